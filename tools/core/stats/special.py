"""The regularized incomplete beta function, its inverse, and Student's t, in plain Python.

bucket and evalstats install light and start in a tenth of a second; scipy.special alone takes a
quarter of a second to import, more than reading a 100,000-line file. These few functions are all
the intervals and the difficulty bands need: bands call them once per distinct (n, k), ~0.3 ms
each. tests/test_evalstats.py checks each against scipy.special (betainc, betaincinv, stdtr,
stdtrit) over a grid, to 1e-12 for moderate parameters.
"""

from __future__ import annotations

import math
from statistics import NormalDist

_TINY = 1e-300
_EPS = 1e-15


def _continued_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of I_x(a, b) (modified Lentz; Numerical Recipes 6.4), which
    converges fast for x < (a + 1)/(a + b + 2)."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, 100_000):
        m2 = 2 * m
        for numerator in (m * (b - m) * x / ((qam + m2) * (a + m2)),
                          -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + numerator / c
            c = c if abs(c) > _TINY else _TINY
            h *= d * c
        if abs(d * c - 1.0) < _EPS:
            return h
    raise ArithmeticError(f"incomplete beta did not converge (a={a}, b={b}, x={x})")


def betainc(a: float, b: float, x: float) -> float:
    """I_x(a, b): the Beta(a, b) CDF at x, for a, b > 0."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                 + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _continued_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _continued_fraction(b, a, 1.0 - x) / b


def betaincinv(a: float, b: float, p: float) -> float:
    """The x with I_x(a, b) = p: the Beta(a, b) quantile. Newton steps on the CDF (its
    derivative is the density), kept inside a shrinking bracket: a bisection step wherever
    Newton would leave it."""
    if p <= 0.0:
        return 0.0
    if p >= 1.0:
        return 1.0
    log_norm = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    lo, hi = 0.0, 1.0
    x = _start(a, b, p)
    for _ in range(2000):
        f = betainc(a, b, x) - p
        if f == 0.0:
            return x
        lo, hi = (x, hi) if f < 0 else (lo, x)
        log_density = log_norm + (a - 1) * math.log(x) + (b - 1) * math.log1p(-x)
        step = x - f / math.exp(log_density) if -700 < log_density < 700 else -1.0  # -1: bisect
        nxt = step if lo < step < hi else 0.5 * (lo + hi)
        if abs(nxt - x) <= 2e-16 * x or hi - lo <= 2e-16 * hi or not 0.0 < nxt < 1.0:
            return nxt  # converged, or beyond what a float holds
        x = nxt
    return x


def _start(a: float, b: float, p: float) -> float:
    """Newton's first point: the normal approximation's quantile when it falls inside (0, 1)
    (close for large a and b, where each incomplete beta costs most), else the mean."""
    mean, n = a / (a + b), a + b
    x = mean + NormalDist().inv_cdf(p) * math.sqrt(mean * (1.0 - mean) / (n + 1.0))
    return x if 0.0 < x < 1.0 else mean


def t_cdf(x: float, df: float) -> float:
    """P(T <= x) for Student's t with `df` degrees of freedom (df = inf: the normal)."""
    if math.isinf(df):
        return 0.5 * math.erfc(-x / math.sqrt(2.0))
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + x * x))
    return 1.0 - tail if x > 0 else tail


def t_ppf(p: float, df: float) -> float:
    """The p-quantile of Student's t (0 < p < 1), from the inverse incomplete beta."""
    if p == 0.5:
        return 0.0
    if math.isinf(df):
        lo, hi = -40.0, 40.0
        while hi - lo > 1e-15 * max(1.0, abs(hi)):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if t_cdf(mid, df) < p else (lo, mid)
        return 0.5 * (lo + hi)
    tail = min(p, 1.0 - p)
    y = betaincinv(df / 2.0, 0.5, 2.0 * tail)  # = df / (df + x²)
    x = math.sqrt(df * (1.0 - y) / y)
    return x if p > 0.5 else -x
