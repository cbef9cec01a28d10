"""evalstats: estimators against exact enumeration, hand-computed metrics, every CLI flag."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from itertools import combinations
from pathlib import Path

import msgspec
import numpy as np
import orjson
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from numerics import approx, incbet_error, stated

from endstate.core.records.schemas import problem
from endstate.core.records.structs import Attempt
from endstate.evalstats import estimands as S
from endstate.evalstats import estimators as E
from endstate.evalstats import groups as G
from endstate.evalstats import intervals as I
from endstate.evalstats import metrics as M
from endstate.evalstats import tally as Tl
from endstate.evalstats.cli import cli
from endstate.evalstats.compare import compare

# Bounds that are not rounding (tests/numerics.py rule 7): scipy's incomplete beta within
# incbet_error, ours held to the same figure, so two implementations of one value differ by at
# most twice it; scipy ≤ 1.10's stdtrit (cdflib's cdft) stops its search at relative 1e-8.
STDTRIT_TOL = 1e-8


def se_magnitude(ns, cs, *, pooled=True, clusters=None) -> float:
    """M for the population SE of docs/evalstats.md (rule 3): √V with V = k·Σ_g S_g²/T², S_g the
    cluster sums of e_i = (c_i − v·n_i)/(N/T) (pooled) or s_i − v, which cancel. Errors ≤ γ·A_g in
    S_g (A_g: the same sums of |c_i| + v·n_i, or s_i + v) move √V by ≤ γ·k·Σ_g A_g²/T²/√V; the
    floor, where it binds, has no cancellation: √V itself."""
    ns, cs = np.asarray(ns, float), np.asarray(cs, float)
    T, N, s = len(ns), ns.sum(), cs / ns
    value = cs.sum() / N if pooled else s.mean()
    a = (cs + value * ns) / (N / T) if pooled else s + value
    labels = np.arange(T) if clusters is None else np.asarray(clusters)
    sums = np.array([a[labels == g].sum() for g in np.unique(labels)])
    G = len(sums)
    se = reference(ns, cs, pooled=pooled, clusters=clusters)[1]
    return max(G / (G - 1) * float(np.sum(sums ** 2)) / T ** 2 / se, se)


def enumerate_pass(n, c, k):
    """Exact, over every k-subset of n attempts of which c succeed: (P(any), P(all))."""
    subsets = list(combinations(range(n), k))
    anyone = sum(1 for s in subsets if any(i < c for i in s))
    everyone = sum(1 for s in subsets if all(i < c for i in s))
    return Fraction(anyone, len(subsets)), Fraction(everyone, len(subsets))


small = st.integers(1, 10).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n),
                                                       st.integers(0, n)))


@settings(max_examples=300, deadline=None)
@given(small)
def test_estimators_equal_exact_enumeration(nck):
    n, c, k = nck
    anyone, everyone = enumerate_pass(n, c, k)
    # pass@k: c factors 1 − k/j, each 2 roundings whose subtraction amplifies k/j's by ≤ k, then
    # 1 − Π over |terms| ≤ 2; pass^k: k quotients multiplied, nothing cancels. Against the exact
    # fraction rounded once.
    assert E.pass_at_k(n, c, k) == approx(float(anyone), dtype=float, terms=c * (k + 2) + 1, magnitude=2)
    assert E.pass_hat_k(n, c, k) == approx(float(everyone), dtype=float, terms=2 * k + 1)


def test_estimator_edge_cases():
    assert E.pass_at_k(1, 1, 1) == 1.0 and E.pass_at_k(1, 0, 1) == 0.0
    assert E.pass_hat_k(1, 1, 1) == 1.0 and E.pass_hat_k(1, 0, 1) == 0.0
    assert E.pass_at_k(5, 3, 0) == 0.0 and E.pass_hat_k(5, 3, 0) == 1.0  # k = 0
    assert E.pass_at_k(5, 1, 5) == 1.0 and E.pass_at_k(5, 0, 5) == 0.0  # k = n
    assert E.pass_hat_k(5, 5, 5) == 1.0 and E.pass_hat_k(5, 4, 5) == 0.0
    # (3/4)·(2/3) rounds to 0.5 (2/3 is not exact); 1 − (1 − 2/4) is
    assert E.pass_hat_k(4, 3, 2) == approx(0.5, dtype=float, terms=4) and E.pass_at_k(4, 1, 2) == 0.5
    with pytest.raises(ValueError, match="0 <= k <= n"):
        E.pass_at_k(3, 1, 4)
    with pytest.raises(ValueError, match="0 <= k <= n"):
        E.pass_hat_k(3, 1, 4)
    # as above with c = 3, k/(j − k) ≤ 100/98; the reference: one correctly rounded quotient, 1 −
    assert E.pass_at_k(200, 3, 100) == approx(1 - math.comb(197, 100) / math.comb(200, 100), dtype=float,
                                              terms=3 * 4 + 1, magnitude=2)


def _inverse_matches(x, a, b, q, sp, abs=0.0):
    """x = I⁻¹(q; a, b) equals scipy's betaincinv; where the two differ, scipy's betainc decides:
    it must map ours back to q and not scipy's (scipy 1.10, the floor, misses far tails such as
    a = 2e4, b = 0.5, q = 1e-9: its answer has betainc 0.0). A quantile's error is its CDF's
    (≤ 2·incbet_error) times the condition number q/(x·density), large in steep corners: the
    first look passes agreement to 1e-8 (Cephes incbi's documented peak is 8.3e-11); past it,
    the CDF decides, at 1e-6, only which of the two maps back onto q."""
    reference = sp.betaincinv(a, b, q)
    if x != stated(reference, rel=1e-8, abs=abs):
        assert sp.betainc(a, b, x) == stated(q, rel=1e-6)
        assert sp.betainc(a, b, reference) != stated(q, rel=1e-6)


def test_special_functions_match_scipy():
    from scipy import special as sp

    from endstate.core.stats import special
    grid = [0.5, 1.0, 2.5, 10.0, 400.0, 2e4]
    for a, b in itertools.product(grid, grid):
        for x in (1e-6, 0.01, 0.3, 0.5, 0.77, 0.999):  # below 1e-12: tails no interval resolves
            assert special.betainc(a, b, x) == stated(sp.betainc(a, b, x), rel=2 * incbet_error(a, b), abs=1e-12)
        for q in (1e-9, 0.025, 0.5, 0.975):
            _inverse_matches(special.betaincinv(a, b, q), a, b, q, sp)
    for a, b in [(0.01, 5.0), (0.3, 0.2), (1e-3, 1e-3), (0.05, 2000.0)]:  # steep densities
        for q in (0.025, 0.975):
            _inverse_matches(special.betaincinv(a, b, q), a, b, q, sp, abs=1e-300)
    for df in (1, 2, 3, 9, 29, 199, 1e5):
        for q in (0.001, 0.025, 0.3, 0.975):
            x = special.t_ppf(q, df)
            peak = incbet_error(df / 2, 0.5)  # the t CDF is 0.5·I(df/2, 1/2) of a tail ≤ 1
            assert sp.stdtr(df, x) == stated(q, rel=2 * peak)  # scipy's CDF maps it back
            assert x == stated(sp.stdtrit(df, q), rel=STDTRIT_TOL)  # scipy 1.10's stdtrit: ~2e-9
            assert special.t_cdf(x, df) == stated(sp.stdtr(df, x), abs=2 * peak)


def reference(ns, cs, *, pooled=True, clusters=None, estimand="population"):
    """The spec of docs/evalstats.md recomputed with numpy and scipy: (value, se, ci95)."""
    from scipy import stats
    ns, cs = np.asarray(ns, float), np.asarray(cs, float)
    T, N, s = len(ns), ns.sum(), cs / ns
    value = cs.sum() / N if pooled else s.mean()
    e = (cs - value * ns) / (N / T) if pooled else s - value
    p = (cs.sum() + 0.5) / (N + 1)
    floor = p * (1 - p) / N if pooled else p * (1 - p) * np.mean(1 / ns) / T
    if estimand == "benchmark":
        w = ns / N if pooled else np.full(T, 1 / T)
        V, df = float(np.sum(w ** 2 * s * (1 - s) / (ns - 1))), float(np.sum(ns - 1))
    else:
        labels = np.arange(T) if clusters is None else np.asarray(clusters)
        sums = np.array([e[labels == g].sum() for g in np.unique(labels)])
        G = len(sums)
        V, df = G / (G - 1) * float(np.sum(sums ** 2)) / T ** 2, G - 1.0
    V = max(V, floor / (df + 1))
    t = stats.t.ppf(0.975, df)
    trials = (value * (1 - value) / V if 0 < value < 1 else N)
    trials = (min(trials, N) if estimand == "population" else trials) * (1.959963984540054 / t) ** 2
    x = value * trials
    lo = stats.beta.ppf(0.025, x, trials - x + 1) if x > 0 else 0.0
    hi = stats.beta.ppf(0.975, x + 1, trials - x) if x < trials else 1.0
    return value, math.sqrt(V), [lo, hi]


@pytest.mark.parametrize("ns, cs, clusters", [
    ([4, 4, 4], [3, 4, 1], None),
    ([100, 2, 2, 2], [100, 0, 0, 0], None),  # pooled and task mean far apart
    ([20] * 6, [0, 3, 9, 14, 20, 5], ["a", "a", "b", "b", "c", "c"]),
    ([5, 9, 13, 2, 7], [1, 9, 0, 2, 3], [0, 1, 0, 1, 2]),
])
@pytest.mark.parametrize("pooled", [True, False])
@pytest.mark.parametrize("estimand", ["population", "benchmark"])
def test_estimands_match_an_independent_computation(ns, cs, clusters, pooled, estimand):
    if estimand == "benchmark":
        if clusters is not None or min(ns) < 2:
            return
    got = S.pass_at_1(ns, cs, pooled=pooled, estimand=estimand, clusters=clusters)
    value, se, ci = reference(ns, cs, pooled=pooled, clusters=clusters, estimand=estimand)
    T, n = len(ns), max(ns)
    assert got["value"] == approx(value, dtype=float, terms=T + 2)  # a quotient of sums, or a mean
    if estimand == "population":  # cluster sums that cancel, then squares, a sum and √
        assert got["se"] == approx(se, dtype=float, terms=T + 6,
                                   magnitude=se_magnitude(ns, cs, pooled=pooled, clusters=clusters))
    else:  # Σ w²·s(1 − s)/(n − 1): nothing cancels but 1 − s, which amplifies s's rounding ≤ n
        assert got["se"] == approx(se, dtype=float, terms=T * (n + 6) + 3)
    # the beta quantile's (ours and scipy's within STDTRIT_TOL) at parameters carrying the SE's
    # rounding, which the quantile's slope amplifies: 1e-7
    assert got["ci95"] == stated(ci, rel=1e-7, abs=1e-12)
    assert got["ci95"][0] <= got["value"] <= got["ci95"][1]


@pytest.mark.parametrize("clusters", [None, ["a", "a", "b", "b", "a", "c", "c", "a", "b"]])
@pytest.mark.parametrize("estimand", ["population", "benchmark"])
def test_a_groups_tasks_of_equal_counts_share_a_row(clusters, estimand):
    """metrics() folds tasks of equal (n, c) (and cluster) into one row counted `mult` times:
    pass@1 still matches the per-task reference, and pass@k, pass^k and k/k their per-task
    computation (one row per task)."""
    if clusters and estimand == "benchmark":
        return
    ns, cs = [4, 4, 4, 4, 6, 6, 6, 4, 6], [3, 3, 1, 4, 6, 6, 2, 3, 6]
    tasks = {f"t{i}": Tl.Counts(n, c, 0, 0.0, 0, 0, 0, 0) for i, (n, c) in enumerate(zip(ns, cs))}
    by_task = None if clusters is None else {f"t{i}": g for i, g in enumerate(clusters)}
    got = M.metrics(tasks, [1, 3], by_task, estimand).to_builtins()
    _, _, labels, mult = M.rows(tasks, by_task)
    assert len(mult) < len(ns) and sum(mult) == got["tasks"] == 9
    for key, pooled in (("pass_at_1", True), ("pass_at_1_task_mean", False)):
        value, se, ci = reference(ns, cs, pooled=pooled, clusters=clusters, estimand=estimand)
        assert got[key] == approx(value, dtype=float, terms=len(ns) + 2)
        assert got[f"{key}_se"] == stated(se, rel=1e-12)
        assert got[f"{key}_ci95"] == stated(ci, rel=1e-7, abs=1e-12)
    one_each = M._at_k(ns, cs, [3], clusters, None, M.cluster_share(ns, cs, clusters))
    for key in ("pass_at_k", "pass_hat_k"):
        assert got[key]["3"] == stated(one_each[key].value["3"], rel=1e-15)
        assert got[f"{key}_ci95"]["3"] == stated(one_each[key].ci95["3"], rel=1e-12)
    every = msgspec.to_builtins(M.observed_all(ns, cs, clusters, M.cluster_share(ns, cs, clusters)))
    assert got["observed_all"] == {**every, "ci95": stated(every["ci95"], rel=1e-12)}


def test_pooled_interval_is_the_pooled_estimates_own():
    """A 100/100 and three tasks 0/2 gave pooled 0.943 with the task-mean interval
    [0, 0.740], which excluded it. Each estimand now has its own interval around itself."""
    pooled = S.pass_at_1([100, 2, 2, 2], [100, 0, 0, 0], pooled=True)
    mean = S.pass_at_1([100, 2, 2, 2], [100, 0, 0, 0], pooled=False)
    assert pooled["value"] == approx(100 / 106, dtype=float, terms=2) and mean["value"] == 0.25  # (1 + 0·3)/4
    assert pooled["ci95"][0] < 100 / 106 < pooled["ci95"][1]
    assert mean["ci95"][0] < 0.25 < mean["ci95"][1]
    # the ratio estimator's SE: sqrt(T/(T-1) · Σ(c_i - R n_i)²) / N
    R = Fraction(100, 106)
    var = Fraction(4, 3) * sum((c - R * n) ** 2 for n, c in [(100, 100), (2, 0), (2, 0), (2, 0)])
    assert pooled["se"] == approx(math.sqrt(var) / 106, dtype=float, terms=4 + 6,
                                  magnitude=se_magnitude([100, 2, 2, 2], [100, 0, 0, 0]))


def test_singleton_clusters_reproduce_the_unclustered_se_exactly():
    """CR1's G/(G-1) makes one task per cluster the plain sd(s)/sqrt(T)."""
    ns, cs = [20] * 7, [0, 3, 9, 14, 20, 5, 11]
    plain = S.pass_at_1(ns, cs, pooled=False)
    single = S.pass_at_1(ns, cs, pooled=False, clusters=list(range(7)))
    assert single == plain
    rates = [c / 20 for c in cs]
    assert plain["se"] == approx(float(np.std(rates, ddof=1)) / math.sqrt(7), dtype=float, terms=7 + 6,
                                 magnitude=se_magnitude(ns, cs, pooled=False))
    assert S.pass_at_1(ns, cs, pooled=False, clusters=[0] * 7)["se"] is None  # one cluster


def test_finite_samples_never_give_zero_width():
    """all-0 and all-1 runs, and a paired Δ that is the same on every task."""
    for cs in ([0, 0, 0], [20, 20, 20]):
        lo, hi = S.pass_at_1([20] * 3, cs, pooled=True)["ci95"]
        assert hi - lo > 0.01
    vb, vn, spread = S.paired_pass_at_1(([2, 2], [0, 0]), ([2, 2], [1, 1]), pooled=True)
    assert vn - vb == 0.5 and spread.se > 0
    assert 0.5 < I.prob_positive(0.5, spread) < 0.95
    # the floor: V0/(df + 1) with V0 the binomial variance at the smoothed rate of both runs
    floor = sum(p * (1 - p) / 4 for p in (0.5 / 5, 2.5 / 5))
    assert spread.variance == approx(floor / 2, dtype=float, terms=8) and spread.df == 1  # p(1 − p)/4 twice, /2


def clustered_reference(ns, cs, clusters, values, slope_of, trials):
    """docs/evalstats.md's clustered interval of the task mean of `values`, recomputed: pass@1's
    CR1 and independent variances with numpy, the slopes as exact fractions of unbiased
    moments, the interval's ends as the real roots of its quartic (numpy.roots)."""
    from scipy import stats
    s, x = np.asarray(cs, float) / np.asarray(ns, float), np.asarray(values, float)
    T, labels = len(ns), np.asarray(clusters)
    groups = np.unique(labels)
    G = len(groups)

    def cr1(v):
        return G / (G - 1) * sum((v[labels == g] - v.mean()).sum() ** 2 for g in groups) / T ** 2

    clustered, alone = cr1(s), float(np.var(s, ddof=1)) / T
    ratio = float(slope_of(ns, cs) / slope_of(ns, cs, k=1)) ** 2
    A, B = float(np.var(x, ddof=1)) / T, ratio * max(clustered - alone, 0.0)
    e = x - x.mean()
    kurtosis = T * float(np.sum(e ** 4)) / float(np.sum(e ** 2)) ** 2
    df_tasks = min(2 * T / (kurtosis - 1), T - 1)
    df = min(max((A + B) ** 2 / (A ** 2 / df_tasks + (ratio * clustered) ** 2 / (G - 1)), 1), T - 1)
    m = np.asarray(trials, float)
    p_floor = (float(np.sum(x * m)) + 0.5) / (float(np.sum(m)) + 1)
    V = max(A + B, p_floor * (1 - p_floor) * float(np.mean(1 / m)) / T / (df + 1))
    A, t2, p, q = V - B, stats.t.ppf(0.975, df) ** 2, float(x.mean()), x.mean() * (1 - x.mean())
    # (p − θ)² − t²(A·θ(1 − θ)/q + B·θ²(1 − θ)²/q²) = 0, a quartic in θ
    quartic = np.polynomial.Polynomial([p * p, -2 * p, 1]) - t2 * (
        A / q * np.polynomial.Polynomial([0, 1, -1]) + B / q ** 2 * np.polynomial.Polynomial([0, 0, 1, -2, 1]))
    roots = sorted(r.real for r in np.roots(quartic.coef[::-1]) if abs(r.imag) < 1e-9)
    below, above = [r for r in roots if r < p], [r for r in roots if r > p]
    return [max(below[-1], 0.0) if below else 0.0, min(above[0], 1.0) if above else 1.0]


def moment_slope(kind, k_of):
    """k·(E[y^k] − E[y^(k+1)]) with y = p ("hat") or 1 − p ("at"), E[·] the mean of the exact
    unbiased per-task estimates C(c, j)/C(n, j) (or C(n − c, j)/C(n, j))."""
    def slope(ns, cs, k=None):
        k = k or k_of(ns)
        def moment(j):
            return sum(Fraction(math.comb(c if kind == "hat" else n - c, j), math.comb(n, j))
                       for n, c in zip(ns, cs)) / len(ns)
        return k * (moment(k) - moment(k + 1))
    return slope


def test_the_clustered_interval_matches_an_independent_computation():
    ns = [12] * 12
    cs = [12, 9, 11, 3, 5, 2, 12, 12, 10, 0, 1, 4]
    clusters = ["a", "a", "a", "b", "b", "b", "c", "c", "c", "d", "d", "d"]
    tasks = {f"t{i}": Tl.Counts(n, c, 0, 0.0, 0, 0, 0, 0) for i, (n, c) in enumerate(zip(ns, cs))}
    got = M.metrics(tasks, [1, 5], {f"t{i}": g for i, g in enumerate(clusters)}).to_builtins()
    pass_hat = [math.comb(c, 5) / math.comb(12, 5) for c in cs]
    pass_at = [1 - math.comb(12 - c, 5) / math.comb(12, 5) for c in cs]
    hits = [1.0 if c == 12 else 0.0 for c in cs]
    five = [12 / 5] * 12
    # numpy.roots: the companion matrix's eigenvalues, backward stable; the quartic's simple roots
    # move by ~1e-13 here (conditioning), the bisection stops at 2^-60: 1e-9 holds both (rule 7)
    assert got["pass_hat_k_ci95"]["5"] == stated(clustered_reference(
        ns, cs, clusters, pass_hat, moment_slope("hat", lambda n: 5), five), abs=1e-9)
    assert got["pass_at_k_ci95"]["5"] == stated(clustered_reference(
        ns, cs, clusters, pass_at, moment_slope("at", lambda n: 5), five), abs=1e-9)
    # k/k at n = 12 = the largest k the attempts allow: E[p^13] is extrapolated, m12²/m11
    def kk_slope(ns_, cs_, k=None):
        if k == 1:
            return moment_slope("hat", None)(ns_, cs_, 1)
        m = [sum(Fraction(math.comb(c, j), math.comb(12, j)) for c in cs_) / 12 for j in (11, 12)]
        return 12 * (m[1] - m[1] ** 2 / m[0])
    assert got["observed_all"]["ci95"] == stated(clustered_reference(
        ns, cs, clusters, hits, kk_slope, [1.0] * 12), abs=1e-9)


def test_p_new_better_is_the_t_cdf():
    from scipy import stats
    spread = I.Spread(0.01, 9.0)
    assert I.prob_positive(0.05, spread) == stated(stats.t.cdf(0.5, 9), abs=2 * incbet_error(4.5, 0.5))
    t = stats.t.ppf(0.975, 9)  # ours and scipy's quantile: within STDTRIT_TOL, times the SE 0.1
    assert I.difference_interval(0.05, spread) == stated([0.05 - t * 0.1, 0.05 + t * 0.1],
                                                         abs=STDTRIT_TOL * t * 0.1)


# --- data -----------------------------------------------------------------------------------------

def rows(task_id, rewards, domain, cost=0.10, model="m", first=0):
    return [{"task_id": task_id, "domain": domain, "attempt": first + i, "model": model,
             "status": "ok" if r is not None else "system_error", "reward": r,
             "usage": {"agent": {"prompt_tokens": 100, "completion_tokens": 50}},
             "cost_usd": cost if r is not None else 0.05} for i, r in enumerate(rewards)]


# A 3/4 (+ a system error, $0.05), B 4/4, C 1/4; every clean attempt costs $0.10.
HAND = [*rows("A", [1, 1, 1, 0, None], "retail"), *rows("B", [1, 1, 1, 1], "travel"),
        *rows("C", [0, 0, 0, 1], "travel")]


def write(path, records):
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return str(path)


def task(task_id):
    return {"id": task_id, "domain": "retail", "user": {"instruction": "x", "opening": "hi"},
            "checks": [{"kind": "said", "value": "done"}]}


def run(args, input=None):
    return CliRunner().invoke(cli, args, input=input)


@pytest.fixture
def hand(tmp_path):
    return write(tmp_path / "hand.jsonl", HAND)


def test_hand_computed_metrics(hand):
    result = run([hand])
    assert result.exit_code == 0, result.output
    report = orjson.loads(result.stdout)
    assert problem("metrics", report) is None
    g = report["overall"]
    assert (g["tasks"], g["attempts"], g["system_errors"], g["successes"]) == (3, 12, 1, 8)
    # float64 (numerics rule 1): a pooled rate is one quotient, a task mean T + 1 roundings; pass@k
    # averages T per-task values of n·(k + 2) + 1 roundings at |terms| ≤ 2 (test_estimators_...);
    # pass^k T products of 2k quotients
    assert g["pass_at_1"] == approx(8 / 12, dtype=float) and g["pass_at_1_task_mean"] == approx(2 / 3, dtype=float, terms=4)
    assert g["pass_at_k"] == approx({"1": 2 / 3, "4": 1.0}, dtype=float, terms=4 * 6 + 4, magnitude=2)  # default k: 1 and n = 4
    assert g["pass_hat_k"] == approx({"1": 2 / 3, "4": 1 / 3}, dtype=float, terms=2 * 4 + 4)
    obs = g["observed_all"]
    assert (obs["k"], obs["k_min"], obs["k_max"], obs["count"]) == (4, 4, 4, 1)
    assert obs["fraction"] == approx(1 / 3, dtype=float)
    value, se, ci = reference([4, 4, 4], [3, 4, 1])
    assert g["estimand"] == "population"
    same_se = approx(se, dtype=float, terms=3 + 6, magnitude=se_magnitude([4, 4, 4], [3, 4, 1]))
    assert (g["pass_at_1_se"], g["pass_at_1_ci95"]) == (same_se, stated(ci, rel=1e-7))  # as in test_estimands_...
    assert g["pass_at_1_task_mean_se"] == same_se  # equal n: the same estimand
    # by hand: sd(s)²/T = (7/48)/3; floor V0/3 = p(1-p)/4/3/3 with p = 8.5/13: not binding
    assert se == approx(math.sqrt(7 / 48 / 3), dtype=float, terms=3 + 6,
                        magnitude=se_magnitude([4, 4, 4], [3, 4, 1], pooled=False))
    assert g["pass_at_k_ci95"]["4"][1] == 1.0 and g["pass_hat_k_ci95"]["4"][0] < 1 / 3
    assert g["pass_at_k_ci95"]["1"] == g["pass_hat_k_ci95"]["1"] == g["pass_at_1_task_mean_ci95"]
    # 13 positive costs summed (13 roundings), then one quotient
    assert g["cost"] == {"total_usd": approx(1.25, dtype=float, terms=13),
                         "per_success_usd": approx(0.15625, dtype=float, terms=14),
                         "per_reliable_task_usd": approx(1.25, dtype=float, terms=14), "priced_attempts": 13,
                         "unpriced_attempts": 0, "recorded_attempts": 13}


def test_hand_computed_k_by_and_cluster(hand):
    report = orjson.loads(run(["--k", "2", "--by", "domain", "--cluster", "domain", hand]).stdout)
    g = report["overall"]
    assert g["pass_at_k"] == approx({"2": 2.5 / 3}, dtype=float, terms=4 * 4 + 4, magnitude=2)  # A 1, B 1, C 1 - 3/6
    assert g["pass_hat_k"] == approx({"2": 0.5}, dtype=float, terms=2 * 2 + 4)  # A 3/6, B 1, C 0
    # CR1, clusters {A}, {B, C}: G/(G-1) · ((1/12)² + (-1/12)²) / T², floored at V0/2, which
    # binds: p(1 − p)/24 with 1 − p amplifying p's rounding by 2, then √
    raw = 2 * 2 * (1 / 12) ** 2 / 9
    p = 8.5 / 13
    floored = approx(math.sqrt(max(raw, p * (1 - p) / 12 / 2)), dtype=float, terms=8)
    assert g["pass_at_1_se"] == floored
    assert g["pass_at_1_se"] == approx(reference([4, 4, 4], [3, 4, 1], clusters=[0, 1, 1])[1], dtype=float,
                                       terms=8)
    retail, travel = report["by_domain"]["retail"], report["by_domain"]["travel"]
    assert (retail["tasks"], retail["system_errors"], retail["pass_at_1"]) == (1, 1, 0.75)  # 3/4: exact
    assert retail["cost"] == {"total_usd": approx(0.45, dtype=float, terms=5),  # 5 costs, then 1 quotient
                              "per_success_usd": approx(0.15, dtype=float, terms=6),
                              "per_reliable_task_usd": None, "priced_attempts": 5,
                              "unpriced_attempts": 0, "recorded_attempts": 5}
    assert travel["pass_at_1"] == 0.625 and travel["observed_all"]["count"] == 1  # 5/8: exact
    assert travel["cost"]["per_reliable_task_usd"] == approx(0.8, dtype=float, terms=9)
    assert list(report) == ["overall", "by_domain"]


def test_price_overrides_cost_usd(hand):
    report = orjson.loads(run(["--price", "m=1000,2000", hand]).stdout)
    # each attempt: (100 * 1000 + 50 * 2000) / 1e6 = $0.20 (3 roundings); 13 attempts summed
    assert report["overall"]["cost"]["total_usd"] == approx(2.6, dtype=float, terms=13 + 3)
    assert report["overall"]["cost"]["per_reliable_task_usd"] == approx(2.6, dtype=float, terms=13 + 4)
    other = orjson.loads(run(["--price", "other=1,1", hand]).stdout)
    assert other["overall"]["cost"]["total_usd"] == approx(1.25, dtype=float, terms=13)


def test_partial_costs_are_flagged(tmp_path):
    data = [*rows("A", [1, 0], "r"), *rows("B", [1], "r", cost=None)]
    result = run([write(tmp_path / "p.jsonl", data)])
    assert orjson.loads(result.stdout)["overall"]["cost"]["total_usd"] == approx(0.2, dtype=float, terms=2)
    assert result.stderr == ("evalstats: only 2 of 3 attempts have a cost (cost_usd, or --price for "
                             "their model); total_usd covers those, the ratios are the priced "
                             "attempts' (docs/evalstats.md)\n")


def test_no_costs_is_null(tmp_path):
    report = orjson.loads(run([write(tmp_path / "p.jsonl", rows("A", [1, 0], "r", cost=None))]).stdout)
    assert report["overall"]["cost"] == {"total_usd": None, "per_success_usd": None,
                                         "per_reliable_task_usd": None, "priced_attempts": 0,
                                         "unpriced_attempts": 0, "recorded_attempts": 2}


def test_default_ks_and_k_too_large(tmp_path, hand):
    assert G.default_ks(20) == [1, 5, 20] and G.default_ks(4) == [1, 4] and G.default_ks(0) == []
    result = run(["--k", "1,5", hand])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == ("--k 5: task 'A' has only 4 clean attempt(s); use k <= 4, or re-run "
                             "its missing attempts\n")
    result = run(["--k", "0", hand])
    assert result.exit_code == 2 and "k values must be from 1 to 10000" in result.stderr


def test_formats(hand):
    table = run(["--format", "table", "--by", "domain", hand]).stdout.splitlines()
    # each head is distinct and names its estimand and k
    assert table[0].split() == ["group", "tasks", "attempts", "sys_err", "pass@1(pooled)%", "±se",
                                "pass@1(task-mean)%", "pass@4%", "pass^4%", "4/4", "$/success",
                                "$/reliable"]
    assert table[1].split() == ["overall", "3", "12", "1", "66.7", "22.0", "66.7", "100.0",
                                "33.3", "1/3", "0.1562", "1.25"]
    assert table[2].split()[0] == "domain=retail"
    md = run(["--format", "markdown", hand]).stdout.splitlines()
    assert md[0].startswith("| group | tasks |") and md[1].startswith("|---|---:|")


def test_plot(tmp_path, hand):
    png = tmp_path / "m.png"
    result = run(["--plot", str(png), hand])
    assert result.exit_code == 0 and png.read_bytes()[:4] == b"\x89PNG"
    assert "by_model" not in orjson.loads(result.stdout)


def test_pareto():
    from endstate.evalstats.figures import pareto
    assert pareto([(0.5, 1.0), (0.6, 2.0), (0.4, 1.5), (0.6, 3.0)]) == [0, 1]


# --- coverage gate --------------------------------------------------------------------------------

@pytest.fixture
def gate(tmp_path):
    data = [*rows("X", [1, 0], "r"), *rows("Y", [1], "r"), *rows("Y", [None], "r", first=1),
            *rows("W", [1], "r")]
    return {"att": write(tmp_path / "g.jsonl", data),
            "tasks": write(tmp_path / "t.jsonl", [task("X"), task("Y"), task("Z")])}


def test_coverage_gate_lists_keys_and_exits_3(gate):
    result = run(["--expect-tasks", gate["tasks"], "--expect-repeats", "2", gate["att"]])
    assert result.exit_code == 3 and result.stdout == ""
    assert result.stderr.splitlines() == [
        ("coverage: 3 of 6 task × attempt keys have no clean record (missing 2, system_error 1); "
         "re-run them:"),
        ("coverage: 1 recorded key(s) are not expected (task not in the expected tasks, or "
         "attempt >= 2); left out of the metrics:"),
        "system_error\tY\t1",
        "missing\tZ\t0",
        "missing\tZ\t1",
        "unexpected\tW\t0",
        ("coverage gate failed: 3 key(s) to re-run (listed above); pass --allow-incomplete to "
         "report anyway"),
    ]


def test_coverage_gate_allow_incomplete_and_pass(gate, tmp_path):
    result = run(["--expect-tasks", gate["tasks"], "--expect-repeats", "2", "--allow-incomplete",
                  gate["att"]])
    assert result.exit_code == 0 and orjson.loads(result.stdout)["overall"]["tasks"] == 2  # not W
    assert "missing\tZ\t0" in result.stderr
    ok = write(tmp_path / "ok.jsonl", [*rows("X", [1, 0], "r"), *rows("Y", [1, 1], "r"),
                                       *rows("Z", [0, 0], "r")])
    result = run(["--expect-tasks", gate["tasks"], "--expect-repeats", "2", ok])
    assert result.exit_code == 0 and result.stderr == ""
    result = run(["--expect-repeats", "2", ok])
    assert result.exit_code == 2 and "--expect-tasks and --expect-repeats go together" in result.stderr


def test_coverage_gate_metrics_cover_exactly_the_grid(tmp_path):
    """expected {g1, g2} × 0..2, all failures; an extra task zz and g1's attempt 3
    succeed. Before: exit 0, tasks 3, pass@1 0.25. Now they are listed and left out."""
    data = [*rows("g1", [0, 0, 0, 1], "r"), *rows("g2", [0, 0, 0], "r"), *rows("zz", [1, 1], "r")]
    att, tasks = write(tmp_path / "a.jsonl", data), write(tmp_path / "t.jsonl", [task("g1"), task("g2")])
    result = run(["--expect-tasks", tasks, "--expect-repeats", "3", att])
    assert result.exit_code == 0, result.output
    g = orjson.loads(result.stdout)["overall"]
    assert (g["tasks"], g["attempts"], g["successes"], g["pass_at_1"]) == (2, 6, 0, 0.0)
    assert "unexpected\tg1\t3" in result.stderr and "unexpected\tzz\t1" in result.stderr
    strict = run(["--expect-tasks", tasks, "--expect-repeats", "3", "--strict", att])
    assert strict.exit_code == 3 and strict.stdout == ""
    assert strict.stderr.splitlines()[-1] == (
        "coverage gate failed: 3 key(s) missing, hit by system errors or unexpected (listed "
        "above); pass --allow-incomplete to report anyway")


def test_bad_input_and_skip_invalid(tmp_path, hand):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(Path(hand).read_text() + '{"task_id": "Q", "attempt": 0, "status": "ok", "reward": 2}\n')
    result = run([str(bad)])
    assert result.exit_code == 4
    assert result.stderr == (f"{bad}:14: attempt record.reward: 2 is not one of [0, 1, None] "
                             "(schema: schemas/attempt.schema.json)\n")
    result = run(["--skip-invalid", str(bad)])
    assert result.exit_code == 0 and orjson.loads(result.stdout)["overall"]["tasks"] == 3
    assert result.stderr.startswith(f"skipped 1 invalid line(s):\n  {bad}:14:")


def test_stdin_workers_and_help(hand):
    with open(hand) as fh:
        assert run(["-"], input=fh.read()).stdout == run([hand]).stdout
    assert run(["--procs", "2", hand]).stdout == run([hand]).stdout
    assert "evalstats --format table schemas/examples/attempt.json" in run(["--help"]).stdout
    assert "evalstats --expect-tasks" in run(["summary", "--help"]).stdout
    assert "evalstats compare schemas/examples/attempt.json" in run(["compare", "--help"]).stdout


# --- compare --------------------------------------------------------------------------------------

BASE = [*rows("A", [1, 1, 0, 0], "retail"), *rows("B", [0, 0, 0, 0], "travel"),
        *rows("C", [1, 1, 1, 1], "travel")]
NEW = [*rows("A", [1, 1, 1, 1], "retail"), *rows("B", [1, 0, 0, 0], "travel"),
       *rows("C", [1, 1, 1, 1], "travel"), *rows("D", [1, 1, 1, 1], "travel")]


def test_compare_by_hand(tmp_path):
    base, new = write(tmp_path / "b.jsonl", BASE), write(tmp_path / "n.jsonl", NEW)
    result = run(["compare", "--by", "domain", base, new])
    assert result.exit_code == 0, result.output
    r = orjson.loads(result.stdout)
    assert (r["tasks"], r["only_base"], r["only_new"]) == (3, 0, 1)
    from scipy import stats
    se, t2 = 0.25 / math.sqrt(3), stats.t.ppf(0.975, 2)  # d = (.5, .25, 0): sd 0.25, df 2
    ci95 = r["pass_at_1"].pop("ci95")
    assert r["estimand"] == "population"
    # the rates and their differences are dyadic (exact); the SE: deviations from their mean
    # squared, summed, /(T − 1), √, /√T — with the reference's 3 roundings
    assert r["pass_at_1"].pop("statistic") == "pooled"
    assert r["pass_at_1"] == approx({"base": 0.5, "new": 0.75, "delta": 0.25, "se": se}, dtype=float, terms=3 * 3 + 6)
    # ours and scipy's t quantile: within STDTRIT_TOL, times the SE
    assert ci95 == stated([0.25 - t2 * se, 0.25 + t2 * se], abs=STDTRIT_TOL * t2 * se)
    assert r["pass_at_1_task_mean"]["delta"] == 0.25  # equal n: the same as pooled
    ci_k = r["pass_at_k"].pop("ci95")
    k_values = approx({"k": 4, "base": 2 / 3, "new": 1.0, "delta": 1 / 3}, dtype=float, terms=4 * 6 + 4 + 1,
                      magnitude=2)  # per-task pass@4 as in test_hand_computed_metrics, then new − base
    assert r["pass_at_k"] == k_values
    assert ci_k[0] < 1 / 3 < ci_k[1]
    assert r["pass_hat_k"]["k"] == 4 and r["pass_hat_k"]["delta"] == approx(1 / 3, dtype=float, terms=2 * 4 + 5,
                                                                            magnitude=2)
    ci_all = r["observed_all"].pop("delta_fraction_ci95")
    assert r["observed_all"].pop("estimated") == []  # both runs: 4 attempts per task
    assert r["observed_all"] == approx({"k": 4, "base": 1, "new": 2, "delta": 1,  # counts over T = 3
                                        "base_fraction": 1 / 3, "new_fraction": 2 / 3,
                                        "delta_fraction": 1 / 3}, dtype=float, terms=2, magnitude=1)
    assert ci_all[0] < 1 / 3 < ci_all[1]
    # Pearson's r of T = 3 pairs: centred sums of products, two norms, √, / (|r| ≤ 1 by
    # Cauchy–Schwarz bounds the normalised |terms|)
    assert r["correlation"] == approx(math.sqrt(3) / 2, dtype=float, terms=4 * 3 + 4, magnitude=1)
    assert r["p_new_better"] == stated(stats.t.cdf(math.sqrt(3), 2), abs=2 * incbet_error(1, 0.5))
    assert r["gained"] == {"pass_at_k": ["B"], "observed_all": ["A"]}
    assert r["lost"] == {"pass_at_k": [], "observed_all": []}
    travel = r["by_domain"]["travel"]
    assert travel["tasks"] == 2 and travel["pass_at_1"]["delta"] == 0.125  # 5/8 − 4/8: dyadic, exact
    base = [msgspec.convert(r, Attempt) for r in BASE]
    counts = G.group_tasks(Tl.tally_fn([], {})(base))["overall"]
    assert compare(counts, counts)["p_new_better"] == 0.5


def test_compare_k_format_plot_and_errors(tmp_path):
    base, new = write(tmp_path / "b.jsonl", BASE), write(tmp_path / "n.jsonl", NEW)
    r = orjson.loads(run(["compare", "--k", "2", base, new]).stdout)
    assert r["pass_at_k"]["k"] == 2 and r["pass_at_k"]["base"] == approx((5 / 6 + 0 + 1) / 3, dtype=float,
                                                                          terms=4 * 4 + 4, magnitude=2)
    result = run(["compare", "--k", "5", base, new])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        ("evalstats compare: 1 only in NEW (first: 'D'); the comparison pairs the 3 task(s) both "
         "have (only_base, only_new)"),
        "--k 5: task 'A' has only 4 clean attempt(s) in one of the runs; use k <= 4"]
    tables = run(["compare", "--format", "table", "--by", "domain", base, new]).stdout
    table, costs = (t.splitlines() for t in tables.split("\n\n"))
    # every attempt costs $0.10: $1.20 for 6 successes (base) and for 9 (new) on the common
    # tasks, 1 (C) and 2 (A, C) of them solved 4/4
    assert costs[0].split() == ["group", "$/success", "base", "new", "change", "[95%]", "$/reliable",
                                "base", "new", "change", "[95%]"]
    c = orjson.loads(run(["compare", base, new]).stdout)["cost"]

    def shown(ci):
        return [f"[{ci[0]:+.1f},", "+inf]" if ci[1] is None else f"{ci[1]:+.1f}]"]

    assert costs[1].split() == ["overall", "0.2", "0.1333", "-33.3%",
                                *shown(c["per_success_change_ci95"]), "1.2", "0.6", "-50.0%",
                                *shown(c["per_reliable_task_change_ci95"])]
    assert table[0].split()[:3] == ["group", "tasks", "pass@1(pooled)"]
    assert "pass@4" in table[0].split() and "4/4" in table[0].split()
    assert table[1].split() == ["overall", "3", "50.0", "75.0", "25.0", "14.4", "66.7", "100.0",
                                "33.3", "1", "2", "+1", "0.887"]
    assert [line.split()[0] for line in table[2:]] == ["domain=retail", "domain=travel"]
    png = tmp_path / "d.png"
    assert run(["compare", "--by", "domain", "--plot", str(png), base, new]).exit_code == 0
    assert png.read_bytes()[:4] == b"\x89PNG"
    result = run(["compare", "-", "-"])
    assert result.exit_code == 2 and "only one of BASE and NEW can be stdin" in result.stderr


