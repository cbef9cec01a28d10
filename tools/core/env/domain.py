"""Domains: folders with schema.sql, seed.py, tools.py, policy.md and optionally checks.py.

Built-in domains (domains/) and user folders (--domains, $ENDSTATE_DOMAINS) load through the same
code. A domain's seed database is built once, deterministically, and cached on disk by the digest of
its inputs; episodes record `seed_digest`, a digest of the seed's *contents*.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import random
import sqlite3
import sys
import tempfile
import warnings
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from types import ModuleType
from typing import Any

import orjson

from endstate import cache_dir
from endstate.core.deprecation import OLD_PATH
from endstate.core.env.folders import REQUIRED_FILES, domain_dirs
from endstate.core.env.results import DEFAULT_FORMAT, RESULT_FORMATS
from endstate.core.env.tools import Tool
from endstate.core.errors import EndstateError

SEED_FORMAT = "3"  # bump when the cached seed layout (change-log tables) changes
DEFAULT_NOW = "2026-01-15T12:00:00"
LOG_PREFIX = "_endstate_"
# While this table holds a row the change log records nothing: a seat replaying an init it knows
# (seats.rebase) would otherwise log every row and then delete the log. Tools cannot write it
# (authorizers: LOG_PREFIX tables are the sandbox's).
QUIET = f"{LOG_PREFIX}quiet"


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[str, ...]
    key: tuple[str, ...]  # primary-key columns: rows in a diff are identified by these
    rowid: bool = True  # False for WITHOUT ROWID tables


def _domain_package(folder: Path) -> str:
    """A package whose path is the domain folder, named after the folder's absolute path (two
    folders may hold domains of one name): the domain's modules load inside it, so that one can
    import its neighbours (`from . import rules` in tools.py)."""
    name = "endstate_domain_" + hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:12]
    if name not in sys.modules:
        package = importlib.util.module_from_spec(
            importlib.util.spec_from_loader(name, loader=None, is_package=True))
        package.__path__ = [str(folder)]
        sys.modules[name] = package
    return name


def _load_module(path: Path, name: str) -> ModuleType:
    """The domain file `path` as the module `name` of its domain's package."""
    name = f"{_domain_package(path.parent)}.{name}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    # registered, as an import would: dataclasses and typing.get_type_hints look a class's module
    # up by name to read string annotations (`from __future__ import annotations`, "Node")
    sys.modules[name] = module
    try:
        with warnings.catch_warnings():  # an old import path is said on stderr, at the domain's line
            warnings.filterwarnings("default", OLD_PATH, DeprecationWarning)
            spec.loader.exec_module(module)
    except Exception as e:
        sys.modules.pop(name, None)
        raise EndstateError(f"{path}: failed to load: {type(e).__name__}: {e}") from e
    return module


