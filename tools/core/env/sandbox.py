"""One episode's database: the domain seed plus the task's `init`, the domain's tools executed
against it, and the diff against seed + init.

An episode's state *is* its diff. Between tool calls a sandbox holds only that diff; a call takes
one of the domain's seed connections, replays init and the diff inside a transaction, runs the tool,
reads the new diff from the change log and rolls back. So an episode in flight costs the memory of
its diff, not a copy of the database (256 episodes on a 5 MB seed share a few connections instead
of holding 1.3 GB), and starting one costs nothing. `grade` rebuilds the terminal state the same
way, so rollout and grade see one state through one code path.

A diff past PIN_ROWS rows (a tool that rewrites many rows) would make every call replay it; such a
sandbox keeps its connection and transaction instead ("pinned") until it is closed.

Reading a diff from the change log and turning it back into statements is changes.py.
"""

from __future__ import annotations

import hashlib
import os
import signal
import sqlite3
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import orjson

from endstate.core.env.authorizers import (
    BEGIN,
    MARK,
    ROLLBACK,
    own,
    read_only_authorizer,
    tools_authorizer,
)
from endstate.core.env.changes import (
    Changes,
    Replay,
    Row,
    compile_replay,
    diff,
    key_text,  # noqa: F401 - re-exported: checks import it from here
    replay_checked,
    row_count,
    table_of,
    touched,
    upsert,
)
from endstate.core.env.domain import LOG_PREFIX, Domain, Table
from endstate.core.env.tools import Db, ToolError
from endstate.core.errors import EndstateError


@dataclass
class ToolResult:
    ok: bool
    content: str  # what the agent sees: JSON of the return value, or {"error": ...}
    value: Any = None

    @classmethod
    def error(cls, message: str) -> ToolResult:
        return cls(False, orjson.dumps({"error": message}).decode())


PIN_ROWS = 256  # replaying more rows than this per call costs more than keeping a connection
INIT_STATES_KEPT = 4096  # per domain: the diff each task's init makes to the seed (small)
_CALL = f"{LOG_PREFIX}call"  # the savepoint around each tool call of a pinned sandbox
_SAVEPOINT, _ROLLBACK_CALL, _RELEASE_CALL = (f"SAVEPOINT {_CALL}{MARK}",
                                             f"ROLLBACK TO {_CALL}{MARK}", f"RELEASE {_CALL}{MARK}")


@dataclass(frozen=True)
class InitState:
    """What a task's `init` does to the seed: as a diff to replay, and the rows it leaves, by table
    and key (None: no such row), which are the `before` of an episode's diff."""

    changes: Changes
    rows: dict[str, dict[tuple, Row | None]]
    replay: Replay


_NO_INIT = InitState({}, {}, [])


def _acquire(domain: Domain, purpose: str) -> sqlite3.Connection:
    """An idle connection on the domain's seed (or a new one), in a fresh transaction. Idle
    connections are kept per process (a forked worker opens its own) and per purpose: grading
    switches its connection's authorizer, which expires every prepared statement, so tool calls
    use other connections and keep their statement caches."""
    idle = domain.seed_connections.setdefault((os.getpid(), purpose), [])
    conn = idle.pop() if idle else _new_connection(domain)
    own(conn, BEGIN)
    return conn


class SandboxLost(EndstateError):
    """A tool got past the authorizer (closed the connection, or removed the authorizer and ended
    the transaction): the episode's state is gone. In a run its episode is a system_error (kind
    tool) and the run goes on; a replay (grade validate) stops with it."""


def _usable(conn: sqlite3.Connection) -> bool:
    try:
        return conn.in_transaction
    except sqlite3.ProgrammingError:  # closed
        return False


def _release(domain: Domain, purpose: str, conn: sqlite3.Connection) -> None:
    """Roll the connection back to the seed and make it idle again."""
    if not _usable(conn):  # only a tool working around the authorizer gets here; never reuse it
        conn.close()
        raise SandboxLost("a tool ended the sandbox's transaction or closed its connection; the "
                          "episode's state is lost (tools must not control transactions)")
    own(conn, ROLLBACK)
    domain.seed_connections.setdefault((os.getpid(), purpose), []).append(conn)


_SPARE = "spare"  # never-used connections, for private states


def prepare_private(domain: Domain) -> None:
    """Make the next private state cheap (read_only(private=True)): a fresh connection on the seed,
    its schema parsed, put aside (one at most). For a process that can do it while it waits (check
    processes)."""
    spare = domain.seed_connections.setdefault((os.getpid(), _SPARE), [])
    if spare:
        return
    conn = _new_connection(domain)
    conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    spare.append(conn)


