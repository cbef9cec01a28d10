"""One episode's database: a fresh in-memory copy of the domain seed plus the task's `init`, the
domain's tools executed against it, and at the end the diff against that initial state.

The same diff, applied to seed + init, rebuilds the terminal state: that is how `grade` re-grades
stored episodes without re-running them.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from endstate.core.domain import LOG_PREFIX, Domain, Table, shadow
from endstate.core.errors import EndstateError
from endstate.core.tools import Db, ToolError

Row = dict[str, Any]
Changes = dict[str, dict[str, list[dict[str, Any]]]]  # table -> inserted/updated/deleted -> entries

_WRITE_ACTIONS = {sqlite3.SQLITE_INSERT, sqlite3.SQLITE_UPDATE, sqlite3.SQLITE_DELETE}
_ALWAYS_DENIED = {
    sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH, sqlite3.SQLITE_CREATE_TABLE,
    sqlite3.SQLITE_CREATE_INDEX, sqlite3.SQLITE_CREATE_TRIGGER, sqlite3.SQLITE_CREATE_VIEW,
    sqlite3.SQLITE_CREATE_TEMP_TABLE, sqlite3.SQLITE_CREATE_TEMP_INDEX,
    sqlite3.SQLITE_CREATE_TEMP_TRIGGER, sqlite3.SQLITE_CREATE_TEMP_VIEW, sqlite3.SQLITE_CREATE_VTABLE,
    sqlite3.SQLITE_DROP_TABLE, sqlite3.SQLITE_DROP_INDEX, sqlite3.SQLITE_DROP_TRIGGER,
    sqlite3.SQLITE_DROP_VIEW, sqlite3.SQLITE_DROP_TEMP_TABLE, sqlite3.SQLITE_DROP_TEMP_INDEX,
    sqlite3.SQLITE_DROP_TEMP_TRIGGER, sqlite3.SQLITE_DROP_TEMP_VIEW, sqlite3.SQLITE_DROP_VTABLE,
    sqlite3.SQLITE_ALTER_TABLE, sqlite3.SQLITE_REINDEX, sqlite3.SQLITE_ANALYZE,
}


def _tools_authorizer(action, arg1, arg2, dbname, trigger):
    """The agent-facing connection: reads and writes of domain tables, nothing structural."""
    if action == sqlite3.SQLITE_READ:
        return sqlite3.SQLITE_OK
    if action in _ALWAYS_DENIED:
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_PRAGMA:
        return sqlite3.SQLITE_OK if arg1 == "query_only" else sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_FUNCTION and arg2 == "load_extension":
        return sqlite3.SQLITE_DENY
    if action in _WRITE_ACTIONS and arg1.startswith(LOG_PREFIX) and not (trigger or "").startswith(LOG_PREFIX):
        return sqlite3.SQLITE_DENY  # only our triggers may write the change log
    return sqlite3.SQLITE_OK


def _read_only_authorizer(action, arg1, arg2, dbname, trigger):
    """The grader's connection: SELECT and reads only; no writes, ATTACH, PRAGMA or extensions."""
    if action in (sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_RECURSIVE):
        return sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_FUNCTION:
        return sqlite3.SQLITE_DENY if arg2 == "load_extension" else sqlite3.SQLITE_OK
    return sqlite3.SQLITE_DENY


@dataclass
class ToolResult:
    ok: bool
    content: str  # what the agent sees: JSON of the return value, or {"error": ...}
    value: Any = None

    @classmethod
    def error(cls, message: str) -> ToolResult:
        return cls(False, orjson.dumps({"error": message}).decode())


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


INITIAL_STATES_KEPT = 32  # serialized seed + init per task: a GRPO group provisions the same one 8x


