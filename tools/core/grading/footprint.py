"""The unrequested-change guard, part of every task's reward.

Checks say what a task is about; an optimizer learns whatever they let through. Row checks pin the
columns a task names and `only_changes` allows whole rows, so "do the task, then change another
column of the same row" (a booking's dates after its downgrade, a ticket's agent after it is
closed) used to score 1. The guard holds the episode's diff to the footprint of the task's gold
calls, column by column:

- a row the episode updated must be one the gold updates, and only in columns the gold changes;
- a row it deleted, one the gold deletes;
- into a table, no more rows inserted than the gold inserts (new rows' ids may differ; what
  they hold is the other checks' to say).

What the gold changes, and to what, stays the other checks' business: the guard only fails what
the gold leaves alone. The domain (`FREE` in its tools.py) and the check (`free`) name what is
free: a column (`updated_at`, any table), a table's column (`tickets.note`) or a whole table (a
log). A task whose correct answers reach different footprints (a refund to the card or to store
credit) lists each other correct way as gold calls in the check's `alternatives`; the episode
must fit one of them whole.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from endstate.core.env.changes import Changes, key_text
from endstate.core.env.nested import ABSENT

Free = Callable[[str, str | None], bool]  # (table, column or None for the whole table) -> free?


def free_of(names: Iterable[str]) -> Free:
    """`column`, `table.column` or `table` (the whole table: its name alone, when it is a table
    of the domain's; the caller checks the names) as a predicate. An imported document's `_absent`
    column is always free: it only follows a field that comes or goes, which is itself checked."""
    names = frozenset(names)
    return lambda table, column: (table in names if column is None
                                  else column == ABSENT or column in names or f"{table}.{column}" in names
                                  or table in names)


@dataclass(frozen=True)
class Footprint:
    """Where a diff writes: the columns it changes per updated row, the rows it deletes, and how
    many rows it inserts per table (free changes left out)."""

    updated: dict[tuple[str, str], frozenset[str]]  # (table, key text) -> changed columns
    deleted: frozenset[tuple[str, str]]
    inserted: Counter[str]


def footprint(changes: Changes, free: Free) -> Footprint:
    updated: dict[tuple[str, str], frozenset[str]] = {}
    deleted: set[tuple[str, str]] = set()
    inserted: Counter[str] = Counter()
    for table, entry in changes.items():
        if free(table, None):
            continue
        for e in entry.get("updated", ()):
            columns = frozenset(c for c in e["after"] if not free(table, c))
            if columns:
                updated[table, key_text(e["key"])] = columns
        deleted.update((table, key_text(e["key"])) for e in entry.get("deleted", ()))
        inserted[table] += len(entry.get("inserted", ()))
    return Footprint(updated, frozenset(deleted), inserted)


def unrequested(changes: Changes, allowed: Footprint, free: Free) -> list[str]:
    """Each change of `changes` outside `allowed`, described with its values."""
    out = []
    for table, entry in changes.items():
        if free(table, None):
            continue
        for e in entry.get("updated", ()):
            row = f"{table}[{key_text(e['key'])}]"
            columns = [c for c in e["after"] if not free(table, c)]
            gold = allowed.updated.get((table, key_text(e["key"])))
            extra = [c for c in columns if gold is None or c not in gold]
            if extra:
                leaves = ("a row the task leaves alone" if gold is None
                          else f"the task changes only {', '.join(sorted(gold))} there")
                out.append(f"{row} updated: " + ", ".join(
                    f"{c} {_shown(e['before'][c])} → {_shown(e['after'][c])}" for c in extra) + f" ({leaves})")
        out += [f"{table}[{key_text(e['key'])}] deleted (the task deletes no such row)"
                for e in entry.get("deleted", ()) if (table, key_text(e["key"])) not in allowed.deleted]
        rows = entry.get("inserted", ())
        if len(rows) > allowed.inserted[table]:
            keys = ", ".join(key_text(e["key"]) for e in rows[:3]) + (" …" if len(rows) > 3 else "")
            out.append(f"{len(rows)} row(s) inserted into {table} ({keys}); the task inserts "
                       f"{allowed.inserted[table]}")
    return out


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "…"


def guard(changes: Changes, paths: list[Changes], free: Free) -> tuple[bool, str]:
    """(passed, detail): whether `changes` fits the footprint of one of `paths` (the gold's diff
    first, then each alternative's). The detail names what lies outside the gold's."""
    outside = unrequested(changes, footprint(paths[0], free), free)
    if outside and not any(not unrequested(changes, footprint(p, free), free) for p in paths[1:]):
        more = f" (+{len(outside) - 3} more)" if len(outside) > 3 else ""
        return False, "unrequested change: " + "; ".join(outside[:3]) + more
    written = sum(len(v) for entry in changes.values() for v in entry.values())
    way = "the gold's" if not outside else "an alternative's"
    return True, f"{written} written row(s), all within {way} footprint"
