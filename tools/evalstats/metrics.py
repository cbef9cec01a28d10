"""The metrics object of one group of tasks: named estimands, their intervals, and cost."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from functools import cache
from operator import itemgetter
from typing import Any

from endstate.evalstats import estimands as S
from endstate.evalstats import estimators as E
from endstate.evalstats import intervals as I
from endstate.evalstats.groups import TaskCounts
from endstate.evalstats.intervals import POPULATION
from endstate.evalstats.tally import Counts


class KTooLarge(ValueError):
    def __init__(self, k: int, task_id: str, n: int):
        super().__init__(f"k={k} but task {task_id!r} has only {n} clean attempt(s)")
        self.k, self.task_id, self.n = k, task_id, n


@cache
def per_task(n: int, c: int, k: int) -> tuple[float, float]:
    return E.pass_at_k(n, c, k), E.pass_hat_k(n, c, k)


def cluster_labels(task_ids: Sequence[str], clusters: Mapping[str, Any] | None
                   ) -> list[Hashable] | None:
    """Each task's cluster; a task without a value is a cluster of its own."""
    if clusters is None:
        return None
    return [v if (v := clusters.get(tid)) is not None else ("task", tid) for tid in task_ids]


def rows(tasks: TaskCounts, clusters: Mapping[str, Any] | None = None
         ) -> tuple[list[int], list[int], list[Hashable] | None, list[int]]:
    """The clean tasks (n > 0) as distinct rows (ns, cs, cluster labels or None, mult): tasks
    with equal (n, c) and cluster share a row, `mult` counts them. Without clusters every
    estimand is a function of the (n, c) multiset, so 50,000 tasks of 20 attempts are at most
    231 rows."""
    if clusters is None:
        table = Counter(map(_n_c, tasks.values()))
        table.pop((0, 0), None)
        return [n for n, _ in table], [c for _, c in table], None, list(table.values())
    clean = {tid: c for tid, c in tasks.items() if c.attempts > 0}
    labels = cluster_labels(list(clean), clusters)
    table = Counter((c.attempts, c.successes, label) for c, label in zip(clean.values(), labels))
    ns, cs, row_labels = (list(column) for column in zip(*table)) if table else ([], [], [])
    return ns, cs, row_labels, list(table.values())


_n_c = itemgetter(0, 1)  # Counts -> (attempts, successes)


def metrics(tasks: TaskCounts, ks: Sequence[int], clusters: Mapping[str, Any] | None = None,
            estimand: str = POPULATION, strict_k: bool = True, cluster: str | None = None,
            policies: int = 1) -> dict[str, Any]:
    """The metrics object of one group (see schemas/metrics.schema.json and docs/evalstats.md).
    A k above some task's clean n raises KTooLarge when `strict_k` (the user asked for it),
    else its pass@k and pass^k are null in this group. `cluster` names the --cluster field of
    `clusters`; `policies` counts the policies whose attempts the group pools (pooled)."""
    ns, cs, labels, mult = rows(tasks, clusters)
    if strict_k and ns and max(ks, default=0) > min(ns):
        for k in ks:
            for tid, c in tasks.items():
                if 0 < c.attempts < k:
                    raise KTooLarge(k, tid, c.attempts)
    pooled = S.pass_at_1(ns, cs, pooled=True, estimand=estimand, clusters=labels, mult=mult)
    task_mean = S.pass_at_1(ns, cs, pooled=False, estimand=estimand, clusters=labels, mult=mult)
    share = cluster_share(ns, cs, labels, mult)
    at_k = _at_k(ns, cs, ks, labels, task_mean, share, mult)
    column = _columns(tasks)
    reliable = observed_all(ns, cs, labels, share, mult)
    out = {
        "tasks": sum(mult),
        "policies": policies,
        "attempts": sum(column["attempts"]),
        "system_errors": sum(column["system_errors"]),
        "successes": sum(column["successes"]),
        "estimand": estimand,
        "cluster": cluster if labels is not None else None,
        "clusters": S.units(0, labels) if labels is not None else None,
        "pass_at_1": pooled["value"],
        "pass_at_1_se": pooled["se"],
        "pass_at_1_ci95": pooled["ci95"],
        "pass_at_1_task_mean": task_mean["value"],
        "pass_at_1_task_mean_se": task_mean["se"],
        "pass_at_1_task_mean_ci95": task_mean["ci95"],
        **at_k,
        "observed_all": reliable,
        "cost": cost(tasks, reliable["count"], column),
    }
    return out if policies < 2 else pooled_policies(out)


def pooled_policies(group: dict[str, Any]) -> dict[str, Any]:
    """A group that pools several policies: per task, their attempts are one sample of no
    policy, so pass@k, pass^k (k > 1) and k/k estimate nothing (four models' 40 pooled attempts
    are no model's pass@10): null, as is the cost per reliable task. pass@1 stays (the share of
    successful attempts)."""
    for key in ("pass_at_k", "pass_hat_k"):
        for k in group[key]:
            if k != "1":
                group[key][k] = group[f"{key}_ci95"][k] = None
    group["observed_all"] = {**group["observed_all"], "k": None, "count": None,
                             "fraction": None, "ci95": None}
    group["cost"] = {**group["cost"], "per_reliable_task_usd": None}
    return group


