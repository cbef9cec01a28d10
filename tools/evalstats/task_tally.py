"""The per-task tally: per (policy, task), successes out of the clean attempts ("changed the
booking in 15 of 20"), and, from graded episodes when given, the checks that failed most.

Attempt records carry the reward, not the checks: the checks come from the graded episodes
(`probe --episodes`, or `rollout | grade`), matched to the attempts by (policy, task_id). Without
them `failed_checks` is null, never an empty list.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import msgspec

from endstate.core.records.episode import prompting_of
from endstate.core.records.jsonl import SkipLog, fold_jsonl
from endstate.core.records.keys import policy_key
from endstate.core.records.structs import GradedEpisode
from endstate.evalstats.groups import policy_labels
from endstate.evalstats.tally import Tally

FailedChecks = dict[tuple[Any, str], Counter]  # (policy key, task_id) -> check id -> failures


def failed_checks(paths: Sequence[str], skip: SkipLog | None = None,
                  workers: int | None = None) -> tuple[FailedChecks, Counter]:
    """From graded episodes: per (policy key, task_id) the failures of each check over its
    clean episodes, and per (policy key, task_id) the clean episodes read (to match them)."""
    def fold(episodes: Iterable[GradedEpisode]) -> tuple[FailedChecks, Counter]:
        failed: FailedChecks = {}
        seen: Counter = Counter()
        for e in episodes:
            if e.status != "ok":
                continue
            policy = msgspec.to_builtins(e.policy)
            key = (policy_key(policy.get("model"), prompting_of(policy)), e.task_id)
            seen[key] += 1
            counts = failed.setdefault(key, Counter())
            for check in e.checks:
                if check.passed is False:
                    counts[check.id] += 1
        return failed, seen

    def merge(parts):
        failed, seen = parts[0]
        for more, more_seen in parts[1:]:
            for key, counts in more.items():
                failed.setdefault(key, Counter()).update(counts)
            seen.update(more_seen)
        return failed, seen

    return fold_jsonl(list(paths), "graded_episode", fold, merge, skip=skip, workers=workers,
                      struct=GradedEpisode)


def task_tally(tally: Tally, domains: Mapping[str, Any] | None,
               checks: FailedChecks | None = None, top: int = 3) -> list[dict[str, Any]]:
    """One record per (policy, task), sorted by policy label then task_id: `policy` (its label),
    `model`, `task_id`, `domain`, `n` (clean attempts), `successes`, `system_errors`, and
    `failed_checks`: the `top` checks that failed most, [{id, count}] by count then id (null
    without graded episodes)."""
    labels = policy_labels(tally)
    keys = {pid: key for key, pid in tally.policies.items()}
    counts: dict[tuple[int, str], list[int]] = {}
    for key, cell in tally.cells.items():
        mine = counts.setdefault((key[1], key[0]), [0, 0, 0])
        mine[0] += cell.attempts
        mine[1] += cell.successes
        mine[2] += cell.system_errors
    out = []
    for (pid, task_id), (n, successes, system_errors) in counts.items():
        failed = None
        if checks is not None:
            found = checks.get((keys[pid], task_id), Counter())
            failed = [{"id": i, "count": c}
                      for i, c in sorted(found.items(), key=lambda kv: (-kv[1], kv[0]))[:top]]
        out.append({"policy": labels[pid], "model": keys[pid][0], "task_id": task_id,
                    "domain": (domains or {}).get(task_id), "n": n, "successes": successes,
                    "system_errors": system_errors, "failed_checks": failed})
    return sorted(out, key=lambda r: (r["policy"], r["task_id"]))


def unmatched(tally: Tally, seen: Counter) -> int:
    """Clean graded episodes whose (policy, task_id) no attempt has: they add no check."""
    keys = {pid: key for key, pid in tally.policies.items()}
    have = {(keys[cell_key[1]], cell_key[0]) for cell_key in tally.cells}
    return sum(n for key, n in seen.items() if key not in have)
