"""The connections on a domain's seed that sandboxes run on ("seats"), and what guards them.

A seat is one in-memory copy of the seed inside an open transaction: a task's init replayed, a
savepoint (its "base") after it, one episode's writes above. A sandbox keeps its seat between tool
calls, so the calls of an episode replay nothing; a seat given back rolls back to its base, so the
next episode of the same task starts with its init in place (the G episodes of a GRPO group, the n
attempts of a probe, the grading after an episode). A process holds at most SEATS of them: past
that, a sandbox that needs one takes a seat on its own base first, else the seat used longest
ago, whose owner first writes its diff down (sandbox.py replays it at its next call). An owner
whose diff is past PIN_ROWS rows keeps its seat: replaying that many rows per call would cost more
than the connection.
"""

from __future__ import annotations

import itertools
import os
import secrets
import sqlite3
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from endstate.core.env.authorizers import (
    BEGIN,
    MARK,
    ROLLBACK,
    own,
    read_only_authorizer,
    tools_authorizer,
)
from endstate.core.env.changes import logged
from endstate.core.env.domain import LOG_PREFIX, QUIET, Domain, Table, shadow
from endstate.core.errors import EndstateError

SEATS = 4  # per process and domain: each is a copy of the seed (5 MB for retail)

_BASE = f"{LOG_PREFIX}base"
SAVE_BASE, TO_BASE = f"SAVEPOINT {_BASE}{MARK}", f"ROLLBACK TO {_BASE}{MARK}"
_CALL = f"{LOG_PREFIX}call"  # the savepoint around each tool call
SAVE_CALL, UNDO_CALL, END_CALL = (f"SAVEPOINT {_CALL}{MARK}", f"ROLLBACK TO {_CALL}{MARK}",
                                  f"RELEASE {_CALL}{MARK}")
_QUIET_ON, _QUIET_OFF = f'INSERT INTO "{QUIET}" VALUES (1){MARK}', f'DELETE FROM "{QUIET}"{MARK}'
# Grading SQL carries this mark: see Guard.
READ_MARK = f"\n-- endstate read {secrets.token_hex(8)}"


class Guard:
    """A seat's authorizer, in tools mode or read-only (grading), switched by a flag: setting an
    authorizer or a pragma expires every prepared statement of the connection, and re-preparing
    them cost grading more than its checks did. SQLite asks the authorizer when a statement is
    prepared, so grading SQL carries READ_MARK: a statement prepared in tools mode is never served
    to a check from the statement cache, and one prepared read-only is never run by a tool."""

    __slots__ = ("read_only",)

    def __init__(self):
        self.read_only = False

    def __call__(self, action, arg1, arg2, dbname, trigger):
        if self.read_only:
            return read_only_authorizer(action, arg1, arg2, dbname, trigger)
        return tools_authorizer(action, arg1, arg2, dbname, trigger)


class Reader:
    """A seat's connection while it is read-only: what checks see (execute marks the SQL)."""

    def __init__(self, conn: sqlite3.Connection):
        self._conn = conn

    def execute(self, sql: str, params: Any = ()) -> sqlite3.Cursor:
        return self._conn.execute(sql + READ_MARK, params)

    @property
    def in_transaction(self) -> bool:
        return self._conn.in_transaction


class SandboxLost(EndstateError):
    """A tool got past the authorizer (closed the connection, or removed the authorizer and ended
    the transaction): the episode's state is gone. In a run its episode is a system_error (kind
    tool) and the run goes on; a replay (grade validate) stops with it."""


def usable(conn: sqlite3.Connection) -> bool:
    try:
        return conn.in_transaction
    except sqlite3.ProgrammingError:  # closed
        return False


def new_connection(domain: Domain) -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False,
                           cached_statements=256)
    seed_bytes, _ = domain.seed()
    conn.deserialize(seed_bytes)
    # OR REPLACE deletes the row it replaces; only with recursive triggers does that delete
    # reach the change log.
    conn.execute("PRAGMA recursive_triggers = ON")
    return conn


@dataclass(eq=False)
class Seat:
    conn: sqlite3.Connection
    guard: Guard = field(default_factory=Guard)
    base: bytes | None = None  # the init under the base savepoint (None: no transaction yet)
    owner: weakref.ref | None = None  # the sandbox whose state is above the base
    busy: bool = False  # inside a block of its owner: never taken
    pinned: bool = False  # its owner's diff is past PIN_ROWS: never taken
    used: int = 0  # when its owner last took it: the longest unused is taken first

    def holder(self) -> Any:
        return self.owner() if self.owner is not None else None


_LOCK = threading.Lock()  # seats change hands under it (episodes may run on worker threads)
_TICKS = itertools.count()


def _pool(domain: Domain) -> list[Seat]:
    return domain.seed_connections.setdefault((os.getpid(), "seats"), [])  # a forked worker: its own


