"""A nested JSON document as SQLite tables, and back. A domain seeds from a data file this way:
`grade import tau2` infers the mapping (endstate.grade.authoring.nested_tables) and stores it as JSON beside
the data; the domain's seed.py applies it with `insert_document`. See docs/domains.md.

The mapping:

- the document's top-level fields that hold an object of objects (a collection keyed by id) or an
  array become tables named after the field; such a container nested in a row becomes a child
  table `<table>__<field>`, keyed by its parent row's key columns plus the object key (column
  `id`, or the item field that always equals it, such as `user_id`) or the array position
  (`position`, from 0); a child names a parent key column as the parent does (`user_id`), or as
  `<parent field>_<column>` when the parent's key is made up (`bikes_position`);
- an object of scalars (a record, `name: {first, last}`) is flattened into the columns
  `name__first` and `name__last` of the row that holds it;
- scalars are TEXT, INTEGER, REAL, or INTEGER 0/1 for booleans; a field whose shape varies (a list
  here, null there) is one column of JSON text; an array of scalars is a child table with a `value`
  column; the top-level scalars, if any, are the one row of table `document`;
- a field that some rows lack is named in those rows' `_absent` column (a JSON array), so the
  rebuilt document has exactly the input's fields: absent stays absent, null stays null.
"""

from __future__ import annotations

import math
import sqlite3
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import orjson

from endstate.core.errors import EndstateError

FORMAT = 1
ROOT = "document"
ABSENT = "_absent"
INT64 = (-(2**63), 2**63 - 1)

Path = tuple[str, ...]


class MappingError(EndstateError):
    """A document that does not fit its mapping (or cannot be mapped): the message names where."""


# Characters no table or column name may hold: SQL quotes identifiers with `"`, and control,
# format, separator and surrogate characters would make schema.sql and the SQL a person writes
# against it unreadable or unwritable (a NUL ends SQL text, a lone surrogate is no UTF-8).
_REFUSED_CATEGORIES = ("Cc", "Cf", "Cs", "Zl", "Zp")


def identifier_problem(name: Any) -> str | None:
    """Why `name` cannot name a table or column (None: it can). Names are always written quoted
    ("name") and never inside comments, so what is left to refuse is what quoting cannot hold."""
    if not isinstance(name, str) or not name:
        return "is empty or not a string"
    if '"' in name:
        return "has a double quote"
    bad = next((c for c in name if unicodedata.category(c) in _REFUSED_CATEGORIES), None)
    if bad is not None:
        return f"has the character U+{ord(bad):04X} ({unicodedata.category(bad)})"
    return None


@dataclass
class Leaf:
    name: str  # the column: the path inside the row joined by "__"
    path: list[str]  # [] for the value of an array of scalars
    type: str  # text | integer | real | bool | json


@dataclass
class Child:
    name: str  # the field's name in the row: its path joined by "__"
    path: list[str]
    table: str


@dataclass
class TableMap:
    name: str
    source: str  # where its rows are in the document, e.g. /users/*/payment_methods/*
    container: str  # root | object | array
    inherited: list[list[str]]  # [this table's column, the parent's key column]
    key: str  # the row's own key column: the object key or the array position
    key_is_field: bool  # the key column is also an item field (user_id == its object key)
    leaves: list[Leaf] = field(default_factory=list)
    children: list[Child] = field(default_factory=list)
    absent: bool = False  # rows may lack fields: an `_absent` column lists them

    @property
    def stored(self) -> bool:
        return self.container != "root" or bool(self.leaves) or self.absent

    @property
    def key_columns(self) -> list[str]:
        return [c for c, _ in self.inherited] + [self.key]

    @property
    def columns(self) -> list[str]:
        own = [] if self.key_is_field else [self.key]
        return ([c for c, _ in self.inherited] + own + [leaf.name for leaf in self.leaves]
                + ([ABSENT] if self.absent else []))


