"""Calibration of evalstats' intervals and of compare's P(new better): seeded simulations.

Each case draws many campaigns from a known truth and counts how often the 95% interval of the
production code (endstate.evalstats.estimands) covers it; it must land in [93%, 97%]. Under the
null (two runs of the same tasks at the same success rates) P(new better) must be uniform
(Kolmogorov-Smirnov p > 0.05). Seeded, so each figure is reproducible; 2,000 replicates each.
"""

from __future__ import annotations

import numpy as np
import pytest
from numerics import binomial_se
from scipy import stats

from endstate.evalstats import estimands as S
from endstate.evalstats import intervals as I

REPS = 2000
N = 20  # attempts per task
# Statistical, not floating-point, bounds (tests/numerics.py rule 7): a calibrated 95% interval's
# coverage over REPS replicates has binomial SE binomial_se(0.95, REPS) = 0.0049, so [93%, 97%]
# is ±4.1 SE (a calibrated interval lands outside by chance with p ≈ 4e-5); seeded, so fixed.
COVERAGE = (0.93, 0.97)


def population(a: float, b: float, tasks: int):
    """Tasks drawn afresh from Beta(a, b) each replicate; the truth is the population mean."""
    def draw(rng):
        c = rng.binomial(N, rng.beta(a, b, tasks))
        return [N] * tasks, c.tolist(), None
    return draw, a / (a + b)


def clustered(groups: int = 8, per: int = 25):
    """8 domains of 25 tasks: success logit = domain effect + task effect, both N(0, 0.8²);
    the truth is the population mean of the logistic-normal (by quadrature on a fine grid)."""
    def draw(rng):
        logit = rng.normal(0, 0.8, groups)[:, None] + rng.normal(0, 0.8, (groups, per))
        c = rng.binomial(N, 1 / (1 + np.exp(-logit)))
        return [N] * (groups * per), c.ravel().tolist(), [i // per for i in range(groups * per)]
    z = np.linspace(-8, 8, 200_001)  # logit ~ N(0, 0.8² · 2)
    weights = stats.norm.pdf(z, scale=0.8 * np.sqrt(2))
    truth = float(np.sum(weights / (1 + np.exp(-z))) / np.sum(weights))
    return draw, truth


def coverage(draw, truth, seed, estimand=I.POPULATION) -> float:
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(REPS):
        ns, cs, clusters = draw(rng)
        lo, hi = S.pass_at_1(ns, cs, pooled=True, estimand=estimand, clusters=clusters)["ci95"]
        hits += lo <= truth <= hi
    return hits / REPS


@pytest.mark.parametrize("case, make, seed", [
    ("T = 200 × 20 drawn from a population", lambda: population(2, 3, 200), 1),
    ("T = 10 × 20 (t quantiles)", lambda: population(2, 3, 10), 2),
    ("rare successes: Beta(0.2, 3.8), T = 30", lambda: population(0.2, 3.8, 30), 3),
    ("8 clusters of 25 tasks, --cluster (CR1 + t(G-1))", clustered, 4),
])
def test_population_intervals_cover_95(case, make, seed):
    draw, truth = make()
    assert COVERAGE[0] <= coverage(draw, truth, seed) <= COVERAGE[1], case


def test_benchmark_estimand_covers_the_fixed_suite_truth():
    """The same 200 tasks every replicate (their rates fixed); the truth is their mean rate."""
    p = np.random.default_rng(5).beta(2, 3, 200)

    def draw(rng):
        return [N] * 200, rng.binomial(N, p).tolist(), None

    assert COVERAGE[0] <= coverage(draw, float(p.mean()), 6, I.BENCHMARK) <= COVERAGE[1]


@pytest.mark.parametrize("tasks, seed", [(10, 7), (200, 8)])
def test_p_new_better_is_uniform_under_the_null(tasks, seed):
    rng = np.random.default_rng(seed)
    ps = []
    for _ in range(REPS):
        rates = rng.beta(2, 3, tasks)
        base, new = (rng.binomial(N, rates).tolist() for _ in range(2))
        vb, vn, spread = S.paired_pass_at_1(([N] * tasks, base), ([N] * tasks, new), pooled=True)
        ps.append(I.prob_positive(vn - vb, spread))
    assert stats.kstest(ps, "uniform").pvalue > 0.05
    # P(p > 0.95) = 0.05 under uniformity, estimated from REPS draws: within 3 binomial SEs
    assert abs(np.mean(np.array(ps) > 0.95) - 0.05) <= 3 * binomial_se(0.05, REPS)


def test_the_calibration_can_fail():
    """The same harness on the naive interval (attempts as independent Bernoulli trials, the
    error the issue measured at 47%) lands far below 93%: the bounds above are not vacuous."""
    draw, truth = population(2, 3, 200)
    rng = np.random.default_rng(9)
    hits = 0
    for _ in range(500):
        ns, cs, _ = draw(rng)
        p, n = sum(cs) / sum(ns), sum(ns)
        half = 1.96 * np.sqrt(p * (1 - p) / n)
        hits += p - half <= truth <= p + half
    assert hits / 500 < 0.8
