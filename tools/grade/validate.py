"""`grade validate`: prove a task sound before anyone trains or evaluates on it.

Sound means: the gold trajectory scores 1, doing nothing scores 0, dropping any single writing
gold call scores 0 (every write is covered by some check; the uncovered ones are reported), and
changing any argument of a writing gold call scores 0 unless the call lists it as `free`
(grade.sensitivity; the arguments no check can tell are reported).
"""

from __future__ import annotations

from typing import Any

from endstate.core.episode.replay import failed_steps, replay
from endstate.core.errors import ConfigurationError, EndstateError
from endstate.core.grading.grader import Grader, reward
from endstate.grade.sensitivity import Seen, argument_sensitivity, free_problems


def _score(grader: Grader, task: dict[str, Any], steps: list[dict[str, Any]]):
    episode = replay(grader.domains[task["domain"]], task, steps)
    results = grader.check(task, episode["changes"], episode["messages"], judge_optional=True)
    return episode, results


def validate_task(grader: Grader, task: dict[str, Any], seen: Seen | None = None) -> dict[str, Any]:
    """The verdict on `task`. `seen`: argument values of other tasks' gold calls to vary arguments
    with (sensitivity.seen_values of the tasks validated together); the task's own by default."""
    verdict: dict[str, Any] = {"task_id": task["id"], "domain": task["domain"], "sound": False,
                               "gold_reward": None, "empty_reward": None, "uncovered_calls": [],
                               "insensitive_args": [], "unvaried_args": [],
                               "unverified_checks": [], "problems": []}
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
            found = argument_sensitivity(lambda steps: _score(grader, task, steps), domain, task,
                                         gold_episode["changes"], seen if seen is not None else {})
            verdict["insensitive_args"], verdict["unvaried_args"] = found.insensitive, found.unvaried
            problems += found.problems()
    except ConfigurationError:
        raise
    except EndstateError as e:
        problems.append(e.message)
    verdict["sound"] = not problems
    return verdict


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
