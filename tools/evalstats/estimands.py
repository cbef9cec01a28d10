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
from typing import Any, NamedTuple

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


class ClusterShare(NamedTuple):
    """What pass@1's clusters say about every function of the success rate (--cluster).

    A cluster's shared effect moves the logits η of all its tasks together, so the variance it
    adds to the task mean of x = f(p) (pass@k, pass^k, k/k) is pass@1's times the squared ratio
    of their mean slopes dx/dη and dp/dη (the delta method). pass@1's clustered variance is the
    one a few clusters estimate stably: x's own, from 8 clusters, covered 88–92% (its skewed
    cluster sums), and pass@1's design effect applied to x whole over-covered (98–100%)."""

    excess: float  # V(clustered) − V(tasks independent) of pass@1's task mean, at least 0
    clustered: float  # V(clustered): the Satterthwaite df of the excess comes from it
    df: float  # G − 1
    slope: float  # mean dp/dη = p(1 − p) over the tasks (estimators.logit_slope)
    design_effect: float  # V(clustered) / V(tasks independent)
    units: int  # G


def cluster_share(rates: Sequence[float], slope: float, clusters: Sequence[Hashable] | None,
                  mult: Sequence[int] | None = None) -> ClusterShare | None:
    """The ClusterShare of per-task pass@1 rates (or paired differences of them), pass@1's
    mean slope dp/dη given; None without clusters, or below two."""
    if clusters is None:
        return None
    m = E.mean(rates, mult)
    centred = [s - m for s in rates]
    clustered = I.population_variance(centred, clusters, mult)
    alone = I.population_variance(centred, None, mult)
    if clustered is None or alone is None:
        return None
    (vc, df), va = clustered, alone[0]
    return ClusterShare(max(vc - va, 0.0), vc, df, slope,
                        vc / va if va > 0 else 1.0, units(0, clusters))


def shared_spread(values: Sequence[float], trials: Sequence[float], floor: float,
                  share: ClusterShare | None, slope: float | None,
                  mult: Sequence[int] | None = None) -> tuple[I.Spread | None, float]:
    """(the floored spread of the task mean of per-task `values`, the clusters' part of its
    variance). Tasks independent (share None): sd²/T, df T − 1. Else that plus the clusters'
    share carried by the slope ratio (ClusterShare), with the Satterthwaite df of the two parts:
    the tasks' 2T/(κ − 1) (κ their kurtosis: T − 1 for normal values, about twice the count of
    the tasks that carry a rare value) and G − 1, between 1 and T − 1."""
    m = E.mean(values, mult)
    centred = [x - m for x in values]
    alone = I.population_variance(centred, None, mult)
    if alone is None or share is None:
        return I.spread(alone, floor), 0.0
    ratio = (slope / share.slope) ** 2 if share.slope > 0 else 1.0
    between = ratio * share.excess
    variance = alone[0] + between
    parts = alone[0] ** 2 / _tasks_df(centred, alone[1], mult) + \
        (ratio * share.clustered) ** 2 / share.df
    df = variance * variance / parts if parts > 0 else alone[1]
    return I.spread((variance, min(max(df, 1.0), alone[1])), floor), between


def _tasks_df(centred: Sequence[float], df: float, mult: Sequence[int] | None) -> float:
    """The df of the tasks-independent variance, 2T/(κ − 1) (Satterthwaite), at most T − 1."""
    m2 = I.task_sum([e * e for e in centred], mult)
    m4 = I.task_sum([e ** 4 for e in centred], mult)
    T = I.task_count(centred, mult)
    kurtosis = T * m4 / (m2 * m2) if m2 > 0 else 3.0
    return min(2 * T / (kurtosis - 1), df) if kurtosis > 1 else df


def task_mean_interval(values: Sequence[float], trials: Sequence[float],
                       share: ClusterShare | None = None, slope: float | None = None,
                       mult: Sequence[int] | None = None, clustered: bool = False
                       ) -> list[float] | None:
    """The population interval of the task mean of per-task values (pass@k, pass^k, k/k);
    `mult` as in pass_at_1. Tasks independent: Korn–Graubard (rate_interval). With --cluster
    (`clustered`; null below two clusters): the clusters' share (cluster_share) carried by x's
    mean slope dx/dη, and the interval that holds each part's dependence on the value
    (shared_interval); at an estimate of 0 or 1 the exact interval of T / design effect units,
    between G and T."""
    if not values or clustered and share is None:
        return None
    m = E.mean(values, mult)
    s, between = shared_spread(values, trials, I.floor_variance(values, trials, False, mult),
                               share, slope, mult)
    T = I.task_count(values, mult)
    if share is None:
        return I.rate_interval(m, s, I.task_sum(trials, mult), units=T)
    if s is not None and 0 < m < 1:
        return I.shared_interval(m, s, between)
    whole = min(max(T / share.design_effect, share.units), T)
    return I.rate_interval(m, s, I.task_sum(trials, mult), units=whole)


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
                     share: ClusterShare | None = None, slope: float | None = None,
                     clustered: bool = False) -> tuple[float | None, I.Spread | None]:
    """Mean of NEW − BASE per-task values and its population spread (floors of both added);
    with --cluster (`clustered`), the clusters' share of Δpass@1 (paired_share) carried by the
    slope ratio, as in task_mean_interval (null below two clusters)."""
    if not base or clustered and share is None:
        return None, None
    d = [y - x for x, y in zip(base, new)]
    floor = I.floor_variance(base, trials, False) + I.floor_variance(new, trials, False)
    return math.fsum(d) / len(d), shared_spread(d, trials, floor, share, slope)[0]
