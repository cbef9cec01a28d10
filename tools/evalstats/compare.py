"""Paired comparison of two evaluation runs on their common tasks."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from endstate.evalstats import estimands as S
from endstate.evalstats import estimators as E
from endstate.evalstats import intervals as I
from endstate.evalstats.cost_change import cost_change
from endstate.evalstats.groups import TaskCounts
from endstate.evalstats.metrics import KTooLarge, cluster_labels, per_task


def common_tasks(base: TaskCounts, new: TaskCounts) -> list[str]:
    """The tasks both runs have clean attempts for, sorted."""
    return sorted(t for t, c in base.items() if c.attempts > 0 and t in new and new[t].attempts > 0)


def compare(base: TaskCounts, new: TaskCounts, k: int | None = None,
            estimand: str = I.POPULATION, clusters: Mapping[str, Any] | None = None,
            cluster: str | None = None) -> dict[str, Any]:
    """BASE vs NEW on the tasks both have clean attempts for, paired task by task.

    pass@1 is the pooled rate Σc/Σn, as in `summary` (`statistic: pooled`), and the task mean
    beside it; Δ = NEW − BASE with the paired SE (influence values differenced per task, summed
    per cluster with `clusters`: CR1, t(G − 1)), a t interval and p_new_better = F_t(Δ/SE).
    pass@k and pass^k at one k (default: the largest common repeat count) and the k/k count,
    each with a paired interval of its Δ. k/k is counted at the common k (the smallest n of
    both runs): a task with more attempts counts its pass^k there (`estimated` names the runs).
    Gained/lost: tasks solved at least once or in all k attempts by one run and not the other,
    at that k. Cost of each side on the common tasks, and each change with its interval.
    """
    common = common_tasks(base, new)
    k_all = min((min(base[t].attempts, new[t].attempts) for t in common), default=0)
    k = k_all if k is None else k
    for side in (base, new):
        for t in common:
            if side[t].attempts < k:
                raise KTooLarge(k, t, side[t].attempts)
    sides = [([side[t].attempts for t in common], [side[t].successes for t in common])
             for side in (base, new)]
    labels = cluster_labels(common, clusters)
    rates = [[c / n for n, c in zip(*side)] for side in sides]
    share = _paired_share(*sides, labels)
    pooled = _pass_at_1(*sides, True, estimand, labels)
    every = [[E.pass_hat_k(n, c, k_all) for n, c in zip(*side)] for side in sides]
    return {
        "tasks": len(common),
        "only_base": sum(1 for t, c in base.items() if c.attempts > 0 and t not in common),
        "only_new": sum(1 for t, c in new.items() if c.attempts > 0 and t not in common),
        "estimand": estimand,
        "cluster": None if labels is None else cluster,
        "clusters": None if labels is None else len(set(labels)),
        "pass_at_1": pooled,
        "pass_at_1_task_mean": _pass_at_1(*sides, False, estimand, labels),
        "pass_at_k": _at_k(*sides, k, 0, labels, share),
        "pass_hat_k": _at_k(*sides, k, 1, labels, share),
        "observed_all": _observed(sides, every, k_all, labels, share),
        "correlation": E.correlation(*rates),
        "p_new_better": pooled.pop("p_new_better"),
        "cost": cost_change(base, new, common, every, labels),
        **_gained_lost(common, sides, every, k_all),
    }


def _pass_at_1(base, new, pooled: bool, estimand: str, labels=None) -> dict[str, Any]:
    if not base[0]:
        return {"statistic": "pooled" if pooled else "task_mean", "base": None, "new": None,
                "delta": None, "se": None, "ci95": None, "p_new_better": None}
    vb, vn, s = S.paired_pass_at_1(base, new, pooled=pooled, estimand=estimand,
                                   clusters=labels)
    delta = vn - vb
    out = {"statistic": "pooled" if pooled else "task_mean", "base": vb, "new": vn,
           "delta": delta, "se": None if s is None else s.se,
           "ci95": I.difference_interval(delta, s), "p_new_better": I.prob_positive(delta, s)}
    if not pooled:
        del out["p_new_better"]
    return out


def _mean_slope(base, new, kind: str, k: int | None) -> float:
    """The mean slope dx/dη (estimators.logit_slope) over both runs' tasks."""
    return (E.logit_slope(*base, kind, k) + E.logit_slope(*new, kind, k)) / 2


def _paired_share(base, new, labels) -> S.ClusterShare | None:
    """The ClusterShare of the per-task differences of pass@1, with pass@1's mean slope over
    both runs (with --cluster; None otherwise or below two clusters)."""
    if labels is None or not base[0]:
        return None
    d = [cn / nn - cb / nb for nb, cb, nn, cn in zip(*base, *new)]
    return S.cluster_share(d, _mean_slope(base, new, "hat", 1), labels)


def _at_k(base, new, k: int, which: int, labels=None, share=None) -> dict[str, Any]:
    """pass@k (which=0) or pass^k (which=1) on each side, Δ with its paired interval."""
    if not k:
        return {"k": None, "base": None, "new": None, "delta": None, "ci95": None}
    xb = [per_task(n, c, k)[which] for n, c in zip(*base)]
    xn = [per_task(n, c, k)[which] for n, c in zip(*new)]
    trials = [min(nb, nn) / k for nb, nn in zip(base[0], new[0])]
    slope = _mean_slope(base, new, ("at", "hat")[which], k) if share else None
    delta, s = S.paired_task_mean(xb, xn, trials, share, slope, labels is not None)
    return {"k": k, "base": E.mean(xb), "new": E.mean(xn), "delta": delta,
            "ci95": I.difference_interval(delta, s)}


def _observed(sides, every, k: int, labels=None, share=None) -> dict[str, Any]:
    """Tasks solved in all k attempts on each side, k the smallest n of both runs: a task with
    more attempts counts pass^k there (the chance that k of its attempts all succeed, so the
    count is an expected one), `estimated` names the runs that have such tasks."""
    hb, hn = every
    T = len(hb)
    slope = _mean_slope(*sides, "hat", k) if share else None
    delta, s = S.paired_task_mean(hb, hn, [1.0] * T, share, slope, labels is not None)
    all_b, all_n = (_count(math.fsum(h)) for h in every)
    return {"k": k or None, "base": all_b, "new": all_n, "delta": _count(all_n - all_b),
            "estimated": [name for name, (ns, _) in zip(("base", "new"), sides)
                          if any(n > k for n in ns)],
            "base_fraction": all_b / T if T else None,
            "new_fraction": all_n / T if T else None, "delta_fraction": delta,
            "delta_fraction_ci95": I.difference_interval(delta, s)}


def _count(x: float) -> int | float:
    """A count of tasks: an integer unless some were estimated (pass^k at the common k)."""
    whole = round(x)
    return int(whole) if abs(x - whole) < 1e-9 else float(x)  # sums of 0.0s and 1.0s: exact


def _gained_lost(common: list[str], sides, every, k: int) -> dict[str, Any]:
    """Tasks one run solved at least once in k attempts (pass@k of 1) or in all k (pass^k of 1)
    and the other never did (0), k the smallest n of both: with equal n, solved at least once
    or in every attempt."""
    once = [[E.pass_at_k(n, c, k) for n, c in zip(*side)] for side in sides]

    def moved(values, frm, to):
        return [t for t, x, y in zip(common, values[frm], values[to]) if y == 1.0 and x == 0.0]

    return {"gained": {"pass_at_k": moved(once, 0, 1), "observed_all": moved(every, 0, 1)},
            "lost": {"pass_at_k": moved(once, 1, 0), "observed_all": moved(every, 1, 0)}}