def test_compare_reports_the_summary_estimand(tmp_path):
    """with unequal n, compare's base/new are summary's pooled pass@1, and it says so."""
    data = [*rows("A", [1] * 10, "r"), *rows("B", [0, 0], "r"), *rows("C", [1, 0], "r")]
    path = write(tmp_path / "u.jsonl", data)
    summary = orjson.loads(run([path]).stdout)["overall"]
    r = orjson.loads(run(["compare", path, path]).stdout)
    assert r["pass_at_1"]["statistic"] == "pooled"
    assert r["pass_at_1"]["base"] == summary["pass_at_1"] == approx(11 / 14, dtype=float)
    assert r["pass_at_1_task_mean"]["base"] == summary["pass_at_1_task_mean"] == approx(0.5, dtype=float, terms=4)
    bench = orjson.loads(run(["--estimand", "benchmark", path]).stdout)["overall"]
    assert bench["estimand"] == "benchmark"
    # as in test_estimands_...: T·(n + 6) + 3 roundings, nothing cancels
    assert bench["pass_at_1_se"] == approx(reference([10, 2, 2], [10, 0, 1], estimand="benchmark")[1],
                                           dtype=float, terms=3 * (10 + 6) + 3)
    assert orjson.loads(run(["compare", "--estimand", "benchmark", path, path]).stdout)[
        "estimand"] == "benchmark"