def take(domain: Domain, owner: Any, base: bytes) -> tuple[Seat, bool]:
    """The owner's seat, busy; and whether it is new to the owner (then it is at its base, which
    may not be `base`). `owner.let_go(seat)` is asked to write its diff down before its seat is
    taken; it answers False when its seat is pinned."""
    with _LOCK:
        seat = owner.seat
        if seat is not None and seat.holder() is owner:
            seat.busy, seat.used = True, next(_TICKS)
            return seat, False
        pool = _pool(domain)
        free = [s for s in pool if s.holder() is None and not s.busy]
        seat = next((s for s in free if s.base == base), free[0] if free else None)
        if seat is None and len(pool) >= SEATS:
            # a seat on the same base first: no init to replay (a GRPO group's G episodes share one)
            for s in sorted((s for s in pool if not s.busy and not s.pinned),
                            key=lambda s: (s.base != base, s.used)):
                if s.holder().let_go(s):
                    seat = s
                    break
        if seat is None:  # fewer than SEATS, or every seat busy or pinned
            conn = new_connection(domain)
            seat = Seat(conn)
            conn.set_authorizer(seat.guard)
            pool.append(seat)
        elif seat.base == base:
            own(seat.conn, TO_BASE)  # the last owner's writes (another base: the owner rebases)
        seat.owner, seat.busy, seat.pinned, seat.used = weakref.ref(owner), True, False, next(_TICKS)
        return seat, True


def restart(seat: Seat) -> None:
    """Put `seat` back on the bare seed, in a new transaction (its base to be marked)."""
    if seat.base is not None or usable(seat.conn):
        own(seat.conn, ROLLBACK)
    seat.base = None
    own(seat.conn, BEGIN)


def mark_base(seat: Seat, base: bytes, tables: dict[str, Table]) -> None:
    """What the seat holds now is `base` (a task's init): its owners' writes roll back to here.
    The change log is emptied first, so that it holds an owner's writes only: reading a diff
    (every hand-over of a seat) then reads the rows the episode touched, not the init's too."""
    for t in logged(seat.conn, tables):
        own(seat.conn, f'DELETE FROM "{shadow(t.name)}"{MARK}')
    own(seat.conn, SAVE_BASE)
    seat.base = base


def rebase(seat: Seat, base: bytes, replay: list[tuple[str, list[list[Any]]]]) -> None:
    """Put `seat` on the seed with `replay` (a task's init) applied and the base savepoint after it.
    The replay is not logged (QUIET), so the change log is as empty at the base as on the seed."""
    restart(seat)
    try:
        own(seat.conn, _QUIET_ON)
        for sql, rows in replay:
            seat.conn.executemany(sql, rows)
        own(seat.conn, _QUIET_OFF)
    except BaseException:
        restart(seat)  # half an init, the log off: back on the bare seed, no base
        raise
    own(seat.conn, SAVE_BASE)
    seat.base = base


def give_back(domain: Domain, seat: Seat) -> None:
    """The owner is done with `seat` (it rolls back to its base when next taken)."""
    with _LOCK:
        seat.owner, seat.busy, seat.pinned = None, False, False
        if not usable(seat.conn):
            drop(domain, seat)


def drop(domain: Domain, seat: Seat) -> None:
    """A seat a tool broke: never reused."""
    pool = _pool(domain)
    if seat in pool:
        pool.remove(seat)
    try:
        seat.conn.close()
    except sqlite3.Error:
        pass


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
def reading(seat: Seat, budget: StepBudget | None) -> Iterator[Reader]:
    """`seat` read-only (and under `budget`) for the length of the block."""
    seat.guard.read_only = True
    if budget:
        seat.conn.set_progress_handler(budget, StepBudget.EVERY)
    try:
        yield Reader(seat.conn)
    finally:
        seat.conn.set_progress_handler(None, 0)
        seat.guard.read_only = False


@contextmanager
def locked(conn: sqlite3.Connection, budget: StepBudget | None) -> Iterator[sqlite3.Connection]:
    """A private connection read-only for good: the python checks' (they get the connection
    itself, so the pragma holds at run time too)."""
    conn.set_authorizer(None)
    conn.execute("PRAGMA query_only = 1")
    conn.set_authorizer(read_only_authorizer)
    if budget:
        conn.set_progress_handler(budget, StepBudget.EVERY)
    yield conn


_SPARE = "spare"  # never-used connections, for private states


def private_connection(domain: Domain) -> sqlite3.Connection:
    """A connection of its own on the seed, in tools mode: the spare if one was prepared."""
    spare = domain.seed_connections.get((os.getpid(), _SPARE))
    conn = spare.pop() if spare else new_connection(domain)
    conn.set_authorizer(tools_authorizer)
    return conn


def prepare_private(domain: Domain) -> None:
    """Make the next private state cheap (read_only(private=True)): a fresh connection on the seed,
    its schema parsed, put aside (one at most). For a process that can do it while it waits (check
    processes)."""
    spare = domain.seed_connections.setdefault((os.getpid(), _SPARE), [])
    if spare:
        return
    conn = new_connection(domain)
    conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    spare.append(conn)


def check_usable(domain: Domain, seat: Seat) -> None:
    """Raise SandboxLost (dropping the seat) if a tool ended its transaction or closed it."""
    if not usable(seat.conn):
        with _LOCK:
            drop(domain, seat)
        raise SandboxLost("a tool ended the sandbox's transaction or closed its connection; the "
                          "episode's state is lost (tools must not control transactions)")
