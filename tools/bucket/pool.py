"""From attempt records to difficulty records: count, assess, exclude, split. Pure functions."""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from itertools import starmap
from operator import attrgetter
from typing import Any

from endstate.core.episode.leak import fingerprint, overlapping  # noqa: F401 - bucket's own API too
from endstate.core.records.keys import WIDE, repeated_tasks
from endstate.core.records.structs import Attempt
from endstate.core.stats.bands import (
    DEFAULT_KEEP,
    JEFFREYS,
    Bands,
    TaskRuns,
    assign,
    band_masses,
    credible_intervals,
    posterior,
)

# Why a task is not kept, strongest first: the first that applies is the record's `reason`.
BENCHMARK_OVERLAP = "benchmark_overlap"
UNSOLVED_BY_REFERENCE = "unsolved_by_reference"
INSUFFICIENT_RUNS = "insufficient_runs"
BAND = "band"  # its band is not in --keep
KEPT = "kept"


UNPROBED = "unprobed"  # the band of a task without clean runs: its posterior is the prior

NO_RUNS = TaskRuns()  # a task without attempts; never added to
_runs_values = attrgetter("runs", "successes", "system_errors", "domain", "seen")  # field order


class Counts(dict[str, TaskRuns]):
    """TaskRuns by task_id, and the clean (task_id, attempt) keys with attempt numbers too wide
    for the TaskRuns bitmask (`wide`)."""

    def __init__(self, *args, wide=None):
        super().__init__(*args)
        self.wide: list[tuple[str, int]] = wide if wide is not None else []

    def __reduce__(self):  # forked readers pickle it: as plain tuples, ~2x faster than one by one
        return _counts_from_values, (list(self), list(map(_runs_values, self.values())), self.wide)

    def repeated(self) -> list[str]:
        """Tasks with two clean records of one attempt (core.attempt_keys)."""
        return repeated_tasks(((t, c.seen, c.runs) for t, c in self.items()), self.wide)


def _counts_from_values(task_ids, values, wide) -> Counts:
    return Counts(zip(task_ids, starmap(TaskRuns, values)), wide=wide)


def tally(records: Iterable[Attempt]) -> Counts:
    """Per task: clean runs, successes, system errors (excluded from n), domain, and the bitmask
    of clean attempt numbers that finds duplicate keys (core.attempt_keys). Hot loop."""
    counts = Counts()
    get, wide = counts.get, counts.wide
    for r in records:
        c = get(r.task_id)
        if c is None:
            c = counts[r.task_id] = TaskRuns(0, 0, 0, r.domain)
        if r.status == "ok":
            c.runs += 1
            c.successes += r.reward
            if (a := r.attempt) < WIDE:
                c.seen |= 1 << a
            else:
                wide.append((r.task_id, a))
        else:
            c.system_errors += 1
    return counts


def merge(parts: list[Counts]) -> Counts:
    counts = parts[0]
    for part in parts[1:]:
        counts.wide += part.wide
        for task_id, d in part.items():
            c = counts.get(task_id)
            if c is None:
                counts[task_id] = d
                continue
            c.seen |= d.seen
            c.runs += d.runs
            c.successes += d.successes
            c.system_errors += d.system_errors
            if c.domain is None:
                c.domain = d.domain
    return counts


@dataclass(frozen=True)
class Rules:
    bands: Bands = field(default_factory=Bands)
    keep: frozenset[str] = frozenset(DEFAULT_KEEP)
    prior: tuple[float, float] = JEFFREYS
    min_clean_runs: int = 4
    reference_min_successes: int = 1
    keep_if: float | None = None  # keep when P(kept bands) >= this, instead of the argmax band