def test_by_never_changes_overall(tmp_path):
    """--by never changes `overall`. Its default k is the largest every policy's tasks can
    answer (A has 4 attempts of each model), so that each model's pass@k is there."""
    data = [*rows("A", [1, 0, 1, 1], "r", model="a"), *rows("A", [1, 1, 0, 0], "r", model="b", first=4),
            *rows("B", [0] * 8, "r", model="a")]
    path = write(tmp_path / "m.jsonl", data)
    plain = orjson.loads(run([path]).stdout)
    by = orjson.loads(run(["--by", "model", "--by", "domain", path]).stdout)
    cost = by["overall"].pop("cost")  # 16 positive costs summed in another order
    assert cost["total_usd"] == approx(plain["overall"].pop("cost")["total_usd"], dtype=float, terms=16)
    assert by["overall"] == plain["overall"] and list(plain["overall"]["pass_at_k"]) == ["1", "4"]
    assert by["by_model"]["b"]["pass_at_k"] == {"1": 0.5, "4": 1.0}


def test_a_tasks_group_is_a_task_property(tmp_path):
    """a task whose attempts disagree on domain is one task in one group; the first
    non-null value wins, disagreement is an input error, and --tasks decides."""
    data = [{**r, "domain": None} if r["attempt"] == 0 else r for r in rows("A", [1, 0], "retail")]
    data = [{k: v for k, v in r.items() if v is not None or k != "domain"} for r in data]
    path = write(tmp_path / "p.jsonl", [*data, *rows("B", [1, 1], "travel")])
    groups = orjson.loads(run(["--by", "domain", path]).stdout)["by_domain"]
    assert {name: g["tasks"] for name, g in groups.items()} == {"retail": 1, "travel": 1}
    bad = write(tmp_path / "c.jsonl", [*rows("A", [1], "retail"), *rows("A", [0], "travel", first=1)])
    result = run(["--by", "domain", bad])
    assert result.exit_code == 4 and result.stdout == ""
    assert result.stderr == ("evalstats: task 'A' has domain 'retail' in some attempts and "
                             "'travel' in others; a task's domain is one value: fix the attempts, "
                             "or pass --tasks FILE to take it from the task records\n")
    tasks = write(tmp_path / "t.jsonl", [{**task("A"), "domain": "bank", "tags": ["x"]}])
    joined = orjson.loads(run(["--by", "domain", "--tasks", tasks, bad]).stdout)
    assert list(joined["by_domain"]) == ["bank"] and joined["by_domain"]["bank"]["attempts"] == 2
    assert list(orjson.loads(run(["--by", "tags", "--tasks", tasks, bad]).stdout)["by_tags"]) == ["x"]


