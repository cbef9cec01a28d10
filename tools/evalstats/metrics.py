"""From attempt records to the metrics object: a mergeable tally, then per-group statistics."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from itertools import starmap
from operator import add, attrgetter
from typing import Any, NamedTuple

from endstate.core.schemas import attribute, record_struct
from endstate.evalstats import estimators as E

MISSING = "(none)"  # the group of records that lack a --by field


class Counts(NamedTuple):
    """One task's attempts within a group."""

    attempts: int  # clean attempts (status ok): n of the estimators
    successes: int  # c of the estimators
    system_errors: int
    cost_usd: float  # summed over the priced attempts
    priced_attempts: int  # attempts with a cost (clean or not)


@dataclass(slots=True)
class Cell:
    """A mutable Counts: the attempts of one tally cell, added to as they are read."""

    attempts: int = 0
    successes: int = 0
    system_errors: int = 0
    cost_usd: float = 0.0
    priced_attempts: int = 0

    def add(self, other: Cell) -> None:
        self.attempts += other.attempts
        self.successes += other.successes
        self.system_errors += other.system_errors
        self.cost_usd += other.cost_usd
        self.priced_attempts += other.priced_attempts


# Every cell is read once per grouping and pickled by a forked reader: both in C.
_cell_values = attrgetter(*Counts._fields)  # a Cell's values, in Counts order
_new_counts = tuple.__new__  # Counts(...) without its Python-level __new__


@dataclass(slots=True)
class KeyCounts:
    """Per (task_id, attempt) key, for the coverage gate: its records, and its system errors
    (only keys that have one)."""

    records: dict[tuple[str, int], int] = field(default_factory=dict)
    system_errors: dict[tuple[str, int], int] = field(default_factory=dict)

    def add(self, other: KeyCounts) -> None:
        for mine, theirs in ((self.records, other.records),
                             (self.system_errors, other.system_errors)):
            get = mine.get
            for key, n in theirs.items():
                mine[key] = get(key, 0) + n


@dataclass
class Tally:
    """What the attempts say, keyed finely enough for every grouping asked for: a Cell per
    (task_id, *values of `fields`), and the KeyCounts when the coverage gate needs them."""

    fields: tuple[str, ...] = ()
    cells: dict[tuple, Cell] = field(default_factory=dict)
    keys: KeyCounts | None = None

    def __reduce__(self):  # as plain tuples: ~2x faster than pickling Cell by Cell
        return _tally_from_values, (self.fields, list(self.cells),
                                    list(map(_cell_values, self.cells.values())), self.keys)


def _tally_from_values(fields: tuple[str, ...], keys: list[tuple], values: list[tuple],
                       key_counts: KeyCounts | None) -> Tally:
    return Tally(fields, dict(zip(keys, starmap(Cell, values))), key_counts)


def _hashable(value: Any) -> Any:
    return value if isinstance(value, (str, int, float, bool, type(None))) else str(value)


def tally_fn(fields: Sequence[str], prices: Mapping[str, tuple[float, float]], with_keys: bool):
    """A tally for fold_jsonl over attempts decoded as `tally.struct` (the attempt Struct with
    `fields` added). Prices are USD per million agent prompt/completion tokens."""
    fields = tuple(fields)
    struct = record_struct("attempt", fields)
    values = attrgetter(*(attribute(struct, f) for f in fields)) if fields else None
    single = len(fields) == 1  # attrgetter of one name returns the value, not a tuple

    def tally(records: Iterable[Any]) -> Tally:
        t = Tally(fields, {}, KeyCounts() if with_keys else None)
        cells = t.cells
        if with_keys:
            key_records, key_errors = t.keys.records, t.keys.system_errors
            records_get, errors_get = key_records.get, key_errors.get
        for r in records:
            tid = r.task_id
            key = (tid,) if values is None else (tid, values(r)) if single else (tid, *values(r))
            try:
                cell = cells.get(key)
            except TypeError:  # a --by field holding a list or object
                key = (tid, *map(_hashable, key[1:]))
                cell = cells.get(key)
            if cell is None:
                cell = cells[key] = Cell()
            ok = r.status == "ok"
            if ok:
                cell.attempts += 1
                cell.successes += r.reward
            else:
                cell.system_errors += 1
            cost = r.cost_usd
            if prices:
                price = prices.get(r.model)
                if price is not None:
                    prompt_usd, completion_usd = price  # per million tokens
                    agent = r.usage.get("agent") if r.usage else None
                    cost = 0.0 if agent is None else (
                        agent.prompt_tokens * prompt_usd + agent.completion_tokens * completion_usd
                    ) / 1e6
            if cost is not None:
                cell.cost_usd += cost
                cell.priced_attempts += 1
            if with_keys:
                attempt = (tid, r.attempt)
                key_records[attempt] = records_get(attempt, 0) + 1
                if not ok:
                    key_errors[attempt] = errors_get(attempt, 0) + 1
        return t

    tally.struct = struct
    return tally


def merge(parts: list[Tally]) -> Tally:
    out = parts[0]
    for part in parts[1:]:
        for key, cell in part.cells.items():
            mine = out.cells.get(key)
            if mine is None:
                out.cells[key] = cell
            else:
                mine.add(cell)
        if out.keys is not None:
            out.keys.add(part.keys)
    return out


# --- grouping -----------------------------------------------------------------------------------------

TaskCounts = dict[str, Counts]  # task_id -> its attempts in one group


