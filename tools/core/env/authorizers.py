"""Who may do what on a domain's connections: SQLite authorizers for the tools' connection (reads
and writes of domain tables, no structure, no PRAGMA, no transaction control but the sandbox's
own) and for the grader's (reads only)."""

from __future__ import annotations

import secrets
import sqlite3
import threading

from endstate.core.env.domain import LOG_PREFIX

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


# The sandbox's own transaction statements: only these may begin, end or nest a transaction on a
# tools connection. Their text is this process's own (a comment with a random mark), so that a
# tool's "ROLLBACK" is never served from the statement cache as the one the sandbox prepared.
MARK = f" -- endstate {secrets.token_hex(8)}"
BEGIN, ROLLBACK = "BEGIN" + MARK, "ROLLBACK" + MARK
_OWN = threading.local()  # .on while this thread runs one of them


def own(conn: sqlite3.Connection, sql: str) -> None:
    _OWN.on = True
    try:
        conn.execute(sql)
    finally:
        _OWN.on = False


def tools_authorizer(action, arg1, arg2, dbname, trigger):
    """The agent-facing connection: reads and writes of domain tables, nothing structural."""
    if action == sqlite3.SQLITE_READ:
        return sqlite3.SQLITE_OK
    if action in _ALWAYS_DENIED:
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_PRAGMA:  # a pragma outlives the episode on a shared connection
        return sqlite3.SQLITE_DENY
    if action in (sqlite3.SQLITE_TRANSACTION, sqlite3.SQLITE_SAVEPOINT):
        # BEGIN, COMMIT, ROLLBACK, SAVEPOINT, RELEASE: the sandbox's alone (a COMMIT would write
        # the shared seed, a ROLLBACK lose the episode's state)
        return sqlite3.SQLITE_OK if getattr(_OWN, "on", False) else sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_FUNCTION and arg2 == "load_extension":
        return sqlite3.SQLITE_DENY
    if action in _WRITE_ACTIONS and arg1.startswith(LOG_PREFIX) and not (trigger or "").startswith(LOG_PREFIX):
        # only our triggers write the change log; the sandbox empties it at a base and switches it
        # off while it replays an init it knows (seats: the quiet table)
        return sqlite3.SQLITE_OK if getattr(_OWN, "on", False) else sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


def read_only_authorizer(action, arg1, arg2, dbname, trigger):
    """The grader's connection: SELECT and reads only; no writes, ATTACH, PRAGMA or extensions."""
    if action in (sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_RECURSIVE):
        return sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_FUNCTION:
        return sqlite3.SQLITE_DENY if arg2 == "load_extension" else sqlite3.SQLITE_OK
    return sqlite3.SQLITE_DENY
