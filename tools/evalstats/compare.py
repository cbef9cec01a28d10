"""Paired comparison of two evaluation runs on their common tasks."""

from __future__ import annotations

from typing import Any

from endstate.evalstats import estimators as E
from endstate.evalstats.metrics import KTooLarge, TaskCounts


def compare(base: TaskCounts, new: TaskCounts, k: int | None = None) -> dict[str, Any]:
    """BASE vs NEW on the tasks both have clean attempts for.

    Per task i: s_i = c_i/n_i on each side and d_i = s_new,i - s_base,i. Δpass@1 = mean(d) with
    the paired SE sd(d)/sqrt(T) (far below the unpaired SE when the runs are correlated, as they
    are); p_new_better = Φ(Δ/SE). pass@k at one k (default: the largest common repeat count).
    Gained/lost: tasks solved at least once (observed pass@n) or in every attempt (k/k) by NEW
    but not BASE, and the reverse.
    """
    common = sorted(t for t, c in base.items() if c.attempts > 0 and t in new and new[t].attempts > 0)
    only_base = sum(1 for t, c in base.items() if c.attempts > 0 and t not in common)
    only_new = sum(1 for t, c in new.items() if c.attempts > 0 and t not in common)
    if k is None:
        k = min((min(base[t].attempts, new[t].attempts) for t in common), default=0)
    for side in (base, new):
        for t in common:
            if side[t].attempts < k:
                raise KTooLarge(k, t, side[t].attempts)
    sb = [base[t].successes / base[t].attempts for t in common]
    sn = [new[t].successes / new[t].attempts for t in common]
    d = [y - x for x, y in zip(sb, sn)]
    delta = E.mean(d)
    se = E.se_over_tasks(d)
    ci = None if delta is None or se is None else [
        max(-1.0, delta - E.Z95 * se), min(1.0, delta + E.Z95 * se)]
    pk_b = E.mean([E.pass_at_k(base[t].attempts, base[t].successes, k) for t in common]) if k else None
    pk_n = E.mean([E.pass_at_k(new[t].attempts, new[t].successes, k) for t in common]) if k else None

    def solved(side, t):
        return side[t].successes > 0

    def reliable(side, t):
        return side[t].successes == side[t].attempts

    all_b = sum(reliable(base, t) for t in common)
    all_n = sum(reliable(new, t) for t in common)
    T = len(common)
    return {
        "tasks": T,
        "only_base": only_base,
        "only_new": only_new,
        "pass_at_1": {"base": E.mean(sb), "new": E.mean(sn), "delta": delta, "se": se,
                      "ci95": ci},
        "pass_at_k": {"k": k or None, "base": pk_b, "new": pk_n,
                      "delta": None if pk_b is None or pk_n is None else pk_n - pk_b},
        "observed_all": {"base": all_b, "new": all_n, "delta": all_n - all_b,
                         "base_fraction": all_b / T if T else None,
                         "new_fraction": all_n / T if T else None,
                         "delta_fraction": (all_n - all_b) / T if T else None},
        "correlation": E.correlation(sb, sn),
        "p_new_better": None if delta is None else E.prob_positive(delta, se),
        "gained": {"pass_at_k": [t for t in common if solved(new, t) and not solved(base, t)],
                   "observed_all": [t for t in common if reliable(new, t) and not reliable(base, t)]},
        "lost": {"pass_at_k": [t for t in common if solved(base, t) and not solved(new, t)],
                 "observed_all": [t for t in common if reliable(base, t) and not reliable(new, t)]},
    }
