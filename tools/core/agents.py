"""Agent backends. Each gives an episode a session with two moves: `act()` (one model call,
interpreted) and `observe(messages)` (tool results or a user reply).

- chat:        OpenAI-compatible chat completions with native tools (hosted models, vLLM + parser).
- completions: token-in/token-out against an OpenAI-compatible completions endpoint: endstate
               renders the prompt with the chat template and parses the raw text itself.
- local:       in-process transformers generation, batched across episodes (see local_model).

The wire to endpoints, its retries and its contract checks: core.endpoints.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from endstate.core.domain import Domain
from endstate.core.endpoints import (
    ContextOverflow,
    EndpointFailure,
    Endpoints,
    chat_message,
    protocol_failure,
    server_root,
    shown,
    usage_of,
)
from endstate.core.episode_record import assistant_message, call_id, tool_result_message
from endstate.core.errors import ConfigurationError
from endstate.core.interpret import (
    Parsed,
    ToolCall,
    parse,
    render_call,
    render_system,
    typed_call,
)
from endstate.core.local_model import Generation, Sampling
from endstate.core.progress import note
from endstate.core.trace import ChatTemplate, TokenTrace

TOOL_PREFILL = "<tool_call>\n"


def native_calls(message: dict[str, Any], params: dict[str, dict[str, Any]]) -> tuple[list[ToolCall], list[str]]:
    """The tool calls of a chat message, and a problem per call that cannot be read: the readable
    ones are kept (a bad call beside them costs only itself). `arguments` is a JSON string as the
    OpenAI API says, or an object (some servers send one)."""
    calls, errors = [], []
    for i, tc in enumerate(message.get("tool_calls") or []):
        function = tc.get("function") if isinstance(tc, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(name, str) or not name:
            errors.append(f"tool call {i} names no function: {shown(tc)}")
            continue
        arguments = function.get("arguments")
        try:
            if isinstance(arguments, str):
                args = orjson.loads(arguments) if arguments.strip() else {}
            else:
                args = {} if arguments is None else arguments
            if not isinstance(args, dict):
                raise ValueError(f"arguments are {shown(args)}, not a JSON object")
            calls.append(typed_call(name, args, params.get(name)))
        except (ValueError, TypeError, RecursionError) as e:  # orjson's errors are these
            errors.append(f"unreadable arguments for {name}: {type(e).__name__}: {e}"[:300])
    return calls, errors


@dataclass
class Turn:
    parsed: Parsed
    raw: str | None  # the raw completion text (token-level backends, or chat content)
    usage: dict[str, int]
    trace_turn: dict[str, Any] | None = None  # prompt/completion ids and logprobs


def _parameters(tool_specs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {s["function"]["name"]: s["function"]["parameters"] for s in tool_specs}


@dataclass
class FewShot:
    """Example turns shown before the real conversation: a user asks, the assistant calls a tool,
    the tool answers, the assistant replies. They are part of the prompt, never of the transcript."""

    user: str
    tool: str
    arguments: dict[str, Any]
    result: Any
    reply: str

    def messages(self, i: int) -> list[dict[str, Any]]:
        call_id = f"example_{i}"
        return [
            {"role": "user", "content": self.user},
            assistant_message(render_call(self.tool, self.arguments),
                              [(call_id, self.tool, self.arguments)]),
            tool_result_message(call_id, self.tool, orjson.dumps(self.result).decode()),
            {"role": "assistant", "content": self.reply},
        ]


# -- chat ----------------------------------------------------------------------------------------

def few_shot_of(domain: Domain) -> list[FewShot]:
    """The domain's example turns (`EXAMPLES` in its tools.py), if it has any."""
    return [FewShot(**e) for e in getattr(domain.tools_module, "EXAMPLES", [])]


