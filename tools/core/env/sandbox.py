"""One episode's database: the domain seed plus the task's `init`, the domain's tools executed
against it, and the diff against seed + init.

An episode's state *is* its diff. A sandbox runs on a seat (seats.py: a connection on the seed
with the init in place) that it keeps between tool calls, and reads its diff from the change log
only when asked for it or when another sandbox takes its seat; then it replays the diff when it
next calls. So an episode in flight costs at most the memory of its diff (256 episodes on a 5 MB
seed share a few seats instead of holding 1.3 GB), and the calls of one episode replay nothing.
`grade` rebuilds the terminal state the same way, so rollout and grade see one state through one
code path.

Reading a diff from the change log and turning it back into statements is changes.py.
"""

from __future__ import annotations

import _signal  # signal's own functions: signal.signal wraps each in enum conversions (below)
import hashlib
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import orjson

from endstate.core.env import seats
from endstate.core.env.authorizers import BEGIN, own
from endstate.core.env.changes import (
    Changes,
    Replay,
    Row,
    Touched,
    compile_replay,
    diff,
    key_text,  # noqa: F401 - re-exported: checks import it from here
    replay_checked,
    row_count,
    table_of,
    touched,
    upsert,
)
from endstate.core.env.domain import Domain, Table
from endstate.core.env.seats import Seat, StepBudget
from endstate.core.env.tools import Db, ToolError
from endstate.core.errors import EndstateError


@dataclass
class ToolResult:
    ok: bool
    content: str  # what the agent sees: the return value in the domain's format, or {"error": ...}
    value: Any = None

    @classmethod
    def error(cls, message: str) -> ToolResult:
        return cls(False, orjson.dumps({"error": message}).decode())


PIN_ROWS = 256  # replaying more rows than this per call costs more than keeping a seat
INIT_STATES_KEPT = 4096  # per domain: the diff each task's init makes to the seed (small)


@dataclass(frozen=True)
class InitState:
    """What a task's `init` does to the seed: as a diff to replay, and the rows it leaves, by table
    and key (None: no such row), which are the `before` of an episode's diff; `key` names it."""

    changes: Changes
    rows: dict[str, dict[tuple, Row | None]]
    replay: Replay
    key: bytes = b""


_NO_INIT = InitState({}, {}, [])


class _Building:
    """The owner of a seat while init_state builds on it."""

    seat: Seat | None = None

    def let_go(self, seat: Seat) -> bool:
        return False


def init_state(domain: Domain, init: Mapping[str, list[Row]] | None) -> InitState:
    """The task's `init` applied to the seed (insert, or update by primary key), kept per task. The
    seat it was built on keeps it as its base."""
    if not init:
        return _NO_INIT
    key = hashlib.sha256(orjson.dumps(init, option=orjson.OPT_SORT_KEYS)).digest()
    cache = domain.init_states
    if key in cache:
        cache.move_to_end(key)
        return cache[key]
    builder = _Building()
    seat, _ = seats.take(domain, builder, key)
    try:
        seats.restart(seat)
        for table, rows in init.items():
            t = table_of(domain, table, "init")
            for row in rows:
                upsert(seat.conn, t, row)
        written = touched(seat.conn, domain.tables)
        seats.mark_base(seat, key, domain.tables)
    except BaseException:
        seats.restart(seat)  # half an init: back on the bare seed, no base
        raise
    finally:
        seats.give_back(domain, seat)
    rows_after: dict[str, dict[tuple, Row | None]] = {}
    for row in written:
        rows_after.setdefault(row.table.name, {})[row.key] = row.after
    cache[key] = InitState(diff(written, {}), rows_after, compile_replay(written), key)
    if len(cache) > INIT_STATES_KEPT:
        cache.popitem(last=False)
    return cache[key]