def cluster_share(ns: Sequence[int], cs: Sequence[int], labels, mult=None
                  ) -> S.ClusterShare | None:
    """pass@1's ClusterShare over the rows (None without clusters, or below two)."""
    if labels is None or not ns:
        return None
    return S.cluster_share([c / n for n, c in zip(ns, cs)], E.logit_slope(ns, cs, "hat", 1, mult),
                           labels, mult)


def _at_k(ns: list[int], cs: list[int], ks: Sequence[int], labels,
          task_mean: dict | None = None, share: S.ClusterShare | None = None,
          mult: list[int] | None = None) -> dict[str, dict]:
    """pass@k and pass^k per k (null where a task has fewer than k clean attempts), each with
    its 95% interval over tasks (population; m_i = n_i/k independent k-trials per task; with
    clusters, pass@1's `share` carried by the slope). At k = 1 both are the task mean:
    its estimate and interval are reused when given (one estimate, one interval, under either
    estimand). Rows and `mult` as in rows()."""
    out: dict[str, dict] = {"pass_at_k": {}, "pass_at_k_ci95": {}, "pass_hat_k": {},
                            "pass_hat_k_ci95": {}}
    for k in ks:
        if not ns or min(ns) < k:
            for key in out:
                out[key][str(k)] = None
            continue
        if k == 1 and task_mean is not None:
            for key in ("pass_at_k", "pass_hat_k"):
                out[key]["1"], out[f"{key}_ci95"]["1"] = task_mean["value"], task_mean["ci95"]
            continue
        pairs = [per_task(n, c, k) for n, c in zip(ns, cs)]
        trials = [n / k for n in ns]
        for key, values, kind in (("pass_at_k", [p for p, _ in pairs], "at"),
                                  ("pass_hat_k", [h for _, h in pairs], "hat")):
            out[key][str(k)] = E.mean(values, mult)
            slope = E.logit_slope(ns, cs, kind, k, mult) if share else None
            out[f"{key}_ci95"][str(k)] = S.task_mean_interval(values, trials, share, slope, mult,
                                                              labels is not None)
    return out


def observed_all(ns: list[int], cs: list[int], labels=None,
                 share: S.ClusterShare | None = None, mult: list[int] | None = None
                 ) -> dict[str, Any]:
    """Tasks whose every clean attempt succeeded. `k` is the number of attempts each of them was
    counted over: the common n when every task has the same n, else null (then `k_min`..`k_max`
    are the range: compare pass_hat_k at one k instead). Rows and `mult` as in rows()."""
    hits = [1.0 if c == n else 0.0 for n, c in zip(ns, cs)]
    T = I.task_count(ns, mult)
    count = int(I.task_sum(hits, mult))
    slope = E.logit_slope(ns, cs, "hat", None, mult) if share and ns else None
    return {"k": ns[0] if ns and min(ns) == max(ns) else None,
            "k_min": min(ns, default=None), "k_max": max(ns, default=None),
            "count": count, "fraction": count / T if T else None,
            "ci95": S.task_mean_interval(hits, [1.0] * len(ns), share, slope, mult,
                                         labels is not None)}


def _columns(tasks: TaskCounts) -> dict[str, tuple]:
    """Each Counts field over the tasks, transposed in C."""
    if not tasks:
        return dict.fromkeys(Counts._fields, ())
    return dict(zip(Counts._fields, zip(*tasks.values())))


def cost(tasks: TaskCounts, reliable: float, column: dict[str, tuple] | None = None
         ) -> dict[str, Any]:
    """Campaign cost over every priced attempt (system errors included: they were paid for);
    attempts of a --price model without token counts are `unpriced_attempts`, not free. The
    ratios: cost_ratios. `reliable`: the tasks solved k/k (compare: at the common k)."""
    column = _columns(tasks) if column is None else column
    priced = sum(column["priced_attempts"])
    recorded = sum(column["attempts"]) + sum(column["system_errors"])
    total, per_success, per_reliable = cost_ratios(
        math.fsum(column["cost_usd"]), priced, recorded, sum(column["priced_successes"]), reliable)
    return {"total_usd": total, "per_success_usd": per_success,
            "per_reliable_task_usd": per_reliable, "priced_attempts": priced,
            "unpriced_attempts": sum(column["unpriced_attempts"]), "recorded_attempts": recorded}


def cost_ratios(total: float, priced: int, recorded: int, priced_successes: int,
                reliable: float) -> tuple[float | None, float | None, float | None]:
    """(total, per success, per reliable task) in USD; None where undefined.

    When some attempts have no cost, the ratios stay about the priced ones: per success is
    the priced attempts' cost over their own successes, and per reliable task scales the
    priced cost to every recorded attempt (total × recorded / priced) before dividing by the
    tasks solved k/k, which unpriced attempts also made. The total is what was priced."""
    if not priced:
        return None, None, None
    campaign = total * recorded / priced
    return (total, total / priced_successes if priced_successes else None,
            campaign / reliable if reliable else None)
