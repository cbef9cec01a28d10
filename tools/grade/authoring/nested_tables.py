"""Inferring how a nested JSON document maps to tables, and the schema.sql of that mapping: what
`grade import tau2` writes. The mapping itself, applying it and reversing it are in
endstate.core.env.nested (a domain's seed.py uses them at run time)."""

from __future__ import annotations

import re
from typing import Any

from endstate.core.env.domain import LOG_PREFIX
from endstate.core.env.nested import (
    ABSENT,
    ROOT,
    Child,
    Leaf,
    Mapping,
    MappingError,
    TableMap,
    get_path,
    identifier_problem,
    items_of,
)

SQL_TYPES = {"text": "TEXT", "integer": "INTEGER", "real": "REAL", "bool": "INTEGER",
             "json": "TEXT"}
_OBJECT_KEYS, _ARRAY_KEYS = ("id", "key", "_key"), ("position", "_position", "__position")
RESERVED_PREFIXES = ("sqlite_", LOG_PREFIX)  # SQLite's own tables; endstate's change log
MAX_DEPTH = 32  # tables within tables; tau2's documents nest 4
MAX_COLUMNS = 2000  # SQLite's default SQLITE_MAX_COLUMN
# The key of the one entry a shape document (infer_mapping's `shapes`: a data model's fields) puts
# in each collection it declares.
SHAPE_KEY = "__endstate_shape__"


def _scalar_type(values: list[Any]) -> str:
    kinds = {type(v) for v in values if v is not None}
    if kinds <= {str}:
        return "text"
    if kinds == {bool}:
        return "bool"
    if kinds <= {int, float} and bool not in kinds:
        return "integer" if kinds == {int} else "real"
    return "json"


def _is_scalar(v: Any) -> bool:
    return v is None or isinstance(v, (str, int, float, bool))


def _kind(values: list[Any]) -> str:
    """record, object (a collection of objects), array, json, or a scalar type."""
    if values and all(isinstance(v, dict) for v in values):
        if any(values) and all(isinstance(x, dict) for v in values for x in v.values()):
            return "object"
        return "record" if all(values) else "json"
    if values and all(isinstance(v, list) for v in values):
        items = [x for v in values for x in v]
        if items and (all(isinstance(x, dict) for x in items)
                      or (all(map(_is_scalar, items)) and _scalar_type(items) != "json")):
            return "array"
        return "json"
    return _scalar_type(values) if all(map(_is_scalar, values)) else "json"


def infer_mapping(document: Any, *shapes: dict) -> Mapping:
    """The tables a document becomes (module docstring); deterministic for given documents.
    `shapes`: more documents whose fields must have a place too, though their rows are not
    stored (the document as each task's init changes it, the data model's declared fields)."""
    if not isinstance(document, dict):
        raise MappingError(f"the document is a JSON {type(document).__name__}; endstate maps a "
                           "JSON object whose fields hold the collections")
    tables = _Tables()
    _infer_table(ROOT, "", "", "root", [], [document, *shapes], tables)
    names = [t.name for t in tables]
    reserved = next((n for n in names if n.lower().startswith(RESERVED_PREFIXES)), None)
    if reserved:
        raise MappingError(f"field {reserved!r} would be a table named so, and SQLite and endstate "
                           f"reserve names starting {' or '.join(RESERVED_PREFIXES)}; rename it")
    return Mapping(list(tables))


class _Tables(list):
    """The tables inferred so far, and the names given out (a child's table is named when its
    parent is inferred, before its rows are)."""

    def __init__(self):
        super().__init__()
        self.taken: set[bytes] = set()


