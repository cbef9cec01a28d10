"""Simulated users, by kind (--user): a task's script (offline, deterministic) or an LLM holding
the task's private instruction. Each answers what the agent said to it, or STOP to end the
conversation. SIMULATED_USERS holds the kinds; a module or an installed package adds one
(docs/api.md)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import msgspec

from endstate.core.errors import ConfigurationError
from endstate.core.records.structs import AssistantMessage, Message, Task, Usage, UserMessage
from endstate.core.registry import Registry, instance_of
from endstate.core.wire.endpoints import Endpoints, chat_message, usage_of
from endstate.core.wire.preflight import Probe, chat_probe

STOP = "###STOP###"  # the simulated user's way of ending the conversation


class SimulatedUser(Protocol):
    """One episode's user: `reply` answers the transcript so far (or STOP); `usage` counts its
    model's tokens; `close` releases what it holds."""

    usage: Usage

    async def reply(self, transcript: list[Message]) -> str: ...
    def close(self) -> None: ...


@dataclass(frozen=True)
class UserEndpoint:
    """The model behind a user kind that talks to one (--user-url, --user-model): its endpoints,
    the seed its requests carry, and the variable its key came from (said on a 401)."""

    endpoints: Endpoints
    model: str
    seed: int | None
    key_env: str = ""


def _plays_every_task(task: dict[str, Any]) -> bool:
    return True


@dataclass(frozen=True)
class UserKind:
    """A kind of simulated user, by name (--user NAME): how a run makes one per task, and what it
    needs. `make(task, endpoint)` gets the UserEndpoint when `endpoint` is true (the run then
    needs --user-url and --user-model, and preflight sends `probe(endpoint)`), else None.
    `plays(task record)` says whether it can play a task: the others are refused before any
    episode, with `refusal`: what they lack, and the fix."""

    make: Callable[[Task, UserEndpoint | None], SimulatedUser]
    help: str
    endpoint: bool = False
    probe: Callable[[UserEndpoint], Probe] | None = None
    plays: Callable[[dict[str, Any]], bool] = _plays_every_task
    refusal: tuple[str, str] = ("cannot be played", "")


SIMULATED_USERS: Registry[UserKind] = Registry("simulated user", accept=instance_of(UserKind))


@dataclass
class CompiledReaction:
    """A scripted user's conditional reply: `reply` when the agent's last message matches `when`."""

    when: re.Pattern[str]
    reply: str
    repeat: bool = False  # else it is used once


@dataclass
class ScriptedUser:
    """Deterministic and offline. To each agent message addressed to the user it answers with, in
    this order: the first unused reaction whose pattern the message matches (a case-insensitive
    regex search), else the next `script` reply, else the `default` reply (every time), else STOP."""

    script: list[str]
    reactions: list[CompiledReaction] = field(default_factory=list)
    default: str | None = None
    usage: Usage = field(default_factory=Usage)
    _next: int = 0
    _used: set[int] = field(default_factory=set)

    @classmethod
    def for_task(cls, task: Task) -> ScriptedUser:
        """The scripted user of a task; a bad pattern is a ConfigurationError."""
        problem = reactions_problem(msgspec.to_builtins(task.user))
        if problem:
            raise ConfigurationError(f"task {task.id}: {problem}")
        reactions = [CompiledReaction(re.compile(r.when, re.IGNORECASE), r.reply, r.repeat)
                     for r in task.user.reactions]
        return cls(list(task.user.script), reactions, task.user.default)

    def close(self) -> None:
        """Nothing to close: the script is in memory."""

    async def reply(self, transcript: list[Message]) -> str:
        said = next((m.content or "" for m in reversed(transcript)
                     if isinstance(m, AssistantMessage)), "")
        for i, reaction in enumerate(self.reactions):
            if i not in self._used and reaction.when.search(said):
                if not reaction.repeat:
                    self._used.add(i)
                return reaction.reply
        if self._next < len(self.script):
            self._next += 1
            return self.script[self._next - 1]
        return STOP if self.default is None else self.default


def reactions_problem(user: dict[str, Any]) -> str | None:
    """What is wrong with the patterns of a task's `user.reactions`, or None."""
    for i, r in enumerate(user.get("reactions", [])):
        try:
            re.compile(r["when"])
        except re.error as e:
            return f"user.reactions[{i}].when {r['when']!r} is not a regular expression: {e}"
        if _nested_repeat(re._parser.parse(r["when"]), False):
            return (f"user.reactions[{i}].when {r['when']!r} repeats a group that itself repeats "
                    "a variable number of times (`(a+)+`): on a message that almost matches, the "
                    "search backtracks for hours and stalls every episode; make the outer repeat "
                    "possessive (`(a+)++`) or the group atomic (`(?>a+)+`), or simplify it")
    return None