@dataclass
class Mapping:
    tables: list[TableMap]  # the root first, then each table before its children

    def __post_init__(self):
        for t in self.tables:  # every name reaches SQL text (quoted): checked here, once
            for name in (t.name, *t.columns, *(c.table for c in t.children)):
                why = identifier_problem(name)
                if why:
                    raise MappingError(f"name {name!r} (table {t.name!r}) {why}; endstate cannot "
                                       "name a table or column so: rename the field")
        self.by_name = {t.name: t for t in self.tables}
        self.parent = {c.table: t for t in self.tables for c in t.children}

    def to_json(self) -> bytes:
        return orjson.dumps({"format": FORMAT, "tables": [asdict(t) for t in self.tables]},
                            option=orjson.OPT_INDENT_2)

    @classmethod
    def from_json(cls, data: bytes | str) -> Mapping:
        try:
            raw = orjson.loads(data)
            found = raw.get("format") if isinstance(raw, dict) else None
            if found != FORMAT:
                raise MappingError(f"mapping format {found!r}; this endstate reads format {FORMAT}")
            return cls([TableMap(**{**t, "leaves": [Leaf(**x) for x in t["leaves"]],
                                    "children": [Child(**x) for x in t["children"]]})
                        for t in raw["tables"]])
        except (ValueError, TypeError, KeyError, AttributeError) as e:  # orjson's errors: ValueError
            raise MappingError(f"not a mapping of format {FORMAT}: {type(e).__name__}: {e}") from None


def get_path(item: Any, path: list[str] | Path) -> tuple[Any, bool]:
    """(the value at `path` inside `item`, whether it is there)."""
    for step in path:
        if not isinstance(item, dict) or step not in item:
            return None, False
        item = item[step]
    return item, True


def items_of(container: Any, kind: str) -> list[tuple[Any, Any]]:
    """(key, item) pairs of an object, (position, item) pairs of an array."""
    return list(container.items()) if kind == "object" else list(enumerate(container))


# -- document -> rows ----------------------------------------------------------------------------

_TYPE_OK = {"text": lambda v: isinstance(v, str), "integer": lambda v: type(v) is int,
            "real": lambda v: type(v) in (int, float), "bool": lambda v: type(v) is bool,
            "json": lambda v: True}


def document_rows(document: Any, mapping: Mapping) -> dict[str, list[tuple]]:
    """The rows of every stored table, in document order; MappingError names a path that does not
    fit the mapping (a new field, a value of another type)."""
    rows: dict[str, list[tuple]] = {t.name: [] for t in mapping.tables if t.stored}
    if not isinstance(document, dict):
        raise MappingError(f"/: expected a JSON object, got {type(document).__name__}")
    _emit(mapping, mapping.tables[0], (), 0, document, "", rows)
    return rows


def _emit(mapping: Mapping, t: TableMap, inherited: tuple, key: Any, item: Any, where: str,
          rows: dict[str, list[tuple]]) -> None:
    values, absent = [], []
    _check_known(t, item, where)
    for leaf in t.leaves:
        v, present = get_path(item, leaf.path)
        at = "/".join([where, *leaf.path])
        if not present:
            absent.append(leaf.name)
        elif v is not None and not _TYPE_OK[leaf.type](v):
            raise MappingError(f"{at}: expected {leaf.type}, got {type(v).__name__} {v!r:.40}; "
                               f"the mapping stores {t.name}.{leaf.name} as {leaf.type}")
        elif not _storable(v):
            raise MappingError(f"{at}: {v!r:.40}: SQLite stores 64-bit integers and finite numbers "
                               "only; write it as a string")
        values.append(None if v is None else orjson.dumps(v).decode() if leaf.type == "json"
                      else int(v) if leaf.type == "bool" else v)
    own = values[[leaf.name for leaf in t.leaves].index(t.key)] if t.key_is_field else key
    keys = () if t.container == "root" else (*inherited, own)
    for child in t.children:
        container, present = get_path(item, child.path)
        if not present:
            absent.append(child.name)
            continue
        ct = mapping.by_name[child.table]
        wanted = dict if ct.container == "object" else list
        if not isinstance(container, wanted):
            raise MappingError(f"{where}/{'/'.join(child.path)}: expected a JSON "
                               f"{'object' if wanted is dict else 'array'} (table {ct.name}), got "
                               f"{type(container).__name__}")
        for k, sub in items_of(container, ct.container):
            _emit(mapping, ct, keys, k, sub, f"{where}/{'/'.join(child.path)}/{k}", rows)
    if absent and not t.absent:
        raise MappingError(f"{where or '/'}: lacks {', '.join(absent)}; table {t.name} has no "
                           f"{ABSENT} column to record that: re-infer the mapping")
    if t.stored:
        absent_column = [orjson.dumps(absent).decode() if absent else None] if t.absent else []
        rows[t.name].append((*inherited, *([] if t.key_is_field else [key]), *values,
                             *absent_column))


