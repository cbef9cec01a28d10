"""endstate's tasks as an OpenEnv environment (`rollout serve-openenv`): one instance per OpenEnv
session (WebSocket connection), one fresh sandbox per reset.

The episode is the one `rollout serve-mcp` drives (mcp_server.SandboxSession): tool calls run in
the sandbox, messages go to the task's simulated user (scripted or LLM), and the record it writes
is rollout's. What this module adds is OpenEnv's shape: reset picks the task (by id, else the next
of the served list, round-robin over all sessions), a step is one agent turn, and the episode ends
as rollout's does (the user stops, the agent takes a turn with nothing to say, or max_turns turns
are spent). Its last observation carries the grade (core.grading: the checks of `grade`), and,
with --save-episodes, the episode record is appended where `grade` and `grade audit` read it.

An episode that is not ended (a reset or a disconnect before done) is discarded: its sandbox is
closed, nothing is graded or written. A bad action (an unknown tool, bad arguments, a tool and a
message at once, a step before reset or after the end) is an observation with ok=False, never a
server error.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from dataclasses import dataclass, field
from typing import Any

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import EnvironmentMetadata

from endstate.core.episode.loop import DEFAULT_MAX_TURNS
from endstate.rollout.mcp_server import USER_LEFT, SandboxSession
from endstate.rollout.openenv_types import EndstateAction, EndstateObservation, EndstateState

log = logging.getLogger("endstate")

NOT_STARTED = "No episode is running: reset to start one."
ENDED = "The episode is over ({why}): reset to start another."


@dataclass
class Served:
    """What every session of one server shares: the tasks, how an episode is made, graded and
    saved, the round-robin cursor and the attempt numbers (unique per task, so saved episodes
    have distinct ids)."""

    tasks: list[dict[str, Any]]
    domains: Any  # core.env.domain.Domains
    new_session: Any  # serve_cmd.SessionMaker: (domain, task, attempt) -> SandboxSession
    grader: Any  # core.grading.grader.Grader
    log: Any = None  # episode_log.EpisodeLog for --save-episodes, or None
    next_attempt: dict[str, int] = field(default_factory=dict)
    live: set[int] = field(default_factory=set)  # ids of the episodes now open (sandboxes held)
    _cursor: itertools.cycle = field(init=False)

    def __post_init__(self) -> None:
        self.by_id = {t["id"]: t for t in self.tasks}
        self._cursor = itertools.cycle(self.tasks)

    def pick(self, task_id: str | None) -> dict[str, Any] | None:
        return next(self._cursor) if task_id is None else self.by_id.get(task_id)

    def attempt(self, task_id: str) -> int:
        n = self.next_attempt.get(task_id, 0)
        self.next_attempt[task_id] = n + 1
        return n

    def unknown(self, task_id: str) -> str:
        shown = ", ".join(list(self.by_id)[:10]) + (", ..." if len(self.by_id) > 10 else "")
        return f"unknown task {task_id!r}: this server serves {len(self.by_id)} task(s): {shown}"


class EndstateEnvironment(Environment[EndstateAction, EndstateObservation, EndstateState]):
    """One OpenEnv session: at most one open episode, its own sandbox."""

    SUPPORTS_CONCURRENT_SESSIONS = True  # each instance has its own sandbox; Served is the loop's

    def __init__(self, served: Served):
        super().__init__()
        self.served = served
        self.episode: SandboxSession | None = None
        self.steps = 0
        self.ending: EndstateObservation | None = None  # the episode's last observation, once done

    # -- reset ------------------------------------------------------------------------------

    async def reset_async(self, seed: int | None = None, episode_id: str | None = None,
                          task_id: str | None = None, **kwargs: Any) -> EndstateObservation:
        """A fresh sandbox of `task_id` (else the next task); the opening, the policy and tools."""
        self._discard()
        record = self.served.pick(task_id)
        if record is None:
            return EndstateObservation(kind="error", ok=False, done=True,
                                       content=self.served.unknown(task_id))
        domain = self.served.domains[record["domain"]]
        session = self.served.new_session(domain, record, self.served.attempt(record["id"]))
        self.episode, self.steps, self.ending = session, 0, None
        self.served.live.add(id(session))
        return EndstateObservation(
            kind="opening", content=session.task.user.opening, task_id=session.task.id,
            domain=domain.name, episode_id=self._episode_id(), system=domain.policy,
            tools=[t.schema for t in session.sandbox.tools.values()], max_turns=self._max_turns())

    def reset(self, seed: int | None = None, episode_id: str | None = None,
              task_id: str | None = None, **kwargs: Any) -> EndstateObservation:
        return asyncio.run(self.reset_async(seed, episode_id, task_id))

    # -- step -------------------------------------------------------------------------------

    async def step_async(self, action: EndstateAction, timeout_s: float | None = None,
                         **kwargs: Any) -> EndstateObservation:
        """One agent turn; the grade when it ends the episode."""
        if self.ending is not None:
            return self._refused(ENDED.format(why=self.ending.termination or "a system error"),
                                 done=True)
        if self.episode is None:
            return self._refused(NOT_STARTED)
        if action.tool is not None and action.message is not None:
            return self._refused("Give one of `tool` (with `arguments`) or `message` per step, "
                                 "not both.")
        if action.tool is None and not (action.message or "").strip():
            return await self._end()  # a turn with nothing to say: the agent is done
        self.steps += 1
        if action.tool is not None:
            ok, content = await self.episode.call(action.tool, action.arguments)
            kind = "tool_result"
        else:
            ok, content = await self.episode.message_user({"message": action.message})
            kind = "user_reply"
        if self.episode.termination or self.episode.error:
            return await self._end(content)
        if self.steps >= self._max_turns():
            self.episode.termination = "max_turns"
            return await self._end(content)
        return EndstateObservation(kind=kind, content=content, ok=ok, task_id=self.episode.task.id,
                                   episode_id=self._episode_id())

    def step(self, action: EndstateAction, timeout_s: float | None = None,
             **kwargs: Any) -> EndstateObservation:
        return asyncio.run(self.step_async(action, timeout_s))

    # -- the end ----------------------------------------------------------------------------

    async def _end(self, content: str = "") -> EndstateObservation:
        """Record the episode, grade it, save it (--save-episodes), close its sandbox."""
        session, task = self.episode, self.episode.task
        episode = session.record()
        self._close_sandbox()
        try:
            graded = await self.served.grader.agrade(episode, self.served.by_id[task.id])
        except Exception as e:  # a grading bug costs this episode, not the server
            log.error("openenv: grading %s failed (a system error)", episode["episode_id"],
                      exc_info=e)
            graded = {"reward": None, "status": "system_error", "checks": [],
                      "error": {"kind": "internal", "message": f"{type(e).__name__}: {e}"}}
        if self.served.log is not None:
            await asyncio.to_thread(self.served.log.append, episode)
        reward = graded["reward"]
        if content == USER_LEFT:  # serve-mcp's words ask the client to end the MCP session
            content = "The user ended the conversation."
        self.ending = EndstateObservation(
            kind="episode_end", content=content, ok=graded["status"] == "ok", done=True,
            reward=None if reward is None else float(reward), task_id=task.id,
            domain=episode["domain"], episode_id=episode["episode_id"],
            termination=episode["termination"], status=graded["status"],
            error=graded.get("error"), checks=graded["checks"])
        return self.ending

    def _refused(self, why: str, done: bool = False) -> EndstateObservation:
        ending = self.ending
        return EndstateObservation(kind="error", content=why, ok=False, done=done,
                                   reward=ending.reward if ending else None,
                                   task_id=self.episode.task.id if self.episode else None,
                                   episode_id=self._episode_id() if self.episode else None)

    # -- bookkeeping ------------------------------------------------------------------------

    def _max_turns(self) -> int:
        return self.episode.task.max_turns or DEFAULT_MAX_TURNS

    def _episode_id(self) -> str:
        return self.episode.episode_id

    @property
    def state(self) -> EndstateState:
        episode = self.episode
        return EndstateState(episode_id=self._episode_id() if episode else None,
                             step_count=self.steps, task_id=episode.task.id if episode else None,
                             attempt=episode.attempt if episode else None,
                             done=self.ending is not None)

    def get_metadata(self) -> EnvironmentMetadata:
        from endstate import __version__

        domains = sorted({t["domain"] for t in self.served.tasks})
        return EnvironmentMetadata(
            name="endstate", version=__version__, documentation_url="docs/openenv.md",
            description=f"{len(self.served.tasks)} endstate task(s) of {', '.join(domains)}: "
                        "tool calls on a fresh SQLite sandbox, a simulated user, and a reward "
                        "from the database's end state.")

    def _close_sandbox(self) -> None:
        if self.episode is not None and id(self.episode) in self.served.live:
            self.served.live.discard(id(self.episode))
            self.episode.close()

    def _discard(self) -> None:
        """Drop an episode that was not ended (nothing graded or written)."""
        if self.ending is None and self.episode is not None:
            log.info("openenv: %s discarded after %d step(s): not ended", self._episode_id(),
                     self.steps)
        self._close_sandbox()
        self.episode, self.ending = None, None

    def close(self) -> None:
        self._discard()

