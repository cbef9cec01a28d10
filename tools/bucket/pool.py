"""From attempt records to difficulty records: count, assess, exclude, split. Pure functions."""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import starmap
from operator import attrgetter
from typing import Any

import orjson

from endstate.core.bands import (
    DEFAULT_KEEP,
    JEFFREYS,
    Bands,
    TaskRuns,
    assign,
    band_masses,
    posterior,
)
from endstate.core.schemas import Attempt

# Why a task is not kept, strongest first: the first that applies is the record's `reason`.
BENCHMARK_OVERLAP = "benchmark_overlap"
UNSOLVED_BY_REFERENCE = "unsolved_by_reference"
INSUFFICIENT_RUNS = "insufficient_runs"
BAND = "band"  # its band is not in --keep
KEPT = "kept"


NO_RUNS = TaskRuns()  # a task without attempts; never added to
_runs_values = attrgetter("runs", "successes", "system_errors", "domain")  # in field order


class Counts(dict[str, TaskRuns]):
    """TaskRuns by task_id."""

    def __reduce__(self):  # forked readers pickle it: as plain tuples, ~2x faster than one by one
        return _counts_from_values, (list(self), list(map(_runs_values, self.values())))


def _counts_from_values(task_ids: list[str], values: list[tuple]) -> Counts:
    return Counts(zip(task_ids, starmap(TaskRuns, values)))


def tally(records: Iterable[Attempt]) -> Counts:
    """Per task: clean runs, successes, system errors (excluded from n), domain. Hot loop."""
    counts = Counts()
    get = counts.get
    for r in records:
        c = get(r.task_id)
        if c is None:
            c = counts[r.task_id] = TaskRuns(0, 0, 0, r.domain)
        if r.status == "ok":
            c.runs += 1
            c.successes += r.reward
        else:
            c.system_errors += 1
    return counts


def merge(parts: list[Counts]) -> Counts:
    counts = parts[0]
    for part in parts[1:]:
        for task_id, d in part.items():
            c = counts.get(task_id)
            if c is None:
                counts[task_id] = d
            else:
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


def assess(
    task_ids: Iterable[str],
    counts: Counts,
    rules: Rules,
    *,
    reference: Counts | None = None,
    overlap: frozenset[str] = frozenset(),
    domains: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """One difficulty record per task id, sorted by id. A task without attempts has n = 0."""
    rows = []
    for task_id in sorted(set(task_ids)):
        c = counts.get(task_id, NO_RUNS)
        domain = c.domain if c.domain is not None else (domains or {}).get(task_id)
        rows.append((task_id, c, domain, posterior(c.runs, c.successes, rules.prior)))
    unique = sorted({ab for _, _, _, ab in rows})
    names = rules.bands.names
    verdict = {}  # (α, β) -> (masses by band name, band): tasks with the same counts share them
    for ab, mass in zip(unique, band_masses(unique, rules.bands.edges)):
        verdict[ab] = (dict(zip(names, mass)), names[assign(mass)])
    ref_min = rules.reference_min_successes
    out = []
    for task_id, c, domain, ab in rows:
        mass, band = verdict[ab]
        alpha, beta = ab
        if task_id in overlap:
            reason = BENCHMARK_OVERLAP
        elif reference is not None and reference.get(task_id, NO_RUNS).successes < ref_min:
            reason = UNSOLVED_BY_REFERENCE
        elif c.runs < rules.min_clean_runs:
            reason = INSUFFICIENT_RUNS
        elif band not in rules.keep:
            reason = BAND
        else:
            reason = KEPT
        record: dict[str, Any] = {"task_id": task_id, "domain": domain, "n": c.runs,
                                  "k": c.successes, "system_errors": c.system_errors,
                                  "alpha": alpha, "beta": beta,
                                  "mass": mass, "band": band, "keep": reason == KEPT,
                                  "reason": reason}
        if domain is None:
            del record["domain"]
        out.append(record)
    return out


def uncertain(records: Iterable[dict[str, Any]], threshold: float, rules: Rules) -> Iterator[dict]:
    """Tasks whose band is not settled: largest mass below `threshold`, or too few clean runs.
    Tasks dropped for overlap or by the reference are left out: more probes cannot change them."""
    for d in records:
        if d["reason"] in (BENCHMARK_OVERLAP, UNSOLVED_BY_REFERENCE):
            continue
        if max(d["mass"].values()) < threshold or d["n"] < rules.min_clean_runs:
            yield d


# --- benchmark exclusion ----------------------------------------------------------------------------

_SPACE = re.compile(r"\s+")


def fingerprint(task: Mapping[str, Any]) -> str:
    """Content identity of a task: domain + normalized user instruction + checks. Two tasks with
    the same fingerprint ask the same thing, whatever their ids (lowercased, whitespace collapsed;
    checks compared as canonical JSON)."""
    instruction = _SPACE.sub(" ", str(task.get("user", {}).get("instruction", ""))).strip().lower()
    checks = orjson.dumps(task.get("checks", []), option=orjson.OPT_SORT_KEYS)
    blob = b"\0".join([str(task.get("domain", "")).encode(), instruction.encode(), checks])
    return hashlib.sha256(blob).hexdigest()


def overlapping(candidates: Iterable[Mapping[str, Any]], benchmark: Iterable[Mapping[str, Any]],
                ids: Iterable[str] = ()) -> frozenset[str]:
    """Candidate ids that are benchmark tasks, by id or by fingerprint."""
    bench = list(benchmark)
    bench_ids = {t["id"] for t in bench}
    bench_prints = {fingerprint(t) for t in bench}
    hit = {i for i in ids if i in bench_ids}
    hit |= {t["id"] for t in candidates if t["id"] in bench_ids or fingerprint(t) in bench_prints}
    return frozenset(hit)


# --- holdout ------------------------------------------------------------------------------------------

def holdout_split(records: list[dict[str, Any]], fraction: float, seed: int
                  ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Split difficulty records into (train, holdout), stratified by (domain, band).

    round(fraction × total) records are held out; each stratum gets floor(fraction × size) and the
    rest go to the strata with the largest remainders (ties: stratum order). Which records is a
    shuffle of the stratum's sorted ids seeded by (seed, stratum): the same seed gives the same
    split, and adding a stratum does not reshuffle the others. Both parts stay sorted by task_id.
    """
    assert 0 < fraction < 1, fraction
    strata: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for d in records:
        strata.setdefault((d.get("domain") or "", d["band"]), []).append(d)
    keys = sorted(strata)
    quota = {key: int(fraction * len(strata[key])) for key in keys}
    spare = round(fraction * len(records)) - sum(quota.values())
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
