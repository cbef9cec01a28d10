"""From attempt records to the metrics object: a mergeable tally, then per-group statistics."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from operator import attrgetter
from typing import Any

from endstate.core.schemas import attribute, record_struct
from endstate.evalstats import estimators as E

MISSING = "(none)"  # the group of records that lack a --by field


@dataclass
class Tally:
    """What the attempts say, keyed finely enough for every grouping asked for.

    cells: (task_id, *values of `fields`) -> [clean n, successes c, system errors, cost sum,
    attempts with a cost]. keys (only for the coverage gate): (task_id, attempt) -> [records,
    system errors].
    """

    fields: tuple[str, ...] = ()
    cells: dict[tuple, list] = field(default_factory=dict)
    keys: dict[tuple[str, int], list[int]] | None = None


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
        t = Tally(fields, {}, {} if with_keys else None)
        cells, keys = t.cells, t.keys
        for r in records:
            tid = r.task_id
            key = (tid,) if values is None else (tid, values(r)) if single else (tid, *values(r))
            try:
                acc = cells.get(key)
            except TypeError:  # a --by field holding a list or object
                key = (tid, *map(_hashable, key[1:]))
                acc = cells.get(key)
            if acc is None:
                acc = cells[key] = [0, 0, 0, 0.0, 0]
            if r.status == "ok":
                acc[0] += 1
                acc[1] += r.reward
            else:
                acc[2] += 1
            cost = r.cost_usd
            if prices:
                price = prices.get(r.model)
                if price is not None:
                    agent = r.usage.get("agent") if r.usage else None
                    cost = 0.0 if agent is None else (agent.prompt_tokens * price[0]
                                                      + agent.completion_tokens * price[1]) / 1e6
            if cost is not None:
                acc[3] += cost
                acc[4] += 1
            if keys is not None:
                k = keys.get((tid, r.attempt))
                if k is None:
                    k = keys[tid, r.attempt] = [0, 0]
                k[0] += 1
                k[1] += r.status != "ok"
        return t

    tally.struct = struct
    return tally


def merge(parts: list[Tally]) -> Tally:
    out = parts[0]
    for part in parts[1:]:
        for key, acc in part.cells.items():
            mine = out.cells.get(key)
            if mine is None:
                out.cells[key] = acc
            else:
                for i, v in enumerate(acc):
                    mine[i] += v
        if out.keys is not None:
            for key, acc in part.keys.items():
                mine = out.keys.setdefault(key, [0, 0])
                mine[0] += acc[0]
                mine[1] += acc[1]
    return out


# --- grouping -----------------------------------------------------------------------------------------

TaskCounts = dict[str, list]  # task_id -> [n, c, system errors, cost sum, attempts with a cost]


def group_tasks(t: Tally, by: str | None = None) -> dict[str, TaskCounts]:
    """Per-task counts of the whole (by=None: {"overall": ...}) or of each value of field `by`."""
    index = t.fields.index(by) + 1 if by else None
    groups: dict[str, TaskCounts] = {}
    for key, acc in t.cells.items():
        name = "overall" if index is None else (
            MISSING if key[index] is None else str(key[index]))
        tasks = groups.setdefault(name, {})
        mine = tasks.get(key[0])
        if mine is None:
            tasks[key[0]] = list(acc)
        else:
            for i, v in enumerate(acc):
                mine[i] += v
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
    ns = [acc[0] for tasks in groups for acc in tasks.values() if acc[0] > 0]
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
    clean = {tid: acc for tid, acc in tasks.items() if acc[0] > 0}
    for k in ks:
        for tid, acc in clean.items():
            if acc[0] < k:
                raise KTooLarge(k, tid, acc[0])
    T = len(clean)
    attempts = sum(acc[0] for acc in clean.values())
    successes = sum(acc[1] for acc in clean.values())
    rates = [acc[1] / acc[0] for acc in clean.values()]
    task_mean = E.mean(rates)
    if clusters is not None:
        se = E.se_clustered(rates, [clusters.get(tid, ("task", tid)) for tid in clean])
    else:
        se = E.se_over_tasks(rates)
    pass_k: dict[str, float | None] = {}
    hat_k: dict[str, float | None] = {}
    for k in ks:
        pairs = [_per_task(acc[0], acc[1], k) for acc in clean.values()]
        pass_k[str(k)] = E.mean([p for p, _ in pairs])
        hat_k[str(k)] = E.mean([h for _, h in pairs])
    reliable = sum(1 for acc in clean.values() if acc[1] == acc[0])
    priced = sum(acc[4] for acc in tasks.values())
    total = math.fsum(acc[3] for acc in tasks.values()) if priced else None
    return {
        "tasks": T,
        "attempts": attempts,
        "system_errors": sum(acc[2] for acc in tasks.values()),
        "successes": successes,
        "pass_at_1": successes / attempts if attempts else None,
        "pass_at_1_task_mean": task_mean,
        "pass_at_k": pass_k,
        "pass_hat_k": hat_k,
        "observed_all": {"k": max((acc[0] for acc in clean.values()), default=None),
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


def coverage(keys: Mapping[tuple[str, int], Sequence[int]], task_ids: Iterable[str], repeats: int
             ) -> list[tuple[str, str, int, int]]:
    """(problem, task_id, attempt, records) for every expected key that is not exactly one clean
    record, then every recorded key that was not expected; sorted by task and attempt.

    A system-error record is superseded by a clean record of the same key (that is how
    `probe --resume` re-runs it), so a key is fine with one clean record and any errors."""
    expected = {(tid, a) for tid in task_ids for a in range(repeats)}
    problems = []
    for key in sorted(expected):
        count, errors = keys.get(key, (0, 0))
        clean = count - errors
        if clean > 1:
            problems.append((DUPLICATE, *key, count))
        elif clean == 0:
            problems.append((SYSTEM_ERROR if errors else MISSING_KEY, *key, count))
    extra = sorted(set(keys) - expected)
    problems += [(UNEXPECTED, *key, keys[key][0]) for key in extra]
    return problems