def _infer_table(name: str, entry: str, source: str, container: str,
                 inherited_from: list[tuple[str, str]], items: list[tuple[Any, Any]] | list[Any],
                 out: _Tables) -> None:
    """Add table `name` for `items` ((key, item) pairs; the root's one document) and its children.
    `inherited_from`: (the column's name here, the parent's key column) for each parent key."""
    if len(inherited_from) > MAX_DEPTH:  # each level adds a key column to every table below
        raise MappingError(f"{source}: containers nested more than {MAX_DEPTH} deep; store the "
                           "deeper part as one JSON string")
    values = items if container == "root" else [v for _, v in items]
    leaves, children, containers = [], [], {}
    if values and not isinstance(values[0], dict):  # an array of scalars
        leaves.append(Leaf("value", [], _scalar_type(values)))
    else:
        _infer_fields(name, container, values, [], leaves, children, containers)
    _rename_clashing_columns([*leaves, *children])
    if container == "root":
        out.taken.add(_sql(ROOT))
    for child in children:  # `Orders` and `orders`, or field `a__b` and `a`'s `b`: one table
        child.table = _free_name(child.table, out.taken)
    taken = {_sql(leaf.name) for leaf in leaves} | {_sql(ABSENT)}
    inherited: list[list[str]] = []
    for col, parent_col in inherited_from:
        # a field of the row, or another parent key of that name (a__a: both `a_id`), has it
        while _sql(col) in taken:
            col = "parent__" + col
        taken.add(_sql(col))
        inherited.append([col, parent_col])
    key_field = _key_field(items, leaves) if container == "object" else None
    key = key_field or _free_key(_ARRAY_KEYS if container != "object" else _OBJECT_KEYS, taken)
    table = TableMap(name, source or "/", container, inherited, key, key_field is not None,
                     leaves, children)
    table.absent = any(get_path(v, entry.path)[1] is False for v in values if isinstance(v, dict)
                       for entry in [*leaves, *children])
    if len(table.columns) > MAX_COLUMNS:
        raise MappingError(f"{source or '/'}: table {name} would have {len(table.columns)} "
                           f"columns, SQLite's limit is {MAX_COLUMNS}; store some fields as one "
                           "JSON string")
    out.append(table)
    for child in children:
        # a child names its parent's key user_id as is, a made-up one as payments_position
        keys = [] if container == "root" else [(c, c) for c, _ in inherited] + [
            (key if table.key_is_field else f"{entry}_{key}", key)]
        kind, present = containers[tuple(child.path)]
        pairs = [pair for c in present for pair in items_of(c, kind)]
        _infer_table(child.table, child.name, f"{source}{'' if container == 'root' else '/*'}/"
                     f"{'/'.join(child.path)}", kind, keys, pairs, out)


def _rename_clashing_columns(entries: list[Leaf | Child]) -> None:
    """Fields SQLite would take for one column (`X` and `x`: its names ignore ASCII case; `a__b`
    and record `a`'s `b`; a field named `_absent`) get the first free `<name>_<n>`, n = 2, 3...:
    the mapping keeps each field's path, so the document comes back with its own keys."""
    taken = {_sql(ABSENT)}
    for entry in entries:
        entry.name = _free_name(entry.name, taken)


def _free_name(name: str, taken: set[bytes]) -> str:
    """`name`, or `<name>_<n>` with the smallest n >= 2 that `taken` lacks; added to `taken`."""
    free, n = name, 2
    while _sql(free) in taken:
        free, n = f"{name}_{n}", n + 1
    taken.add(_sql(free))
    return free


def _sql(name: str) -> bytes:
    """A name as SQLite compares identifiers: ASCII letters without case (`ID` is `id`)."""
    return name.encode().lower()


def _free_key(names: tuple[str, ...], taken: set[bytes]) -> str:
    """The first of `names` no column uses, else the last one with more leading underscores."""
    free = next((n for n in names if _sql(n) not in taken), None)
    while free is None or _sql(free) in taken:
        free = "_" + (free or names[-1])
    return free


def _infer_fields(table: str, container: str, values: list[dict], prefix: list[str],
                  leaves: list[Leaf], children: list[Child], containers: dict) -> None:
    names = list(dict.fromkeys(k for v in values for k in v))
    for f in names:
        why = identifier_problem(f)
        if why:
            raise MappingError(f"field {f!r} {why}; endstate cannot name a column so: rename it")
        present = [v[f] for v in values if f in v]
        path, kind = [*prefix, f], _kind(present)
        entry = "__".join(path)
        if kind == "record":
            _infer_fields(table, container, present, path, leaves, children, containers)
        elif kind in ("object", "array"):
            child_table = entry if container == "root" else f"{table}__{entry}"
            children.append(Child(entry, path, child_table))
            containers[tuple(path)] = (kind, present)
        else:
            leaves.append(Leaf(entry, path, kind))


