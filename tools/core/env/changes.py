"""An episode's diff: read from the change log of a transaction, and turned back into the
statements that replay it (sandbox.py keeps an episode as this diff between tool calls).

The change log is the domain's shadow tables (domain.shadow): triggers save a row's first state
in a transaction there, so `touched` sees every row a transaction wrote, before and now.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any, NamedTuple

import orjson

from endstate.core.env.domain import LOG_PREFIX, Domain, Table, shadow
from endstate.core.errors import EndstateError

Row = dict[str, Any]
Changes = dict[str, dict[str, list[dict[str, Any]]]]  # table -> inserted/updated/deleted -> entries
Replay = list[tuple[str, list[list[Any]]]]  # statements that restore rows, each with its params


class Touched(NamedTuple):
    """A row a transaction wrote, by table and primary key."""

    table: Table
    key: tuple
    before: Row | None  # first state in the transaction, as the change log saved it (None: absent)
    after: Row | None  # state now (None: gone)
    rowid: int | None  # rowid now (None: gone; in a replay to insert: the next one)


def key_text(key: Mapping[str, Any]) -> str:
    """`W1042` for a one-column key, `W1042,3` for a composite one: how details name rows."""
    return ",".join(str(v) for v in key.values())


def _where(columns) -> str:
    return " AND ".join(f'"{c}" IS ?' for c in columns)


def _cols(columns) -> str:
    return ", ".join(f'"{c}"' for c in columns)


def _sets(columns) -> str:
    return ", ".join(f'"{c}" = ?' for c in columns)


def table_of(domain: Domain, name: str, what: str) -> Table:
    try:
        return domain.tables[name]
    except KeyError:
        raise EndstateError(f"{what}: unknown table {name!r} in domain {domain.name}; "
                            f"tables: {', '.join(domain.tables)}") from None


def upsert(conn: sqlite3.Connection, t: Table, row: Row) -> None:
    """Update the row with this key if there is one, else insert it (how a task's init applies)."""
    unknown = set(row) - set(t.columns)
    if unknown:
        raise EndstateError(f"init row for {t.name} has unknown column(s) {sorted(unknown)}; "
                            f"columns: {', '.join(t.columns)}")
    missing = [c for c in t.key if c not in row]
    if missing:
        raise EndstateError(f"init row for {t.name} lacks its key column(s) {missing}")
    updates = [c for c in row if c not in t.key]
    try:
        changed = updates and conn.execute(
            f'UPDATE "{t.name}" SET {_sets(updates)} WHERE {_where(t.key)}',
            [*(row[c] for c in updates), *(row[c] for c in t.key)]).rowcount
        if not changed:
            conn.execute(f'INSERT INTO "{t.name}" ({_cols(row)}) '
                         f'VALUES ({", ".join("?" * len(row))})', list(row.values()))
    except sqlite3.DatabaseError as e:
        raise EndstateError(f"init row for {t.name}[{key_text({c: row[c] for c in t.key})}]: "
                            f"{e}; a new row needs every required column") from None


def logged(conn: sqlite3.Connection, tables: dict[str, Table]) -> list[Table]:
    """The tables whose change log holds rows, in one statement."""
    found = conn.execute(_logged_sql(tuple(tables))).fetchall()
    in_order = list(tables.values())
    return [in_order[i] for (i,) in found]


def touched(conn: sqlite3.Connection, tables: dict[str, Table]) -> list[Touched]:
    """Every row touched since the change log was last emptied (the transaction's start, or the
    seat's base): its first saved state and its state now, read in one statement per table."""
    out: list[Touched] = []
    for t in logged(conn, tables):
        key_idx = [t.columns.index(c) for c in t.key]
        width = len(t.columns)
        for row in conn.execute(_touched_sql(t)).fetchall():
            before, existed, rowid, present, now = (row[:width], row[width], row[width + 1],
                                                    row[width + 2], row[width + 3:])
            out.append(Touched(t, tuple(before[i] for i in key_idx),
                               dict(zip(t.columns, before)) if existed else None,
                               dict(zip(t.columns, now)) if present else None, rowid))
    return out


def _current(conn: sqlite3.Connection, t: Table, key_values) -> tuple[int | None, Row | None]:
    """(rowid, row) of the row with this key now, or (None, None)."""
    found = conn.execute(_select_sql(t), key_values).fetchone()
    return (None, None) if found is None else (found[0], dict(zip(t.columns, found[1:])))


# The statement texts are built once: a tool call reads and replays every row it touched.

@cache
def _select_sql(t: Table) -> str:
    return (f'SELECT {"rowid, " if t.rowid else "NULL, "}{_cols(t.columns)} '
            f'FROM "{t.name}" WHERE {_where(t.key)}')


@cache
def _logged_sql(names: tuple[str, ...]) -> str:
    return " UNION ALL ".join(f'SELECT {i} FROM (SELECT 1 FROM "{shadow(name)}" LIMIT 1)'
                              for i, name in enumerate(names))


@cache
def _touched_sql(t: Table) -> str:
    """The change log of `t` beside each row's state now: (saved columns, existed, rowid now,
    present now, columns now), in the order the rows were first touched."""
    on = " AND ".join(f'n."{c}" IS s."{c}"' for c in t.key)
    # a WITHOUT ROWID table's key columns are NOT NULL: a key column is null only for a missing row
    present = "n.rowid IS NOT NULL" if t.rowid else f'n."{t.key[0]}" IS NOT NULL'
    saved, now = (", ".join(f'{ref}."{c}"' for c in t.columns) for ref in ("s", "n"))
    return (f'SELECT {saved}, s."{LOG_PREFIX}existed", {"n.rowid" if t.rowid else "NULL"}, '
            f'{present}, {now} FROM "{shadow(t.name)}" AS s LEFT JOIN "{t.name}" AS n ON {on} '
            "ORDER BY s.rowid")


@cache
def _insert_sql(table: str, columns: tuple[str, ...]) -> str:
    marks = ", ".join("?" * len(columns))
    return f'INSERT INTO "{table}" ({_cols(columns)}) VALUES ({marks})'


def diff(rows: list[Touched], base: dict[str, dict[tuple, Row | None]]) -> Changes:
    """Per table, the rows inserted, updated and deleted, by primary key. A row's `before` is its
    state in `base` (seed + init) where base has it, else the seed's, as the change log saved it."""
    out: Changes = {}
    for row in rows:
        t, before, after = row.table, row.before, row.after
        table_base = base.get(t.name)
        if table_base is not None and row.key in table_base:
            before = table_base[row.key]
        key = dict(zip(t.key, row.key))
        entry = out.setdefault(t.name, {"inserted": [], "updated": [], "deleted": []})
        if before is None and after is not None:
            entry["inserted"].append({"key": key, "row": after})
        elif before is not None and after is None:
            entry["deleted"].append({"key": key, "row": before})
        elif before is not None and after is not None:
            changed = [c for c in t.columns if before[c] != after[c]
                       or type(before[c]) is not type(after[c])]
            if changed:
                entry["updated"].append({"key": key, "before": {c: before[c] for c in changed},
                                         "after": {c: after[c] for c in changed}})
    return {name: {k: sorted(v, key=lambda e: orjson.dumps(list(e["key"].values())))
                   for k, v in entry.items() if v}
            for name, entry in out.items() if any(entry.values())}


def row_count(changes: Changes) -> int:
    return sum(len(v) for entry in changes.values() for v in entry.values())


def compile_replay(rows: Iterable[Touched]) -> Replay:
    """The statements that put rows in their `after` state (None: absent), keyed by primary key,
    rows of one statement grouped for executemany. Per table every key is deleted first and the
    rows are then inserted whole, with the rowid they had: so the replay does not depend on the
    order of the original writes (a unique value moved from one row to another replays too), and
    rows come back in the physical order the calls left them in."""
    by_table: dict[str, list[Touched]] = {}
    for item in rows:
        by_table.setdefault(item.table.name, []).append(item)
    out: Replay = []

    def add(sql: str, params: list[Any]) -> None:
        if out and out[-1][0] == sql:
            out[-1][1].append(params)
        else:
            out.append((sql, [params]))

    for name, items in by_table.items():
        t = items[0].table
        delete = f'DELETE FROM "{name}" WHERE {_where(t.key)}'
        for item in items:
            add(delete, list(item.key))
        for item in items:
            row = item.after
            if row is None:
                continue
            if t.rowid:
                add(_insert_sql(name, ("rowid", *row)), [item.rowid, *row.values()])
            else:
                add(_insert_sql(name, tuple(row)), list(row.values()))
    return out


def replay_checked(conn: sqlite3.Connection, domain: Domain, changes: Changes) -> None:
    """Apply a recorded diff after checking every row's recorded state against seed + init (the
    seed or init may have changed since the episode was recorded)."""
    rows = []
    for table, entry in changes.items():
        t = table_of(domain, table, "changes")
        for e in entry.get("deleted", ()):
            _well_formed(t, e["key"], e["row"], with_key=True)
            _, now = _expect(conn, t, e["key"], e["row"], "deleted")
            rows.append(Touched(t, _key(t, e["key"]), now, None, None))
        for e in entry.get("updated", ()):
            _well_formed(t, e["key"], e["before"], e["after"], keyless=True)
            rowid, now = _expect(conn, t, e["key"], e["before"], "updated")
            rows.append(Touched(t, _key(t, e["key"]), now, {**now, **e["after"]}, rowid))
        for e in entry.get("inserted", ()):
            _well_formed(t, e["key"], e["row"], with_key=True)
            _expect(conn, t, e["key"], None, "inserted")
            rows.append(Touched(t, _key(t, e["key"]), None, e["row"], None))
    try:
        for sql, params in compile_replay(rows):
            conn.executemany(sql, params)
    except sqlite3.IntegrityError as e:  # a NOT NULL, CHECK or UNIQUE the domain's schema enforces
        raise EndstateError(f"the recorded diff breaks the domain's schema ({e}): it was not made "
                            "by this domain's tools, or the schema changed since") from None


_SQL_VALUES = (str, int, float, type(None))  # what a row read from SQLite holds (no BLOBs)


def _key(t: Table, key: dict[str, Any]) -> tuple:
    return tuple(key[c] for c in t.key)


def _well_formed(t: Table, key: dict[str, Any], *rows: Row, with_key: bool = False,
                 keyless: bool = False) -> None:
    """A recorded change names the table's key columns, only columns the table has, and (a whole
    row) the same key values as its `key`; an update names no key column (a new key is recorded
    as a delete and an insert). Else the diff was not written by endstate."""
    where = f"{t.name}[{key_text(key) if isinstance(key, dict) else key!r}]"
    if not isinstance(key, dict) or set(key) != set(t.key):
        raise EndstateError(f"{where}: a change's key must name the key column(s) {list(t.key)}")
    for row in (key, *rows):
        wrong = next(((c, v) for c, v in row.items() if type(v) not in _SQL_VALUES), None)
        if wrong:
            raise EndstateError(f"{where}.{wrong[0]} is recorded as {wrong[1]!r:.60}; a diff holds "
                                "SQLite values (text, numbers, null), as endstate records them")
    for row in rows:
        unknown = set(row) - set(t.columns)
        if unknown:
            raise EndstateError(f"{where} is recorded with column(s) {sorted(unknown)} that the "
                                f"table does not have; columns: {', '.join(t.columns)}")
        if keyless and set(row) & set(t.key):
            raise EndstateError(f"{where}: an update names key column(s) "
                                f"{sorted(set(row) & set(t.key))}; endstate records a new key as a "
                                "delete and an insert")
        if with_key and any(c in row and row[c] != key[c] for c in t.key):
            raise EndstateError(f"{where}: the recorded row's key is "
                                f"{key_text({c: row.get(c) for c in t.key})}, not its change's key")


def _expect(conn: sqlite3.Connection, t: Table, key: dict[str, Any], before: Row | None,
            what: str) -> tuple[int | None, Row | None]:
    """Check that the row with this key is as recorded (None: absent); its (rowid, row) now."""
    unknown = set(before or ()) - set(t.columns)
    if unknown:
        raise EndstateError(f"{t.name}[{key_text(key)}] is recorded with column(s) "
                            f"{sorted(unknown)} that the table does not have; "
                            f"columns: {', '.join(t.columns)}")
    rowid, now = _current(conn, t, _key(t, key))
    actual = None if now is None else {c: now[c] for c in before or t.key}
    if before is None and actual is not None:
        raise EndstateError(f"{t.name}[{key_text(key)}] is recorded as {what} but already exists "
                            "in seed + init: the domain seed or the task init changed since the "
                            "episode was recorded")
    if before is not None and actual != before:
        raise EndstateError(f"{t.name}[{key_text(key)}] was {before} when the episode was recorded "
                            f"but is {actual} in seed + init now: the domain seed or the task "
                            "init changed since; re-run the episode")
    return rowid, now
