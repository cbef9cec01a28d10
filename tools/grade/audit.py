"""`grade audit`: the successes that got there another way.

A reward of 1 says every check passed, not that the episode did what the task's gold calls do.
For each graded episode with reward 1, the audit compares the end state the episode left with the
one gold leaves (both seed + the task's init + a diff; gold replayed as `gold_state` replays it)
and lists the rows where they differ, by kind:

- `extra`: the episode changed a row that gold leaves alone (a side effect no check notices);
- `different`: both changed the row, to different values (the checks passed on other values);
- `missing`: gold changes the row, the episode left it alone (no check pins it).

"Differ" is `gold_state`'s comparison (checks.terminal) with nothing ignored. Each flagged episode
also says which of the task's checks read the differing tables, and what the ones with
`ignore_columns` ignored there: those passed on a state gold does not leave.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from endstate.core.env.changes import Changes, key_text
from endstate.core.env.domain import Table
from endstate.core.env.sandbox import Sandbox
from endstate.core.errors import ConfigurationError, EndstateError
from endstate.core.grading.checks import ignored, terminal
from endstate.core.grading.grader import Grader, TaskIndex, check_id, check_recorded_on, guarded
from endstate.core.records.jsonl import Loc, SkipLog, fail
from endstate.grade.listing import aligned

KINDS = ("extra", "different", "missing")
WHOLE_STATE = ("only_changes", "gold_state", "footprint")  # check kinds that read every changed row
TRANSCRIPT = ("said", "judge")  # check kinds that read no table
Where = tuple[str, str]  # (table, key_text): how checks.terminal names a row
UNCHANGED = ("unchanged", None)


def differing_rows(tables: dict[str, Table], mine: Changes, gold: Changes) -> list[dict[str, Any]]:
    """The rows whose end state after `mine` differs from the one after `gold` (two diffs of the
    same start state), with each side's values of every column that differs."""
    mine_ends, gold_ends = terminal(mine), terminal(gold)
    mine_at, gold_at = _entries(mine), _entries(gold)
    rows = []
    for where in sorted(mine_ends.keys() | gold_ends.keys()):
        if mine_ends.get(where) == gold_ends.get(where):
            continue
        kind = "extra" if where not in gold_ends else "missing" if where not in mine_ends else "different"
        rows.append(_row(tables[where[0]], kind, mine_at.get(where, UNCHANGED),
                         gold_at.get(where, UNCHANGED)))
    return rows


def _entries(changes: Changes) -> dict[Where, tuple[str, dict[str, Any]]]:
    """(change, diff entry) of each row `changes` touches."""
    return {(table, key_text(e["key"])): (change, e)
            for table, entry in changes.items() for change, es in entry.items() for e in es}


def _row(t: Table, kind: str, mine: tuple[str, dict | None], gold: tuple[str, dict | None]
         ) -> dict[str, Any]:
    # The row's start values are what the diffs recorded of it (an update's `before`, a deleted
    # row); every column either side changed is among them, and the rest both sides share.
    start = {**_start(*mine), **_start(*gold)}
    ends = {"gold": _end(*gold, start), "episode": _end(*mine, start)}
    return {"kind": kind, "table": t.name, "key": (mine[1] or gold[1])["key"],
            "gold": gold[0], "episode": mine[0],
            "columns": {c: {side: end.get(c) for side, end in ends.items()} for c in t.columns
                        if ends["gold"].get(c) != ends["episode"].get(c)}}


def _start(change: str, entry: dict[str, Any] | None) -> dict[str, Any]:
    return entry["before"] if change == "updated" else entry["row"] if change == "deleted" else {}


def _end(change: str, entry: dict[str, Any] | None, start: dict[str, Any]) -> dict[str, Any]:
    """The row's values in one side's end state; none where the row is absent there."""
    if change == "inserted":
        return entry["row"]
    if change == "deleted":
        return {}
    return {**start, **entry["after"]} if change == "updated" else start


def check_views(task: dict[str, Any], graded: dict[str, Any], rows: list[dict[str, Any]]
                ) -> list[dict[str, Any]]:
    """Each of the task's checks as the audit sees it: its detail when it passed, the differing
    tables it reads (`sees`; null where the record cannot tell: sql, python), and, for a check
    with ignore_columns, the differing columns it ignores (`ignores`, as table.column)."""
    details = {c["id"]: c["detail"] for c in graded["checks"]}
    tables = sorted({r["table"] for r in rows})
    columns = sorted({(r["table"], c) for r in rows for c in r["columns"]})
    views = []
    for i, check in enumerate(guarded(task)):
        view = {"id": check_id(check, i), "kind": check["kind"],
                "detail": details.get(check_id(check, i)), "sees": _sees(check, tables)}
        if "ignore_columns" in check:
            ignore = ignored(check)
            view["ignores"] = [f"{t}.{c}" for t, c in columns if ignore(t, c)]
        views.append(view)
    return views


def _sees(check: dict[str, Any], tables: list[str]) -> list[str] | None:
    if "table" in check:
        return [t for t in tables if t == check["table"]]
    if check["kind"] in WHOLE_STATE:
        return tables
    return [] if check["kind"] in TRANSCRIPT else None


def audit_record(task: dict[str, Any], graded: dict[str, Any], rows: list[dict[str, Any]]
                 ) -> dict[str, Any]:
    """The audit record of one flagged episode (schemas/audit.schema.json)."""
    return {"episode_id": graded["episode_id"], "task_id": graded["task_id"],
            "domain": graded["domain"], "attempt": graded.get("attempt"),
            "kinds": [k for k in KINDS if any(r["kind"] == k for r in rows)],
            "rows": rows, "checks": check_views(task, graded, rows)}


