"""What an agent backend gives an episode: a session with two moves, `observe(messages)` (what the
transcript gained) and `act()` (one model call, interpreted as a Turn); and what the sessions share
(the few-shot turns, the tools' parameters).

The backends: agent.chat (chat completions with native tools) and agent.tokens (token-in/
token-out: the local model, or a completions endpoint); by name: core.episode.backends; the wire
to endpoints, its retries and its contract checks: core.wire.endpoints.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import msgspec
import orjson

from endstate.core.agent.interpret import (
    Parsed,
    render_call,
)
from endstate.core.env.domain import Domain
from endstate.core.records.episode import call_id
from endstate.core.records.structs import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)


@dataclass
class Turn:
    """One model call, interpreted."""

    parsed: Parsed
    raw: str | None  # the raw completion text (token-level backends, or chat content)
    usage: Usage
    trace_turn: dict[str, Any] | None = None  # prompt/completion ids and logprobs

    def message(self, turn: int) -> AssistantMessage:
        """Its transcript message: what the interpreter read, the raw completion (for `rollout
        parity`) and the tool calls, numbered call_<turn>_<i>."""
        p = self.parsed
        calls = [msgspec.structs.replace(c, id=call_id(turn, i)) for i, c in enumerate(p.tool_calls)]
        return AssistantMessage(p.content or None, p.reasoning or None, self.raw,
                                p.parse_error or None, calls)


def parameters(tool_specs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
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

    def messages(self, i: int) -> list[Message]:
        example_id = f"example_{i}"
        return [
            UserMessage(self.user),
            AssistantMessage(render_call(self.tool, self.arguments),
                             tool_calls=[ToolCall.of(self.tool, self.arguments, example_id)]),
            ToolMessage(example_id, self.tool, orjson.dumps(self.result).decode()),
            AssistantMessage(self.reply),
        ]


def few_shot_of(domain: Domain) -> list[FewShot]:
    """The domain's example turns (`EXAMPLES` in its tools.py), if it has any."""
    return [FewShot(**e) for e in getattr(domain.tools_module, "EXAMPLES", [])]


# -- backends: what an episode opens a session on -------------------------------------------------

class AgentSession(Protocol):
    """One episode's conversation with the agent. The episode loop's list is the only copy of the
    transcript: the session is told of each message of the conversation as the loop appends it,
    in order, through `observe`: the start ([system, opening]), its own turns, tool results, the
    user's replies (endstate's note that a context overflowed ends the record, not the
    conversation). It keeps what it needs to make the next call (a request body, token ids),
    never the list. `act` is one model call."""

    system: str  # the system prompt the session renders (policy, tools, few-shot framing)

    def observe(self, new: list[Message]) -> None: ...
    async def act(self) -> Turn: ...


class AgentBackend(Protocol):
    """What rollout, probe and grpo run episodes on (episode.backends builds one by name)."""

    def open(self, domain: Domain, tool_specs: list[dict[str, Any]]) -> AgentSession: ...
    def close(self) -> None: ...  # its connections, at the end of a run


