"""Grading: rebuild an episode's terminal state from seed + init + its recorded diff, lock it
read-only, run every check. Reward is 1 exactly when all checks pass."""

from __future__ import annotations

import asyncio
import inspect
import logging
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
import orjson

from endstate import __version__
from endstate.core.env.changes import Changes
from endstate.core.env.domain import Domain, Domains
from endstate.core.env.folders import suite_files
from endstate.core.env.sandbox import Sandbox
from endstate.core.env.seats import StepBudget
from endstate.core.episode.plan import read_tasks
from endstate.core.episode.replays import replay
from endstate.core.errors import EndstateError
from endstate.core.grading.checks import CHECK_KINDS, Check, Context, TaskError
from endstate.core.grading.judge import Judge, JudgeError
from endstate.core.records.episode import graded_episode
from endstate.core.records.jsonl import Loc, SkipLog

log = logging.getLogger("endstate")


class TaskIndex:
    """Task definitions by id: from --tasks files, else from the built-in suites and the `tasks/`
    folder of every visible domain."""

    def __init__(self, domains: Domains, files: Sequence[str] = (), skip: SkipLog | None = None):
        self.domains = domains
        self.files = [str(f) for f in files]
        self.by_id: dict[str, dict[str, Any]] = {}
        self.where: dict[str, Loc] = {}
        for loc, task in read_tasks(self.files or builtin_task_files(domains), skip):
            self.by_id[task["id"]] = task
            self.where[task["id"]] = loc

    def get(self, task_id: str) -> dict[str, Any] | None:
        return self.by_id.get(task_id)

    def unknown(self, task_id: str) -> str:
        """What to say of a task id that is not here, and how to fix it."""
        where = " or ".join(self.files) or "the built-in suites"
        return f"unknown task id {task_id!r} (not in {where}); pass --tasks FILE that defines it"

    def __iter__(self):
        return iter(self.by_id.values())


def builtin_task_files(domains: Domains) -> list[str]:
    """The built-in suites and the `tasks/` folder of every visible domain (core.env.folders)."""
    return suite_files([str(d.path) for d in domains])


