"""The estimators, as pure functions of per-task counts (n clean attempts, c successes).

References: docs/evalstats.md and the papers each function cites. Everything here is exact
arithmetic on small integers or plain means; no sampling, no numpy. Standard errors and
intervals: intervals.py and estimands.py.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from operator import mul


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased P(at least one of k attempts succeeds) = 1 - C(n-c, k)/C(n, k) (Chen et al. 2021),
    in the stable product form 1 - prod(1 - k/j for j in n-c+1..n); 1.0 when n - c < k."""
    if not 0 <= k <= n or not 0 <= c <= n:
        raise ValueError(f"pass@k needs 0 <= k <= n and 0 <= c <= n (n={n}, c={c}, k={k})")
    if n - c < k:
        return 1.0
    prod = 1.0
    for j in range(n - c + 1, n + 1):
        prod *= 1.0 - k / j
    return 1.0 - prod


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Unbiased P(all of k fresh attempts succeed) = C(c, k)/C(n, k) (Yao et al. 2024, tau-bench),
    as prod((c - j)/(n - j) for j < k); 0.0 when c < k. Not the biased plug-in (c/n)**k."""
    if not 0 <= k <= n or not 0 <= c <= n:
        raise ValueError(f"pass^k needs 0 <= k <= n and 0 <= c <= n (n={n}, c={c}, k={k})")
    prod = 1.0
    for j in range(k):
        prod *= (c - j) / (n - j)
    return prod


def logit_slope(ns: Sequence[int], cs: Sequence[int], kind: str, k: int | None,
                mult: Sequence[int] | None = None) -> float:
    """The mean over tasks of dx/dη (η = logit p) of x = pass^k (`kind` "hat"; k = 1: pass@1),
    pass@k ("at"), or, with k None, p^n_i (the k/k indicator's mean, each task at its own n),
    from unbiased moments: k(E[p^k] − E[p^(k+1)]) and k(E[(1−p)^k] − E[(1−p)^(k+1)]), each
    E[·] the mean of pass^j (or 1 − pass@j) over the tasks. A moment above some task's n is
    extrapolated, m_(j+1) = m_j² / m_(j−1): by Cauchy–Schwarz a bound below it, so the slope
    errs large (the interval wide). Rows and `mult` as in mean()."""
    if k is None:
        parts = [(sum(mult[i] for i in rows) if mult else len(rows),
                  logit_slope([ns[i] for i in rows], [cs[i] for i in rows], "hat", n,
                              [mult[i] for i in rows] if mult else None))
                 for n, rows in _rows_by_n(ns).items()]
        return math.fsum(w * x for w, x in parts) / sum(w for w, _ in parts)
    one = pass_hat_k if kind == "hat" else (lambda n, c, j: 1.0 - pass_at_k(n, c, j))
    top = min(ns)
    moments = [mean([one(n, c, j) for n, c in zip(ns, cs)], mult) for j in range(max(k - 1, 0),
                                                                                   min(k + 1, top) + 1)]
    if k + 1 > top:  # m_(k+1) = m_k² / m_(k−1)
        moments.append(moments[-1] ** 2 / moments[-2] if moments[-2] > 0 else 0.0)
    return k * (moments[-2] - moments[-1])


def _rows_by_n(ns: Sequence[int]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for i, n in enumerate(ns):
        out.setdefault(n, []).append(i)
    return out


def mean(xs: Sequence[float], mult: Sequence[int] | None = None) -> float | None:
    """The mean over tasks of per-row values, each row standing for `mult` tasks (None: one
    each); None without a row."""
    if not xs:
        return None
    if mult is None:
        return math.fsum(xs) / len(xs)
    return math.fsum(map(mul, xs, mult)) / sum(mult)


def correlation(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Pearson correlation; None when either side is constant or has fewer than two values."""
    if len(xs) < 2:
        return None
    mx, my = math.fsum(xs) / len(xs), math.fsum(ys) / len(ys)
    sxy = math.fsum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sxx = math.fsum((x - mx) ** 2 for x in xs)
    syy = math.fsum((y - my) ** 2 for y in ys)
    if sxx == 0 or syy == 0:
        return None
    return sxy / math.sqrt(sxx * syy)
