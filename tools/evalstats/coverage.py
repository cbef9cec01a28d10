"""The coverage gate: does the campaign hold exactly one clean record per expected key?"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from endstate.evalstats.tally import KeyCounts

MISSING_KEY, SYSTEM_ERROR, UNEXPECTED = "missing", "system_error", "unexpected"


class Problem(NamedTuple):
    """A task × attempt key the coverage gate flags."""

    kind: str  # MISSING_KEY, SYSTEM_ERROR or UNEXPECTED
    task_id: str
    attempt: int
    records: int


def coverage(keys: KeyCounts, task_ids: Iterable[str], repeats: int) -> list[Problem]:
    """A Problem for every expected key without a clean record, then one for every recorded key
    that was not expected (its records are left out of the metrics); sorted by task and attempt.

    A system-error record is superseded by a clean record of the same key (that is how
    `probe --resume` re-runs it). Two clean records of one key never get here: the reader
    stops at them, or keeps one (--duplicates)."""
    expected = {(tid, a) for tid in task_ids for a in range(repeats)}
    records, errors = keys.records, keys.system_errors
    problems = []
    for key in sorted(expected):
        count = records.get(key, 0)
        if count - errors.get(key, 0) == 0:
            kind = SYSTEM_ERROR if errors.get(key) else MISSING_KEY
            problems.append(Problem(kind, *key, count))
    extra = sorted(set(records) - expected)
    problems += [Problem(UNEXPECTED, *key, records[key]) for key in extra]
    return problems