@dataclass
class Grader:
    domains: Domains
    judge: Judge | None = None
    check_steps: int = StepBudget.STEPS  # SQLite steps each check may take (core.sandbox)
    _replays: dict[tuple[str, bytes], Changes] = field(default_factory=dict)

    def gold_changes(self, task: dict[str, Any]) -> Changes:
        return self.replayed(task, task.get("gold", []))

    def replayed(self, task: dict[str, Any], steps: list[dict[str, Any]]) -> Changes:
        """The diff `steps` (gold calls) leave on `task`'s start state, replayed once per grader."""
        key = (task["id"], orjson.dumps([task.get("init"), steps], option=orjson.OPT_SORT_KEYS))
        if key not in self._replays:
            self._replays[key] = replay(self.domains[task["domain"]], task, steps)["changes"]
        return self._replays[key]

    def close(self) -> None:
        """The judge's connections, at the end of a run (on the event loop that used them)."""
        if self.judge is not None:
            self.judge.close()

    def task_problem(self, task: dict[str, Any]) -> str | None:
        """Why this grader cannot grade `task`, before any episode of it runs: a check kind no
        module registers, or a judge check with no judge configured."""
        unknown = sorted({c["kind"] for c in guarded(task)} - set(CHECK_KINDS))
        if unknown:
            return (f"has check kind(s) {unknown} that no module registers; registered: "
                    f"{', '.join(CHECK_KINDS)}")
        if self.judge is None and any(c["kind"] == "judge" for c in task["checks"]):
            return ("has a judge check: pass --judge-model and --judge-base-url (or set "
                    "ENDSTATE_JUDGE_MODEL and ENDSTATE_JUDGE_BASE_URL)")
        return None

    @staticmethod
    def _kind(check: dict[str, Any]) -> Check:
        try:
            return CHECK_KINDS[check["kind"]]
        except KeyError as e:  # the task's defect, never the agent's 0
            raise TaskError(e.args[0]) from None

    def check(self, task: dict[str, Any], changes: Changes, messages: list[dict[str, Any]],
              *, judge_optional: bool = False) -> list[dict[str, Any]]:
        """Results of every check of `task` on the terminal state seed + init + `changes`.

        The database checks run first; coroutine kinds (the judge) after them and only while every
        other check passes: a reward that is already 0 does not buy a judge call. Raises
        JudgeError when the judge cannot answer. With `judge_optional` and no judge, judge checks
        are left unanswered (passed None). Outside an event loop: `acheck` runs inside one."""
        results, ctx = self._database_checks(task, changes, messages)
        if any(r is None for r in results):
            asyncio.run(self._on_own_loop(self._asked(task, results, ctx, judge_optional)))
        return results

    async def acheck(self, task: dict[str, Any], changes: Changes, messages: list[dict[str, Any]],
                     *, judge_optional: bool = False) -> tuple[list[dict[str, Any]], Context]:
        """`check` inside an event loop, where the judge's calls run beside other episodes';
        also returns the context, whose judge_usage is this episode's."""
        results, ctx = self._database_checks(task, changes, messages)
        await self._asked(task, results, ctx, judge_optional)
        return results, ctx

    def _database_checks(self, task: dict[str, Any], changes: Changes, messages: list[dict[str, Any]]
                         ) -> tuple[list[dict[str, Any] | None], Context]:
        """Every check but the coroutine kinds, on the read-only terminal state; those are None."""
        domain = self.domains[task["domain"]]
        sandbox = Sandbox(domain, task.get("init"))
        sandbox.apply_changes(changes)
        budget = StepBudget(self.check_steps)
        # python checks run in a process of their own (checks.check_python): this connection is
        # the shared one, only the declarative checks read it
        checks = guarded(task)
        results: list[dict[str, Any] | None] = [None] * len(checks)
        with sandbox, sandbox.read_only(budget) as conn:
            ctx = Context(domain, task, conn, changes, messages,
                          lambda steps: self.replayed(task, steps), self.judge)
            for i, check in enumerate(checks):
                fn = self._kind(check)
                if inspect.iscoroutinefunction(fn):
                    continue
                budget.reset()
                try:
                    passed, detail = fn(check, ctx)
                    if not conn.in_transaction:
                        raise TaskError("the check ended the grading transaction; checks only read")
                except (TaskError, sqlite3.Error) as e:
                    why = (f"ran past {budget.steps:,} SQLite steps (a query that never ends?)"
                           if budget.exceeded else e.message if isinstance(e, TaskError)
                           else f"database error: {e}")
                    raise TaskError(f"task {task['id']} check {check_id(check, i)}: {why}") from None
                results[i] = {"id": check_id(check, i), "kind": check["kind"], "passed": passed,
                              "detail": detail}
        ctx.conn = None
        return results, ctx

    async def _asked(self, task: dict[str, Any], results: list[dict[str, Any] | None], ctx: Context,
                     judge_optional: bool) -> None:
        """Fill in the coroutine kinds' results (the judge's), unless another check failed."""
        failed = any(r and r["passed"] is False for r in results)
        for i, check in enumerate(guarded(task)):
            if results[i] is not None:
                continue
            if failed or (judge_optional and self.judge is None):
                results[i] = {"id": check_id(check, i), "kind": check["kind"], "passed": None, "detail": (
                    "not asked: another check already failed" if failed
                    else "not asked: no judge configured")}
                continue
            try:
                passed, detail = await self._kind(check)(check, ctx)
            except TaskError as e:
                raise TaskError(f"task {task['id']} check {check_id(check, i)}: {e.message}") from None
            results[i] = {"id": check_id(check, i), "kind": check["kind"], "passed": passed,
                          "detail": detail}

    async def _on_own_loop(self, work):
        """`work`'s value, on an event loop of its own (asyncio.run): the judge's connections are
        closed before the loop is."""
        try:
            return await work
        finally:
            if self.judge is not None:
                self.judge.close()

    def grade(self, episode: dict[str, Any], task: dict[str, Any]) -> dict[str, Any]:
        """The graded episode: reward 1/0, or null (with status system_error) when the episode or
        its judge failed for reasons outside the agent. Outside an event loop; `agrade` inside."""
        if episode["status"] == "system_error" or not self._asks(task):
            return self._graded(episode, task, lambda: (self.check(task, episode["changes"],
                                                                   episode["messages"]), None))
        return asyncio.run(self._on_own_loop(self.agrade(episode, task)))

    async def agrade(self, episode: dict[str, Any], task: dict[str, Any]) -> dict[str, Any]:
        """`grade` inside an event loop: the judge's calls wait beside the other episodes'."""
        if episode["status"] == "system_error":
            return self._graded(episode, task, None)
        try:
            results, ctx = await self.acheck(task, episode["changes"], episode["messages"])
        except (JudgeError, TaskError) as e:
            return self._graded(episode, task, None, e)
        return self._graded(episode, task, lambda: (results, ctx))

    @staticmethod
    def _asks(task: dict[str, Any]) -> bool:
        """Whether a check of `task` is a coroutine kind (the judge): grading then needs a loop."""
        return any(c["kind"] in CHECK_KINDS and inspect.iscoroutinefunction(CHECK_KINDS[c["kind"]])
                   for c in task["checks"])

    def _graded(self, episode: dict[str, Any], task: dict[str, Any], compute,
                failure: Exception | None = None) -> dict[str, Any]:
        """The graded record from `compute() -> (results, context or None)`, or from `failure`."""
        grader = {"version": __version__, "judge_model": self.judge.model if self.judge else None}
        if episode["status"] == "system_error":
            return graded_episode(episode, grader, None, [])
        check_recorded_on(self.domains[task["domain"]], episode, task)
        try:
            if failure is not None:
                raise failure
            results, ctx = compute()
        except JudgeError as e:
            return graded_episode(episode, grader, None, [], status="system_error",
                                  error={"kind": "judge", "message": str(e)})
        except TaskError as e:  # a defect of the task, not the agent's doing: never a 0
            log.warning("%s: recorded as system_error (kind task)", e.message)
            return graded_episode(episode, grader, None, [], status="system_error",
                                  error={"kind": "task", "message": e.message})
        if ctx is None or not self.judge:
            return graded_episode(episode, grader, reward(results), results)
        return graded_episode(episode, grader, reward(results), results,
                              usage={**episode.get("usage", {}),
                                     "judge": msgspec.to_builtins(ctx.judge_usage)})


