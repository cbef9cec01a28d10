"""The named estimands of a group of tasks, each with its own standard error and 95% interval.

Per task i: n_i clean attempts, c_i successes, s_i = c_i/n_i; T tasks, N = Σn_i.

- pooled pass@1 R = Σc_i / N (what `pass_at_1` is): influence e_i = (c_i − R·n_i)/(N/T)
  (the linearised ratio; with equal n_i it is s_i − R), weights n_i/N.
- task mean m = mean(s_i) (`pass_at_1_task_mean`): influence s_i − m, weights 1/T.
- any other per-task value x_i in [0, 1] (pass@k, pass^k, the k/k indicator): its task mean,
  population inference only, with m_i = n_i/k independent trials per task (1 for k/k).

intervals.py turns influence values into a floored variance, a t reference and an interval.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import Any

from endstate.evalstats import estimators as E
from endstate.evalstats import intervals as I


def _pass1_parts(ns: Sequence[int], cs: Sequence[int], pooled: bool,
                 mult: Sequence[int] | None = None):
    """(estimate, influence values, weights, floor variance) of pass@1 over the tasks (`mult`:
    how many tasks each (n, c) row stands for; None: one each)."""
    T = I.task_count(ns, mult)
    N = I.task_sum(ns, mult)
    rates = [c / n for n, c in zip(ns, cs)]
    if pooled:
        value = I.task_sum(cs, mult) / N
        scale = N / T
        influence = [(c - value * n) / scale for n, c in zip(ns, cs)]
        weights = [n / N for n in ns]
    else:
        value = E.mean(rates, mult)
        influence = [s - value for s in rates]
        weights = [1 / T] * len(ns)
    return value, influence, weights, I.floor_variance(rates, ns, pooled, mult)


def _raw_variance(ns, cs, influence, weights, estimand, clusters, mult=None):
    if estimand == I.BENCHMARK:
        rates = [c / n for n, c in zip(ns, cs)]
        return I.benchmark_variance(weights, list(zip(ns, cs)),
                                    I.smoothed_rate(rates, ns, mult), mult)
    return I.population_variance(influence, clusters, mult)


def units(T: int, clusters: Sequence[Hashable] | None) -> int:
    """The independent units of a population estimate: its clusters, else its tasks."""
    return T if clusters is None else len(set(clusters))


def pass_at_1(ns: Sequence[int], cs: Sequence[int], *, pooled: bool, estimand: str = I.POPULATION,
              clusters: Sequence[Hashable] | None = None, mult: Sequence[int] | None = None
              ) -> dict[str, Any]:
    """{"value", "se", "ci95"} of pooled pass@1 (`pooled`) or of the task mean; nulls when
    there is no task, or (population) fewer than two tasks or clusters. Each (n, c) row (and
    its cluster) stands for `mult` tasks (None: one)."""
    if not ns:
        return {"value": None, "se": None, "ci95": None}
    value, influence, weights, floor = _pass1_parts(ns, cs, pooled, mult)
    s = I.spread(_raw_variance(ns, cs, influence, weights, estimand, clusters, mult), floor)
    population = estimand == I.POPULATION
    T = I.task_count(ns, mult)
    return {"value": value, "se": None if s is None else s.se,
            "ci95": I.rate_interval(value, s, I.task_sum(ns, mult), cap=population,
                                    units=units(T, clusters) if population else None)}


def task_mean(values: Sequence[float], trials: Sequence[float],
              clusters: Sequence[Hashable] | None = None, mult: Sequence[int] | None = None
              ) -> tuple[float | None, I.Spread | None]:
    """The mean of per-task values in [0, 1] and its population spread (floored); `mult` as in
    pass_at_1."""
    if not values:
        return None, None
    m = E.mean(values, mult)
    raw = I.population_variance([x - m for x in values], clusters, mult)
    return m, I.spread(raw, I.floor_variance(values, trials, False, mult))


def design_effect(rates: Sequence[float], trials: Sequence[float],
                  clusters: Sequence[Hashable] | None, mult: Sequence[int] | None = None
                  ) -> float | None:
    """V(clustered) / V(tasks independent) of the task mean of `rates` (pass@1's): how much the
    clusters' shared effect inflates the variance. None without clusters, or below two."""
    if clusters is None:
        return None
    _, clustered = task_mean(rates, trials, clusters, mult)
    _, independent = task_mean(rates, trials, None, mult)
    if clustered is None or independent is None:
        return None
    return clustered.variance / independent.variance


def task_mean_interval(values: Sequence[float], trials: Sequence[float],
                       clusters: Sequence[Hashable] | None = None,
                       borrowed: float | None = None, mult: Sequence[int] | None = None
                       ) -> list[float] | None:
    """The population interval of the task mean of per-task values (pass@k, pass^k, k/k);
    `mult` as in pass_at_1.

    With clusters, the variance is never below the tasks-independent one times `borrowed`, the
    design effect of pass@1 (design_effect): the clusters' shared effect on the success rate
    carries into every function of it, and pass@1's cluster variance is the one a few clusters
    estimate stably. pass@k and pass^k of large k are skewed; from 8 clusters their own CR1
    variance alone covered 89–92% (tests/test_calibration.py)."""
    m, s = task_mean(values, trials, clusters, mult)
    if s is not None and clusters is not None and borrowed is not None:
        _, alone = task_mean(values, trials, None, mult)
        s = I.Spread(max(s.variance, alone.variance * borrowed), s.df)
    T = I.task_count(values, mult)
    return I.rate_interval(m, s, I.task_sum(trials, mult), units=units(T, clusters))


def paired_pass_at_1(base: tuple[Sequence[int], Sequence[int]],
                     new: tuple[Sequence[int], Sequence[int]], *, pooled: bool,
                     estimand: str = I.POPULATION, clusters: Sequence[Hashable] | None = None
                     ) -> tuple[float, float, I.Spread | None]:
    """(base estimate, new estimate, spread of NEW − BASE) over the same tasks, in order: the
    influence values are differenced task by task (paired), summed per cluster with `clusters`
    (CR1, df = G − 1); the floors add. Under the benchmark estimand the two runs' within-task
    variances add."""
    vb, eb, wb, fb = _pass1_parts(*base, pooled)
    vn, en, wn, fn = _pass1_parts(*new, pooled)
    if estimand == I.BENCHMARK:
        rb = _raw_variance(*base, eb, wb, estimand, None)
        rn = _raw_variance(*new, en, wn, estimand, None)
        raw = (rb[0] + rn[0], rb[1] + rn[1])
    else:
        raw = I.population_variance([y - x for x, y in zip(eb, en)], clusters)
    return vb, vn, I.spread(raw, fb + fn)


def paired_task_mean(base: Sequence[float], new: Sequence[float], trials: Sequence[float],
                     clusters: Sequence[Hashable] | None = None, borrowed: float | None = None
                     ) -> tuple[float | None, I.Spread | None]:
    """Mean of NEW − BASE per-task values and its population spread (floors of both added);
    with clusters, CR1 and never below the tasks-independent variance times `borrowed` (the
    design effect of Δpass@1, as in task_mean_interval)."""
    if not base:
        return None, None
    d = [y - x for x, y in zip(base, new)]
    delta = math.fsum(d) / len(d)
    floor = I.floor_variance(base, trials, False) + I.floor_variance(new, trials, False)
    s = I.spread(I.population_variance([x - delta for x in d], clusters), floor)
    if s is not None and clusters is not None and borrowed is not None:
        alone = I.spread(I.population_variance([x - delta for x in d]), floor)
        s = I.Spread(max(s.variance, alone.variance * borrowed), s.df)
    return delta, s


def paired_design_effect(base: Sequence[float], new: Sequence[float], trials: Sequence[float],
                         clusters: Sequence[Hashable] | None) -> float | None:
    """design_effect of the per-task differences of pass@1 (compare --cluster)."""
    if clusters is None:
        return None
    _, clustered = paired_task_mean(base, new, trials, clusters)
    _, independent = paired_task_mean(base, new, trials)
    if clustered is None or independent is None:
        return None
    return clustered.variance / independent.variance
