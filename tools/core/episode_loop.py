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
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from endstate.core.agents import AgentBackend, Turn
from endstate.core.domain import Domain
from endstate.core.endpoints import (
    ContextOverflow,
    EndpointFailure,
    Endpoints,
    chat_message,
    usage_of,
)
from endstate.core.episode_record import (
    assistant_message,
    call_id,
    episode_id,
    new_episode,
    tool_result_message,
)
from endstate.core.errors import ConfigurationError, EndstateError
from endstate.core.sandbox import Sandbox

log = logging.getLogger("endstate")

STOP = "###STOP###"  # the simulated user's way of ending the conversation
DEFAULT_MAX_TURNS = 30


# -- simulated users ------------------------------------------------------------------------------

@dataclass
class Reaction:
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
    reactions: list[Reaction] = field(default_factory=list)
    default: str | None = None
    usage: dict[str, int] = field(default_factory=lambda: {"prompt_tokens": 0, "completion_tokens": 0})
    _next: int = 0
    _used: set[int] = field(default_factory=set)

    @classmethod
    def for_task(cls, task: dict[str, Any]) -> ScriptedUser:
        """The scripted user of a task (its `user` object); a bad pattern is a ConfigurationError."""
        user = task["user"]
        problem = reactions_problem(user)
        if problem:
            raise ConfigurationError(f"task {task['id']}: {problem}")
        reactions = [Reaction(re.compile(r["when"], re.IGNORECASE), r["reply"], r.get("repeat", False))
                     for r in user.get("reactions", [])]
        return cls(list(user.get("script", [])), reactions, user.get("default"))

    async def reply(self, messages: list[dict[str, Any]]) -> str:
        said = next((m.get("content") or "" for m in reversed(messages) if m["role"] == "assistant"), "")
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
        elif op is c.POSSESSIVE_REPEAT and _nested_repeat(av[2], False):
            return True
        elif op is c.ATOMIC_GROUP and _nested_repeat(av, False):
            return True
        elif op is c.SUBPATTERN and _nested_repeat(av[3], inside):
            return True
        elif op is c.BRANCH and any(_nested_repeat(b, inside) for b in av[1]):
            return True
        elif op in (c.ASSERT, c.ASSERT_NOT) and _nested_repeat(av[1], inside):
            return True
        elif op is c.GROUPREF_EXISTS and any(_nested_repeat(b, inside) for b in av[1:] if b):
            return True
    return False


USER_SYSTEM = """You are a customer talking to a customer-service agent. Stay in character and
follow your private instructions below; reveal details only when the agent asks for them. Write one
short message at a time. When your request is handled, or cannot be, reply with exactly {stop}.

<instructions>
{instruction}
</instructions>"""


@dataclass
class LLMUser:
    """An LLM plays the user, holding the task's private instruction. It sees what the agent said
    to it, never the agent's reasoning or tool traffic."""

    endpoints: Endpoints
    model: str
    instruction: str
    seed: int | None = 0
    usage: dict[str, int] = field(default_factory=lambda: {"prompt_tokens": 0, "completion_tokens": 0})

    async def reply(self, messages: list[dict[str, Any]]) -> str:
        # Roles swap: the agent's visible words are the "user" of this model.
        convo = [{"role": "system", "content": USER_SYSTEM.format(stop=STOP, instruction=self.instruction)}]
        for m in messages:
            if m["role"] == "user":
                convo.append({"role": "assistant", "content": m["content"]})
            elif m["role"] == "assistant" and m.get("content"):
                convo.append({"role": "user", "content": m["content"]})

        response = await self.endpoints.post("/chat/completions", {
            "model": self.model, "messages": convo, "temperature": 0.7, "max_tokens": 256,
            "seed": self.seed})
        for k, v in usage_of(response).items():
            self.usage[k] += v
        text = (chat_message(response).get("content") or "").strip()
        return STOP if STOP in text or not text else text


# -- the loop -------------------------------------------------------------------------------------

async def _timed(awaitable, timing: dict[str, float], key: str):
    started = time.perf_counter()
    try:
        return await awaitable
    finally:
        timing[key] += time.perf_counter() - started


