"""The estimators, as pure functions of per-task counts (n clean attempts, c successes).

References: docs/evalstats.md and the papers each function cites. Everything here is exact
arithmetic on small integers or plain means; no sampling, no numpy.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

Z95 = 1.959963984540054  # standard normal quantile at 0.975


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


def mean(xs: Sequence[float]) -> float | None:
    return math.fsum(xs) / len(xs) if xs else None


def sd(xs: Sequence[float]) -> float | None:
    """Sample standard deviation (n - 1); None below two values."""
    if len(xs) < 2:
        return None
    m = math.fsum(xs) / len(xs)
    return math.sqrt(math.fsum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def se_over_tasks(rates: Sequence[float]) -> float | None:
    """SE of the mean per-task success rate: sd(s_i)/sqrt(T) (Miller 2024). Attempts of one task
    are correlated; treating all attempts as independent understates the error ~3x."""
    s = sd(rates)
    return None if s is None else s / math.sqrt(len(rates))


def se_clustered(rates: Sequence[float], clusters: Sequence[Hashable]) -> float | None:
    """Cluster-robust SE of the mean rate: sqrt(sum_g (sum_{i in g} (s_i - mean))^2) / T.
    None with fewer than two clusters (the formula then says 0, which is not an estimate)."""
    if len(set(clusters)) < 2:
        return None
    m = math.fsum(rates) / len(rates)
    sums: dict[Hashable, list[float]] = {}
    for s, g in zip(rates, clusters):
        sums.setdefault(g, []).append(s - m)
    return math.sqrt(math.fsum(math.fsum(v) ** 2 for v in sums.values())) / len(rates)


def ci95(center: float | None, se: float | None) -> list[float] | None:
    """Normal 95% interval, clipped to [0, 1] (a rate cannot leave it)."""
    if center is None or se is None:
        return None
    return [max(0.0, center - Z95 * se), min(1.0, center + Z95 * se)]


def normal_cdf(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def prob_positive(delta: float, se: float | None) -> float | None:
    """P(true Δ > 0) under a flat prior and the normal approximation: Φ(Δ / SE) (one minus the
    one-sided p-value of the paired z-test). SE = 0: 1, 0 or 0.5 by the sign of Δ."""
    if se is None:
        return None
    if se == 0:
        return 1.0 if delta > 0 else 0.0 if delta < 0 else 0.5
    return normal_cdf(delta / se)


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
