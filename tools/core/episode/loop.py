"""One episode: a fresh sandbox, an agent session, a simulated user, until someone stops.

The loop: the agent acts; its tool calls run in the sandbox and the results go back to it; a turn
without tool calls goes to the user, whose reply goes back to the agent. It ends when the user
stops (`user_stop`), the agent says nothing (`agent_done`), `max_turns` agent calls are spent, or
the next prompt would overflow the context (`context_overflow`). Every ending is graded on the
state it left. Endpoint failures after bounded retries, answers that break the OpenAI contract and
internal errors make the episode a `system_error` (error.kind says which) and the run goes on.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec

from endstate.core.agent.session import AgentBackend, AgentSession
from endstate.core.env.domain import Domain
from endstate.core.env.sandbox import Sandbox
from endstate.core.env.seats import SandboxLost
from endstate.core.episode.users import STOP, SimulatedUser
from endstate.core.errors import EndstateError
from endstate.core.records.episode import episode_id
from endstate.core.records.structs import (
    Episode,
    ErrorInfo,
    Message,
    Policy,
    SystemMessage,
    Task,
    ToolMessage,
    Usage,
    UserMessage,
    table_changes,
)
from endstate.core.wire.endpoints import (
    ContextOverflow,
    EndpointFailure,
)

log = logging.getLogger("endstate")

DEFAULT_MAX_TURNS = 30


async def _timed(awaitable, timing: dict[str, float], key: str):
    started = time.perf_counter()
    try:
        return await awaitable
    finally:
        timing[key] += time.perf_counter() - started


def _system_error(e: Exception, spec: EpisodeSpec) -> ErrorInfo:
    """The `error` of an episode that `e` ended: an endpoint failure's kind, else `internal` (with
    the traceback on stderr)."""
    if isinstance(e, EndpointFailure):
        return ErrorInfo(e.kind, e.message, e.attempts)
    log.error("episode %s attempt %d: internal error (recorded as system_error)",
              spec.task.id, spec.attempt, exc_info=e)
    return ErrorInfo("internal", f"{type(e).__name__}: {e}")


@dataclass
class Conversation:
    """An episode's transcript, the only copy: each message appended is told to the agent
    session (AgentSession.observe), in order, its own turns included."""

    session: AgentSession
    messages: list[Message] = field(default_factory=list)

    def append(self, *messages: Message) -> None:
        self.messages.extend(messages)
        self.session.observe(list(messages))


@dataclass
class EpisodeSpec:
    task: Task
    domain: Domain
    attempt: int
    policy: Policy  # model, backend, sampling, seed, prompting: recorded as is
    max_turns: int | None = None


async def run_episode(spec: EpisodeSpec, backend: AgentBackend, user: SimulatedUser,
                      price: Callable[[dict[str, Usage]], float | None]) -> Episode:
    """Run one episode and return its record (schemas/episode.schema.json). The transcript is
    the episode's own (Conversation): the agent session is told of each message appended."""
    task, started = spec.task, time.perf_counter()
    timing = {"model_s": 0.0, "tools_s": 0.0, "user_s": 0.0}
    agent_usage = Usage()
    with Sandbox(spec.domain, task.init, task.tools) as sandbox:
        session = backend.open(spec.domain, [t.schema for t in sandbox.tools.values()])
        conversation = Conversation(session)
        transcript, append = conversation.messages, conversation.append
        append(SystemMessage(session.system), UserMessage(task.user.opening))
        status, error, termination = "ok", None, "max_turns"
        turns: list[dict[str, Any]] = []
        try:
            for n in range(spec.max_turns or task.max_turns or DEFAULT_MAX_TURNS):
                turn = await _timed(session.act(), timing, "model_s")
                agent_usage.add(turn.usage)
                if turn.trace_turn is not None:
                    turns.append(turn.trace_turn)
                said = turn.message(n)
                append(said)
                if said.tool_calls:
                    t = time.perf_counter()
                    results = [ToolMessage(c.id, c.name, sandbox.call(c.name, c.args()).content)
                               for c in said.tool_calls]
                    timing["tools_s"] += time.perf_counter() - t
                    append(*results)
                    continue
                if not said.content and not said.parse_error:
                    termination = "agent_done"
                    break
                reply = await _timed(user.reply(transcript), timing, "user_s")
                if reply == STOP:
                    termination = "user_stop"
                    break
                append(UserMessage(reply))
        except ContextOverflow as e:
            termination = "context_overflow"
            # endstate's note on the record, after the conversation: no session is told of it
            transcript.append(SystemMessage(f"[endstate] context overflow: {e}"))
        except SandboxLost as e:  # the domain's bug, in this episode only
            status, termination, error = "system_error", None, ErrorInfo("tool", e.message)
        except EndstateError:  # a setup the user must fix (a 401, a domain bug): the run stops
            raise
        except Exception as e:  # endpoint failures; and a bug in endstate costs one episode, not the run
            status, termination, error = "system_error", None, _system_error(e, spec)
        changes = table_changes(sandbox.changes())
        seed_digest = sandbox.seed_digest
    usage = {"agent": agent_usage, "user": msgspec.structs.replace(user.usage)}
    timing["total_s"] = time.perf_counter() - started
    return Episode(
        episode_id=episode_id(task.id, spec.attempt), task_id=task.id, domain=spec.domain.name,
        attempt=spec.attempt, policy=spec.policy, status=status, error=error,
        termination=termination, messages=transcript, turns=turns, changes=changes,
        seed_digest=seed_digest, usage=usage, cost_usd=price(usage),
        timing={k: round(v, 4) for k, v in timing.items()})
