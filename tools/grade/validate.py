"""`grade validate`: prove a task sound before anyone trains or evaluates on it.

Sound means: the gold trajectory scores 1, doing nothing scores 0, dropping any single writing
gold call scores 0 (every write is covered by some check; the uncovered ones are reported),
changing any argument of a writing gold call scores 0 unless the call lists it as `free`
(grade.sensitivity; the arguments no check can tell are reported), and every unrequested write
after the gold calls scores 0 (grade.attacks: what an optimizer would try). The verdict counts
what was tried: `arguments` (tried, varied, ignored by the tool, not varied) and `attacks`
(unrequested calls tried, those that wrote, those that scored 0).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from endstate.core.episode.replays import failed_steps, replay
from endstate.core.errors import ConfigurationError, EndstateError
from endstate.core.grading.grader import Grader, reward
from endstate.grade.attacks import attack
from endstate.grade.sensitivity import Seen, argument_sensitivity, free_problems, seen_values


def _score(grader: Grader, task: dict[str, Any], steps: list[dict[str, Any]]):
    episode = replay(grader.domains[task["domain"]], task, steps)
    results = grader.check(task, episode["changes"], episode["messages"], judge_optional=True)
    return episode, results


def validate_task(grader: Grader, task: dict[str, Any], seen: Seen | None = None) -> dict[str, Any]:
    """The verdict on `task`. `seen`: argument values of other tasks' gold calls to vary arguments
    with (sensitivity.seen_values of the tasks validated together); the task's own by default."""
    verdict: dict[str, Any] = {"task_id": task["id"], "domain": task["domain"], "sound": False,
                               "gold_reward": None, "empty_reward": None, "uncovered_calls": [],
                               "insensitive_args": [], "unvaried_args": [], "ignored_args": [],
                               "unrequested_writes": [], "arguments": None, "attacks": None,
                               "unverified_checks": [], "warnings": [], "problems": []}
    problems = verdict["problems"]
    try:
        domain = grader.domains[task["domain"]]
        gold = task.get("gold", [])
        unknown = sorted({s["tool"] for s in gold if "tool" in s} - set(domain.tools))
        if unknown:
            problems.append(f"gold uses unknown tool(s) {unknown}")
            return verdict
        problems += free_problems(gold)
        gold_episode = _gold_and_empty(grader, task, verdict)
        _uncovered(grader, task, verdict)
        if verdict["gold_reward"]:
            _attack(grader, task, gold_episode, seen if seen is not None else seen_values([task]), verdict)
    except ConfigurationError:
        raise
    except EndstateError as e:
        problems.append(e.message)
    verdict["sound"] = not problems
    return verdict


def _attack(grader: Grader, task: dict[str, Any], gold: dict[str, Any], seen: Seen,
            verdict: dict[str, Any]) -> None:
    """Argument sensitivity and unrequested writes, into `verdict`."""
    domain = grader.domains[task["domain"]]
    found = argument_sensitivity(lambda steps: _score(grader, task, steps), domain, task,
                                 gold["changes"], seen)
    verdict.update(insensitive_args=found.insensitive, unvaried_args=found.unvaried,
                   ignored_args=found.ignored, arguments=found.counts())
    verdict["warnings"] += found.warnings()
    verdict["problems"] += found.problems()

    def graded(changes, messages) -> int:
        return reward(grader.check(task, changes, messages, judge_optional=True))

    writes = attack(domain, task, gold, seen, graded)
    verdict.update(unrequested_writes=writes.passed, attacks=writes.counts())
    verdict["problems"] += writes.problems()


def _gold_and_empty(grader: Grader, task: dict[str, Any], verdict: dict[str, Any]) -> dict[str, Any]:
    """Score the gold and the empty trajectory into `verdict`; the gold's episode."""
    problems = verdict["problems"]
    gold_episode, results = _score(grader, task, task.get("gold", []))
    problems += _failures(task.get("gold", []), failed_steps(gold_episode))
    verdict["gold_reward"] = reward(results)
    verdict["unverified_checks"] = [r["id"] for r in results if r["passed"] is None]
    if not verdict["gold_reward"]:
        problems += [f"gold fails check {r['id']}: {r['detail']}" for r in results if r["passed"] is False]
    _, results = _score(grader, task, [])
    verdict["empty_reward"] = reward(results)
    if verdict["empty_reward"]:
        problems.append("doing nothing passes every check: add a check on the intended outcome")
    return gold_episode


def _uncovered(grader: Grader, task: dict[str, Any], verdict: dict[str, Any]) -> None:
    """Drop each writing gold call in turn; those no check misses go to `verdict`."""
    gold, tools = task.get("gold", []), grader.domains[task["domain"]].tools
    for i, step in enumerate(gold):
        if "tool" not in step or step.get("fails") or not tools[step["tool"]].writes:
            continue
        _, results = _score(grader, task, gold[:i] + gold[i + 1:])
        if reward(results):
            verdict["uncovered_calls"].append({"index": i, "tool": step["tool"], "args": step["args"]})
    verdict["problems"] += [f"no check notices when gold call #{c['index']} {c['tool']}"
                            f"({_args(c['args'])}) is left out" for c in verdict["uncovered_calls"]]


def _args(args: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in args.items())


def _failures(gold: list[dict[str, Any]], failed: dict[int, str]) -> list[str]:
    """A gold call that fails is a problem, unless the task says it fails (`fails`: as it does in
    the benchmark the task comes from); one said to fail that succeeds is a problem too."""
    out = []
    for i, step in enumerate(gold):
        expected = step.get("fails", False)
        if i in failed and not expected:
            out.append(f"gold call #{i} {step['tool']} failed: {failed[i]} (if the source "
                       "benchmark's gold fails there too, mark the step \"fails\": true)")
        elif expected and i not in failed:
            out.append(f"gold call #{i} {step['tool']} is marked \"fails\" but succeeded")
    return out


@dataclass
class Attempted:
    """What validating a suite tried, summed over its verdicts: for its summary line."""

    arguments: Counter[str] = field(default_factory=Counter)
    attacks: Counter[str] = field(default_factory=Counter)

    def add(self, verdict: dict[str, Any]) -> None:
        self.arguments.update(verdict.get("arguments") or {})
        self.attacks.update(verdict.get("attacks") or {})

    def line(self) -> str:
        a, w = self.arguments, self.attacks
        passed = w["wrote"] - w["scored_0"]
        return (f"writing arguments: {a['tried']:,} tried, {a['varied']:,} varied, {a['ignored']:,} "
                f"ignored by the tool, {a['unvaried']:,} not varied; unrequested writes: {w['tried']:,} "
                f"tried, {w['wrote']:,} changed the end state, "
                + ("all scored 0" if not passed else f"{passed:,} scored 1"))