def _new_connection(domain: Domain) -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    seed_bytes, _ = domain.seed()
    conn.deserialize(seed_bytes)
    # OR REPLACE deletes the row it replaces; only with recursive triggers does that delete
    # reach the change log.
    conn.execute("PRAGMA recursive_triggers = ON")
    conn.set_authorizer(tools_authorizer)
    return conn


class StepBudget:
    """At most `steps` SQLite VM steps between resets: a deterministic bound on a check, the same
    on every machine (a time limit would grade the same episode differently under load). Past it,
    the running statement is interrupted (sqlite3.OperationalError) and `exceeded` is set."""

    EVERY = 10_000  # steps between calls of the handler
    STEPS = 200_000_000  # ~3 s of SQLite: far past any sound check

    def __init__(self, steps: int = STEPS):
        self.steps, self.ticks = steps, 0

    def reset(self) -> None:
        self.ticks = 0

    @property
    def exceeded(self) -> bool:
        return self.ticks * self.EVERY > self.steps

    def __call__(self) -> int:
        self.ticks += 1
        return self.exceeded  # nonzero interrupts the statement


@contextmanager
def _locked(conn: sqlite3.Connection, budget: StepBudget | None) -> Iterator[sqlite3.Connection]:
    """`conn` read-only (and under `budget`) for the length of the block, unlocked after."""
    conn.set_authorizer(None)  # the tools' authorizer denies every pragma
    conn.execute("PRAGMA query_only = 1")
    conn.set_authorizer(read_only_authorizer)
    if budget:
        conn.set_progress_handler(budget, StepBudget.EVERY)
    try:
        yield conn
    finally:
        conn.set_progress_handler(None, 0)
        conn.set_authorizer(None)
        conn.execute("PRAGMA query_only = 0")
        conn.set_authorizer(tools_authorizer)


def init_state(domain: Domain, init: Mapping[str, list[Row]] | None) -> InitState:
    """The task's `init` applied to the seed (insert, or update by primary key), kept per task."""
    if not init:
        return _NO_INIT
    key = hashlib.sha256(orjson.dumps(init, option=orjson.OPT_SORT_KEYS)).digest()
    cache = domain.init_states
    if key in cache:
        cache.move_to_end(key)
        return cache[key]
    conn = _acquire(domain, "tools")
    try:
        for table, rows in init.items():
            t = table_of(domain, table, "init")
            for row in rows:
                upsert(conn, t, row)
        written = touched(conn, domain.tables)
    finally:
        _release(domain, "tools", conn)
    rows_after: dict[str, dict[tuple, Row | None]] = {}
    for row in written:
        rows_after.setdefault(row.table.name, {})[row.key] = row.after
    cache[key] = InitState(diff(written, {}), rows_after, compile_replay(written))
    if len(cache) > INIT_STATES_KEPT:
        cache.popitem(last=False)
    return cache[key]


def _invoke(t, db: Db, args: Any, name: str) -> ToolResult:
    """Run a tool: every way it can fail is an error observation for the agent. A SystemExit or
    KeyboardInterrupt it raises itself is one too; a Ctrl-C that arrives meanwhile (on the main
    thread) still interrupts the run."""
    interrupted: list[int] = []
    previous = signal.getsignal(signal.SIGINT) \
        if threading.current_thread() is threading.main_thread() else None

    def noted(signum, frame):
        interrupted.append(signum)
        if callable(previous):
            return previous(signum, frame)
        if previous != signal.SIG_IGN:
            raise KeyboardInterrupt

    if previous is not None:  # None: off the main thread (no signal lands there), or set from C
        signal.signal(signal.SIGINT, noted)
    try:
        value = t.invoke(db, args)
        return ToolResult(True, orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode(), value)
    except ToolError as e:
        return ToolResult.error(str(e))
    except sqlite3.DatabaseError as e:
        return ToolResult.error(f"{name} failed: database error: {e}")
    except (Exception, SystemExit, KeyboardInterrupt) as e:
        if isinstance(e, KeyboardInterrupt) and interrupted:
            raise
        return ToolResult.error(f"{name} failed: {type(e).__name__}: {e}")
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


