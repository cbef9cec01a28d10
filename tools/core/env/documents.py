"""One entry of a nested document's collection at a time, for the tools of an imported domain:
load a user or an order as the nested dict it is in seed/db.json, change it in Python, save it
back as rows through the domain's mapping (seed/mapping.json, endstate.core.env.nested). So a tool
ported from tau2-bench, where tools edit pydantic objects, keeps the shape of the original:

    DOCS = Documents(Path(__file__).parent / "seed" / "mapping.json")

    @tool(writes=True)
    def update_task_status(db: Db, task_id: str, status: str) -> dict:
        task = DOCS.load(db, "tasks", task_id)
        if task is None:
            raise ToolError(f"task {task_id} not found")
        task["status"] = status
        DOCS.save(db, "tasks", task_id, task)
        return task

A save writes only the rows that differ (updated in place, so their rowids, the document's order
and the episode's change log stay as they were), deletes the rows the entry no longer has and
inserts the new ones: the tables then hold what `insert_document` would make of the changed
document.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from endstate.core.env.nested import (
    EVERY,
    Mapping,
    MappingError,
    TableMap,
    _quoted,
    collection_tables,
    entry_rows,
    rebuild_entries,
)
from endstate.core.env.tools import Db


class Documents:
    """The collections of a domain's seed document, through its mapping: a Mapping, or the path of
    its file (an imported domain's seed/mapping.json), read when first needed so that tools.py
    loads without it."""

    def __init__(self, mapping: Mapping | Path | str):
        self._mapping = mapping if isinstance(mapping, Mapping) else None
        self._path = None if isinstance(mapping, Mapping) else Path(mapping)

    @property
    def mapping(self) -> Mapping:
        if self._mapping is None:
            self._mapping = Mapping.from_json(self._path.read_bytes())
        return self._mapping

    def load(self, db: Db, collection: str, key: Any) -> Any:
        """Entry `key` of `collection` as it is in the document (`users`, `"u1"` ->
        the user's nested dict); None when there is none."""
        found = rebuild_entries(_select(db), self.mapping, collection, key)
        return found[0][1] if found else None

    def load_all(self, db: Db, collection: str) -> dict[Any, Any] | list[Any]:
        """The whole collection as it is in the document: an object by key, or an array."""
        entries = rebuild_entries(_select(db), self.mapping, collection, EVERY)
        if self.mapping.by_name[collection].container == "object":
            return dict(entries)
        return [item for _, item in entries]

    def save(self, db: Db, collection: str, key: Any, item: Any) -> None:
        """Make entry `key` of `collection` hold `item` (a new entry is added). MappingError names
        a field or value the mapping cannot store (a new field: add its column, or re-import)."""
        tables = collection_tables(self.mapping, collection)
        t = tables[0]
        if t.key_is_field and not (isinstance(item, dict) and item.get(t.key) == key):
            found = item.get(t.key) if isinstance(item, dict) else None
            raise MappingError(f"{t.source}/{key}: its field {t.key} is {found!r}; an entry of "
                               f"{collection} holds its own key there")
        rows = entry_rows(self.mapping, collection, key, item)
        for table in tables:
            _write(db, table, key, rows[table.name])


def _select(db: Db):
    return lambda sql, params: [tuple(r.values()) for r in db.all(sql, *params)]


def _write(db: Db, t: TableMap, entry: Any, rows: list[tuple]) -> None:
    """Make the rows of `t` under collection entry `entry` be `rows`, touching only those that
    differ."""
    at = [t.columns.index(c) for c in t.key_columns]
    old = {tuple(r[i] for i in at): r for r in _select(db)(
        f'SELECT {_quoted(t.columns)} FROM "{t.name}" WHERE "{t.key_columns[0]}" = ?', (entry,))}
    new = {tuple(r[i] for i in at): r for r in rows}
    match = " AND ".join(f'"{c}" = ?' for c in t.key_columns)
    for key in [k for k in old if k not in new]:
        db.run(f'DELETE FROM "{t.name}" WHERE {match}', *key)
    others = [i for i, c in enumerate(t.columns) if c not in t.key_columns]
    for key, row in new.items():
        if key not in old:
            db.run(f'INSERT INTO "{t.name}" ({_quoted(t.columns)}) VALUES '
                   f'({", ".join("?" * len(row))})', *row)
        elif old[key] != row:
            sets = ", ".join(f'"{t.columns[i]}" = ?' for i in others)
            db.run(f'UPDATE "{t.name}" SET {sets} WHERE {match}', *(row[i] for i in others), *key)

