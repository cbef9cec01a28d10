"""The per-task statistics evalstats reports at each k, declared once: the metrics object, summary's
table, compare's object and table, the cross table and the figures walk STATISTICS in its order.
A new statistic is one `STATISTICS.register(NAME)(Statistic(...))` plus its estimator; an
installed package adds one through the `endstate.statistics` entry-point group (core.registry).

pass@1 (pooled and task mean) and observed k/k are not here: each has an estimand of its own
(estimands.py), not a per-task value averaged at each k."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache

import msgspec

from endstate.core.registry import Registry, instance_of
from endstate.evalstats import estimators as E


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


class Statistic(msgspec.Struct, frozen=True):
    """A per-task value in [0, 1] at k, averaged over the tasks (with a population interval over
    them); its registered name is its key in the metrics and compare objects."""

    symbol: str  # its label without k: "pass@" labels pass@5
    estimator: Callable[[int, int, int], float]  # (n clean attempts, c successes, k) -> value
    # the mean over tasks of d value / d logit(p) (estimators.logit_slope), (ns, cs, k, mult):
    # how --cluster carries pass@1's cluster effect to this statistic (estimands.ClusterShare)
    slope: Callable[[Sequence[int], Sequence[int], int, Sequence[int] | None], float]
    task_mean_at_1: bool = False  # at k = 1 it is pass@1's task mean (and takes its interval)
    headline: bool = False  # also in the compact views: compare, the cross table, its figures
    format: Callable[[float | None], str] = pct  # a value as a table cell
    unit: str = "%"  # after the label in a column head: the unit `format` writes

    def label(self, k: int | str) -> str:
        return f"{self.symbol}{k}"


STATISTICS: Registry[Statistic] = Registry("statistic", accept=instance_of(Statistic))


def logit_slope(kind: str):
    """Statistic.slope of pass@k ("at") or pass^k ("hat")."""
    def slope(ns: Sequence[int], cs: Sequence[int], k: int, mult: Sequence[int] | None = None
              ) -> float:
        return E.logit_slope(ns, cs, kind, k, mult)
    return slope


STATISTICS.register("pass_at_k", origin="endstate.evalstats.statistics")(
    Statistic("pass@", E.pass_at_k, logit_slope("at"), task_mean_at_1=True, headline=True))
STATISTICS.register("pass_hat_k", origin="endstate.evalstats.statistics")(
    Statistic("pass^", E.pass_hat_k, logit_slope("hat"), task_mean_at_1=True))


@cache
def estimate(estimator: Callable[[int, int, int], float], n: int, c: int, k: int) -> float:
    """One task's value (remembered: a study has few distinct (n, c, k))."""
    return estimator(n, c, k)


def headline() -> list[tuple[str, Statistic]]:
    return [(name, stat) for name, stat in STATISTICS.items() if stat.headline]