class Sandbox:
    """One episode's database (or the rebuilt terminal state of one, in grade)."""

    def __init__(self, domain: Domain, init: Mapping[str, list[Row]] | None = None,
                 allowed_tools: list[str] | None = None):
        self.domain = domain
        _, self.seed_digest = domain.seed()
        self.tables: dict[str, Table] = domain.tables
        self.tools = {n: t for n, t in domain.tools.items()
                      if allowed_tools is None or n in allowed_tools}
        unknown = set(allowed_tools or ()) - set(domain.tools)
        if unknown:
            raise EndstateError(f"task allows unknown tool(s) {sorted(unknown)} in domain {domain.name}")
        self.init = init_state(domain, init)
        self._diff: Changes = {}
        self._replay: Replay = self.init.replay  # every row init and the diff touched, as it is now
        self._pinned: sqlite3.Connection | None = None

    @contextmanager
    def _state(self, purpose: str = "tools") -> Iterator[sqlite3.Connection]:
        """A connection holding seed + init + this episode's diff, for the length of the block."""
        if self._pinned is not None:
            yield self._pinned
            return
        conn = _acquire(self.domain, purpose)
        try:
            for sql, rows in self._replay:
                conn.executemany(sql, rows)
            yield conn
        finally:
            if self._pinned is not conn:
                _release(self.domain, purpose, conn)

    def _read_diff(self, conn: sqlite3.Connection) -> None:
        """Take the diff from the change log; a large one pins this connection (module doc)."""
        rows = touched(conn, self.tables)  # init's rows too: they were replayed in this transaction
        self._diff = diff(rows, self.init.rows)
        self._replay = compile_replay(rows)
        if self._pinned is None and row_count(self.init.changes) + row_count(self._diff) > PIN_ROWS:
            self._pinned = conn

    # -- the agent's side -------------------------------------------------------------------

    def call(self, name: str, args: Any) -> ToolResult:
        """Run one tool call. Every failure becomes an error observation, never an exception;
        only a tool that ends the sandbox's transaction (a bug in the domain) raises."""
        t = self.tools.get(name)
        if t is None:
            return ToolResult.error(f"unknown tool {name!r}; available: {', '.join(self.tools)}")
        problem = t.argument_problem(args)
        if problem:
            return ToolResult.error(f"invalid arguments for {name}: {problem}")
        with self._state() as conn:
            # A tool that fails half-way leaves no partial writes behind: unpinned, the whole
            # transaction is rolled back anyway; pinned, a savepoint per call.
            pinned = conn is self._pinned
            if pinned:
                own(conn, _SAVEPOINT)
            # Read-only tools are held to it by counting changes, not by PRAGMA query_only: a
            # pragma expires every prepared statement of the connection.
            writes_before = conn.total_changes
            result = _invoke(t, Db(conn, self.domain.now), args, name)
            if result.ok and not t.writes and conn.total_changes != writes_before:
                result = ToolResult.error(f"{name} failed: read-only tool tried to write")
            if not _usable(conn) and pinned:
                self._pinned = None
                _release(self.domain, "tools", conn)  # raises: the episode's state is gone
            if pinned:
                if not result.ok:
                    own(conn, _ROLLBACK_CALL)
                own(conn, _RELEASE_CALL)
            elif result.ok and t.writes and _usable(conn):  # else _state's release raises
                self._read_diff(conn)
        return result

    # -- the diff ---------------------------------------------------------------------------

    def changes(self) -> Changes:
        """Per table, the rows inserted, updated and deleted since seed + init, by primary key."""
        if self._pinned is not None:
            return diff(touched(self._pinned, self.tables), self.init.rows)
        return self._diff

    def apply_changes(self, changes: Changes) -> None:
        """Replay a recorded diff on seed + init, checking every recorded `before` still holds."""
        with self._state() as conn:
            replay_checked(conn, self.domain, changes)
            self._read_diff(conn)

    @contextmanager
    def read_only(self, budget: StepBudget | None = None,
                  private: bool = False) -> Iterator[sqlite3.Connection]:
        """The state locked for grading: SELECT only, no ATTACH, no extensions, at most `budget`
        steps. `private`: on a connection of its own, closed after the block, for code (python
        checks) that could change a connection beyond what a rollback undoes."""
        if not private:
            with self._state("grade") as conn, _locked(conn, budget):
                yield conn
            return
        with self._private() as conn, _locked(conn, budget):
            yield conn

    def copy_to(self, dest: sqlite3.Connection) -> None:
        """Copy the state, change log included, into `dest` (`grade state` writes it to a file).
        Committed on a private connection first: a backup sees committed pages only."""
        with self._private() as conn:
            conn.set_authorizer(None)  # it commits, and no tool ever runs on it
            conn.execute("COMMIT")
            conn.backup(dest)

    @contextmanager
    def _private(self) -> Iterator[sqlite3.Connection]:
        """The state on a connection of its own, in a transaction, closed after the block: nothing
        done on it reaches the shared seed connections."""
        rows = self._replay if self._pinned is None else \
            compile_replay(touched(self._pinned, self.tables))  # a pinned one's replay is stale
        spare = self.domain.seed_connections.get((os.getpid(), _SPARE))
        conn = spare.pop() if spare else _new_connection(self.domain)
        try:
            own(conn, BEGIN)
            for sql, params in rows:
                conn.executemany(sql, params)
            yield conn
        finally:
            conn.close()

    def close(self) -> None:
        """Give back a pinned connection; an unpinned sandbox holds nothing."""
        if self._pinned is not None:
            conn, self._pinned = self._pinned, None
            _release(self.domain, "tools", conn)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