FOOTPRINT = {"id": "footprint", "kind": "footprint"}  # the guard a task gets unless it writes its own


def guarded(task: dict[str, Any]) -> list[dict[str, Any]]:
    """`task`'s checks as graded: its own, and the unrequested-change guard (core.grading.
    footprint) last where none of them is one, so that no task's reward lets a side effect
    through."""
    checks = task["checks"]
    return checks if any(c["kind"] == "footprint" for c in checks) else [*checks, FOOTPRINT]


def check_id(check: dict[str, Any], i: int) -> str:
    """How graded records name the `i`th check of a task: its `id`, else `i:kind`."""
    return check.get("id") or f"{i}:{check['kind']}"


def check_recorded_on(domain: Domain, episode: dict[str, Any], task: dict[str, Any]) -> None:
    """The episode ran in its task's domain, on the seed the domain builds now: else its diff does
    not describe this state, and neither grading nor `grade state` may replay it."""
    if episode["domain"] != task["domain"]:
        raise EndstateError(f"episode {episode['episode_id']} ran in domain {episode['domain']!r} "
                            f"but task {task['id']} is in {task['domain']!r}: pass the --tasks "
                            "file the episode was run from")
    if episode["seed_digest"] != domain.seed()[1]:
        raise EndstateError(f"episode {episode['episode_id']} was recorded on seed "
                            f"{episode['seed_digest'][:19]}… but domain {domain.name} now seeds "
                            f"{domain.seed()[1][:19]}…: re-run it, or use that domain version")


def reward(results: list[dict[str, Any]]) -> int:
    """1 when every check passed. A check left unanswered (None) is a pass only when the others
    passed too, which is how it came to be asked in the first place."""
    return int(all(r["passed"] is not False for r in results))

