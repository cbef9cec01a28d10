"""Argument sensitivity, the last proof of `grade validate`: every argument of a writing gold call
must matter to some check. Each is replayed changed to another value (grade.alternatives); when
every check still passes, an agent that gets that argument wrong scores 1, and the task is unsound.
A gold call names the arguments whose value is the agent's to choose (a free-text note) in `free`;
those are left alone.

The values tried come from the domain's own data, as an optimizer's mistakes would: first the
other rows of the same entity (the customer's other payment methods, the product's other
variants: rows of the id's table that share its owner), then the table's other rows (another
customer's: `Entities.related`), the task's other rows of that id's shape, the schema's neighbours of the value (an enum's other members, the next day) and
what the argument is in other gold calls.

A changed value counts only when the tool accepts it and it changes the end state: a value the
tool refuses is no mistake an agent gets away with. An argument with no such value among those
tried is reported, which does not make a task unsound: as "ignored by the tool" when the tool
accepted some value and the end state stayed the gold's every time (a port that does not store a
cancel reason or a payment method: a warning), else as not varied.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from endstate.core.env.domain import Domain
from endstate.core.env.sandbox import Sandbox
from endstate.core.episode.replays import failed_steps
from endstate.core.grading.checks import terminal
from endstate.core.grading.footprint import free_of
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
    ignored: list[dict[str, Any]] = field(default_factory=list)  # index, tool, arg, tried
    arguments: int = 0  # writing gold calls' arguments that are not free

    def counts(self) -> dict[str, int]:
        """How many arguments were tried, and what became of them."""
        return {"tried": self.arguments, "varied": self.arguments - len(self.unvaried) - len(self.ignored),
                "ignored": len(self.ignored), "unvaried": len(self.unvaried)}

    def warnings(self) -> list[str]:
        return [f"argument {f['arg']} of gold call #{f['index']} {f['tool']} is ignored by the tool: it "
                f"accepted {_shown(f['tried'])} and the end state stayed the gold's (does the tool store it?)"
                for f in self.ignored]

    def problems(self) -> list[str]:
        return [f"no check notices when argument {f['arg']} of gold call #{f['index']} {f['tool']} is "
                f"{f['unnoticed']!r} instead of {f['value']!r}: pin it in a check, or list it in the "
                f"call's \"free\" if any value will do" for f in self.insensitive]


def argument_sensitivity(score: Score, domain: Domain, task: dict[str, Any],
                         gold_changes: dict[str, Any], seen: Seen) -> Sensitivity:
    """Vary each argument of each writing gold call of `task` (its gold scores 1 and changed the
    database to `gold_changes`), alternatives from `seen` after the task's own gold calls."""
    gold, own, found = task.get("gold", []), seen_values([task]), Sensitivity()
    entities = Entities(domain, task)
    for i, step in enumerate(gold):
        if "tool" not in step or step.get("fails") or not domain.tools[step["tool"]].writes:
            continue  # a call that fails as in the source benchmark changes nothing to vary
        properties = domain.tools[step["tool"]].parameters.get("properties", {})
        for arg, value in step["args"].items():
            if arg in step.get("free", []):
                continue
            key = (task["domain"], step["tool"], arg)
            near = [*entities.related(value), *shaped_like(value, _init_values(task), MAX_REPLAYS)]
            candidates = alternatives(properties.get(arg, {}), value, near,
                                      [*own.get(key, []), *seen.get(key, [])])
            where = {"index": i, "tool": step["tool"], "arg": arg}
            found.arguments += 1
            tried = _vary(score, domain, gold, i, arg, candidates, gold_changes)
            if tried.unnoticed is not None:
                found.insensitive.append({**where, "value": value, "unnoticed": tried.unnoticed})
            elif tried.accepted and not tried.varied:
                found.ignored.append({**where, "tried": tried.values})
            elif not tried.varied:
                found.unvaried.append({**where, "tried": tried.values})
    entities.close()
    return found


class Entities:
    """The task's start state (seed + init), read for the rows that share an id's owner."""

    def __init__(self, domain: Domain, task: dict[str, Any]):
        self.domain, self.task, self._sandbox = domain, task, None

    def related(self, value: Any, most: int = MAX_REPLAYS) -> list[Any]:
        """Other rows' ids for the id `value` (a one-column key of some table), at most `most`:
        first those that share one of its row's `*_id` columns (an owner: the customer's other
        payment methods, the product's other variants), then the table's other rows nearest in
        key order (another customer's); none when `value` is no row's id."""
        if not isinstance(value, str) or not value:
            return []
        found: list[Any] = []
        with self._state().read_only() as conn:
            for table in self.domain.tables.values():
                if len(table.key) != 1:
                    continue
                key = table.key[0]
                owners = [c for c in table.columns if c.endswith("_id") and c != key]
                columns = ", ".join(["1", *(f'"{c}"' for c in owners)])
                row = conn.execute(f'SELECT {columns} FROM "{table.name}" WHERE "{key}" = ?', (value,)).fetchone()
                if row is None:
                    continue
                queries = [(f'"{c}" = ?', (owner,)) for c, owner in zip(owners, row[1:]) if owner is not None]
                for where, params in [*queries, (f'"{key}" > ?', (value,)), (f'"{key}" < ?', (value,))]:
                    order = "DESC" if "<" in where else "ASC"
                    found += [r[0] for r in conn.execute(
                        f'SELECT "{key}" FROM "{table.name}" WHERE {where} AND "{key}" != ? ORDER BY '
                        f'"{key}" {order} LIMIT ?', (*params, value, most)) if r[0] not in found]
        return found[:most]

    def _state(self) -> Sandbox:
        if self._sandbox is None:
            self._sandbox = Sandbox(self.domain, self.task.get("init"))
        return self._sandbox

    def close(self) -> None:
        if self._sandbox is not None:
            self._sandbox.close()


def _init_values(task: dict[str, Any]) -> Iterable[Any]:
    """Every value of the task's own rows: the other orders, cards or tickets an agent could
    mistake for the right one."""
    return (v for rows in task.get("init", {}).values() for row in rows for v in row.values())


@dataclass
class Tried:
    """What varying one argument found: the values tried, whether the tool accepted any, whether
    one changed the end state and scored 0 (`varied`), and one that changed it and scored 1."""

    values: list[Any] = field(default_factory=list)
    accepted: bool = False
    varied: bool = False
    unnoticed: Any = None


def _vary(score: Score, domain: Domain, gold: list[dict[str, Any]], index: int, arg: str,
          candidates: list[Any], gold_changes: dict[str, Any]) -> Tried:
    """Replay gold with argument `arg` of call `index` set to each candidate in turn, at most
    MAX_REPLAYS of them, until one changes the end state and every check passes."""
    step = gold[index]
    tool, tried, replays = domain.tools[step["tool"]], Tried(), 0
    for candidate in candidates:
        if replays == MAX_REPLAYS:
            break
        tried.values.append(candidate)
        args = {**step["args"], arg: candidate}
        if tool.argument_problem(args):  # refused before any replay: costs nothing
            continue
        replays += 1
        episode, results = score([*gold[:index], {"tool": step["tool"], "args": args}, *gold[index + 1:]])
        if index in failed_steps(episode):
            continue
        tried.accepted = True
        free = free_of(domain.free)  # a value that changes only what is free changes nothing
        if terminal(episode["changes"], free) == terminal(gold_changes, free):
            continue
        if reward(results):
            tried.unnoticed = candidate
            return tried
        tried.varied = True
    return tried


def _shown(values: list[Any]) -> str:
    return ", ".join(map(repr, values[:3])) + (" …" if len(values) > 3 else "")
