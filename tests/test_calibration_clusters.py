"""Calibration of the clustered (--cluster) intervals of pass@k, pass^k and k/k: seeded
simulations of tasks drawn in clusters, the shipped rule against the rule it replaced.

Success logits are μ + cluster effect + task effect (normal); each regime draws whole campaigns
and counts how often the 95% interval covers the population truth (by quadrature). The regimes:
many tasks in few clusters, rare successes, and a per-cluster effect that averages zero (compare
of two runs). `pytest -s` prints the table of docs/evalstats.md; ENDSTATE_SLOW=1 runs it at
2,000 replicates (the table's), the default at 1,000.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from typing import NamedTuple

import numpy as np
import pytest
from numerics import binomial_se
from scipy import stats

from endstate.evalstats import compare as C
from endstate.evalstats import estimators as E
from endstate.evalstats import intervals as I
from endstate.evalstats import metrics as M

REPS = 2000 if os.environ.get("ENDSTATE_SLOW") == "1" else 1000
GOAL = (0.93, 0.98)
# The goal is about the true coverage; a seeded estimate from REPS replicates has binomial SE
# binomial_se(p, REPS) (tests/numerics.py rule 7): the assertion allows 3 of them beyond each end.
SLACK = (3 * binomial_se(GOAL[0], REPS), 3 * binomial_se(GOAL[1], REPS))


class Regime(NamedTuple):
    name: str
    mu: float
    cluster_sd: float
    task_sd: float
    clusters: int
    per: int
    attempts: int
    statistics: tuple[tuple[str, int], ...]  # ("at" | "hat" | "all", k)


REGIMES = [
    Regime("8 clusters × 25, effects N(0, .8²), μ 0", 0, .8, .8, 8, 25, 20,
           (("at", 5), ("hat", 5), ("at", 10), ("hat", 10))),
    Regime("8 clusters × 25, effects N(0, .8²), μ 1", 1, .8, .8, 8, 25, 20,
           (("at", 5), ("hat", 5), ("hat", 10), ("all", 20))),
    Regime("8 clusters × 25, effects N(0, .8²), μ −1", -1, .8, .8, 8, 25, 20,
           (("at", 5), ("hat", 5), ("at", 10))),
    Regime("many tasks, few clusters: 5 × 80", 0, .5, 1.0, 5, 80, 20,
           (("at", 5), ("hat", 5), ("at", 10), ("hat", 10))),
    Regime("many tasks, few clusters: 4 × 100, 10 attempts, μ 1", 1, .5, 1.0, 4, 100, 10,
           (("at", 5), ("hat", 5), ("all", 10))),
    Regime("rare successes: pass@1 ≈ .11, 10 × 30", -2.5, .5, 1.0, 10, 30, 20,
           (("at", 5), ("at", 10), ("at", 20))),
    Regime("rare reliability: k/k ≈ .013, 10 × 100", 0.13, .5, 1.0, 10, 100, 20,
           (("hat", 10), ("all", 20))),
]
# Within a few tasks of 0 or 1 no interval covers 98% or less: the estimate is 0 (or 1) in a
# quarter of the campaigns, and any interval holds the truth there. Shown, not held to the goal.
EDGE = Regime("edge: k/k truth .011 × 200 tasks (2 expected)", 0, .8, .8, 8, 25, 20,
              (("all", 20),))


def truth(regime: Regime, which: str, k: int) -> float:
    """The population value of pass@k, pass^k or k/k (= pass^n) under the logit-normal."""
    sd = math.hypot(regime.cluster_sd, regime.task_sd)
    z = np.linspace(regime.mu - 12 * sd, regime.mu + 12 * sd, 400_001)
    w = stats.norm.pdf(z, loc=regime.mu, scale=sd)
    p = 1 / (1 + np.exp(-z))
    x = 1 - (1 - p) ** k if which == "at" else p ** k
    return float(np.sum(w * x) / np.sum(w))


def draw(rng, r: Regime) -> tuple[list[int], list[int], list[int]]:
    logit = r.mu + rng.normal(0, r.cluster_sd, r.clusters)[:, None] + \
        rng.normal(0, r.task_sd, (r.clusters, r.per))
    cs = rng.binomial(r.attempts, 1 / (1 + np.exp(-logit))).ravel().tolist()
    return [r.attempts] * len(cs), cs, [i // r.per for i in range(len(cs))]


def fold(ns, cs, labels):
    """Tasks of equal (n, c, cluster) as one row, as metrics.rows() folds them."""
    table = Counter(zip(ns, cs, labels))
    return [list(column) for column in zip(*table)] + [list(table.values())]


def shipped(ns, cs, labels, which, k):
    """The interval evalstats reports (metrics._at_k, metrics.observed_all)."""
    ns, cs, labels, mult = fold(ns, cs, labels)
    share = M.cluster_share(ns, cs, labels, mult)
    if which == "all":
        return M.observed_all(ns, cs, labels, share, mult)["ci95"]
    key = "pass_at_k_ci95" if which == "at" else "pass_hat_k_ci95"
    return M._at_k(ns, cs, [k], labels, None, share, mult)[key][str(k)]


def replaced(ns, cs, labels, which, k):
    """The rule it replaced: x's own CR1 variance, never below the tasks-independent one times
    pass@1's design effect; at an estimate of 0 or 1 the exact interval of G units."""
    values = [1.0 if c == n else 0.0 for n, c in zip(ns, cs)] if which == "all" else \
        [(E.pass_at_k if which == "at" else E.pass_hat_k)(n, c, k) for n, c in zip(ns, cs)]
    trials = [1.0] * len(ns) if which == "all" else [n / k for n in ns]
    rates = [c / n for n, c in zip(ns, cs)]
    deff = own_variance(rates, labels) / own_variance(rates, None)
    floor = I.floor_variance(values, trials, False)
    clustered = I.spread(variance_and_df(values, labels), floor)
    alone = I.spread(variance_and_df(values, None), floor)
    spread = I.Spread(max(clustered.variance, alone.variance * deff), clustered.df)
    return I.rate_interval(sum(values) / len(values), spread, sum(trials),
                           units=len(set(labels)))