@dataclass
class Domain:
    name: str
    path: Path
    _seed: tuple[bytes, str] | None = field(default=None, repr=False)
    # what each task's init does to the seed; filled and bounded by sandbox.init_state
    init_states: OrderedDict[bytes, Any] = field(default_factory=OrderedDict, repr=False)
    # connections on the seed, per (process id, kind): core.env.seats's seats and spares
    seed_connections: dict[tuple[int, str], list[Any]] = field(default_factory=dict, repr=False)

    @cached_property
    def tools_module(self) -> ModuleType:
        return _load_module(self.path / "tools.py", "tools")

    @cached_property
    def tools(self) -> dict[str, Tool]:
        found = {t.name: t for t in (getattr(v, "__endstate_tool__", None)
                                     for v in vars(self.tools_module).values()) if t is not None}
        if not found:
            raise EndstateError(f"{self.path}/tools.py: no tools; mark functions with @tool")
        return found

    @cached_property
    def now(self) -> str:
        return getattr(self.tools_module, "NOW", DEFAULT_NOW)

    @cached_property
    def free(self) -> tuple[str, ...]:
        """What the unrequested-change guard lets any task of this domain change (core.grading.
        footprint): tools.py's FREE, names of columns (`updated_at`: any table), `table.column`s
        or tables (a log)."""
        names = getattr(self.tools_module, "FREE", ())
        if isinstance(names, str) or not all(isinstance(n, str) and self.holds(n) for n in names):
            raise EndstateError(f"{self.path}/tools.py: FREE must be a tuple of this domain's columns "
                                f"(`updated_at`: any table), `table.column`s or tables, not {names!r}")
        return tuple(names)

    def holds(self, name: str) -> bool:
        """Whether `name` is a table, a `table.column` or a column of some table of this domain."""
        table, _, column = name.rpartition(".")
        if table:
            return table in self.tables and column in self.tables[table].columns
        return name in self.tables or any(name in t.columns for t in self.tables.values())

    @cached_property
    def render_result(self) -> Callable[[Any], str]:
        """A tool's return value as its tool message's text, in the format tools.py names with
        RESULTS (core.env.results; default json)."""
        name = getattr(self.tools_module, "RESULTS", DEFAULT_FORMAT)
        if not isinstance(name, str) or name not in RESULT_FORMATS:
            raise EndstateError(f"{self.path}/tools.py: RESULTS = {name!r} names no tool result "
                                f"format; use one of {', '.join(map(repr, RESULT_FORMATS))}")
        return RESULT_FORMATS[name]

    @cached_property
    def checks_module(self) -> ModuleType | None:
        path = self.path / "checks.py"
        return _load_module(path, "checks") if path.exists() else None

    @cached_property
    def policy(self) -> str:
        path = self.path / "policy.md"
        return path.read_text() if path.exists() else ""

    @cached_property
    def tables(self) -> dict[str, Table]:
        conn = sqlite3.connect(":memory:")
        conn.executescript((self.path / "schema.sql").read_text())
        triggers = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")]
        if triggers:
            raise EndstateError(f"{self.path}/schema.sql: defines trigger {triggers[0]}; an episode's "
                                "state is replayed from its diff row by row, so a trigger would apply "
                                "twice: do that work in the tool instead")
        tables = {}
        names = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' "
            "ORDER BY name")]
        for name in names:
            info = conn.execute(f'PRAGMA table_info("{name}")').fetchall()
            key = tuple(r[1] for r in sorted((r for r in info if r[5]), key=lambda r: r[5]))
            if not key:
                raise EndstateError(f"{self.path}/schema.sql: table {name} has no PRIMARY KEY; "
                                    "diffs identify rows by primary key, so add one")
            if any((r[2] or "").upper() == "BLOB" for r in info):
                raise EndstateError(f"{self.path}/schema.sql: table {name} has a BLOB column; "
                                    "records are JSON, use TEXT")
            without_rowid = "WITHOUT ROWID" in " ".join(conn.execute(
                "SELECT sql FROM sqlite_master WHERE name = ?", (name,)).fetchone()[0].upper().split())
            tables[name] = Table(name, tuple(r[1] for r in info), key, rowid=not without_rowid)
        conn.close()
        return tables

    # -- the seed ---------------------------------------------------------------------------

    def input_digest(self) -> str:
        h = hashlib.sha256(SEED_FORMAT.encode())
        for f in ["schema.sql", "seed.py", *sorted(
                str(p.relative_to(self.path)) for p in (self.path / "seed").rglob("*") if p.is_file())]:
            h.update(f.encode() + b"\0" + (self.path / f).read_bytes() + b"\0")
        return h.hexdigest()

    def seed(self) -> tuple[bytes, str]:
        """(serialized seed database with the change log installed, content digest)."""
        if self._seed is None:
            self._seed = self._load_or_build_seed()
        return self._seed

    def _load_or_build_seed(self) -> tuple[bytes, str]:
        stem = cache_dir() / "seeds" / f"{self.name}-{self.input_digest()[:20]}"
        db_path, digest_path = stem.with_suffix(".sqlite"), stem.with_suffix(".digest")
        if db_path.exists() and digest_path.exists():
            return db_path.read_bytes(), digest_path.read_text().strip()
        data, digest = self.build_seed()
        db_path.parent.mkdir(parents=True, exist_ok=True)
        for path, payload in ((db_path, data), (digest_path, digest.encode())):
            # Atomic: concurrent array jobs on shared storage may build the same seed.
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name)
            with os.fdopen(fd, "wb") as f:
                f.write(payload)
            os.replace(tmp, path)
        return data, digest

    def build_seed(self) -> tuple[bytes, str]:
        conn = sqlite3.connect(":memory:", isolation_level=None)
        conn.executescript((self.path / "schema.sql").read_text())
        seed_module = _load_module(self.path / "seed.py", "seed")
        if not hasattr(seed_module, "build"):
            raise EndstateError(f"{self.path}/seed.py: define build(db: sqlite3.Connection, "
                                "rng: random.Random) -> None")
        conn.execute("BEGIN")
        seed_module.build(conn, random.Random(0))
        conn.execute("COMMIT")
        digest = content_digest(conn, self.tables)
        install_change_log(conn, self.tables)
        conn.execute("VACUUM")
        data = conn.serialize()
        conn.close()
        return data, digest


