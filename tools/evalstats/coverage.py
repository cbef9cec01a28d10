"""The coverage gate: does the campaign hold exactly one clean record per expected key, for
each policy it holds?"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

from endstate.evalstats.tally import KeyCounts

MISSING_KEY, SYSTEM_ERROR, UNEXPECTED = "missing", "system_error", "unexpected"


class Problem(NamedTuple):
    """A task × attempt key the coverage gate flags."""

    kind: str  # MISSING_KEY, SYSTEM_ERROR or UNEXPECTED
    task_id: str
    attempt: int
    records: int
    policy: Any = None  # core.records.keys.policy_key of the policy it concerns


def coverage(keys: KeyCounts, task_ids: Iterable[str], repeats: int) -> list[Problem]:
    """A Problem for every expected key without a clean record (per policy the records hold:
    each must cover the grid), then one for every recorded key that was not expected (its
    records are left out of the metrics); sorted by policy, task and attempt.

    A system-error record is superseded by a clean record of the same key (that is how
    `probe --resume` re-runs it). Two clean records of one key never get here: the reader
    stops at them, or keeps one (--duplicates)."""
    expected = sorted({(tid, a) for tid in task_ids for a in range(repeats)})
    records, errors = keys.records, keys.system_errors
    policies = list(dict.fromkeys(p for _, _, p in records)) or [None]
    problems = []
    for policy in policies:
        for tid, a in expected:
            key = (tid, a, policy)
            count = records.get(key, 0)
            if count - errors.get(key, 0) == 0:
                kind = SYSTEM_ERROR if errors.get(key) else MISSING_KEY
                problems.append(Problem(kind, tid, a, count, policy))
    wanted = set(expected)
    extra = [key for key in records if key[:2] not in wanted]
    problems += [Problem(UNEXPECTED, t, a, records[(t, a, p)], p)
                 for t, a, p in sorted(extra, key=lambda k: (policies.index(k[2]), k[:2]))]
    return problems