def assess(
    task_ids: Iterable[str],
    counts: Counts,
    rules: Rules,
    *,
    reference: Counts | None = None,
    overlap: frozenset[str] = frozenset(),
    domains: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """One difficulty record per task id, sorted by id. A task without attempts has n = 0 and
    is `unprobed`. The domain is the task record's (`domains`, from --tasks) when given, else
    the attempts'."""
    rows = []
    for task_id in sorted(set(task_ids)):
        c = counts.get(task_id, NO_RUNS)
        domain = (domains or {}).get(task_id) or c.domain
        rows.append((task_id, c, domain, posterior(c.runs, c.successes, rules.prior)))
    verdict = _verdicts(sorted({ab for _, _, _, ab in rows}), rules)
    out = []
    for task_id, c, domain, ab in rows:
        mass, band, p_keep, credible = verdict[ab]
        band = band if c.runs > 0 else UNPROBED
        reason = _reason(task_id, c, band, p_keep, rules, reference, overlap)
        record: dict[str, Any] = {"task_id": task_id, "domain": domain, "n": c.runs,
                                  "k": c.successes, "system_errors": c.system_errors,
                                  "alpha": ab[0], "beta": ab[1], "mass": mass, "band": band,
                                  "p_keep": p_keep, "credible95": list(credible),
                                  "keep": reason == KEPT, "reason": reason}
        if domain is None:
            del record["domain"]
        out.append(record)
    return out


def _verdicts(params: list[tuple[float, float]], rules: Rules) -> dict[tuple[float, float], tuple]:
    """(α, β) -> (masses by band name, argmax band, P(kept bands), 95% credible interval): tasks
    with the same counts share them."""
    names = rules.bands.names
    masses = band_masses(params, rules.bands.edges)
    verdict = {}
    for ab, mass, credible in zip(params, masses, credible_intervals(params)):
        p_keep = min(1.0, math.fsum(m for name, m in zip(names, mass) if name in rules.keep))
        verdict[ab] = (dict(zip(names, mass)), names[assign(mass)], p_keep, credible)
    return verdict


def _reason(task_id: str, c: TaskRuns, band: str, p_keep: float, rules: Rules,
            reference: Counts | None, overlap: frozenset[str]) -> str:
    """The first reason that applies, strongest first (see the module's constants)."""
    if task_id in overlap:
        return BENCHMARK_OVERLAP
    if reference is not None and reference.get(task_id, NO_RUNS).successes < rules.reference_min_successes:
        return UNSOLVED_BY_REFERENCE
    if c.runs < max(rules.min_clean_runs, 1):  # no clean run: nothing is known, never kept
        return INSUFFICIENT_RUNS
    kept = band in rules.keep if rules.keep_if is None else p_keep >= rules.keep_if
    return KEPT if kept else BAND


def open_range(threshold: float, keep_if: float | None) -> tuple[float, float]:
    """(lo, hi): a decision is open while lo < P(kept bands) < hi. A decision is settled when it
    is right with probability >= `threshold`: a kept task when P(kept) >= threshold, a dropped
    one when P(kept) <= 1 - threshold. With --keep-if Q the cut between them is Q, so the open
    range is (min(1 - P, Q), max(P, Q)): a task --keep-if drops at p_keep 0.87 with P = 0.8 is
    wrong with probability 0.87, and stays open."""
    if keep_if is None:
        return 1 - threshold, threshold
    return min(1 - threshold, keep_if), max(threshold, keep_if)


def uncertain(records: Iterable[dict[str, Any]], threshold: float, rules: Rules) -> Iterator[dict]:
    """Tasks whose keep/drop decision is not settled at `threshold` (> 1/2): P(kept bands)
    inside open_range (1 - threshold to threshold, widened to --keep-if's Q), or fewer clean
    runs than the rules need (the unprobed among them). Tasks dropped for overlap or by the
    reference are left out: more probes cannot change them."""
    lo, hi = open_range(threshold, rules.keep_if)
    for d in records:
        if d["reason"] in (BENCHMARK_OVERLAP, UNSOLVED_BY_REFERENCE):
            continue
        if lo < d["p_keep"] < hi or d["n"] < max(rules.min_clean_runs, 1):
            yield d


# --- holdout ------------------------------------------------------------------------------------------

def held_out_count(fraction: float, total: int) -> int:
    """⌊fraction × total + ½⌋, in exact decimal arithmetic (0.1 × 25 is 2.5, rounded up to 3)."""
    exact = Fraction(str(fraction)) * total
    return int(exact + Fraction(1, 2))


def holdout_split(records: list[dict[str, Any]], fraction: float, seed: int
                  ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Split difficulty records into (train, holdout), stratified by (domain, band).

    ⌊fraction × total + ½⌋ records are held out (half rounds up: 0.5 of 5 holds out 3); each
    stratum gets ⌊fraction × size⌋ and the rest go to the strata with the largest remainders
    (ties: stratum order). Which records is a
    shuffle of the stratum's sorted ids seeded by (seed, stratum): the same seed gives the same
    split, and adding a stratum does not reshuffle the others. Both parts stay sorted by task_id.
    """
    assert 0 < fraction < 1, fraction
    strata: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for d in records:
        strata.setdefault((d.get("domain") or "", d["band"]), []).append(d)
    keys = sorted(strata)
    quota = {key: int(fraction * len(strata[key])) for key in keys}
    spare = held_out_count(fraction, len(records)) - sum(quota.values())
    by_remainder = sorted(keys, key=lambda key: -(fraction * len(strata[key]) - quota[key]))
    for key in by_remainder[:max(spare, 0)]:
        quota[key] += 1
    held: set[str] = set()
    for key in keys:
        ids = sorted(d["task_id"] for d in strata[key])
        random.Random(f"{seed}:{key[0]}:{key[1]}").shuffle(ids)
        held.update(ids[:quota[key]])
    train = [d for d in records if d["task_id"] not in held]
    hold = [d for d in records if d["task_id"] in held]
    return train, hold
