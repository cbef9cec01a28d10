"""Jeffreys posteriors and difficulty bands: pure functions, exact (regularized incomplete beta).

A task with n clean runs and k successes has posterior Beta(k + a, n - k + b) over its success
rate (Jeffreys: a = b = 1/2). The unit interval is cut at `edges` into named bands; the mass of a
band is I_hi(α, β) - I_lo(α, β) with I the regularized incomplete beta (core.stats.special),
never a numerical integral (the Beta(½, ·) density is infinite at 0). A task goes to the band
with the most mass; masses within TIE_TOL of the largest count as tied and the tie goes to the
harder (lower) band.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from endstate.core.stats.special import betainc, betaincinv

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
    masses = []
    for a, b in params:
        cdf = [0.0, *(betainc(a, b, e) for e in edges), 1.0]  # I_0 = 0, I_1 = 1
        masses.append([min(1.0, max(0.0, hi - lo)) for lo, hi in zip(cdf, cdf[1:])])
    return masses


def credible_intervals(params: Iterable[tuple[float, float]], level: float = 0.95
                       ) -> list[tuple[float, float]]:
    """Equal-tailed credible interval of each Beta(α, β): the (1 ∓ level)/2 quantiles, exact
    (the inverse of the regularized incomplete beta)."""
    lo, hi = (1 - level) / 2, (1 + level) / 2
    return [(betaincinv(a, b, lo), betaincinv(a, b, hi)) for a, b in params]


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
