"""Standard errors and 95% intervals of means over tasks: the inference behind every interval.

An estimate is a mean over T tasks (the task mean of per-task values x_i, or the pooled ratio
Σc/Σn). Its spread is described by per-task *influence* values e_i (they sum to zero) and the
reference distribution's degrees of freedom:

- population (tasks are a sample of the tasks one could have written; the default):
  V = G/(G−1) · Σ_g (Σ_{i∈g} e_i)² / T², df = G − 1, with G clusters (`--cluster`; CR1, the
  small-sample cluster-robust variance) or G = T singleton clusters, where it is exactly
  sd(e)²/T (Miller 2024).
- benchmark (this fixed suite, only the attempts are random): V = Σ_i w_i² v_i with
  v_i = s_i(1−s_i)/(n_i−1) the unbiased within-task binomial variance, df = Σ(n_i − 1).

A variance floor keeps a finite sample from ever claiming certainty (all-0 runs, two tasks that
both moved by +0.5): V' = max(V, V₀/(df + 1)), with V₀ = p̃(1−p̃)·mean(1/m_i)/T (task mean) or
p̃(1−p̃)/Σm_i (pooled), the binomial variance at the Jeffreys-smoothed rate
p̃ = (Σ x_i m_i + ½)/(Σ m_i + 1), m_i independent trials per task: one task's share of the
variance a binomial would have. It binds only when the tasks agree far more than chance allows.
An estimate in [0, 1] gets the Korn–Graubard interval: the Clopper–Pearson interval at the
effective number of trials n* = p(1−p)/V' (population: at most Σm) times (z/t)², t = t_{0.975,
df}; a difference gets estimate ± t·√V'. See docs/evalstats.md.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence
from functools import cache
from itertools import repeat
from operator import mul, truediv
from typing import NamedTuple

from endstate.core.stats.special import betaincinv, t_cdf, t_ppf

Z95 = 1.959963984540054  # standard normal quantile at 0.975
POPULATION, BENCHMARK = "population", "benchmark"


class Spread(NamedTuple):
    """The variance of an estimate (after the floor) and the degrees of freedom of its t."""

    variance: float
    df: float

    @property
    def se(self) -> float:
        return math.sqrt(self.variance)


def population_variance(influence: Sequence[float], clusters: Sequence[Hashable] | None = None,
                        mult: Sequence[int] | None = None) -> tuple[float, float] | None:
    """(V, df) of a mean over tasks from centred per-task influence values: CR1 over `clusters`
    (None: every task its own), df = G − 1. None below two clusters. `mult`: how many tasks
    each value stands for (tasks of equal counts and cluster share one; None: one each)."""
    if mult is None:
        T, summed = len(influence), influence
    else:
        T, summed = sum(mult), list(map(mul, influence, mult))  # each row's tasks' sum
    if clusters is None:
        G = T
        total = math.fsum(map(mul, summed, influence))
    else:
        sums: dict[Hashable, list[float]] = {}
        for e, g in zip(summed, clusters):
            sums.setdefault(g, []).append(e)
        G = len(sums)
        total = math.fsum(math.fsum(v) ** 2 for v in sums.values())
    if G < 2:
        return None
    return G / (G - 1) * total / (T * T), G - 1.0


def benchmark_variance(weights: Sequence[float], counts: Sequence[tuple[int, int]], smoothed: float,
                       mult: Sequence[int] | None = None) -> tuple[float, float]:
    """(V, df) of Σ w_i s_i over a fixed suite: within-task binomial variance only. A task with
    one attempt has no within-task estimate and is given the smoothed rate's. `mult` as in
    population_variance."""
    total, df = [], 0.0
    for w, (n, c), m in zip(weights, counts, repeat(1) if mult is None else mult):
        s = c / n
        v = s * (1 - s) / (n - 1) if n > 1 else smoothed * (1 - smoothed)
        total.append(m * w * w * v)
        df += m * max(n - 1, 1)
    return math.fsum(total), df


def floor_variance(values: Sequence[float], trials: Sequence[float], pooled: bool,
                   mult: Sequence[int] | None = None) -> float:
    """V₀: the binomial variance at the Jeffreys-smoothed rate over all trials, of the task mean
    (mean(1/m_i)/T) or of the pooled rate (1/Σm). `mult` as in population_variance."""
    p = smoothed_rate(values, trials, mult)
    if pooled:
        return p * (1 - p) / task_sum(trials, mult)
    T = task_count(values, mult)
    return p * (1 - p) * task_sum(map(truediv, repeat(1.0), trials), mult) / (T * T)


def smoothed_rate(values: Sequence[float], trials: Sequence[float],
                  mult: Sequence[int] | None = None) -> float:
    """(Σx_i·m_i + ½)/(Σm_i + 1); plain sums: a floor needs no last-bit exactness."""
    return (task_sum(map(mul, values, trials), mult) + 0.5) / (task_sum(trials, mult) + 1.0)


def task_count(rows: Sequence, mult: Sequence[int] | None) -> int:
    """How many tasks the rows stand for."""
    return len(rows) if mult is None else sum(mult)


def task_sum(values: Iterable[float], mult: Sequence[int] | None) -> float:
    """Σ over the tasks of per-row values, each row standing for `mult` tasks (None: one)."""
    return sum(values) if mult is None else sum(map(mul, values, mult))


def spread(raw: tuple[float, float] | None, floor: float) -> Spread | None:
    """The variance, never below V₀/(df + 1) (one task's share of the binomial floor), and its
    degrees of freedom."""
    if raw is None:
        return None
    variance, df = raw
    return Spread(max(variance, floor / (df + 1.0)), df)


@cache
def _t975(df: float) -> float:
    return t_ppf(0.975, df)


def rate_interval(estimate: float | None, s: Spread | None, trials: float, cap: bool = True,
                  units: float | None = None) -> list[float] | None:
    """Korn–Graubard 95% interval of a rate in [0, 1]: Clopper–Pearson at the effective number
    of trials p(1−p)/V (with `cap`, never more than the trials there were: the population
    rule), shrunk for the t's degrees of freedom.

    At p = 0 or 1 the variance says nothing, and the interval is the exact Clopper–Pearson one
    of `units` trials: the independent units (tasks, or clusters) of a population, since a unit
    whose attempts all failed bounds its rate like one failed trial ((1 − p)^n ≤ 1 − p); without
    `units` (the benchmark estimand: only the attempts are random), the trials there were."""
    if estimate is None or s is None:
        return None
    p = min(max(estimate, 0.0), 1.0)
    if p * (1 - p) > 0:
        n = p * (1 - p) / s.variance
        n = min(n, trials) if cap else n
        n *= (Z95 / _t975(s.df)) ** 2
    else:
        n = units if units is not None else trials
    x = p * n
    lo = 0.0 if x <= 0 else betaincinv(x, n - x + 1, 0.025)
    hi = 1.0 if x >= n else betaincinv(x + 1, n - x, 0.975)
    return [round(lo, 12), round(hi, 12)]  # 1.5e-90 and 0.9999999999999998 are 0 and 1 to a reader


def shared_interval(estimate: float, s: Spread, clusters: float) -> list[float]:
    """The 95% interval of a clustered rate p in (0, 1) whose variance V has a part B from the
    clusters (the rest, A = V − B, from the tasks): {θ : (p − θ)² ≤ t²·V(θ)}, V(θ) = A·w + B·w²,
    w = θ(1 − θ)/(p(1 − p)). The tasks' part scales with θ like a binomial's; the clusters'
    part is a shift of the logit, whose effect on a rate is proportional to θ(1 − θ). Held at
    its value p, a rare rate's interval was too short above whenever the tasks drawn happened
    to be hard: CR1 or the Korn–Graubard interval of V covered 90–92% there."""
    t2 = _t975(s.df) ** 2
    tasks, q = max(s.variance - clusters, 0.0), estimate * (1 - estimate)

    def inside(theta: float) -> bool:
        w = theta * (1 - theta) / q
        return (estimate - theta) ** 2 <= t2 * (tasks * w + clusters * w * w)

    def edge(end: float) -> float:
        if inside(end):
            return end
        near, far = estimate, end
        for _ in range(60):  # bisection to below 1e-18: the interval's ends to the last bit
            middle = (near + far) / 2
            near, far = (middle, far) if inside(middle) else (near, middle)
        return near

    return [round(edge(0.0), 12), round(edge(1.0), 12)]


def difference_interval(delta: float | None, s: Spread | None) -> list[float] | None:
    """delta ± t_{0.975, df}·SE, clipped to [−1, 1]."""
    if delta is None or s is None:
        return None
    half = _t975(s.df) * s.se
    return [max(-1.0, delta - half), min(1.0, delta + half)]


def prob_positive(delta: float | None, s: Spread | None) -> float | None:
    """P(true Δ > 0) under a flat prior on Δ: the t(df) CDF at Δ/SE (one minus the one-sided
    p-value of the paired t-test). The floor keeps SE > 0."""
    if delta is None or s is None:
        return None
    return t_cdf(delta / s.se, s.df)