def _storable(v: Any) -> bool:
    """Whether SQLite (and orjson, for JSON text) hold `v` exactly, at any depth: integers of 64
    bits, finite numbers."""
    if type(v) is int:
        return INT64[0] <= v <= INT64[1]
    if type(v) is float:
        return math.isfinite(v)
    if isinstance(v, (dict, list)):
        return all(map(_storable, v.values() if isinstance(v, dict) else v))
    return True


def _check_known(t: TableMap, item: Any, where: str) -> None:
    if t.leaves and not t.leaves[0].path:  # an array of scalars: the item is the value
        if isinstance(item, (dict, list)):
            raise MappingError(f"{where}: expected a scalar ({t.name}.value), got "
                               f"{type(item).__name__}")
        return
    if not isinstance(item, dict):
        raise MappingError(f"{where}: expected a JSON object (a row of {t.name}), got "
                           f"{type(item).__name__}")
    known = {tuple(e.path[:i]) for e in [*t.leaves, *t.children] for i in range(1, len(e.path) + 1)}
    records = {tuple(e.path[:i]) for e in [*t.leaves, *t.children] for i in range(1, len(e.path))}
    stack: list[tuple[Path, dict]] = [((), item)]
    while stack:
        prefix, obj = stack.pop()
        for k, v in obj.items():
            path = (*prefix, k)
            if path not in known:
                raise MappingError(f"{where}/{'/'.join(path)}: a field the mapping does not know; "
                                   f"add a column to {t.name} in schema.sql and mapping.json, or "
                                   "re-run the import")
            if path in records:
                if not isinstance(v, dict):
                    raise MappingError(f"{where}/{'/'.join(path)}: expected a JSON object "
                                       f"(flattened into {t.name}), got {type(v).__name__}")
                stack.append((path, v))


def insert_document(conn: sqlite3.Connection, document: Any, mapping: Mapping,
                    source: str = "the document") -> None:
    """Seed helper: insert the rows of `document` into the mapping's tables (schema.sql); an error
    names `source` and the path inside it."""
    try:
        rows = document_rows(document, mapping)
    except MappingError as e:
        raise MappingError(f"{source}: {e.message}") from None
    for t in mapping.tables:
        if t.stored:
            conn.executemany(f'INSERT INTO "{t.name}" ({_quoted(t.columns)}) VALUES '
                             f'({", ".join("?" * len(t.columns))})', rows[t.name])


# -- rows -> document ----------------------------------------------------------------------------

_FROM_SQL = {"bool": bool, "json": orjson.loads, "real": float, "integer": int, "text": str}


def rebuild_document(conn: sqlite3.Connection, mapping: Mapping) -> dict[str, Any]:
    """The document the tables hold now: the inverse of `document_rows` (a seed gives back its
    input; after an episode, the input with the episode's changes)."""
    groups = _groups(conn.execute, mapping.tables[1:])
    root = mapping.tables[0]
    row = {}
    if root.stored:
        row = dict(zip(root.columns, conn.execute(f'SELECT {_quoted(root.columns)} FROM "{ROOT}"')
                       .fetchone()))
    return _build(mapping, root, row, groups)


# SQL and its parameters -> the rows: a connection's execute, or a tool's Db (documents.py)
Select = Callable[[str, Sequence[Any]], Iterable[Sequence[Any]]]
EVERY = object()  # rebuild_entries: every entry of the collection