def _key_field(items: list[tuple[Any, Any]], leaves: list[Leaf]) -> str | None:
    """The item field that equals the object key in every item (id first), if there is one.
    Items of a shape (SHAPE_KEY) have no say: which field is the key is the data's to show."""
    items = [(k, v) for k, v in items if k != SHAPE_KEY]
    fields = sorted((leaf.name for leaf in leaves if len(leaf.path) == 1 and leaf.type == "text"),
                    key=lambda n: n != "id")
    return next((f for f in fields if items and all(isinstance(v, dict) and v.get(f) == k
                                                    for k, v in items)), None)


def column_types(mapping: Mapping, t: TableMap) -> dict[str, str]:
    """SQL type of each column of `t`; an inherited key column has its parent's type."""
    parent = column_types(mapping, mapping.parent[t.name]) if t.inherited else {}  # once: deep
    types = {c: parent[p] for c, p in t.inherited}  # nesting made this factorial
    if not t.key_is_field:
        types[t.key] = "TEXT" if t.container == "object" else "INTEGER"
    types.update({leaf.name: SQL_TYPES[leaf.type] for leaf in t.leaves})
    if t.absent:
        types[ABSENT] = "TEXT"
    return types


def _column_note(mapping: Mapping, t: TableMap, column: str) -> str:
    leaf = next((x for x in t.leaves if x.name == column), None)
    if leaf is None:
        parent = dict(t.inherited).get(column)
        if parent is not None:
            return f"{_code(mapping.parent[t.name].name + '.' + parent)} of the row holding it"
        if column == ABSENT:
            return "JSON array of the fields this item lacks (NULL: none)"
        return {"object": "its key in the object", "array": "its position in the array, from 0",
                "root": "0: the document's one row"}[t.container]
    inside = "" if t.container == "root" else f"{t.source}/*"
    where = _code(f"{inside}/{'/'.join(leaf.path)}") if leaf.path else "the array's item itself"
    note = {"bool": ", 0/1 for false/true", "json": ", as JSON text"}.get(leaf.type, "")
    is_key = t.key_is_field and column == t.key
    return where + (", equal to its key in the object" if is_key else "") + note


def _code(text: str) -> str:
    """`text` as a Markdown code span, whatever backticks it holds (CommonMark's rule)."""
    fence = "`" * (max(map(len, re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def create_statements(mapping: Mapping) -> str:
    """schema.sql for the mapping: one CREATE TABLE per stored table. Names are data: quoted,
    checked by Mapping (no quote, control or separator character), and never inside a comment;
    where each column comes from is column_guide's Markdown."""
    return "\n".join(create_table(mapping, t) + "\n" for t in mapping.tables if t.stored)


def create_table(mapping: Mapping, t: TableMap) -> str:
    types = column_types(mapping, t)
    lines = [f'  "{c}" {types[c]}{" NOT NULL" if c in t.key_columns else ""},' for c in t.columns]
    keys = ", ".join(f'"{c}"' for c in t.key_columns)
    return "\n".join([f'CREATE TABLE "{t.name}" (', *lines, f"  PRIMARY KEY ({keys})", ");"])


def column_guide(mapping: Mapping) -> str:
    """Markdown: each stored table, what its rows are, and where each column comes from in the
    document (what a person writing tools.py against schema.sql needs)."""
    out = []
    for t in mapping.tables:
        if not t.stored:
            continue
        what = ("the document's top-level scalars (one row)" if t.container == "root" else
                f"one row per {'entry' if t.container == 'object' else 'item'} of {_code(t.source)}")
        out += [f"## {_code(t.name)}", "", f"{what[0].upper()}{what[1:]}.", ""]
        out += [f"- {_code(c)}: {_column_note(mapping, t, c)}" for c in t.columns]
        out += [f"- {_code(child.name)}: table {_code(child.table)}" for child in t.children]
        out.append("")
    return "\n".join(out)