def group_tasks(t: Tally, by: str | None = None) -> dict[str, TaskCounts]:
    """Per-task counts of the whole (by=None: {"overall": ...}) or of each value of field `by`."""
    index = t.fields.index(by) + 1 if by else None
    groups: dict[str, TaskCounts] = {}
    for key, cell in t.cells.items():
        name = "overall" if index is None else (
            MISSING if key[index] is None else str(key[index]))
        tasks = groups.setdefault(name, {})
        mine = tasks.get(key[0])
        values = _cell_values(cell)
        tasks[key[0]] = _new_counts(Counts, values if mine is None else map(add, mine, values))
    return groups


def task_field(t: Tally, name: str) -> dict[str, Any]:
    """task_id -> the value of field `name` on its records (the first seen when they differ)."""
    index = t.fields.index(name) + 1
    out: dict[str, Any] = {}
    for key in t.cells:
        out.setdefault(key[0], key[index])
    return out


def common_repeats(groups: Iterable[TaskCounts]) -> int:
    """The largest k every task of every group can answer: the smallest clean n (tasks with n=0
    do not count). 0 when there are none."""
    ns = [c.attempts for tasks in groups for c in tasks.values() if c.attempts > 0]
    return min(ns) if ns else 0


def default_ks(repeats: int) -> list[int]:
    """1, 5 and the largest common repeat count, as far as the data allows."""
    return sorted({k for k in (1, 5, repeats) if 1 <= k <= repeats})


class KTooLarge(ValueError):
    def __init__(self, k: int, task_id: str, n: int):
        super().__init__(f"k={k} but task {task_id!r} has only {n} clean attempt(s)")
        self.k, self.task_id, self.n = k, task_id, n


@cache
def _per_task(n: int, c: int, k: int) -> tuple[float, float]:
    return E.pass_at_k(n, c, k), E.pass_hat_k(n, c, k)


def metrics(tasks: TaskCounts, ks: Sequence[int], clusters: Mapping[str, Any] | None = None
            ) -> dict[str, Any]:
    """The metrics object of one group (see schemas/metrics.schema.json)."""
    clean = {tid: c for tid, c in tasks.items() if c.attempts > 0}
    for k in ks:
        for tid, c in clean.items():
            if c.attempts < k:
                raise KTooLarge(k, tid, c.attempts)
    T = len(clean)
    attempts = sum(c.attempts for c in clean.values())
    successes = sum(c.successes for c in clean.values())
    rates = [c.successes / c.attempts for c in clean.values()]
    task_mean = E.mean(rates)
    if clusters is not None:
        se = E.se_clustered(rates, [clusters.get(tid, ("task", tid)) for tid in clean])
    else:
        se = E.se_over_tasks(rates)
    pass_k: dict[str, float | None] = {}
    hat_k: dict[str, float | None] = {}
    for k in ks:
        pairs = [_per_task(c.attempts, c.successes, k) for c in clean.values()]
        pass_k[str(k)] = E.mean([p for p, _ in pairs])
        hat_k[str(k)] = E.mean([h for _, h in pairs])
    reliable = sum(1 for c in clean.values() if c.successes == c.attempts)
    priced = sum(c.priced_attempts for c in tasks.values())
    total = math.fsum(c.cost_usd for c in tasks.values()) if priced else None
    return {
        "tasks": T,
        "attempts": attempts,
        "system_errors": sum(c.system_errors for c in tasks.values()),
        "successes": successes,
        "pass_at_1": successes / attempts if attempts else None,
        "pass_at_1_task_mean": task_mean,
        "pass_at_k": pass_k,
        "pass_hat_k": hat_k,
        "observed_all": {"k": max((c.attempts for c in clean.values()), default=None),
                         "count": reliable, "fraction": reliable / T if T else None},
        "pass_at_1_se": se,
        "pass_at_1_ci95": E.ci95(task_mean, se),
        "cost": {"total_usd": total,
                 "per_success_usd": total / successes if total is not None and successes else None,
                 "per_reliable_task_usd": total / reliable if total is not None and reliable else None,
                 "priced_attempts": priced},
    }


# --- coverage gate --------------------------------------------------------------------------------------

MISSING_KEY, DUPLICATE, SYSTEM_ERROR, UNEXPECTED = "missing", "duplicate", "system_error", "unexpected"


class Problem(NamedTuple):
    """A task × attempt key the coverage gate flags."""

    kind: str  # MISSING_KEY, DUPLICATE, SYSTEM_ERROR or UNEXPECTED
    task_id: str
    attempt: int
    records: int


def coverage(keys: KeyCounts, task_ids: Iterable[str], repeats: int) -> list[Problem]:
    """A Problem for every expected key that is not exactly one clean record, then one for every
    recorded key that was not expected; sorted by task and attempt.

    A system-error record is superseded by a clean record of the same key (that is how
    `probe --resume` re-runs it), so a key is fine with one clean record and any errors."""
    expected = {(tid, a) for tid in task_ids for a in range(repeats)}
    records, errors = keys.records, keys.system_errors
    problems = []
    for key in sorted(expected):
        count = records.get(key, 0)
        clean = count - errors.get(key, 0)
        if clean > 1:
            problems.append(Problem(DUPLICATE, *key, count))
        elif clean == 0:
            kind = SYSTEM_ERROR if errors.get(key) else MISSING_KEY
            problems.append(Problem(kind, *key, count))
    extra = sorted(set(records) - expected)
    problems += [Problem(UNEXPECTED, *key, records[key]) for key in extra]
    return problems
