"""Paired comparison of two evaluation runs on their common tasks."""

from __future__ import annotations

from typing import Any

from endstate.evalstats import estimands as S
from endstate.evalstats import estimators as E
from endstate.evalstats import intervals as I
from endstate.evalstats.groups import TaskCounts
from endstate.evalstats.metrics import KTooLarge, per_task


def compare(base: TaskCounts, new: TaskCounts, k: int | None = None,
            estimand: str = I.POPULATION) -> dict[str, Any]:
    """BASE vs NEW on the tasks both have clean attempts for, paired task by task.

    pass@1 is the pooled rate Σc/Σn, as in `summary` (`statistic: pooled`), and the task mean
    beside it; Δ = NEW − BASE with the paired SE (influence values differenced per task), a t
    interval and p_new_better = F_t(Δ/SE). pass@k and pass^k at one k (default: the largest
    common repeat count) and the k/k count, each with a paired interval of its Δ. Gained/lost:
    tasks solved at least once or in every attempt by one run and not the other.
    """
    common = sorted(t for t, c in base.items() if c.attempts > 0 and t in new and new[t].attempts > 0)
    if k is None:
        k = min((min(base[t].attempts, new[t].attempts) for t in common), default=0)
    for side in (base, new):
        for t in common:
            if side[t].attempts < k:
                raise KTooLarge(k, t, side[t].attempts)
    sides = [([side[t].attempts for t in common], [side[t].successes for t in common])
             for side in (base, new)]
    pooled = _pass_at_1(*sides, True, estimand)
    return {
        "tasks": len(common),
        "only_base": sum(1 for t, c in base.items() if c.attempts > 0 and t not in common),
        "only_new": sum(1 for t, c in new.items() if c.attempts > 0 and t not in common),
        "estimand": estimand,
        "pass_at_1": pooled,
        "pass_at_1_task_mean": _pass_at_1(*sides, False, estimand),
        "pass_at_k": _at_k(*sides, k, 0),
        "pass_hat_k": _at_k(*sides, k, 1),
        "observed_all": _observed(*sides),
        "correlation": E.correlation(*([c / n for n, c in zip(*side)] for side in sides)),
        "p_new_better": pooled.pop("p_new_better"),
        **_gained_lost(base, new, common),
    }


def _pass_at_1(base, new, pooled: bool, estimand: str) -> dict[str, Any]:
    if not base[0]:
        return {"statistic": "pooled" if pooled else "task_mean", "base": None, "new": None,
                "delta": None, "se": None, "ci95": None, "p_new_better": None}
    vb, vn, s = S.paired_pass_at_1(base, new, pooled=pooled, estimand=estimand)
    delta = vn - vb
    out = {"statistic": "pooled" if pooled else "task_mean", "base": vb, "new": vn,
           "delta": delta, "se": None if s is None else s.se,
           "ci95": I.difference_interval(delta, s), "p_new_better": I.prob_positive(delta, s)}
    if not pooled:
        del out["p_new_better"]
    return out


def _at_k(base, new, k: int, which: int) -> dict[str, Any]:
    """pass@k (which=0) or pass^k (which=1) on each side, Δ with its paired interval."""
    if not k:
        return {"k": None, "base": None, "new": None, "delta": None, "ci95": None}
    xb = [per_task(n, c, k)[which] for n, c in zip(*base)]
    xn = [per_task(n, c, k)[which] for n, c in zip(*new)]
    trials = [min(nb, nn) / k for nb, nn in zip(base[0], new[0])]
    delta, s = S.paired_task_mean(xb, xn, trials)
    return {"k": k, "base": E.mean(xb), "new": E.mean(xn), "delta": delta,
            "ci95": I.difference_interval(delta, s)}


def _observed(base, new) -> dict[str, Any]:
    """Tasks solved in every clean attempt on each side; `k` = the common n of both runs (null
    when the tasks' n differ)."""
    hb = [1.0 if c == n else 0.0 for n, c in zip(*base)]
    hn = [1.0 if c == n else 0.0 for n, c in zip(*new)]
    T = len(hb)
    ns = set(base[0]) | set(new[0])
    delta, s = S.paired_task_mean(hb, hn, [1.0] * T)
    all_b, all_n = int(sum(hb)), int(sum(hn))
    return {"k": ns.pop() if len(ns) == 1 else None, "base": all_b, "new": all_n,
            "delta": all_n - all_b, "base_fraction": all_b / T if T else None,
            "new_fraction": all_n / T if T else None, "delta_fraction": delta,
            "delta_fraction_ci95": I.difference_interval(delta, s)}


def _gained_lost(base: TaskCounts, new: TaskCounts, common: list[str]) -> dict[str, Any]:
    def solved(side, t):
        return side[t].successes > 0

    def reliable(side, t):
        return side[t].successes == side[t].attempts

    return {
        "gained": {"pass_at_k": [t for t in common if solved(new, t) and not solved(base, t)],
                   "observed_all": [t for t in common if reliable(new, t) and not reliable(base, t)]},
        "lost": {"pass_at_k": [t for t in common if solved(base, t) and not solved(new, t)],
                 "observed_all": [t for t in common if reliable(base, t) and not reliable(new, t)]},
    }