def initial_state(domain: Domain, init: Mapping[str, list[Row]] | None, change_log: bool = True) -> bytes:
    """Serialized seed + the task's `init`, built once per task and kept (LRU) for reuse.

    Without `change_log` the triggers are dropped: the grader needs no diff, and the triggers are
    a third of the schema SQLite parses when a connection first touches the database.
    """
    seed_bytes = domain.seed()[0]
    if not init and change_log:
        return seed_bytes
    key = hashlib.sha256(orjson.dumps([init, change_log], option=orjson.OPT_SORT_KEYS)).digest()
    cache = domain.initial_states
    if key in cache:
        cache.move_to_end(key)
        return cache[key]
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.deserialize(seed_bytes)
    conn.execute("BEGIN")
    try:
        for table, rows in (init or {}).items():
            t = table_of(domain, table, "init")
            for row in rows:
                _upsert(conn, t, row)
            # The diff starts after init: forget what init touched.
            conn.execute(f'DELETE FROM "{shadow(table)}"')
        if not change_log:
            for (trigger,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' "
                                           "AND name LIKE ?", (LOG_PREFIX + "%",)).fetchall():
                conn.execute(f'DROP TRIGGER "{trigger}"')
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    cache[key] = conn.serialize()
    conn.close()
    if len(cache) > INITIAL_STATES_KEPT:
        cache.popitem(last=False)
    return cache[key]


def _upsert(conn: sqlite3.Connection, t: Table, row: Row) -> None:
    """Update the row with this key if there is one, else insert it."""
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
            conn.execute(f'INSERT INTO "{t.name}" ({_cols(row)}) VALUES ({", ".join("?" * len(row))})',
                         list(row.values()))
    except sqlite3.DatabaseError as e:
        raise EndstateError(f"init row for {t.name}[{key_text({c: row[c] for c in t.key})}]: "
                            f"{e}; a new row needs every required column") from None


