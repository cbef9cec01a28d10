"""Argument sensitivity, the last proof of `grade validate`: every argument of a writing gold call
must matter to some check. Each is replayed changed to another value (grade.alternatives); when
every check still passes, an agent that gets that argument wrong scores 1, and the task is unsound.
A gold call names the arguments whose value is the agent's to choose (a free-text note) in `free`;
those are left alone.

A changed value counts only when the tool accepts it and it changes the end state: a value the
tool refuses is no mistake an agent gets away with, and one that leaves the database as the gold
left it (a default spelled out) is no mistake at all. An argument with no such value among those
tried is reported as not varied, which does not make a task unsound.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from endstate.core.env.domain import Domain
from endstate.core.episode.replay import failed_steps
from endstate.core.grading.grader import reward
from endstate.grade.alternatives import alternatives, same, shaped_like

MAX_REPLAYS = 3  # changed values replayed per argument: a replay takes ms, a task has ~10 arguments
SEEN_KEPT = MAX_REPLAYS + 1  # values kept per argument from other gold calls; one may be the gold's

Seen = dict[tuple[str, str, str], list[Any]]  # (domain, tool, argument) -> distinct gold values
Score = Callable[[list[dict[str, Any]]], tuple[dict[str, Any], list[dict[str, Any]]]]  # steps -> (episode, results)


def seen_values(tasks: Iterable[dict[str, Any]]) -> Seen:
    """The first few distinct values each argument has in the gold calls of `tasks`: realistic
    alternatives (another reason, another email) that no rule derives from the value itself."""
    seen: Seen = {}
    for task in tasks:
        for step in task.get("gold", []):
            for arg, value in step.get("args", {}).items():
                kept = seen.setdefault((task["domain"], step["tool"], arg), [])
                if len(kept) < SEEN_KEPT and not any(same(value, v) for v in kept):
                    kept.append(value)
    return seen


def free_problems(gold: list[dict[str, Any]]) -> list[str]:
    """A name in a call's `free` that is not one of its arguments (a typo would leave the argument
    it meant checked, or a renamed one unchecked, without a word)."""
    return [f"gold call #{i} {step['tool']} lists {name!r} in \"free\", but the call has no "
            f"argument {name!r}; its arguments: {', '.join(step['args']) or 'none'}"
            for i, step in enumerate(gold) if "tool" in step
            for name in step.get("free", []) if name not in step["args"]]


@dataclass
class Sensitivity:
    insensitive: list[dict[str, Any]] = field(default_factory=list)  # index, tool, arg, value, unnoticed
    unvaried: list[dict[str, Any]] = field(default_factory=list)  # index, tool, arg, tried

    def problems(self) -> list[str]:
        return [f"no check notices when argument {f['arg']} of gold call #{f['index']} {f['tool']} is "
                f"{f['unnoticed']!r} instead of {f['value']!r}: pin it in a check, or list it in the "
                f"call's \"free\" if any value will do" for f in self.insensitive]


def argument_sensitivity(score: Score, domain: Domain, task: dict[str, Any],
                         gold_changes: dict[str, Any], seen: Seen) -> Sensitivity:
    """Vary each argument of each writing gold call of `task` (its gold scores 1 and changed the
    database to `gold_changes`), alternatives from `seen` after the task's own gold calls."""
    gold, own, found = task.get("gold", []), seen_values([task]), Sensitivity()
    for i, step in enumerate(gold):
        if "tool" not in step or step.get("fails") or not domain.tools[step["tool"]].writes:
            continue  # a call that fails as in the source benchmark changes nothing to vary
        properties = domain.tools[step["tool"]].parameters.get("properties", {})
        for arg, value in step["args"].items():
            if arg in step.get("free", []):
                continue
            key = (task["domain"], step["tool"], arg)
            near = shaped_like(value, _init_values(task), MAX_REPLAYS)
            candidates = alternatives(properties.get(arg, {}), value, near,
                                      [*own.get(key, []), *seen.get(key, [])])
            where = {"index": i, "tool": step["tool"], "arg": arg}
            unnoticed, varied, tried = _vary(score, domain, gold, i, arg, candidates, gold_changes)
            if unnoticed:
                found.insensitive.append({**where, "value": value, "unnoticed": unnoticed[0]})
            elif not varied:
                found.unvaried.append({**where, "tried": tried})
    return found


def _init_values(task: dict[str, Any]) -> Iterable[Any]:
    """Every value of the task's own rows: the other orders, cards or tickets an agent could
    mistake for the right one."""
    return (v for rows in task.get("init", {}).values() for row in rows for v in row.values())


def _vary(score: Score, domain: Domain, gold: list[dict[str, Any]], index: int, arg: str,
          candidates: list[Any], gold_changes: dict[str, Any]) -> tuple[list[Any], bool, list[Any]]:
    """Replay gold with argument `arg` of call `index` set to each candidate in turn, at most
    MAX_REPLAYS of them: ([the first value every check passed with] or [], whether any value the
    tool accepted changed the end state, the values tried)."""
    step = gold[index]
    tool, tried, replays, varied = domain.tools[step["tool"]], [], 0, False
    for candidate in candidates:
        if replays == MAX_REPLAYS:
            break
        tried.append(candidate)
        args = {**step["args"], arg: candidate}
        if tool.argument_problem(args):  # refused before any replay: costs nothing
            continue
        replays += 1
        episode, results = score([*gold[:index], {"tool": step["tool"], "args": args}, *gold[index + 1:]])
        if index in failed_steps(episode) or episode["changes"] == gold_changes:
            continue
        if reward(results):
            return [candidate], True, tried
        varied = True
    return [], varied, tried