def test_by_tags_puts_a_task_in_the_group_of_each_of_its_tags(tmp_path):
    """tags is a list: one group per tag (overlapping), not one per tag set named by its repr."""
    tagged = {"A": ["address", "single-write"], "B": ["address"], "C": []}
    tasks = write(tmp_path / "t.jsonl", [{**task(t), "tags": tags} for t, tags in tagged.items()])
    attempts = write(tmp_path / "a.jsonl", [*rows("A", [1, 1], "retail"), *rows("B", [0, 0], "retail"),
                                            *rows("C", [1, 0], "retail")])
    groups = orjson.loads(run(["--by", "tags", "--tasks", tasks, attempts]).stdout)["by_tags"]
    assert {name: (g["tasks"], g["successes"]) for name, g in groups.items()} == {
        "address": (2, 2), "single-write": (1, 2), "(none)": (1, 1)}


def test_by_a_field_no_record_has_is_an_error(hand):
    """attempts carry no tags; one "(none)" group hid that."""
    result = run(["--by", "tag", hand])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == ("--by tag: no attempt record has a field 'tag'; name a field the "
                             "records carry (e.g. domain, model), or pass --tasks FILE for a task "
                             "field\n")


def test_price_without_usage_is_unpriced_not_free(tmp_path):
    """an attempt of a --price model without usage was priced at $0 and counted; then its
    success stayed in the denominator of the cost per success (0.2 where the priced attempts
    paid 0.4 for 1 success)."""
    data = [*rows("A", [1, 0], "r"), *({k: v for k, v in r.items() if k != "usage"}
                                      for r in rows("B", [1], "r"))]
    result = run(["--price", "m=1000,2000", write(tmp_path / "u.jsonl", data)])
    cost = orjson.loads(result.stdout)["overall"]["cost"]
    # 2 attempts of 3 roundings each ($0.20), summed, then one quotient
    assert cost["total_usd"] == approx(0.4, dtype=float, terms=5) and cost["priced_attempts"] == 2
    assert cost["unpriced_attempts"] == 1 and cost["per_success_usd"] == approx(0.4, dtype=float, terms=6)
    # per reliable task (B, 1/1): the priced cost scaled to the 3 recorded attempts, 0.4·3/2
    assert cost["per_reliable_task_usd"] == approx(0.6, dtype=float, terms=8)
    assert result.stderr.splitlines() == [
        ("evalstats: 1 attempt(s) of a --price model have no usage.agent token counts: they are "
         "left out of the cost (cost.unpriced_attempts)"),
        ("evalstats: only 2 of 3 attempts have a cost (cost_usd, or --price for their model); "
         "total_usd covers those, the ratios are the priced attempts' (docs/evalstats.md)")]