def _nested_repeat(items: Any, inside: bool) -> bool:
    """Whether a parsed pattern (re's own parser) repeats, without bound, something that itself
    repeats a variable number of times: the shape of catastrophic backtracking. Possessive repeats
    and atomic groups never backtrack into what they matched, so they start afresh."""
    c = re._constants
    for op, av in items:
        if op in (c.MAX_REPEAT, c.MIN_REPEAT):
            low, high, sub = av
            if (inside and low != high) or _nested_repeat(sub, inside or high == c.MAXREPEAT):
                return True
        elif op is c.POSSESSIVE_REPEAT and _nested_repeat(av[2], False) or op is c.ATOMIC_GROUP and _nested_repeat(av, False) or op is c.SUBPATTERN and _nested_repeat(av[3], inside) or op is c.BRANCH and any(_nested_repeat(b, inside) for b in av[1]) or op in (c.ASSERT, c.ASSERT_NOT) and _nested_repeat(av[1], inside) or op is c.GROUPREF_EXISTS and any(_nested_repeat(b, inside) for b in av[1:] if b):
            return True
    return False


USER_SYSTEM = """You are a customer talking to a customer-service agent. Stay in character and
follow your private instructions below; reveal details only when the agent asks for them. Write one
short message at a time. When your request is handled, or cannot be, reply with exactly {stop}.

<instructions>
{instruction}
</instructions>"""


LLM_USER_TEMPERATURE = 0.7


@dataclass
class LLMUser:
    """An LLM plays the user, holding the task's private instruction. It sees what the agent said
    to it, never the agent's reasoning or tool traffic."""

    endpoints: Endpoints
    model: str
    instruction: str
    seed: int | None = 0
    usage: Usage = field(default_factory=lambda: Usage(calls=0))

    def close(self) -> None:
        """Close the connections to the user's model (at the end of a session)."""
        self.endpoints.close()

    async def reply(self, transcript: list[Message]) -> str:
        # Roles swap: the agent's visible words are the "user" of this model.
        convo = [{"role": "system", "content": USER_SYSTEM.format(stop=STOP, instruction=self.instruction)}]
        for m in transcript:
            if isinstance(m, UserMessage):
                convo.append({"role": "assistant", "content": m.content})
            elif isinstance(m, AssistantMessage) and m.content:
                convo.append({"role": "user", "content": m.content})

        response = await self.endpoints.post("/chat/completions", {
            "model": self.model, "messages": convo, "temperature": LLM_USER_TEMPERATURE, "max_tokens": 256,
            "seed": self.seed})
        self.usage.add(usage_of(response))
        self.usage.calls += 1
        text = (chat_message(response).get("content") or "").strip()
        return STOP if STOP in text or not text else text


def _has_script(task: dict[str, Any]) -> bool:
    return bool({"script", "reactions", "default"} & set(task["user"]))


SIMULATED_USERS.register("scripted", origin=f"{__name__}.ScriptedUser")(UserKind(
    lambda task, endpoint: ScriptedUser.for_task(task), "the task's script (offline)",
    plays=_has_script,
    refusal=(("have no user.script, reactions or default for --user scripted to say (each "
              "episode would end at the agent's first question)"),
             ("run them with --user llm --user-url URL --user-model NAME, or give each a "
              "user.script"))))


def _llm_user(task: Task, endpoint: UserEndpoint | None) -> LLMUser:
    return LLMUser(endpoint.endpoints, endpoint.model, task.user.instruction, seed=endpoint.seed)


def _llm_probe(endpoint: UserEndpoint) -> Probe:
    """A chat request as LLMUser asks (its temperature and seed)."""
    return chat_probe("user", endpoint.endpoints, endpoint.model,
                      {"temperature": LLM_USER_TEMPERATURE, "seed": endpoint.seed}, endpoint.key_env)


SIMULATED_USERS.register("llm", origin=f"{__name__}.LLMUser")(UserKind(
    _llm_user, "an LLM holding the task's private instruction (--user-url, --user-model)",
    endpoint=True, probe=_llm_probe))