def content_digest(conn: sqlite3.Connection, tables: dict[str, Table]) -> str:
    """sha256 of every row of every table in key order: stable across SQLite page layouts."""
    h = hashlib.sha256()
    for t in tables.values():
        h.update(t.name.encode() + b"\0")
        order = ", ".join(f'"{c}"' for c in t.key)
        for row in conn.execute(f'SELECT * FROM "{t.name}" ORDER BY {order}'):
            h.update(orjson.dumps(row))
    return "sha256:" + h.hexdigest()


def shadow(table: str) -> str:
    return f"{LOG_PREFIX}before_{table}"


def _quoted(columns) -> str:
    return ", ".join(f'"{c}"' for c in columns)


def install_change_log(conn: sqlite3.Connection, tables: dict[str, Table]) -> None:
    """Triggers that save each row's state the first time it is touched, into a shadow table,
    unless the QUIET table holds a row (seats.rebase: an init replayed is not the episode's).

    The diff at the end compares those saved states with the current rows; only touched rows are
    ever read, so the cost is proportional to what the agent changed, not to the database size.
    """
    conn.execute(f'CREATE TABLE "{QUIET}" (on_ INTEGER)')
    when = f'WHEN NOT EXISTS (SELECT 1 FROM "{QUIET}")'
    for t in tables.values():
        log = shadow(t.name)
        conn.execute(f'CREATE TABLE "{log}" ({_quoted(t.columns)}, "{LOG_PREFIX}existed" INTEGER, '
                     f"PRIMARY KEY ({_quoted(t.key)}))")

        # NOT EXISTS, not INSERT OR IGNORE: an outer UPSERT or OR REPLACE overrides a trigger's
        # conflict clause. Only the first touch of a row is saved: that is its state before.
        def save(ref: str, cols: tuple[str, ...], existed: int) -> str:
            values = ", ".join(f'{ref}."{c}"' for c in cols)
            first = " AND ".join(f'"{c}" IS {ref}."{c}"' for c in t.key)
            return (f'INSERT INTO "{log}" ({_quoted(cols)}, "{LOG_PREFIX}existed") '
                    f'SELECT {values}, {existed} WHERE NOT EXISTS (SELECT 1 FROM "{log}" WHERE {first});')

        save_old, note_new = save("OLD", t.columns, 1), save("NEW", t.key, 0)
        conn.execute(f'CREATE TRIGGER "{LOG_PREFIX}ins_{t.name}" AFTER INSERT ON "{t.name}" {when} '
                     f"BEGIN {note_new} END")
        conn.execute(f'CREATE TRIGGER "{LOG_PREFIX}upd_{t.name}" AFTER UPDATE ON "{t.name}" {when} '
                     f"BEGIN {save_old} {note_new} END")
        conn.execute(f'CREATE TRIGGER "{LOG_PREFIX}del_{t.name}" AFTER DELETE ON "{t.name}" {when} '
                     f"BEGIN {save_old} END")


def remove_change_log(conn: sqlite3.Connection) -> None:
    """Drop what install_change_log added, from a copy of a state that leaves endstate."""
    found = conn.execute("SELECT type, name FROM sqlite_master WHERE type IN ('trigger', 'table') "
                         "AND substr(name, 1, ?) = ? ORDER BY type = 'table'",
                         (len(LOG_PREFIX), LOG_PREFIX)).fetchall()
    for kind, name in found:  # the triggers first: they write to the tables
        conn.execute(f'DROP {kind.upper()} "{name}"')


class Domains:
    """All domains visible to a run, by name."""

    def __init__(self, extra_dirs: Sequence[str] = ()):
        self.by_name: dict[str, Domain] = {}
        for path in domain_dirs(extra_dirs):
            missing = [f for f in REQUIRED_FILES if not (path / f).exists()]
            if missing:
                raise EndstateError(f"{path}: not a domain folder, missing {', '.join(missing)}")
            name = path.name
            if name in self.by_name and self.by_name[name].path.resolve() != path.resolve():
                raise EndstateError(f"domain {name!r} is defined twice: {self.by_name[name].path} "
                                    f"and {path}; rename one folder")
            self.by_name[name] = Domain(name, path)

    def __getitem__(self, name: str) -> Domain:
        try:
            return self.by_name[name]
        except KeyError:
            raise EndstateError(f"unknown domain {name!r}; known: {', '.join(sorted(self.by_name))}"
                                "; add yours with --domains DIR (or install a package that "
                                "registers it: docs/api.md)") from None

    def __iter__(self):
        return iter(self.by_name.values())