def _invoke(t, db: Db, args: Any, name: str, render: Callable[[Any], str]) -> ToolResult:
    """Run a tool: every way it can fail is an error observation for the agent. A SystemExit or
    KeyboardInterrupt it raises itself is one too; a Ctrl-C that arrives meanwhile (on the main
    thread) still interrupts the run."""
    # _signal, not signal: signal.getsignal/signal convert the handler they return to an enum,
    # which for asyncio's SIGINT handler fails by formatting the repr of the running task: about
    # a tenth of rollout's CPU in bench_rollout's profile.
    interrupted: list[int] = []
    previous = _signal.getsignal(_signal.SIGINT) \
        if threading.current_thread() is threading.main_thread() else None

    def noted(signum, frame):
        interrupted.append(signum)
        if callable(previous):
            return previous(signum, frame)
        if previous != _signal.SIG_IGN:
            raise KeyboardInterrupt

    if previous is not None:  # None: off the main thread (no signal lands there), or set from C
        _signal.signal(_signal.SIGINT, noted)
    try:
        value = t.invoke(db, args)
        return ToolResult(True, render(value), value)
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
            _signal.signal(_signal.SIGINT, previous)


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
        self._touched: list[Touched] = []  # the rows this episode wrote, as last read
        self._diff: Changes | None = {}  # their diff against seed + init (None: not made yet)
        self._replay: Replay = []  # what puts those rows back on a seat at the init's base
        self._stale = False  # the seat holds writes the diff above does not have yet
        self.seat: Seat | None = None

    @property
    def pinned(self) -> bool:
        """Whether this sandbox keeps its seat for good (its diff is past PIN_ROWS rows)."""
        return self.seat is not None and self.seat.pinned

    @contextmanager
    def _state(self) -> Iterator[Seat]:
        """A seat holding seed + init + this episode's diff, for the length of the block."""
        seat, new = seats.take(self.domain, self, self.init.key)
        try:
            if new:
                self.seat = seat
                try:
                    if seat.base != self.init.key:
                        seats.rebase(seat, self.init.key, self.init.replay)
                    for sql, rows in self._replay:
                        seat.conn.executemany(sql, rows)
                except BaseException:
                    seat.base, self.seat = None, None  # half a state: the next owner starts over
                    seats.give_back(self.domain, seat)
                    raise
            yield seat
        finally:
            seat.busy = False

    def _read_diff(self, conn: sqlite3.Connection) -> None:
        """Take the rows this episode wrote from the change log (it holds nothing from below the
        base) and what replays them; their diff is made only when asked for (changes)."""
        self._touched = touched(conn, self.tables)
        self._replay = compile_replay(self._touched)
        self._diff = None
        self._stale = False

    def let_go(self, seat: Seat) -> bool:
        """Asked by seats.take for this sandbox's seat: write the diff down first, unless it is
        past PIN_ROWS (then the seat stays pinned to this sandbox)."""
        if self._stale:
            self._read_diff(seat.conn)
        if self._touched and row_count(self.init.changes) + len(self._touched) > PIN_ROWS:
            seat.pinned = True
            return False
        self.seat = None
        return True

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
        with self._state() as seat:
            conn = seat.conn
            own(conn, seats.SAVE_CALL)  # a tool that fails half-way leaves no partial writes
            # Read-only tools are held to it by counting changes, not by PRAGMA query_only: a
            # pragma expires every prepared statement of the connection.
            writes_before = conn.total_changes
            result = _invoke(t, Db(conn, self.domain.now), args, name, self.domain.render_result)
            wrote = conn.total_changes != writes_before
            if result.ok and wrote and not t.writes:
                result = ToolResult.error(f"{name} failed: read-only tool tried to write")
            seats.check_usable(self.domain, seat)
            if not result.ok:
                own(conn, seats.UNDO_CALL)
            own(conn, seats.END_CALL)
            self._stale |= result.ok and wrote
        return result

    # -- the diff ---------------------------------------------------------------------------

    def changes(self) -> Changes:
        """Per table, the rows inserted, updated and deleted since seed + init, by primary key."""
        if self._stale:
            with self._state() as seat:  # still this sandbox's: a taken seat is never stale
                self._read_diff(seat.conn)
        if self._diff is None:
            self._diff = diff(self._touched, self.init.rows)
        return self._diff

    def apply_changes(self, changes: Changes) -> None:
        """Replay a recorded diff on seed + init, checking every recorded `before` still holds."""
        with self._state() as seat:
            replay_checked(seat.conn, self.domain, changes)
            self._stale = True

    @contextmanager
    def read_only(self, budget: StepBudget | None = None, private: bool = False) -> Iterator[Any]:
        """The state locked for grading: SELECT only, no ATTACH, no extensions, at most `budget`
        steps. `private`: on a connection of its own, closed after the block, for code (python
        checks) that could change a connection beyond what a rollback undoes."""
        if not private:
            with self._state() as seat, seats.reading(seat, budget) as reader:
                yield reader
            return
        with self._private() as conn, seats.locked(conn, budget):
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
        done on it reaches the shared seats."""
        self.changes()  # the diff, written down
        conn = seats.private_connection(self.domain)
        try:
            own(conn, BEGIN)
            for sql, params in (*self.init.replay, *self._replay):
                conn.executemany(sql, params)
            yield conn
        finally:
            conn.close()

    def close(self) -> None:
        """Give the seat back (it keeps the init for the next episode of the task)."""
        seat, self.seat = self.seat, None
        if seat is not None and seat.holder() is self:
            seats.give_back(self.domain, seat)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

