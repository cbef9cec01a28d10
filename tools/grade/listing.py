"""`grade tasks`: list and count tasks. Pure functions over task records; the CLI reads and writes.

A listing line is a compact view of one task, small enough to scan and to filter with jq:

    {"id": ..., "domain": ..., "split": ..., "tags": [...], "checks": 3,
     "check_kinds": ["absent", "said"], "gold_calls": 2, "gold_writes": 0, "max_turns": 30,
     "opening": "Can I check out Iron Night?"}
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from endstate.core.episode.plan import TaskFilter

MAX_TURNS_DEFAULT = 30  # schemas/task.schema.json: max_turns.default
NO_SPLIT = "-"  # a task without `split`, in the summary table


def matches(task: Mapping[str, Any], domains: Collection[str] = (), splits: Collection[str] = (),
            tags: Collection[str] = ()) -> bool:
    """True when the task passes every given filter (core.tasks.TaskFilter, which rollout and
    probe use for --task and --tag too)."""
    return TaskFilter(domains=tuple(domains), splits=tuple(splits), tags=tuple(tags))(task)


def listing(task: Mapping[str, Any], writing_tools: Collection[str]) -> dict[str, Any]:
    """The listing line of a task. `writing_tools`: the names of its domain's writing tools."""
    calls = [s["tool"] for s in task.get("gold", []) if "tool" in s]
    return {
        "id": task["id"],
        "domain": task["domain"],
        "split": task.get("split"),
        "tags": task.get("tags", []),
        "checks": len(task["checks"]),
        "check_kinds": sorted({c["kind"] for c in task["checks"]}),
        "gold_calls": len(calls),
        "gold_writes": sum(name in writing_tools for name in calls),
        "max_turns": task.get("max_turns", MAX_TURNS_DEFAULT),
        "opening": task["user"]["opening"],
    }


Counts = Counter[tuple[str, str]]  # (domain, split) -> number of tasks


def count(tasks: Iterable[Mapping[str, Any]]) -> Counts:
    """Tasks per (domain, split); a task without a split counts under NO_SPLIT."""
    return Counter((t["domain"], t.get("split") or NO_SPLIT) for t in tasks)


def summary_table(counts: Counts) -> str:
    """Tasks per domain (rows) × split (columns), with totals; aligned plain text."""
    domains = sorted({d for d, _ in counts})
    splits = sorted({s for _, s in counts})
    header = ["domain", *splits, "total"]
    rows = [[d, *(counts[d, s] for s in splits), sum(counts[d, s] for s in splits)] for d in domains]
    rows.append(["total", *(sum(counts[d, s] for d in domains) for s in splits), sum(counts.values())])
    return aligned([header, *([str(c) for c in row] for row in rows)])


def aligned(cells: list[list[str]], left: Collection[int] = (0,)) -> str:
    """Rows of cells as aligned plain text: the columns in `left` (names) left-aligned, the others
    (counts) right-aligned."""
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    return "".join("  ".join(c.ljust(w) if i in left else c.rjust(w)
                             for i, (c, w) in enumerate(zip(row, widths))).rstrip() + "\n"
                   for row in cells)