def test_observed_all_k_is_the_k_counted(tmp_path):
    """k was the largest n_i, though tasks were counted over their own n."""
    mixed = orjson.loads(run([write(tmp_path / "k.jsonl", [*rows("A", [1] * 4, "r"),
                                                            *rows("B", [1] * 5, "r")])]).stdout)
    obs = mixed["overall"]["observed_all"]
    assert (obs["k"], obs["k_min"], obs["k_max"], obs["count"]) == (None, 4, 5, 2)
    table = run(["--format", "table", write(tmp_path / "k.jsonl", [*rows("A", [1] * 4, "r"),
                                                                 *rows("B", [1] * 5, "r")])])
    assert "k/k" in table.stdout.splitlines()[0].split()


# --- duplicate keys ------------------------------------------------------------

DUPES = [*rows("A", [1, 0], "r"), *rows("B", [1], "r"), *rows("A", [0], "r", first=1),
         *rows("B", [None], "r")]  # A/1 twice clean (lines 2, 4); B/0 ok then a system error


def test_duplicate_keys_are_an_input_error_naming_both_lines(tmp_path):
    path = write(tmp_path / "d.jsonl", DUPES)
    result = run([path])
    assert result.exit_code == 4 and result.stdout == ""
    assert result.stderr == (f"{path}:4: duplicate attempt: task_id 'A' attempt 1 of model 'm' is "
                             f"already at {path}:2 (the same model and prompting); each (policy, "
                             "task_id, attempt) must be one clean record; remove one, or pass "
                             "--duplicates first|last to keep one\n")
    result = run(["compare", path, path])
    assert result.exit_code == 4 and f"{path}:4: duplicate attempt" in result.stderr
    with open(path) as fh:
        result = run(["-"], input=fh.read())
    assert result.exit_code == 4
    assert result.stderr.startswith("<stdin>: duplicate attempt: task_id 'A' has two clean "
                                    "records of one attempt (1 task(s) in all; read from a file")


