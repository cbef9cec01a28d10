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
# (policy key, task_id) -> the failed checks of a failed episode (sorted ids) -> episodes
Outcomes = dict[tuple[Any, str], Counter]


def failed_checks(paths: Sequence[str], skip: SkipLog | None = None,
                  workers: int | None = None) -> tuple[FailedChecks, Counter, Outcomes]:
    """From graded episodes: per (policy key, task_id) the failures of each check over its
    clean episodes, the clean episodes read (to match them), and the outcome of each failed
    episode: the set of checks that failed in it (its category: "changed without approval")."""
    def fold(episodes: Iterable[GradedEpisode]) -> tuple[FailedChecks, Counter, Outcomes]:
        failed: FailedChecks = {}
        seen: Counter = Counter()
        outcomes: Outcomes = {}
        for e in episodes:
            if e.status != "ok":
                continue
            policy = msgspec.to_builtins(e.policy)
            key = (policy_key(policy.get("model"), prompting_of(policy)), e.task_id)
            seen[key] += 1
            counts = failed.setdefault(key, Counter())
            ids = sorted({check.id for check in e.checks if check.passed is False})
            counts.update(ids)
            if e.reward == 0:
                outcomes.setdefault(key, Counter())[tuple(ids)] += 1
        return failed, seen, outcomes

    def merge(parts):
        failed, seen, outcomes = parts[0]
        for more, more_seen, more_outcomes in parts[1:]:
            for mine, theirs in ((failed, more), (outcomes, more_outcomes)):
                for key, counts in theirs.items():
                    mine.setdefault(key, Counter()).update(counts)
            seen.update(more_seen)
        return failed, seen, outcomes

    return fold_jsonl(list(paths), "graded_episode", fold, merge, skip=skip, workers=workers,
                      struct=GradedEpisode)


def task_tally(tally: Tally, domains: Mapping[str, Any] | None,
               checks: FailedChecks | None = None, top: int = 3,
               outcomes: Outcomes | None = None) -> list[dict[str, Any]]:
    """One record per (policy, task), sorted by policy label then task_id: `policy` (its label),
    `model`, `task_id`, `domain`, `n` (clean attempts), `successes`, `system_errors`,
    `failed_checks`: the `top` checks that failed most, [{id, count}] by count then id, and
    `failures`: the failed episodes by the checks that failed in each, [{checks, count}] by
    count then checks (both null without graded episodes)."""
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
        kinds = None if outcomes is None else outcomes.get((keys[pid], task_id), Counter())
        out.append({"policy": labels[pid], "model": keys[pid][0], "task_id": task_id,
                    "domain": (domains or {}).get(task_id), "n": n, "successes": successes,
                    "system_errors": system_errors, "failed_checks": failed,
                    "failures": None if kinds is None else
                    [{"checks": list(ids), "count": c}
                     for ids, c in sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0]))]})
    return sorted(out, key=lambda r: (r["policy"], r["task_id"]))


def unmatched(tally: Tally, seen: Counter) -> int:
    """Clean graded episodes whose (policy, task_id) no attempt has: they add no check."""
    keys = {pid: key for key, pid in tally.policies.items()}
    have = {(keys[cell_key[1]], cell_key[0]) for cell_key in tally.cells}
    return sum(n for key, n in seen.items() if key not in have)
