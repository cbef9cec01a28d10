"""The chat backend: OpenAI-compatible chat completions with native tools (hosted models, vLLM
with a tool parser). The endpoint renders the prompt and parses the calls; endstate reads what it
returns, and re-reads the text itself when the server has no tool parser."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import msgspec
import orjson

from endstate.core.agent.interpret import Parsed, parse, typed_call
from endstate.core.agent.sampling import Sampling
from endstate.core.agent.session import FewShot, Turn, few_shot_of, parameters
from endstate.core.env.domain import Domain
from endstate.core.records.structs import AssistantMessage, Message, SystemMessage, ToolCall
from endstate.core.wire.endpoints import (
    ContextOverflow,
    Endpoints,
    chat_message,
    shown,
    usage_of,
    without_nulls,
)


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


def endpoint_view(message: Message) -> dict[str, Any]:
    """A transcript message as the chat endpoint is shown it: the agent's turns as it sent them
    (its raw text, and the calls as endstate read them, under the transcript's ids), the rest as
    recorded, without endstate's own fields."""
    if isinstance(message, AssistantMessage):
        view: dict[str, Any] = {"role": "assistant", "content": message.raw or message.content or None}
        if message.tool_calls:
            view["tool_calls"] = msgspec.to_builtins(message.tool_calls)
        return view
    return msgspec.to_builtins(message)


@dataclass
class ChatSession:
    """Stateless on the wire: every call sends the conversation so far, with the few-shot turns
    after the system prompt (tools are native). Each message is serialized once, when the session
    is told of it (observe), into the request body it keeps: a request is the bytes sent last time
    plus the new messages' (with hundreds of episodes in flight, re-encoding whole conversations
    was a tenth of rollout's CPU); tests/test_chat_body.py holds every request to the encoding of
    the whole conversation."""

    endpoints: Endpoints
    model: str
    sampling: Sampling
    seed: int | None
    tool_specs: list[dict[str, Any]]
    system: str
    shots: list[dict[str, Any]]  # the few-shot turns as sent (shot_views), shared: never changed
    max_context: int | None = None
    context_used: int = 0  # the last call's prompt + completion tokens, as the endpoint counted
    opening: bytes | None = None  # request_opening(...), when the backend has it made already
    tail: bytes | None = None  # request_tail(...), likewise
    _sent: bytearray | None = None  # the body's opening and the messages observed so far

    def observe(self, new: list[Message]) -> None:
        """Encode `new` into the body. The first message is SystemMessage(self.system), as the
        episode loop makes it: the opening holds it already, with the few-shot turns after it."""
        if self._sent is None:
            if self.opening is None:
                self.opening = request_opening(self.model, self.system, self.shots)
            self._sent = bytearray(self.opening)
            new = new[1:]
        for message in new:
            self._sent += b","
            self._sent += orjson.dumps(endpoint_view(message))

    def _body(self) -> bytes:
        if self.tail is None:
            self.tail = request_tail(self.tool_specs, self.sampling, self.seed)
        return bytes(self._sent) + self.tail

    async def act(self) -> Turn:
        # The endpoint tokenizes, so the next prompt's length is known only after the call: it is
        # at least the last call's prompt and completion, and the call may add max_new_tokens.
        new = self.sampling.max_new_tokens
        if self.max_context is not None and self.context_used + new > self.max_context:
            raise ContextOverflow(f"the last call used {self.context_used} tokens, + {new} new "
                                  f"would exceed --max-context {self.max_context}")
        response = await self.endpoints.post("/chat/completions", self._body())
        message = chat_message(response)
        params = self._params
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
        usage = usage_of(response)
        self.context_used = usage.prompt_tokens + usage.completion_tokens
        return Turn(parsed, content, usage)

    @cached_property
    def _params(self) -> dict[str, dict[str, Any]]:
        return parameters(self.tool_specs)


def request_opening(model: str, system: str, shots: list[dict[str, Any]]) -> bytes:
    """A request body up to the last message before the conversation (the system prompt, the
    few-shot turns), without its closing "]}"."""
    return orjson.dumps(without_nulls({"model": model,
                                  "messages": [endpoint_view(SystemMessage(system)), *shots]}))[:-2]


def request_tail(tool_specs: list[dict[str, Any]], sampling: Sampling, seed: int | None) -> bytes:
    """What follows a request's messages: "]", the tools, the sampling fields and the seed."""
    tail = orjson.dumps(without_nulls({"tools": tool_specs or None, **sampling.request_fields(), "seed": seed}))
    return b"]" + (b"," + tail[1:] if len(tail) > 2 else b"}")


@dataclass
class ChatBackend:
    endpoints: Endpoints
    model: str
    sampling: Sampling
    seed: int | None = 0
    few_shot: bool = True
    max_context: int | None = None
    _shots: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict, repr=False)
    _openings: dict[tuple[str, str], bytes] = field(default_factory=dict, repr=False)
    _tails: dict[tuple[str, ...], bytes] = field(default_factory=dict, repr=False)

    def close(self) -> None:
        self.endpoints.close()

    def open(self, domain: Domain, tool_specs: list[dict[str, Any]]) -> ChatSession:
        key = (domain.name, str(domain.path))
        shots = self._shots.get(key)
        if shots is None:  # rendered once per domain, not once per episode
            shots = self._shots[key] = shot_views(few_shot_of(domain)) if self.few_shot else []
            self._openings[key] = request_opening(self.model, domain.policy, shots)
        tools = (*key, *(s["function"]["name"] for s in tool_specs))  # a task may allow fewer
        tail = self._tails.get(tools)
        if tail is None:
            tail = self._tails[tools] = request_tail(tool_specs, self.sampling, self.seed)
        return ChatSession(self.endpoints, self.model, self.sampling, self.seed, tool_specs,
                           domain.policy, shots, self.max_context, opening=self._openings[key],
                           tail=tail)


def shot_views(examples: list[FewShot]) -> list[dict[str, Any]]:
    """The few-shot turns as the endpoint is shown them (endpoint_view), after the system prompt."""
    shots = [endpoint_view(m) for i, e in enumerate(examples) for m in e.messages(i)]
    for shot in shots:  # the example's call is in tool_calls; its text would repeat it
        if "tool_calls" in shot:
            del shot["content"]
    return shots