@dataclass
class ChatSession:
    endpoints: Endpoints
    model: str
    sampling: Sampling
    seed: int | None
    tool_specs: list[dict[str, Any]]
    system: str
    examples: list[FewShot]
    messages: list[dict[str, Any]] = field(default_factory=list)
    _turns: int = 0

    def begin(self, messages: list[dict[str, Any]]) -> None:
        """`messages` is [system, opening]; the examples go between them (tools are native here)."""
        shots = [{k: v for k, v in m.items() if not (m["role"] == "assistant" and "tool_calls" in m
                                                     and k == "content")}
                 for i, e in enumerate(self.examples) for m in e.messages(i)]
        self.messages = [messages[0], *shots, *messages[1:]]

    async def act(self) -> Turn:
        response = await self.endpoints.post("/chat/completions", {
            "model": self.model, "messages": self.messages, "tools": self.tool_specs or None,
            **self.sampling.request_fields(), "seed": self.seed})
        message = chat_message(response)
        usage = usage_of(response)
        params = _parameters(self.tool_specs)
        calls, errors = native_calls(message, params)
        reasoning = message.get("reasoning_content") or message.get("reasoning")
        reasoning = reasoning if isinstance(reasoning, str) else None
        content = message.get("content") or ""
        if not calls and not errors:  # a server without a tool parser leaves the calls in the text
            parsed = parse(content, params)
            if reasoning and not parsed.reasoning:
                parsed.reasoning = reasoning
        else:
            parsed = Parsed(parse(content).content, reasoning, calls, "; ".join(errors) or None)
        # What the endpoint sees next turn: the calls we could read, as we read them, under the ids
        # the episode's transcript and tool results use.
        self.messages.append(assistant_message(content or None, [
            (call_id(self._turns, i), c.name, c.arguments) for i, c in enumerate(calls)]))
        self._turns += 1
        return Turn(parsed, content, usage)

    def observe(self, messages: list[dict[str, Any]]) -> None:
        self.messages += [{k: m[k] for k in ("role", "content", "tool_call_id", "name") if k in m}
                          for m in messages]


# -- token level: local and completions -----------------------------------------------------------

@dataclass
class TokenSession:
    template: ChatTemplate
    sample: Callable[[list[int], int], Awaitable[Generation]]
    sampling: Sampling
    max_context: int
    tool_specs: list[dict[str, Any]]
    system: str
    examples: list[FewShot]
    tool_prefill: bool = False
    trace: TokenTrace = field(default_factory=TokenTrace)
    prefix_len: int = 0  # leading tokens every episode of this domain shares (KV-cache reuse)
    _last_finished: bool = True
    _after_user: bool = True

    def begin(self, messages: list[dict[str, Any]]) -> None:
        """`messages` is [system, opening]; the examples go between them, rendered as text."""
        static = [messages[0], *(m for i, e in enumerate(self.examples) for m in e.messages(i))]
        ids = self.template.first_prompt([*static, *messages[1:]])
        self.prefix_len = self.template.shared_prefix_len(static, ids)
        self.trace.append_prompt(ids)

    async def act(self) -> Turn:
        # Small models call tools far more reliably when their turn after a user message starts
        # with `<tool_call>`; those tokens are prompt (masked), not sampled.
        prefill = TOOL_PREFILL if self.tool_prefill and self._after_user else ""
        prefill_ids = self.template.encode(prefill) if prefill else []
        prompt_len = self.trace.length + len(prefill_ids)
        if prompt_len + self.sampling.max_new_tokens > self.max_context:
            raise ContextOverflow(f"{prompt_len} prompt tokens + {self.sampling.max_new_tokens} "
                                  f"new would exceed --max-context {self.max_context}")
        if prefill:
            self.trace.append_prompt(prefill_ids)
        prompt = self.trace.next_prompt()
        generation = await self.sample(prompt, self.prefix_len)
        self.trace.append_completion(generation.ids, generation.logprobs)
        self._last_finished = generation.finished
        text = prefill + self.template.tokenizer.decode(generation.ids, skip_special_tokens=True)
        return Turn(parse(text, _parameters(self.tool_specs)), text,
                    {"prompt_tokens": len(prompt), "completion_tokens": len(generation.ids)},
                    self.trace.turns[-1])

    def observe(self, messages: list[dict[str, Any]]) -> None:
        self._after_user = messages[-1]["role"] == "user"
        self.trace.append_prompt(self.template.delta(messages, self._last_finished))


