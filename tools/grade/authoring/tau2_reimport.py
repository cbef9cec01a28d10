"""What `grade import tau2 --force` does with a domain folder the user has worked in: schema.sql
keeps the user's edits (the new import's tables and columns are added to it), and once the tools
are written, gold calls that fail are marked `"fails": true` (tau2 logs such an error and goes on,
so its gold end state is the one without that call)."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from typing import Any

from endstate.core.env.domain import Domain
from endstate.core.env.nested import Mapping
from endstate.core.episode.replays import failed_steps, replay
from endstate.core.errors import EndstateError
from endstate.grade.authoring.nested_tables import column_types, create_table

NOT_WRITTEN_MARK = "is not written yet"  # in the error of every stub tools.py starts with


@dataclass
class Merged:
    schema: str
    added: list[str] = field(default_factory=list)  # "table T", "column T.c"


def merge_schema(user_schema: str, previous: str | None, generated: str,
                 mapping: Mapping) -> Merged:
    """`generated` when the user's schema.sql is what the last import wrote (`previous`);
    otherwise the user's, plus what the new mapping needs that it lacks: tables (CREATE TABLE)
    and columns (ALTER TABLE ADD COLUMN). A key column it lacks cannot be added: EndstateError
    names it."""
    if user_schema == previous:
        return Merged(generated)
    have = _columns(user_schema, "schema.sql")
    merged, added = [user_schema.rstrip("\n"), ""], []
    for t in mapping.tables:
        if not t.stored:
            continue
        types = column_types(mapping, t)
        if t.name not in have:
            merged += [create_table(mapping, t), ""]
            added.append(f"table {t.name}")
            continue
        missing = [c for c in t.columns if c.lower() not in have[t.name]]
        keys = [c for c in missing if c in t.key_columns]
        if keys:
            raise EndstateError(f"schema.sql: table {t.name} lacks key column(s) {', '.join(keys)} "
                                "that the imported data needs; add them (and the PRIMARY KEY), "
                                "or import into a new folder and move your edits there")
        for c in missing:
            merged.append(f'ALTER TABLE "{t.name}" ADD COLUMN "{c}" {types[c]};')
            added.append(f"column {t.name}.{c}")
    return Merged("\n".join(merged) + "\n" if added else user_schema, added)


def _columns(schema: str, where: str) -> dict[str, set[str]]:
    """Each table's columns (lowercased: SQLite's names ignore ASCII case) in `schema`."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.executescript(schema)
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
        return {t: {r[1].lower() for r in conn.execute(f'PRAGMA table_info("{t}")')}
                for t in tables}
    except sqlite3.Error as e:
        raise EndstateError(f"{where}: your edited schema does not run ({e}); fix it before "
                            "re-importing") from None
    finally:
        conn.close()


@dataclass
class Marked:
    calls: int = 0  # gold calls marked as failing
    unchecked: list[str] = field(default_factory=list)  # tasks calling a tool not written yet


def mark_failing_gold(domain: Domain, tasks: list[dict[str, Any]]) -> Marked:
    """Replay each task's gold with the domain's (written) tools and mark the calls that fail.
    A task whose gold reaches a stub is left as it is: its failures say nothing yet."""
    marked = Marked()
    for task in tasks:
        steps = [s for s in task.get("gold", [])]
        failed = failed_steps(replay(domain, task, steps))
        if any(NOT_WRITTEN_MARK in error for error in failed.values()):
            marked.unchecked.append(task["id"])
            continue
        for i in failed:
            steps[i]["fails"] = True
            marked.calls += 1
    return marked
