"""The records as typed Structs: each record and its parts declared once, built and read through
these types inside the code; schemas/ stays the contract at the boundary (records.schemas).

A Struct mirrors its schema, deliberately stricter (an integer must be written as one, not 3.0),
so that a record a Struct accepts is certainly schema-valid (a property test:
tests/test_fastcheck.py); what it rejects, jsonschema judges. Optional fields are UNSET and left
out when encoding; an explicit null is rejected where the schema rejects it. Encoding a Struct
gives its fields in declaration order, which is the order records have always been written in.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
import orjson
from msgspec import UNSET, Meta, Struct, UnsetType

NonNegative = Annotated[int, Meta(ge=0)]
Object = dict[str, Any]
Key = Annotated[Object, Meta(min_length=1)]


class Usage(Struct, gc=False):
    """Tokens of one role (agent, user, judge) over an episode; for the LLM user and the judge,
    also the model calls made and (judge) the verdicts served from the cache. Left out when unset:
    a scripted user makes no calls."""

    prompt_tokens: NonNegative = 0
    completion_tokens: NonNegative = 0
    calls: NonNegative | UnsetType = UNSET
    cache_hits: NonNegative | UnsetType = UNSET

    def add(self, other: Usage) -> None:
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        for name in ("calls", "cache_hits"):
            theirs = getattr(other, name)
            if theirs is not UNSET:
                mine = getattr(self, name)
                setattr(self, name, theirs if mine is UNSET else mine + theirs)

    def since(self, earlier: Usage) -> Usage:
        """The tokens counted after `earlier`, a copy of this count taken then."""
        return Usage(self.prompt_tokens - earlier.prompt_tokens,
                     self.completion_tokens - earlier.completion_tokens)


class ErrorInfo(Struct, omit_defaults=True):
    """Why an episode or attempt is a system error; `attempts`: calls made before giving up."""

    kind: str
    message: str
    attempts: int | UnsetType = UNSET


# -- the transcript ------------------------------------------------------------------------------

class Function(Struct):
    name: str
    arguments: str  # a JSON object, as text (the OpenAI wire format)


class ToolCall(Struct, kw_only=True):
    """One tool call, OpenAI-style: what the interpreter reads from the model (id ""), and what
    the transcript records (id call_<turn>_<i>)."""

    id: str  # required by the schema: "" until the transcript numbers the call
    type: str = "function"
    function: Function

    @classmethod
    def of(cls, name: str, arguments: dict[str, Any], id: str = "") -> ToolCall:
        return cls(id=id, function=Function(name, orjson.dumps(arguments).decode()))

    @property
    def name(self) -> str:
        return self.function.name

    def args(self) -> dict[str, Any]:
        """The arguments as typed values (the interpreter coerced them to the tool's schema)."""
        return orjson.loads(self.function.arguments)


class SystemMessage(Struct, tag_field="role", tag="system"):
    content: str | None = None


class UserMessage(Struct, tag_field="role", tag="user"):
    content: str | None = None


class AssistantMessage(Struct, tag_field="role", tag="assistant", omit_defaults=True):
    """What the agent said: `content` without reasoning or call markup, `raw` the completion as
    sampled (for `rollout parity`), `parse_error` when the interpreter could not read a call."""

    content: str | None
    reasoning: str | None = None
    raw: str | None = None
    parse_error: str | None = None
    tool_calls: list[ToolCall] = []


class ToolMessage(Struct, tag_field="role", tag="tool"):
    """The observation answering one tool call."""

    tool_call_id: str = ""
    name: str = ""
    content: str | None = None


Message = SystemMessage | UserMessage | AssistantMessage | ToolMessage


def as_dicts(messages: list[Message]) -> list[dict[str, Any]]:
    """Messages as the plain dicts a chat template or an OpenAI request takes."""
    return msgspec.to_builtins(messages)


# -- how a policy was run ------------------------------------------------------------------------

class Prompting(Struct, kw_only=True):
    """How the agent is prompted, as a run resolves it (core.agent.prompting); recorded flat in
    every episode's policy and as an attempt's `prompting`."""

    few_shot: bool
    tool_prefill: bool  # token level: the agent's turn after a user message starts with <tool_call>
    tool_format: str  # token level: how the system prompt lists the tools (interpret.TOOL_LISTINGS)
    interpreter: str  # the interpreter version that reads the answers


class SamplingRecord(Struct, kw_only=True, omit_defaults=True):
    """policy.sampling ($defs/sampling): the settings that were given (agent.sampling.Sampling)."""

    temperature: Annotated[float, Meta(ge=0)] | UnsetType = UNSET
    top_p: float | UnsetType = UNSET
    max_new_tokens: Annotated[int, Meta(ge=1)] | UnsetType = UNSET
    top_k: Annotated[int, Meta(ge=1)] | UnsetType = UNSET
    min_p: float | UnsetType = UNSET
    presence_penalty: float | UnsetType = UNSET
    frequency_penalty: float | UnsetType = UNSET
    repetition_penalty: float | UnsetType = UNSET
    stop: list[str] | UnsetType = UNSET
    extra_body: Object | UnsetType = UNSET


class Policy(Struct, kw_only=True, omit_defaults=True):
    """Who acted: model, backend, seed, sampling, and the prompting settings, flat."""

    model: str = ""
    backend: str = ""
    seed: int | None | UnsetType = UNSET
    sampling: SamplingRecord | UnsetType = UNSET
    few_shot: bool | UnsetType = UNSET
    tool_prefill: bool | UnsetType = UNSET
    tool_format: str | UnsetType = UNSET
    interpreter: str | UnsetType = UNSET


# -- the database diff ---------------------------------------------------------------------------

class RowChange(Struct, forbid_unknown_fields=True):
    key: Key
    row: Object


class Update(Struct, forbid_unknown_fields=True):
    key: Key
    before: Object
    after: Object


class TableChanges(Struct, forbid_unknown_fields=True):
    inserted: list[RowChange] = []
    updated: list[Update] = []
    deleted: list[RowChange] = []


def table_changes(changes: dict[str, dict[str, list[dict[str, Any]]]]) -> dict[str, TableChanges]:
    """A sandbox's diff (env.changes, plain rows) as the episode records it."""
    return msgspec.convert(changes, dict[str, TableChanges])


# -- episodes and attempts -----------------------------------------------------------------------

Termination = Literal["agent_done", "user_stop", "max_turns", "context_overflow", "replay"]


class Episode(Struct, kw_only=True):
    """schemas/episode.schema.json: built by the episode loop, replays and the MCP gateway, and
    what every writer checks a line against before it writes it."""

    episode_id: Annotated[str, Meta(min_length=1)]
    task_id: Annotated[str, Meta(min_length=1)]
    domain: str
    attempt: NonNegative = 0
    policy: Policy = msgspec.field(default_factory=Policy)
    status: Literal["ok", "system_error"]
    error: ErrorInfo | None = None
    termination: Termination | None = None
    messages: list[Message]
    turns: list[Object] | UnsetType = UNSET  # token-level backends: ids and logprobs per call
    changes: dict[str, TableChanges]
    seed_digest: Annotated[str, Meta(pattern="^sha256:[0-9a-f]{64}$")]
    usage: dict[str, Usage] = {}
    cost_usd: Annotated[float, Meta(ge=0)] | None = None
    timing: dict[str, float] | UnsetType = UNSET  # seconds; replays are not timed

    def record(self) -> dict[str, Any]:
        """As a plain dict, the shape grade and the tools extend and pass on."""
        return msgspec.to_builtins(self)


class CheckResult(Struct):
    id: str
    kind: str
    passed: bool | None
    detail: str


class GraderInfo(Struct):
    version: str
    judge_model: str | None = None


class GradedEpisode(Episode, kw_only=True):
    """schemas/graded_episode.schema.json: an episode plus its reward, checks and grader."""

    reward: Literal[0, 1] | None
    checks: list[CheckResult]
    grader: GraderInfo

    def __post_init__(self) -> None:
        if (self.reward is None) is (self.status == "ok"):
            raise ValueError("reward must be null exactly when status is system_error")


class Attempt(Struct, gc=False, kw_only=True):
    """schemas/attempt.schema.json, fields in its order. Optional fields default to None; an
    explicit null is rejected where the schema rejects it (`domain: str = None` is "absent or a
    string"). Readers decode into it; records.episode.attempt_record builds every attempt."""

    task_id: Annotated[str, Meta(min_length=1)]
    domain: str = None  # type: ignore[assignment]
    attempt: NonNegative
    reward: Literal[0, 1] | None
    status: Literal["ok", "system_error"]
    model: str = None  # type: ignore[assignment]
    usage: dict[str, Usage] = None  # type: ignore[assignment]
    cost_usd: Annotated[float, Meta(ge=0)] | None = None
    episode_id: str = None  # type: ignore[assignment]
    error: ErrorInfo | None = None
    prompting: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if (self.reward is None) is (self.status == "ok"):
            raise ValueError("reward must be null exactly when status is system_error")


# -- tasks ---------------------------------------------------------------------------------------

class Reaction(Struct, forbid_unknown_fields=True):
    when: Annotated[str, Meta(min_length=1)]
    reply: str
    repeat: bool = False


class TaskUser(Struct, forbid_unknown_fields=True):
    instruction: str
    opening: str
    script: list[str] = []
    reactions: list[Reaction] = []
    default: str | None = None


class Task(Struct, kw_only=True):
    """What the episode runtime reads of a task (schemas/task.schema.json). Tools that pass tasks
    on (bucket --tasks, grade tasks --full) keep the record itself, fields of their own included;
    `Task.of` is the typed view."""

    id: Annotated[str, Meta(min_length=1)]
    domain: Annotated[str, Meta(min_length=1)]
    user: TaskUser
    init: dict[str, list[Object]] = {}
    tools: list[str] | None = None  # None: every tool of the domain
    max_turns: Annotated[int, Meta(ge=1)] | None = None
    checks: list[Object]
    gold: list[Object] = []
    tags: list[str] = []
    split: str | None = None

    @classmethod
    def of(cls, record: dict[str, Any]) -> Task:
        return msgspec.convert(record, cls)