def completions_sampler(endpoints: Endpoints, model: str, sampling: Sampling, seed: int | None,
                        eos_id: int, vocab_size: int) -> Callable[[list[int], int], Awaitable[Generation]]:
    """Token ids in, token ids and logprobs out, from a vLLM-style completions endpoint (which
    caches shared prefixes itself)."""
    fields = sampling.request_fields()

    async def sample(prompt: list[int], prefix_len: int = 0) -> Generation:
        response = await endpoints.post("/completions", {
            "model": model, "prompt": prompt, **fields, "seed": seed,
            "logprobs": 1, "return_token_ids": True, "skip_special_tokens": False})
        choices = response.get("choices")
        choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
        ids = choice.get("token_ids")
        if ids is None:
            raise EndpointFailure("protocol", "the completions endpoint returned no token_ids; "
                                  "endstate needs vLLM's return_token_ids", 1)
        if not isinstance(ids, list) or not all(type(t) is int and 0 <= t < vocab_size for t in ids):
            raise protocol_failure(f"token_ids {shown(ids)} are not ids of this tokenizer's "
                                   f"vocabulary (0..{vocab_size - 1}): is --tokenizer the served model's?")
        logprobs = choice.get("logprobs")
        logprobs = logprobs.get("token_logprobs") if isinstance(logprobs, dict) else None
        if logprobs is not None and not (
                isinstance(logprobs, list) and len(logprobs) == len(ids)
                and all(type(x) in (int, float) for x in logprobs)):
            raise protocol_failure(f"logprobs.token_logprobs {shown(logprobs)} are not one "
                                   f"number per token id ({len(ids)})")
        # Without the end-of-turn token the next delta supplies it, masked: it was not sampled.
        return Generation(ids, logprobs, finished=bool(ids) and ids[-1] == eos_id)

    return sample


# -- the start-up check of a completions endpoint ------------------------------------------------
# Token ids from another vocabulary are not an error anywhere downstream, only garbage prompts
# and low rewards: so before the first episode the local tokenizer must tokenize a conversation
# rendered with its own chat template (special tokens, tool-call tags, non-ASCII text) exactly as
# the server does (vLLM's /tokenize), and the served name and length must fit (/v1/models).

PROBE_CONVERSATION = [
    {"role": "system", "content": "You check tokenizers: Ünïcödé, 東京, 🙂, 12345, \ttabs."},
    {"role": "user", "content": "Call the tool, then answer in  two spaces."},
    {"role": "assistant", "content": '<think>\nfine\n</think>\n<tool_call>\n{"name": "probe", '
                                     '"arguments": {"n": 1}}\n</tool_call>'},
    {"role": "user", "content": "Thanks."},
]


def probe_text(template: ChatTemplate) -> str:
    return template.tokenizer.apply_chat_template(PROBE_CONVERSATION, tokenize=False,
                                                  add_generation_prompt=True)


def check_served_tokenizer(endpoints: Endpoints, model: str, max_context: int,
                           template: ChatTemplate, name: str) -> None:
    """Check every endpoint before the first episode: a wrong served name, a --max-context past
    the served max_model_len, or token ids that differ from the local tokenizer's (`name`, as
    the user gave it) stop the run (exit 2); a check the server cannot answer is a warning."""
    async def check_all() -> None:
        try:
            await asyncio.gather(*(_check_endpoint(endpoints, url, model, max_context, template, name)
                                   for url in endpoints.urls))
        finally:
            endpoints.close()

    asyncio.run(check_all())


async def _check_endpoint(endpoints: Endpoints, url: str, model: str, max_context: int,
                          template: ChatTemplate, name: str) -> None:
    limit = None
    status, answer, problem = await endpoints.ask("GET", url + "/models")
    cards = answer.get("data") if isinstance(answer, dict) else None
    if status == 200 and isinstance(cards, list):
        served = {c["id"]: c for c in cards if isinstance(c, dict) and isinstance(c.get("id"), str)}
        if model not in served:
            raise ConfigurationError(f"{url}/models serves {', '.join(map(str, served)) or 'no model'}, "
                                     f"not --model {model}: pass the served name (vLLM's "
                                     "--served-model-name)")
        limit = served[model].get("max_model_len")
    else:
        note(f"warning: GET {url}/models: {problem or 'not a model list'}: the served model's name "
             "and length were not checked")
    text = probe_text(template)
    tokenize = server_root(url) + "/tokenize"
    status, answer, problem = await endpoints.ask("POST", tokenize, {
        "model": model, "prompt": text, "add_special_tokens": False, "return_token_strs": True})
    served_ids = answer.get("tokens") if isinstance(answer, dict) else None
    if status == 200 and isinstance(served_ids, list):
        local_ids = template.encode(text)
        if served_ids != local_ids:
            raise ConfigurationError(tokenizer_mismatch(local_ids, served_ids, answer.get("token_strs"),
                                                        template.tokenizer, name, tokenize))
        limit = limit or answer.get("max_model_len")
    else:
        note(f"warning: POST {tokenize}: {problem or 'no token list'}: the tokenizer check could not "
             f"run (a server without vLLM's /tokenize); make sure --tokenizer {name} is the served "
             "model's, or its prompts will be garbage")
    if type(limit) is int and 0 < limit < max_context:
        raise ConfigurationError(f"--max-context {max_context} exceeds the max_model_len {limit} "
                                 f"served at {url}: pass --max-context {limit} (or serve with "
                                 f"--max-model-len {max_context})")