@dataclass
class TaskTally:
    audited: int = 0
    flagged: int = 0
    kinds: Counter[str] = field(default_factory=Counter)  # flagged episodes with a row of the kind
    checks: Counter[str] = field(default_factory=Counter)  # flagged episodes a check saw differ in


@dataclass
class Tally:
    """What an audit found, per task, and what it passed over."""

    tasks: dict[str, TaskTally] = field(default_factory=dict)
    skipped: Counter[str] = field(default_factory=Counter)  # "reward 0", "system_error"

    def add(self, task_id: str, record: dict[str, Any] | None) -> None:
        t = self.tasks.setdefault(task_id, TaskTally())
        t.audited += 1
        if record is not None:
            t.flagged += 1
            t.kinds.update(record["kinds"])
            t.checks.update(c["id"] for c in record["checks"] if c["sees"])

    def total_line(self) -> str:
        audited = sum(t.audited for t in self.tasks.values())
        flagged = sum(t.flagged for t in self.tasks.values())
        kinds = _counts(sum((t.kinds for t in self.tasks.values()), Counter()), KINDS)
        skipped = ", ".join(f"{what} ×{n}" for what, n in sorted(self.skipped.items())) or "none"
        return (f"audited {audited} success(es) of {len(self.tasks)} task(s): {flagged} got there "
                f"another way{f' ({kinds})' if kinds else ''}; skipped {skipped}")

    def task_lines(self) -> str:
        """Per task: how many were audited and flagged, by kind, and the checks that passed while
        reading a differing table."""
        lines = []
        for task_id, t in sorted(self.tasks.items()):
            line = f"  {task_id}: {t.audited} audited, {t.flagged} another way"
            if t.flagged:
                line += f" ({_counts(t.kinds, KINDS)})"
            if t.checks:
                line += f"; passed reading the differing tables: {_counts(t.checks)}"
            lines.append(line + "\n")
        return "".join(lines)

    def table(self) -> str:
        """The per-task table of `--summary`, with totals."""
        header = ["task", "audited", "another way", *KINDS, "checks that read the differences"]
        rows = [[task_id, t.audited, t.flagged, *(t.kinds[k] for k in KINDS), _counts(t.checks)]
                for task_id, t in sorted(self.tasks.items())]
        counts = range(1, len(header) - 1)
        rows.append(["total", *(sum(r[i] for r in rows) for i in counts), ""])
        return aligned([header, *([str(c) for c in row] for row in rows)], left=(0, len(header) - 1))


def _counts(counter: Counter[str], order: Iterable[str] | None = None) -> str:
    """`name ×n, ...`, in `order` (default: by name)."""
    return ", ".join(f"{name} ×{counter[name]}" for name in (order or sorted(counter)) if counter[name])


def one_per_episode(records: Iterable[tuple[Loc, dict[str, Any]]], mode: str, tally: Tally,
                    skip: SkipLog | None) -> Iterator[tuple[Loc, dict[str, Any]]]:
    """The records with one per episode_id (a file given twice, or graded twice and concatenated,
    would count every episode twice): a repeat is a bad line naming both (`error`), or passed
    over and counted as `duplicate` in `tally`, the first or the last read kept (`mode`)."""
    if mode == "last":  # held to the end: the last read of each is the one audited
        held: dict[str, tuple[Loc, dict[str, Any]]] = {}
        for loc, graded in records:
            if held.pop(graded["episode_id"], None) is not None:
                tally.skipped["duplicate"] += 1
            held[graded["episode_id"]] = (loc, graded)
        yield from held.values()
        return
    seen: dict[str, Loc] = {}
    for loc, graded in records:
        first = seen.get(graded["episode_id"])
        if first is None:
            seen[graded["episode_id"]] = loc
            yield loc, graded
        elif mode == "first":
            tally.skipped["duplicate"] += 1
        else:
            fail(loc, f"duplicate graded episode: episode_id {graded['episode_id']!r} is already at "
                      f"{first}; each episode is audited once: remove one, or pass --duplicates "
                      "first|last to keep one", skip)


def audited(records: Iterable[tuple[Loc, dict[str, Any]]], tasks: TaskIndex, grader: Grader,
            tally: Tally, skip: SkipLog | None, duplicates: str = "error") -> Iterator[dict[str, Any]]:
    """The audit record of each graded episode with reward 1 that got there another way; every
    success audited and every other episode passed over (a duplicate too) is counted in `tally`."""
    for loc, graded in one_per_episode(records, duplicates, tally, skip):
        if graded["reward"] != 1:
            tally.skipped["system_error" if graded["reward"] is None else "reward 0"] += 1
            continue
        task = tasks.get(graded["task_id"])
        if task is None:
            fail(loc, tasks.unknown(graded["task_id"]), skip)
            continue
        try:
            domain = grader.domains[task["domain"]]
            check_recorded_on(domain, graded, task)
            with Sandbox(domain, task.get("init")) as sandbox:  # as grade does: every `before` holds
                sandbox.apply_changes(graded["changes"])
            rows = differing_rows(domain.tables, graded["changes"], grader.gold_changes(task))
        except ConfigurationError:
            raise
        except EndstateError as e:
            fail(loc, e.message, skip)
            continue
        record = audit_record(task, graded, rows) if rows else None
        tally.add(task["id"], record)
        if record is not None:
            yield record
