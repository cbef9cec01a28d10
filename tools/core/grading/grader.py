"""Grading: rebuild an episode's terminal state from seed + init + its recorded diff, lock it
read-only, run every check. Reward is 1 exactly when all checks pass."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from endstate import TASKS_DIR, __version__
from endstate.core.env.changes import Changes
from endstate.core.env.domain import Domain, Domains
from endstate.core.env.sandbox import Sandbox
from endstate.core.env.seats import StepBudget
from endstate.core.episode.plan import read_tasks
from endstate.core.episode.replay import replay
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
        self.by_id: dict[str, dict[str, Any]] = {}
        self.where: dict[str, Loc] = {}
        paths = list(files) or builtin_task_files(domains)
        for loc, task in read_tasks([str(p) for p in paths], skip):
            self.by_id[task["id"]] = task
            self.where[task["id"]] = loc

    def get(self, task_id: str) -> dict[str, Any] | None:
        return self.by_id.get(task_id)

    def __iter__(self):
        return iter(self.by_id.values())


def builtin_task_files(domains: Domains) -> list[str]:
    files = sorted(TASKS_DIR.rglob("*.jsonl"))
    for d in domains:
        files += sorted((d.path / "tasks").glob("*.jsonl"))
    return [str(f) for f in files]


@dataclass
class Grader:
    domains: Domains
    judge: Judge | None = None
    check_steps: int = StepBudget.STEPS  # SQLite steps each check may take (core.sandbox)
    _gold: dict[str, Changes] = field(default_factory=dict)

    def gold_changes(self, task: dict[str, Any]) -> Changes:
        if task["id"] not in self._gold:
            domain = self.domains[task["domain"]]
            self._gold[task["id"]] = replay(domain, task, task.get("gold", []))["changes"]
        return self._gold[task["id"]]

    def task_problem(self, task: dict[str, Any]) -> str | None:
        """Why this grader cannot grade `task`, before any episode of it runs: a check kind no
        module registers, or a judge check with no judge configured."""
        unknown = sorted({c["kind"] for c in task["checks"]} - set(CHECK_KINDS))
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

        Judge checks run last and only while every other check passes: a reward that is already 0
        does not buy a judge call. Raises JudgeError when the judge cannot answer. With
        `judge_optional` and no judge, judge checks are left unanswered (passed None).
        """
        domain = self.domains[task["domain"]]
        sandbox = Sandbox(domain, task.get("init"))
        sandbox.apply_changes(changes)
        budget = StepBudget(self.check_steps)
        # python checks run in a process of their own (checks.check_python): this connection is
        # the shared one, only the declarative checks read it
        with sandbox, sandbox.read_only(budget) as conn:
            ctx = Context(domain, task, conn, changes, messages,
                          lambda: self.gold_changes(task), self.judge)
            order = sorted(range(len(task["checks"])), key=lambda i: task["checks"][i]["kind"] == "judge")
            results: list[dict[str, Any] | None] = [None] * len(order)
            for i in order:
                check = task["checks"][i]
                cid = check.get("id") or f"{i}:{check['kind']}"
                if check["kind"] == "judge" and (
                        any(r and r["passed"] is False for r in results)
                        or (judge_optional and self.judge is None)):
                    results[i] = {"id": cid, "kind": "judge", "passed": None, "detail": (
                        "not asked: no judge configured" if self.judge is None
                        else "not asked: another check already failed")}
                    continue
                budget.reset()
                try:
                    passed, detail = self._kind(check)(check, ctx)
                    if not conn.in_transaction:
                        raise TaskError("the check ended the grading transaction; checks only read")
                except (TaskError, sqlite3.Error) as e:
                    why = (f"ran past {budget.steps:,} SQLite steps (a query that never ends?)"
                           if budget.exceeded else e.message if isinstance(e, TaskError)
                           else f"database error: {e}")
                    raise TaskError(f"task {task['id']} check {cid}: {why}") from None
                results[i] = {"id": cid, "kind": check["kind"], "passed": passed, "detail": detail}
        return results

    def grade(self, episode: dict[str, Any], task: dict[str, Any]) -> dict[str, Any]:
        """The graded episode: reward 1/0, or null (with status system_error) when the episode or
        its judge failed for reasons outside the agent."""
        grader = {"version": __version__, "judge_model": self.judge.model if self.judge else None}
        if episode["status"] == "system_error":
            return graded_episode(episode, grader, None, [])
        check_recorded_on(self.domains[task["domain"]], episode, task)
        before = msgspec.structs.replace(self.judge.usage) if self.judge else None
        try:
            results = self.check(task, episode["changes"], episode["messages"])
        except JudgeError as e:
            return graded_episode(episode, grader, None, [], status="system_error",
                                  error={"kind": "judge", "message": str(e)})
        except TaskError as e:  # a defect of the task, not the agent's doing: never a 0
            log.warning("%s: recorded as system_error (kind task)", e.message)
            return graded_episode(episode, grader, None, [], status="system_error",
                                  error={"kind": "task", "message": e.message})
        if not self.judge:
            return graded_episode(episode, grader, reward(results), results)
        judge_usage = msgspec.to_builtins(self.judge.usage.since(before))
        return graded_episode(episode, grader, reward(results), results,
                              usage={**episode.get("usage", {}), "judge": judge_usage})


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