def test_duplicates_first_and_last(tmp_path):
    path = write(tmp_path / "d.jsonl", DUPES)
    first = run(["--duplicates", "first", path])
    assert first.exit_code == 0
    assert orjson.loads(first.stdout)["overall"]["successes"] == 2  # A: 1, 0; B: 1
    assert first.stderr == ("evalstats: 1 duplicate clean record(s) of 1 (task_id, attempt) key(s) "
                            "passed over, the first kept (first: 'A' attempt 1)\n")
    last = orjson.loads(run(["--duplicates", "last", path]).stdout)["overall"]
    assert (last["successes"], last["attempts"], last["system_errors"]) == (2, 3, 1)
    swapped = write(tmp_path / "s.jsonl", [DUPES[0], DUPES[3], DUPES[1]])  # A/0: 1, A/1: 0 then 0
    assert orjson.loads(run(["--duplicates", "last", swapped]).stdout)["overall"]["successes"] == 1


def test_duplicates_across_forked_readers_and_cells():
    """What the parallel path and --by fields hide from one cell: a key in two readers' parts,
    a key whose records disagree on a --by field; and keys past the bitmask."""
    recs = [msgspec.convert(r, Attempt) for r in [*rows("A", [1, 0], "r"), *rows("B", [1], "r")]]
    tally = Tl.tally_fn([], {})
    assert tally(recs).repeated() == []
    assert Tl.merge([tally(recs[:2]), tally(recs[1:])]).repeated() == ["A"]
    by_team = Tl.tally_fn(["domain"], {})
    t = by_team([recs[0], msgspec.structs.replace(recs[0], domain="other")])
    assert len(t.cells) == 2 and t.repeated() == ["A"]
    other = msgspec.structs.replace(recs[0], model="other")  # another policy: another key
    assert tally([recs[0], other]).repeated() == []
    assert Tl.merge([tally([recs[0]]), tally([other, recs[0]])]).repeated() == ["A"]
    wide = [msgspec.structs.replace(recs[0], attempt=10**9 + i) for i in range(2)]
    assert tally(wide).repeated() == [] and tally([*wide, wide[0]]).repeated() == ["A"]
    assert Tl.merge([tally(wide[:1]), tally(wide)]).repeated() == ["A"]
    errors = [msgspec.structs.replace(recs[0], status="system_error", reward=None), recs[0]]
    assert tally(errors).repeated() == []  # a re-run system error is not a duplicate


def test_compare_warns_when_base_and_new_were_prompted_differently(tmp_path):
    from conftest import run_tool

    def attempts(path, tool_format):
        prompting = {"few_shot": True, "tool_prefill": True, "tool_format": tool_format, "interpreter": "1"}
        path.write_bytes(b"".join(orjson.dumps({"task_id": f"t{i}", "attempt": 0, "reward": i % 2,
                                                "status": "ok", "prompting": prompting}) + b"\n"
                                  for i in range(4)))
        return str(path)

    base = attempts(tmp_path / "base.jsonl", "signatures")
    alike = run_tool("evalstats", "compare", base, attempts(tmp_path / "same.jsonl", "signatures"))
    assert alike.returncode == 0 and "not prompted alike" not in alike.stderr
    mixed = run_tool("evalstats", "compare", base, attempts(tmp_path / "new.jsonl", "json"))
    assert mixed.returncode == 0, mixed.stderr
    assert 'not prompted alike (tool_format: "json" vs "signatures")' in mixed.stderr