def tokenizer_mismatch(local: list[int], served: list, served_pieces: Any, tokenizer, name: str,
                       where: str) -> str:
    """Both tokenizations of the probe around the first position where they differ."""
    at = next((i for i, (a, b) in enumerate(zip(local, served)) if a != b), min(len(local), len(served)))
    window = range(max(0, at - 3), at + 6)

    def shown_ids(ids: list, pieces: list | None) -> str:
        def piece(i: int) -> str:
            if pieces is not None and i < len(pieces):
                return str(pieces[i])
            ok = type(ids[i]) is int and 0 <= ids[i] < len(tokenizer)
            return tokenizer.convert_ids_to_tokens(ids[i]) if ok else "?"
        return "  ".join(f"{i}:{ids[i]} {piece(i)!r}" for i in window if i < len(ids)) or "(ends)"

    pieces = served_pieces if isinstance(served_pieces, list) else None
    here = f"--tokenizer {name}:"
    return (f"--tokenizer {name} is not the served model's: a conversation rendered with its chat "
            f"template tokenizes differently at {where} from token {at} on ({len(local)} tokens "
            f"here, {len(served)} there)\n"
            f"  {here} {shown_ids(local, None)}\n"
            f"  {'server:':<{len(here)}} {shown_ids(served, pieces)}"
            f"{'' if pieces else '  (pieces decoded with the local tokenizer)'}\n"
            "Pass --tokenizer the folder of the model the server runs (its tokenizer files): ids "
            "from another vocabulary make garbage prompts, not errors.")


# -- backends: what an episode opens a session on -------------------------------------------------

class AgentSession(Protocol):
    """One episode's conversation with the agent: the transcript so far in, one turn out."""

    system: str  # the system prompt the session renders (policy, tools, few-shot framing)

    def begin(self, messages: list[dict[str, Any]]) -> None: ...
    async def act(self) -> Turn: ...
    def observe(self, messages: list[dict[str, Any]]) -> None: ...


class AgentBackend(Protocol):
    """What rollout, probe and grpo run episodes on (core.runtime.BACKENDS builds one by name)."""

    def open(self, domain: Domain, tool_specs: list[dict[str, Any]]) -> AgentSession: ...


@dataclass
class ChatBackend:
    endpoints: Endpoints
    model: str
    sampling: Sampling
    seed: int | None = 0
    few_shot: bool = True

    def open(self, domain: Domain, tool_specs: list[dict[str, Any]]) -> ChatSession:
        return ChatSession(self.endpoints, self.model, self.sampling, self.seed, tool_specs,
                           domain.policy, few_shot_of(domain) if self.few_shot else [])


@dataclass
class TokenBackend:
    """local and completions: the same session, a different sampler."""

    template: ChatTemplate
    sample: Callable[[list[int], int], Awaitable[Generation]]
    sampling: Sampling
    max_context: int
    few_shot: bool = True
    tool_prefill: bool = False
    tool_format: str = "json"  # how the system prompt lists the tools (interpret.TOOL_FORMATS)

    def open(self, domain: Domain, tool_specs: list[dict[str, Any]]) -> TokenSession:
        return TokenSession(self.template, self.sample, self.sampling, self.max_context, tool_specs,
                            render_system(domain.policy, tool_specs, self.tool_format),
                            few_shot_of(domain) if self.few_shot else [], self.tool_prefill)