def _assistant(turn: Turn, n: int) -> dict[str, Any]:
    """Turn n's transcript message: what the interpreter read, the raw completion (token-level
    backends, for `rollout parity`) and the tool calls, numbered call_<turn>_<i>."""
    p = turn.parsed
    extra: dict[str, Any] = {}
    if p.reasoning:
        extra["reasoning"] = p.reasoning
    if turn.raw is not None:
        extra["raw"] = turn.raw
    if p.parse_error:
        extra["parse_error"] = p.parse_error
    calls = [(call_id(n, i), c.name, c.arguments) for i, c in enumerate(p.tool_calls)]
    return assistant_message(p.content or None, calls, **extra)


def _system_error(e: Exception, spec: EpisodeSpec) -> dict[str, Any]:
    """The `error` of an episode that `e` ended: an endpoint failure's kind, else `internal` (with
    the traceback on stderr)."""
    if isinstance(e, EndpointFailure):
        return {"kind": e.kind, "message": e.message, "attempts": e.attempts}
    log.error("episode %s attempt %d: internal error (recorded as system_error)",
              spec.task["id"], spec.attempt, exc_info=e)
    return {"kind": "internal", "message": f"{type(e).__name__}: {e}"}


@dataclass
class EpisodeSpec:
    task: dict[str, Any]
    domain: Domain
    attempt: int
    policy: dict[str, Any]  # model, backend, sampling, seed, interpreter: recorded as is
    max_turns: int | None = None


async def run_episode(spec: EpisodeSpec, backend: AgentBackend,
                      user: ScriptedUser | LLMUser,
                      price: Callable[[dict[str, dict[str, int]]], float | None]) -> dict[str, Any]:
    """Run one episode and return its record (schemas/episode.schema.json)."""
    task, started = spec.task, time.perf_counter()
    timing = {"model_s": 0.0, "tools_s": 0.0, "user_s": 0.0}
    agent_usage = {"prompt_tokens": 0, "completion_tokens": 0}
    with Sandbox(spec.domain, task.get("init"), task.get("tools")) as sandbox:
        tool_specs = [t.schema for t in sandbox.tools.values()]
        session = backend.open(spec.domain, tool_specs)
        messages: list[dict[str, Any]] = [{"role": "system", "content": session.system},
                                          {"role": "user", "content": task["user"]["opening"]}]
        session.begin(messages)
        status, error, termination = "ok", None, "max_turns"
        turns: list[dict[str, Any]] = []
        max_turns = spec.max_turns or task.get("max_turns", DEFAULT_MAX_TURNS)
        try:
            for n in range(max_turns):
                turn = await _timed(session.act(), timing, "model_s")
                for k in agent_usage:
                    agent_usage[k] += turn.usage[k]
                if turn.trace_turn is not None:
                    turns.append(turn.trace_turn)
                p = turn.parsed
                messages.append(_assistant(turn, n))
                if p.tool_calls:
                    t = time.perf_counter()
                    results = [tool_result_message(call["id"], call["function"]["name"],
                                                   sandbox.call(c.name, c.arguments).content)
                               for call, c in zip(messages[-1]["tool_calls"], p.tool_calls)]
                    timing["tools_s"] += time.perf_counter() - t
                    messages += results
                    session.observe(results)
                    continue
                if not p.content and not p.parse_error:
                    termination = "agent_done"
                    break
                reply = await _timed(user.reply(messages), timing, "user_s")
                if reply == STOP:
                    termination = "user_stop"
                    break
                messages.append({"role": "user", "content": reply})
                session.observe(messages[-1:])
        except ContextOverflow as e:
            termination = "context_overflow"
            messages.append({"role": "system", "content": f"[endstate] context overflow: {e}"})
        except EndstateError:  # a setup the user must fix (a 401, a domain bug): the run stops
            raise
        except Exception as e:  # endpoint failures; and a bug in endstate costs one episode, not the run
            status, termination, error = "system_error", None, _system_error(e, spec)
        changes = sandbox.changes()
        seed_digest = sandbox.seed_digest
    usage = {"agent": agent_usage, "user": dict(user.usage)}
    timing["total_s"] = time.perf_counter() - started
    return new_episode(
        episode_id=episode_id(task["id"], spec.attempt), task_id=task["id"],
        domain=spec.domain.name, attempt=spec.attempt, policy=spec.policy, status=status,
        error=error, termination=termination, messages=messages, turns=turns, changes=changes,
        seed_digest=seed_digest, usage=usage, cost_usd=price(usage),
        timing={k: round(v, 4) for k, v in timing.items()})