def variance_and_df(values, labels):
    m = sum(values) / len(values)
    return I.population_variance([x - m for x in values], labels)


def own_variance(values, labels) -> float:
    return I.spread(variance_and_df(values, labels), 0.0).variance


WIDTHS: dict[tuple[str, str, int, str], float] = {}  # (regime, statistic, rule) -> mean width


def coverage(regime: Regime, rule, seed: int) -> dict[tuple[str, int], float]:
    rng = np.random.default_rng(seed)
    truths = {s: truth(regime, *s) for s in regime.statistics}
    hits, widths = Counter(), Counter()
    for _ in range(REPS):
        ns, cs, labels = draw(rng, regime)
        for which, k in regime.statistics:
            lo, hi = rule(ns, cs, labels, which, k)
            hits[which, k] += lo <= truths[which, k] <= hi
            widths[which, k] += hi - lo
    for s in regime.statistics:
        WIDTHS[regime.name, *s, rule.__name__] = widths[s] / REPS
    return {s: hits[s] / REPS for s in regime.statistics}


NAMES = {"at": "pass@{}", "hat": "pass^{}", "all": "k/k (n = {})"}


def say(regime: str, statistic, before: float, after: float) -> None:
    width = [WIDTHS.get((regime, *statistic, rule)) for rule in ("replaced", "shipped")]
    widths = f" (mean width {width[0]:.3f} → {width[1]:.3f})" if None not in width else ""
    print(f"\n{regime}: {NAMES[statistic[0]].format(statistic[1])}: before {before:.3f}, "
          f"after {after:.3f}{widths}")


@pytest.mark.parametrize("regime", REGIMES, ids=[r.name for r in REGIMES])
def test_clustered_intervals_cover_93_to_98(regime):
    seed = 31 + REGIMES.index(regime)
    before, after = coverage(regime, replaced, seed), coverage(regime, shipped, seed)
    for statistic in regime.statistics:
        say(regime.name, statistic, before[statistic], after[statistic])
    wrong = {s: c for s, c in after.items() if not GOAL[0] - SLACK[0] <= c <= GOAL[1] + SLACK[1]}
    assert not wrong, wrong


def test_the_rule_replaced_over_covers_where_the_shipped_one_does_not():
    """The harness can fail: the replaced rule lands above the goal in the regimes the shipped
    rule meets it (its pass^10 of 5 × 80 covered 99%, its k/k of 4 × 100 100%)."""
    regime = REGIMES[4]
    before = coverage(regime, replaced, 35)
    assert before["all", 10] > GOAL[1] + SLACK[1]


