"""compare's cost: each run's cost on the common tasks, and the change of each ratio with a paired
bootstrap interval.

A ratio of two runs' ratios (USD per success, per reliable task) has no usable standard error
when its denominators are small ("−62.3%" from 1 → 2 reliable tasks): the interval is the
percentile interval of the change over resamples of the tasks (of the clusters, with --cluster),
the same resample for both runs (paired). A resample in which a run has no success (no reliable
task) gives that run no ratio: its change is −100% (BASE's missing) or unbounded (NEW's), and
where both are missing it widens both ends. An upper end that is unbounded is null.
"""

from __future__ import annotations

import math
import random
from collections.abc import Hashable, Sequence
from typing import Any

from endstate.evalstats.groups import TaskCounts
from endstate.evalstats.metrics import cost, cost_ratios

RATIOS = ("total", "per_success", "per_reliable_task")
RESAMPLES = 2000
SEED = 0  # the interval is a function of the data: the same files give the same interval


def cost_change(base: TaskCounts, new: TaskCounts, common: list[str],
                reliable: Sequence[Sequence[float]], clusters: Sequence[Hashable] | None
                ) -> dict[str, Any]:
    """`base` and `new`: each run's cost object (metrics.cost) over the common tasks, its tasks
    solved k/k counted at the common k (`reliable`: per task, as compare's observed_all); per
    ratio the % change 100·(new − base)/base and its 95% interval (`*_change_ci95`; null where
    the change is)."""
    sides = [[side[t] for t in common] for side in (base, new)]
    out: dict[str, Any] = {name: cost(dict(zip(common, tasks)), math.fsum(hits))
                           for name, tasks, hits in zip(("base", "new"), sides, reliable)}
    changes = [change(out["base"][f"{r}_usd"], out["new"][f"{r}_usd"]) for r in RATIOS]
    intervals = bootstrap(sides, reliable, clusters) if any(c is not None for c in changes) \
        else [None] * len(RATIOS)
    for name, value, interval in zip(RATIOS, changes, intervals):
        out[f"{name}_change_pct"] = value
        out[f"{name}_change_ci95"] = None if value is None else interval
    return out


def change(base: float | None, new: float | None) -> float | None:
    """100·(new − base)/base; None where either run has no ratio (or BASE's is 0)."""
    return 100 * (new - base) / base if base and new is not None else None


def _resampled_change(base: float | None, new: float | None) -> float:
    """The change in a resample, on the extended line: a run without a ratio has an infinite
    one (−100% for BASE's, +∞ for NEW's); both without: NaN (neither end holds it)."""
    if base is None:
        return math.nan if new is None else -100.0
    if new is None:
        return math.inf
    return change(base, new) if base else (0.0 if new == 0 else math.inf)


def bootstrap(sides, reliable, clusters) -> list[list[float | None]]:
    """Per ratio, the 2.5th and 97.5th percentiles of the change over RESAMPLES paired
    resamples of the units (tasks, or clusters); NaN counts as −100% for the lower end and +∞
    for the upper, +∞ as a null end."""
    columns = _unit_columns(sides, reliable, clusters)
    units = range(len(columns[0]))
    rng = random.Random(SEED)
    values: list[list[float]] = [[] for _ in RATIOS]
    for _ in range(RESAMPLES):
        pick = rng.choices(units, k=len(units))
        sums = [math.fsum(map(column.__getitem__, pick)) for column in columns]
        for j, (b, n) in enumerate(zip(cost_ratios(*sums[:5]), cost_ratios(*sums[5:]))):
            values[j].append(_resampled_change(b, n))
    lo_at, hi_at = int(0.025 * RESAMPLES), math.ceil(0.975 * RESAMPLES) - 1
    out = []
    for v in values:
        lo = sorted(-100.0 if math.isnan(x) else x for x in v)[lo_at]
        hi = sorted(math.inf if math.isnan(x) else x for x in v)[hi_at]
        out.append([lo, None if math.isinf(hi) else hi])
    return out


def _unit_columns(sides, reliable, clusters) -> list[list[float]]:
    """Per unit (task, or cluster) the sums cost_ratios takes, BASE's five then NEW's: cost,
    priced attempts, recorded attempts, priced successes, tasks solved k/k."""
    keys = list(range(len(sides[0]))) if clusters is None else list(clusters)
    index = {key: i for i, key in enumerate(dict.fromkeys(keys))}
    columns = [[0.0] * len(index) for _ in range(10)]
    for side, (tasks, hits) in enumerate(zip(sides, reliable)):
        for key, counts, hit in zip(keys, tasks, hits):
            u = index[key]
            for j, x in enumerate((counts.cost_usd, counts.priced_attempts,
                                   counts.attempts + counts.system_errors,
                                   counts.priced_successes, hit)):
                columns[5 * side + j][u] += x
    return columns