def _groups(select: Select, tables: list[TableMap], first_key: Any = EVERY) -> dict[str, dict]:
    """Each table's rows as dicts, grouped by their parent row's key, in document order; with
    `first_key`, only the rows under that entry of a collection (the first key column of every
    table below a collection is the collection's key)."""
    groups: dict[str, dict[tuple, list[dict[str, Any]]]] = {}
    for t in tables:
        order = ", ".join(f'"{c}"' for c in t.key_columns[:-1])
        order += (", " if order else "") + ("rowid" if t.container == "object" else f'"{t.key}"')
        where, params = ("", ()) if first_key is EVERY else (f' WHERE "{t.key_columns[0]}" = ?',
                                                              (first_key,))
        group = groups[t.name] = {}
        for row in select(f'SELECT {_quoted(t.columns)} FROM "{t.name}"{where} ORDER BY {order}',
                          params):
            record = dict(zip(t.columns, row))
            group.setdefault(tuple(record[c] for c, _ in t.inherited), []).append(record)
    return groups


def collection_tables(mapping: Mapping, name: str) -> list[TableMap]:
    """Table `name` of a collection (a top-level field's object or array) and the tables below it,
    each before its children."""
    if name not in {c.table for c in mapping.tables[0].children}:
        known = ", ".join(c.table for c in mapping.tables[0].children)
        raise MappingError(f"no collection {name!r} in the document; its collections: {known}")
    inside = [mapping.by_name[name]]
    for t in mapping.tables:  # listed parents first, so one pass finds every descendant
        if t.name in mapping.parent and mapping.parent[t.name] in inside:
            inside.append(t)
    return inside


def rebuild_entries(select: Select, mapping: Mapping, name: str,
                    key: Any = EVERY) -> list[tuple[Any, Any]]:
    """(key, item) of every entry of collection `name` as in the document, or of entry `key` only
    ([] when there is none)."""
    tables = collection_tables(mapping, name)
    groups = _groups(select, tables, key)
    t = tables[0]
    return [(r[t.key], _build(mapping, t, r, groups)) for r in groups[name].get((), [])]


def entry_rows(mapping: Mapping, name: str, key: Any, item: Any) -> dict[str, list[tuple]]:
    """The rows of entry `key` of collection `name` holding `item`, by table (those of
    `collection_tables`); MappingError names a path that does not fit, as document_rows does."""
    tables = collection_tables(mapping, name)
    rows: dict[str, list[tuple]] = {t.name: [] for t in tables}
    _emit(mapping, tables[0], (), key, item, f"{tables[0].source}/{key}", rows)
    return rows


def _quoted(columns: list[str]) -> str:
    return ", ".join(f'"{c}"' for c in columns)


def _build(mapping: Mapping, t: TableMap, row: dict[str, Any], groups) -> Any:
    if t.leaves and not t.leaves[0].path:
        v = row["value"]
        return None if v is None else _FROM_SQL[t.leaves[0].type](v)
    absent = set(orjson.loads(row[ABSENT])) if t.absent and row.get(ABSENT) else set()
    item: dict[str, Any] = {}
    for leaf in t.leaves:
        if leaf.name not in absent:
            v = row[leaf.name]
            _put(item, leaf.path, None if v is None else _FROM_SQL[leaf.type](v))
    keys = () if t.container == "root" else tuple(row[c] for c in t.key_columns)
    for child in t.children:
        if child.name in absent:
            continue
        ct = mapping.by_name[child.table]
        rows = groups[ct.name].get(keys, [])
        built = [(r[ct.key], _build(mapping, ct, r, groups)) for r in rows]
        _put(item, child.path, dict(built) if ct.container == "object" else [v for _, v in built])
    return item


def _put(item: dict[str, Any], path: list[str], value: Any) -> None:
    for step in path[:-1]:
        item = item.setdefault(step, {})
    item[path[-1]] = value


class _Lacking:
    def __repr__(self) -> str:
        return "<absent>"


LACKING = _Lacking()  # a field a record lacks, in a row shown to a person


def readable_row(row: dict[str, Any]) -> dict[str, Any]:
    """A row's columns as a person reads them in a detail: the `_absent` bookkeeping column left
    out and folded in, each field it names shown as <absent> (not null, not missing)."""
    if ABSENT not in row:
        return row
    lacking = orjson.loads(row[ABSENT]) if row[ABSENT] else []
    shown = {c: v for c, v in row.items() if c != ABSENT}
    return {**shown, **dict.fromkeys(lacking, LACKING)}