def test_an_estimate_at_the_edge_is_bounded_by_the_clusters_effective_tasks():
    """k/k with 2 tasks expected to pass: the replaced rule's interval at a count of 0 was the
    exact one of G = 8 clusters ([0, 0.37]); now of T / design effect units (at most T)."""
    before, after = coverage(EDGE, replaced, 40), coverage(EDGE, shipped, 40)
    say(EDGE.name, ("all", 20), before["all", 20], after["all", 20])
    rng = np.random.default_rng(41)
    while True:
        ns, cs, labels = draw(rng, EDGE)
        if not any(c == n for n, c in zip(ns, cs)):
            break
    old, new = replaced(ns, cs, labels, "all", 20), shipped(ns, cs, labels, "all", 20)
    assert old[1] == pytest.approx(1 - 0.025 ** (1 / 8), rel=1e-9) and new[1] < old[1] / 2
    assert after["all", 20] >= GOAL[0]


# --- compare: a per-cluster effect that averages zero ---------------------------------------------

def paired_truth(k: int, which: str, effect_sd: float) -> float:
    """Population Δ of pass@k or pass^k when NEW moves each cluster's logits by N(0, sd²) and
    BASE's task rates are Beta(2, 2): E f(expit(logit p + δ)) − E f(p), by quadrature."""
    p = np.linspace(1e-6, 1 - 1e-6, 4001)
    wp = stats.beta.pdf(p, 2, 2)
    wp /= wp.sum()
    d = np.linspace(-8 * effect_sd, 8 * effect_sd, 801)
    wd = stats.norm.pdf(d, scale=effect_sd)
    wd /= wd.sum()
    moved = 1 / (1 + np.exp(-(np.log(p / (1 - p))[:, None] + d[None, :])))

    def f(q):
        return 1 - (1 - q) ** k if which == "at" else q ** k

    return float(np.sum(wp[:, None] * wd[None, :] * f(moved)) - np.sum(wp * f(p)))


def paired_replaced(base, new, labels, which, k):
    """The rule compare replaced: the Δ's own CR1 variance, floored at the tasks-independent one
    times Δpass@1's design effect."""
    def values(side):
        return [(1.0 if c == n else 0.0) if which == "all" else
                (E.pass_at_k if which == "at" else E.pass_hat_k)(n, c, k) for n, c in zip(*side)]

    xb, xn = values(base), values(new)
    trials = [1.0 if which == "all" else n / k for n in base[0]]
    d = [y - x for x, y in zip(xb, xn)]
    rates = [cn / nn - cb / nb for nb, cb, nn, cn in zip(*base, *new)]
    deff = own_variance(rates, labels) / own_variance(rates, None)
    floor = I.floor_variance(xb, trials, False) + I.floor_variance(xn, trials, False)
    clustered = I.spread(variance_and_df(d, labels), floor)
    alone = I.spread(variance_and_df(d, None), floor)
    delta = sum(d) / len(d)
    return I.difference_interval(delta, I.Spread(max(clustered.variance, alone.variance * deff),
                                                 clustered.df))


def paired_shipped(base, new, labels, which, k):
    share = C._paired_share(base, new, labels)
    if which == "all":
        every = [[E.pass_hat_k(n, c, k) for n, c in zip(*side)] for side in (base, new)]
        return C._observed((base, new), every, k, labels, share)["delta_fraction_ci95"]
    return C._at_k(base, new, k, 0 if which == "at" else 1, labels, share)["ci95"]


def test_compare_clustered_deltas_cover_when_the_effect_averages_zero():
    """8 clusters × 25 tasks × 10 attempts; NEW moves each cluster's logits by N(0, 0.3²) (the
    effect averages zero over clusters): the Δ intervals of pass@k, pass^k and k/k cover the
    population Δ."""
    statistics = (("at", 5), ("hat", 5), ("at", 10), ("all", 10))
    truths = {s: paired_truth(s[1], "at" if s[0] == "at" else "hat", 0.3) for s in statistics}
    labels = [i // 25 for i in range(200)]
    rng = np.random.default_rng(50)
    hits = {rule: Counter() for rule in ("before", "after")}
    for _ in range(REPS):
        p = rng.beta(2, 2, 200)
        moved = 1 / (1 + np.exp(-(np.log(p / (1 - p)) + np.repeat(rng.normal(0, 0.3, 8), 25))))
        base, new = (([10] * 200, rng.binomial(10, q).tolist()) for q in (p, moved))
        for s in statistics:
            for rule, f in (("before", paired_replaced), ("after", paired_shipped)):
                lo, hi = f(base, new, labels, *s)
                hits[rule][s] += lo <= truths[s] <= hi
    for s in statistics:
        say("compare, per-cluster effect averaging zero, 8 × 25 × 10 attempts", s, hits["before"][s] / REPS,
            hits["after"][s] / REPS)
    after = {s: hits["after"][s] / REPS for s in statistics}
    assert all(GOAL[0] - SLACK[0] <= c <= GOAL[1] + SLACK[1] for c in after.values()), after
