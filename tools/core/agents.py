"""Agent backends. Each gives an episode a session with two moves: `act()` (one model call,
interpreted) and `observe(messages)` (tool results or a user reply).

- chat:        OpenAI-compatible chat completions with native tools (hosted models, vLLM + parser).
- completions: token-in/token-out against an OpenAI-compatible completions endpoint: endstate
               renders the prompt with the chat template and parses the raw text itself.
- local:       in-process transformers generation, batched across episodes (see local_model).

Endpoint failures (timeouts, 5xx, connection resets, rate limits) are retried with bounded
exponential backoff; after the bound the session raises EndpointFailure and the episode becomes
`system_error`, never reward 0.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from endstate.core.domain import Domain
from endstate.core.episode_record import assistant_message, tool_result_message
from endstate.core.errors import EndstateError
from endstate.core.http import HttpClient, ProtocolError
from endstate.core.interpret import (
    Parsed,
    ToolCall,
    coerce_arguments,
    parse,
    render_call,
    render_system,
)
from endstate.core.local_model import Generation, Sampling
from endstate.core.trace import ChatTemplate, TokenTrace

TOOL_PREFILL = "<tool_call>\n"


class EndpointFailure(Exception):
    def __init__(self, kind: str, message: str, attempts: int):
        super().__init__(message)
        self.kind, self.message, self.attempts = kind, message, attempts


class ContextOverflow(Exception):
    """The next prompt would not fit: the episode ends, nothing is truncated."""


@dataclass
class RetryPolicy:
    attempts: int = 4  # calls in all, first included
    base_delay: float = 0.5
    max_delay: float = 8.0


class EndpointError(Exception):
    """An endpoint answered with an HTTP error status."""

    def __init__(self, url: str, status: int, body: bytes):
        text = body[:300].decode(errors="replace").strip()
        super().__init__(f"POST {url}: HTTP {status}: {text}")
        self.status = status


def failure_kind(error: BaseException) -> str | None:
    """How an endpoint error is named in `error.kind`, or None when retrying cannot help."""
    if isinstance(error, EndpointError):
        return ("rate_limit" if error.status == 429 else "timeout" if error.status == 408
                else "http_5xx" if error.status >= 500 else None)
    if isinstance(error, TimeoutError):
        return "timeout"
    if isinstance(error, OSError):
        return "connection"  # refused, reset, closed mid-answer, unreachable, TLS
    return None


class Endpoints:
    """One or more OpenAI-compatible base URLs; calls rotate over them, retries move on.

    The wire protocol is the OpenAI REST API (POST JSON, Bearer key), spoken through a lean
    keep-alive client (core/http.py) with orjson bodies: the openai SDK's client costs ~1-3 ms of
    CPU a call (request models, httpx, typed responses) and aiohttp ~0.2 ms, which at hundreds of
    episodes in flight adds up to more than the model's latency (bench/bench_rollout.py); this
    path costs ~0.06 ms. Answers are plain dicts.
    """

    def __init__(self, base_urls: list[str], api_key: str | None, timeout: float, retry: RetryPolicy):
        self.urls = [u.rstrip("/") for u in base_urls]
        self.headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"
        self.timeout = timeout
        self.retry = retry
        self.retries = 0  # across the run, for the logs
        self._next = itertools.count()
        self._http: HttpClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _client(self) -> HttpClient:
        """This event loop's client (asyncio.run makes a new loop each time, e.g. per grpo step)."""
        loop = asyncio.get_running_loop()
        if self._http is None or self._loop is not loop:
            self._http, self._loop = HttpClient(self.timeout), loop
            _OPEN.add(self)
        return self._http

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
        self._http = self._loop = None

    async def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST `body` as JSON to `path` (e.g. "/chat/completions"): the decoded JSON answer.
        Top-level keys set to None are left out (the server's default; `--seed none`).
        Retries what retrying can help (timeouts, resets, 5xx, 429) with jittered exponential
        backoff; past the bound, EndpointFailure. Other HTTP errors stop the run: they mean the
        request or its configuration is wrong (URL, key, model name)."""
        content = orjson.dumps({k: v for k, v in body.items() if v is not None})
        start = next(self._next)
        for attempt in range(self.retry.attempts):
            url = self.urls[(start + attempt) % len(self.urls)] + path
            try:
                status, data = await self._client().post(url, content, self.headers)
                if status >= 400:
                    raise EndpointError(url, status, data)
                return orjson.loads(data)
            except (orjson.JSONDecodeError, ProtocolError) as e:
                raise EndpointFailure("protocol", f"POST {url}: the answer is not JSON over HTTP ({e})", 1) from e
            except Exception as e:  # classified below: retried, stopped on, or raised
                kind = failure_kind(e)
                if kind is None:
                    text = str(e).lower()
                    if "context" in text and "length" in text:
                        raise ContextOverflow(str(e)) from e
                    if isinstance(e, EndpointError):
                        raise EndstateError(f"{e} (not retried: fix the URL, key or request)") from e
                    raise
                if attempt + 1 == self.retry.attempts:
                    raise EndpointFailure(kind, f"{type(e).__name__}: {e}", attempt + 1) from e
                self.retries += 1
                delay = min(self.retry.max_delay, self.retry.base_delay * 2 ** attempt)
                await asyncio.sleep(delay * (0.5 + random.random() / 2))  # jittered backoff
        raise AssertionError("unreachable")


_OPEN: weakref.WeakSet[Endpoints] = weakref.WeakSet()


async def close_endpoints() -> None:
    """Close the connections opened on this event loop (at the end of a run)."""
    for endpoints in list(_OPEN):
        if endpoints._loop is asyncio.get_running_loop():
            endpoints.close()


def usage_of(response: dict[str, Any]) -> dict[str, int]:
    """Token counts of an OpenAI-style response (0 where the server reports none)."""
    usage = response.get("usage") or {}
    return {"prompt_tokens": usage.get("prompt_tokens") or 0,
            "completion_tokens": usage.get("completion_tokens") or 0}


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

    def begin(self, messages: list[dict[str, Any]]) -> None:
        """`messages` is [system, opening]; the examples go between them (tools are native here)."""
        shots = [{k: v for k, v in m.items() if not (m["role"] == "assistant" and "tool_calls" in m
                                                     and k == "content")}
                 for i, e in enumerate(self.examples) for m in e.messages(i)]
        self.messages = [messages[0], *shots, *messages[1:]]

    async def act(self) -> Turn:
        response = await self.endpoints.post("/chat/completions", {
            "model": self.model, "messages": self.messages, "tools": self.tool_specs or None,
            "temperature": self.sampling.temperature, "top_p": self.sampling.top_p,
            "max_tokens": self.sampling.max_new_tokens, "seed": self.seed})
        try:
            message = response["choices"][0]["message"]
        except (KeyError, IndexError, TypeError):
            raise EndpointFailure("protocol", f"no choices[0].message in the chat completion: "
                                  f"{orjson.dumps(response)[:200].decode(errors='replace')}", 1) from None
        params = _parameters(self.tool_specs)
        calls, errors = [], []
        for tc in message.get("tool_calls") or []:
            function = tc.get("function") or {}
            name = function.get("name")
            try:
                args = orjson.loads(function.get("arguments") or "{}")
                if not isinstance(args, dict):
                    raise ValueError("arguments are not an object")
                calls.append(ToolCall(name, coerce_arguments(args, params.get(name))))
            except ValueError as e:
                errors.append(f"unreadable arguments for {name}: {e}")
        reasoning = message.get("reasoning_content") or message.get("reasoning")
        content = message.get("content") or ""
        if not calls:  # a server without a tool parser leaves the calls in the text
            parsed = parse(content, params)
            if reasoning and not parsed.reasoning:
                parsed.reasoning = reasoning
        else:
            parsed = Parsed(parse(content).content, reasoning, calls, "; ".join(errors) or None)
        self.messages.append({k: message[k] for k in ("role", "content", "tool_calls")
                              if message.get(k) is not None})
        return Turn(parsed, content, usage_of(response))

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
        if self.trace.length + self.sampling.max_new_tokens > self.max_context:
            raise ContextOverflow(f"{self.trace.length} prompt tokens + {self.sampling.max_new_tokens} "
                                  f"new would exceed --max-context {self.max_context}")
        # Small models call tools far more reliably when their turn after a user message starts
        # with `<tool_call>`; those tokens are prompt (masked), not sampled.
        prefill = TOOL_PREFILL if self.tool_prefill and self._after_user else ""
        if prefill:
            self.trace.append_prompt(self.template.encode(prefill))
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
                        eos_id: int) -> Callable[[list[int], int], Awaitable[Generation]]:
    """Token ids in, token ids and logprobs out, from a vLLM-style completions endpoint (which
    caches shared prefixes itself)."""

    async def sample(prompt: list[int], prefix_len: int = 0) -> Generation:
        choices = (await endpoints.post("/completions", {
            "model": model, "prompt": prompt, "max_tokens": sampling.max_new_tokens,
            "temperature": sampling.temperature, "top_p": sampling.top_p, "seed": seed,
            "logprobs": 1, "return_token_ids": True, "skip_special_tokens": False})).get("choices") or [{}]
        ids = choices[0].get("token_ids")
        if ids is None:
            raise EndpointFailure("protocol", "the completions endpoint returned no token_ids; "
                                  "endstate needs vLLM's return_token_ids", 1)
        logprobs = (choices[0].get("logprobs") or {}).get("token_logprobs")
        # Without the end-of-turn token the next delta supplies it, masked: it was not sampled.
        return Generation(ids, logprobs, finished=bool(ids) and ids[-1] == eos_id)

    return sample


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