class Sandbox:
    """A fresh database for one episode (or for rebuilding one, in grade)."""

    def __init__(self, domain: Domain, init: Mapping[str, list[Row]] | None = None,
                 allowed_tools: list[str] | None = None, *, change_log: bool = True):
        self.domain = domain
        self.seed_digest = domain.seed()[1]
        self.conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        self.conn.deserialize(initial_state(domain, init, change_log))
        # OR REPLACE deletes the row it replaces; only with recursive triggers does that delete
        # reach the change log.
        self.conn.execute("PRAGMA recursive_triggers = ON")
        self.change_log = change_log
        self.tables: dict[str, Table] = domain.tables
        self.tools = {n: t for n, t in domain.tools.items()
                      if allowed_tools is None or n in allowed_tools}
        unknown = set(allowed_tools or ()) - set(domain.tools)
        if unknown:
            raise EndstateError(f"task allows unknown tool(s) {sorted(unknown)} in domain {domain.name}")
        self.conn.set_authorizer(_tools_authorizer)
        self.db = Db(self.conn, domain.now)
        self._query_only = False

    # -- the agent's side -------------------------------------------------------------------

    def call(self, name: str, args: Any) -> ToolResult:
        """Run one tool call. Every failure becomes an error observation, never an exception."""
        t = self.tools.get(name)
        if t is None:
            return ToolResult.error(f"unknown tool {name!r}; available: {', '.join(self.tools)}")
        problem = t.argument_problem(args)
        if problem:
            return ToolResult.error(f"invalid arguments for {name}: {problem}")
        if self._query_only != (not t.writes):
            self.conn.execute(f"PRAGMA query_only = {0 if t.writes else 1}")
            self._query_only = not t.writes
        # A savepoint per call: a tool that fails half-way leaves no partial writes behind.
        self.conn.execute("SAVEPOINT tool_call")
        try:
            value = t.fn(self.db, **args)
            content = orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
        except ToolError as e:
            self.conn.execute("ROLLBACK TO tool_call")
            return ToolResult.error(str(e))
        except sqlite3.DatabaseError as e:
            self.conn.execute("ROLLBACK TO tool_call")
            kind = "read-only tool tried to write" if "readonly" in str(e) else "database error"
            return ToolResult.error(f"{name} failed: {kind}: {e}")
        except Exception as e:
            self.conn.execute("ROLLBACK TO tool_call")
            return ToolResult.error(f"{name} failed: {type(e).__name__}: {e}")
        finally:
            self.conn.execute("RELEASE tool_call")
        return ToolResult(True, content, value)

    # -- the diff ---------------------------------------------------------------------------

    def changes(self) -> Changes:
        """Per table, the rows inserted, updated and deleted since seed + init, by primary key."""
        if not self.change_log:
            raise RuntimeError("this sandbox was opened without a change log")
        out: Changes = {}
        touched = self.conn.execute(" UNION ALL ".join(
            f"SELECT {i} FROM (SELECT 1 FROM \"{shadow(name)}\" LIMIT 1)"
            for i, name in enumerate(self.tables))).fetchall()
        tables = list(self.tables.values())
        for t in (tables[i] for (i,) in touched):
            cols = _cols(t.columns)
            saved = self.conn.execute(
                f'SELECT {cols}, "{LOG_PREFIX}existed" FROM "{shadow(t.name)}"').fetchall()
            if not saved:
                continue
            entry: dict[str, list[dict[str, Any]]] = {"inserted": [], "updated": [], "deleted": []}
            key_idx = [t.columns.index(c) for c in t.key]
            get = f'SELECT {cols} FROM "{t.name}" WHERE {_where(t.key)}'
            for *values, existed in saved:
                key_values = [values[i] for i in key_idx]
                key = dict(zip(t.key, key_values))
                now = self.conn.execute(get, key_values).fetchone()
                before = dict(zip(t.columns, values)) if existed else None
                after = dict(zip(t.columns, now)) if now else None
                if before is None and after is not None:
                    entry["inserted"].append({"key": key, "row": after})
                elif before is not None and after is None:
                    entry["deleted"].append({"key": key, "row": before})
                elif before is not None and after is not None:
                    changed = [c for c in t.columns if before[c] != after[c]
                               or type(before[c]) is not type(after[c])]
                    if changed:
                        entry["updated"].append({"key": key,
                                                 "before": {c: before[c] for c in changed},
                                                 "after": {c: after[c] for c in changed}})
            entry = {k: sorted(v, key=lambda e: orjson.dumps(list(e["key"].values())))
                     for k, v in entry.items() if v}
            if entry:
                out[t.name] = entry
        return out

    def apply_changes(self, changes: Changes) -> None:
        """Replay a recorded diff on seed + init, checking every recorded `before` still holds."""
        self.conn.set_authorizer(None)
        self.conn.execute("BEGIN")
        try:
            for table, entry in changes.items():
                t = table_of(self.domain, table, "changes")
                for e in entry.get("deleted", []):
                    self._expect(t, e["key"], e["row"], "deleted")
                    self.conn.execute(f'DELETE FROM "{table}" WHERE {_where(e["key"])}',
                                      list(e["key"].values()))
                for e in entry.get("updated", []):
                    self._expect(t, e["key"], e["before"], "updated")
                    self.conn.execute(f'UPDATE "{table}" SET {_sets(e["after"])} WHERE {_where(e["key"])}',
                                      [*e["after"].values(), *e["key"].values()])
                for e in entry.get("inserted", []):
                    self._expect(t, e["key"], None, "inserted")
                    cols = list(e["row"])
                    self.conn.execute(
                        f'INSERT INTO "{table}" ({_cols(cols)}) '
                        f'VALUES ({", ".join("?" * len(cols))})', [e["row"][c] for c in cols])
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")
        self.conn.set_authorizer(_tools_authorizer)

    def _expect(self, t: Table, key: dict[str, Any], before: Row | None, what: str) -> None:
        cols = list(before) if before else list(t.key)
        row = self.conn.execute(
            f'SELECT {_cols(cols)} FROM "{t.name}" '
            f'WHERE {_where(key)}', list(key.values())).fetchone()
        actual = None if row is None else dict(zip(cols, row))
        if before is None and actual is not None:
            raise EndstateError(f"{t.name}[{key_text(key)}] is recorded as {what} but already exists "
                                "in seed + init: the domain seed or the task init changed since the "
                                "episode was recorded")
        if before is not None and actual != before:
            raise EndstateError(f"{t.name}[{key_text(key)}] was {before} when the episode was recorded "
                                f"but is {actual} in seed + init now: the domain seed or the task "
                                "init changed since; re-run the episode")

    def read_only(self) -> sqlite3.Connection:
        """Lock the database for grading: SELECT only, no ATTACH, no extensions."""
        self.conn.execute("PRAGMA query_only = 1")
        self.conn.set_authorizer(_read_only_authorizer)
        return self.conn

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
