"""Jeffreys posteriors and difficulty bands: pure functions, exact (regularized incomplete beta).

A task with n clean runs and k successes has posterior Beta(k + a, n - k + b) over its success
rate (Jeffreys: a = b = 1/2). The unit interval is cut at `edges` into named bands; the mass of a
band is I_hi(α, β) - I_lo(α, β) with I = scipy.special.betainc, never a numerical integral (the
Beta(½, ·) density is infinite at 0). A task goes to the band with the most mass; masses within
TIE_TOL of the largest count as tied and the tie goes to the harder (lower) band.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

DEFAULT_EDGES = (0.08, 0.40, 0.60, 0.90)
DEFAULT_NAMES = ("too_hard", "hard", "medium", "easy", "too_easy")
DEFAULT_KEEP = ("hard", "medium", "easy")
JEFFREYS = (0.5, 0.5)
TIE_TOL = 1e-12  # masses this close are an exact tie up to rounding in betainc


@dataclass(frozen=True)
class Bands:
    """Cut points strictly inside (0, 1), increasing, and one name per band (len(edges) + 1)."""

    edges: tuple[float, ...] = DEFAULT_EDGES
    names: tuple[str, ...] = DEFAULT_NAMES

    def __post_init__(self) -> None:
        if not self.edges:
            raise ValueError("give at least one edge, e.g. 0.08,0.40,0.60,0.90")
        if not all(0 < e < 1 for e in self.edges):
            raise ValueError("edges must lie strictly between 0 and 1")
        if any(a >= b for a, b in zip(self.edges, self.edges[1:])):
            raise ValueError("edges must increase strictly")
        if len(self.names) != len(self.edges) + 1:
            raise ValueError(
                f"{len(self.edges)} edges make {len(self.edges) + 1} bands but "
                f"{len(self.names)} names were given; name them with --bands")
        if len(set(self.names)) != len(self.names):
            raise ValueError("band names must be distinct")


def posterior(n: int, k: int, prior: tuple[float, float] = JEFFREYS) -> tuple[float, float]:
    """(α, β) of the Beta posterior after k successes in n clean runs."""
    assert 0 <= k <= n, (n, k)
    a, b = prior
    return k + a, n - k + b


def band_masses(params: Iterable[tuple[float, float]], edges: Sequence[float]) -> list[list[float]]:
    """Posterior mass per band for each (α, β): rows sum to 1 (up to rounding)."""
    import numpy as np
    from scipy.special import betainc

    params = list(params)
    if not params:
        return []
    ab = np.asarray(params, dtype=float)  # (P, 2)
    cdf = betainc(ab[:, :1], ab[:, 1:], np.asarray(edges, dtype=float)[None, :])  # (P, E)
    ones = np.ones((len(params), 1))
    cdf = np.hstack([0 * ones, cdf, ones])  # (P, E + 2): I_0 = 0, I_1 = 1
    return np.clip(np.diff(cdf, axis=1), 0.0, 1.0).tolist()  # (P, E + 1)


def credible_intervals(params: Iterable[tuple[float, float]], level: float = 0.95
                       ) -> list[tuple[float, float]]:
    """Equal-tailed credible interval of each Beta(α, β): the (1 ∓ level)/2 quantiles, exact
    (scipy.special.betaincinv, the inverse of the regularized incomplete beta)."""
    import numpy as np
    from scipy.special import betaincinv

    params = list(params)
    if not params:
        return []
    ab = np.asarray(params, dtype=float)  # (P, 2)
    tails = np.array([(1 - level) / 2, (1 + level) / 2])[None, :]  # (1, 2)
    return [tuple(row) for row in betaincinv(ab[:, :1], ab[:, 1:], tails).tolist()]  # (P, 2)


def assign(masses: Sequence[float]) -> int:
    """Index of the band with the largest mass; ties (within TIE_TOL) go to the harder band."""
    best = max(masses)
    return next(i for i, m in enumerate(masses) if m >= best - TIE_TOL)


@dataclass(slots=True)
class TaskRuns:
    """One task's attempts, added up as they are read (mutable: the hot loop)."""

    runs: int = 0  # clean runs: n of the posterior
    successes: int = 0  # k of the posterior
    system_errors: int = 0  # not runs: excluded from n
    domain: str | None = None
    seen: int = 0  # bitmask of the clean attempt numbers read (core.attempt_keys)
