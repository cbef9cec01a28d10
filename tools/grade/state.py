"""`grade state`: the database an episode left behind (or its task's gold replay, or seed + init)
as a plain SQLite file that sqlite3, sqlite-utils and Datasette open.

The state is rebuilt exactly as the grader rebuilds it: core.sandbox's Sandbox on seed + the
task's init, the episode's recorded diff through `Sandbox.apply_changes` (every recorded `before`
checked on the way), then copied out with `Connection.backup` (`Sandbox.copy_to`). The copy loses
endstate's change log (the `_endstate_*` shadow tables and their triggers): it is the sandbox's
bookkeeping, and its triggers would fire on every edit someone makes to the file.

With `diff_tables`, each domain table T gets a companion `_changed_T`: T's columns plus
`_change` (inserted, updated, deleted), `_side` (before, after) and `_columns` (an update's changed
columns, comma-separated), one whole row per side of each change in the diff, so what the agent
changed is one query: `SELECT * FROM _changed_orders`.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from endstate.core.env.changes import Changes
from endstate.core.env.domain import Domain, Table, remove_change_log
from endstate.core.env.sandbox import Sandbox
from endstate.core.errors import EndstateError
from endstate.core.records.jsonl import Loc

# sqlite_utils is imported where a state is written: it imports pandas where that is installed
# (~0.5 s that every `grade` paid at start)
if TYPE_CHECKING:
    import sqlite_utils

CHANGED_PREFIX = "_changed_"
SHOWN = 5  # ids and locations named in an error message


def pick_episode(records: Iterable[tuple[Loc, dict[str, Any]]], where: str, task_id: str | None,
                 attempt: int | None, episode_id: str | None) -> tuple[Loc, dict[str, Any]]:
    """The one episode of `records` (read from `where`) that matches every given selector; else
    an error that says what the input holds and which flag picks one."""
    found: list[tuple[Loc, dict[str, Any]]] = []
    seen: dict[str, set[int]] = {}  # task id -> attempts, for the message when nothing matches
    for loc, episode in records:
        seen.setdefault(episode["task_id"], set()).add(episode["attempt"])
        if (task_id in (None, episode["task_id"]) and attempt in (None, episode["attempt"])
                and episode_id in (None, episode["episode_id"])):
            found.append((loc, episode))
    selectors = (("--task", task_id), ("--attempt", attempt), ("--episode-id", episode_id))
    wanted = " ".join(f"{flag} {value}" for flag, value in selectors if value is not None)
    if len(found) == 1:
        return found[0]
    if not seen:
        raise EndstateError(f"{where} holds no episodes; pass the file rollout or probe wrote")
    if not found:
        raise EndstateError(f"no episode in {where} matches {wanted}: {_holdings(seen, task_id)}")
    locs = ", ".join(str(loc) for loc, _ in found[:SHOWN]) + (", …" if len(found) > SHOWN else "")
    missing = " ".join(flag for flag, value in (("--task ID", task_id), ("--attempt N", attempt))
                       if value is None)
    pick = f"{missing} or --episode-id ID" if missing else "--episode-id ID"
    what = f"episodes in {where} match {wanted}" if wanted else f"episodes are in {where}"
    raise EndstateError(f"{len(found)} {what} ({locs}); pick one with {pick}, "
                        f"e.g. --episode-id {found[0][1]['episode_id']}")


def _holdings(seen: dict[str, set[int]], task_id: str | None) -> str:
    if task_id in seen:
        return f"its attempts of {task_id} are {', '.join(map(str, sorted(seen[task_id])))}"
    ids = sorted(seen)
    return (f"it holds episodes of {len(ids)} task(s): {', '.join(ids[:SHOWN])}"
            + (", …" if len(ids) > SHOWN else ""))


def output_path(out_file: str, force: bool) -> Path:
    """-o FILE, checked: a new regular file (or, with --force, one to replace) in a folder that
    exists. The state is written whole beside it and moved into place, so never stdout, a device,
    a folder or a symlink (the move would replace the link, not its target)."""
    out = Path(out_file)
    if out_file == "-" or (out.exists() or out.is_symlink()) and not out.is_file():
        raise EndstateError(f"-o {out_file}: give a path for a new SQLite file (it is written whole "
                            "and moved into place, so not stdout, a device, a folder or a symlink)")
    if out.is_symlink():
        raise EndstateError(f"-o {out_file} is a symlink; give the path it points to, or another")
    if not out.parent.is_dir():
        raise EndstateError(f"-o {out_file}: folder {out.parent} does not exist")
    if out.exists() and not force:
        raise EndstateError(f"{out} exists; pass --force to overwrite it, or another -o FILE")
    return out


def write_state(domain: Domain, init: dict[str, Any] | None, changes: Changes, out: Path,
                *, diff_tables: bool = False) -> dict[str, int]:
    """Write seed + `init` + `changes` to the SQLite file `out` (replaced whole, never half
    written); with `diff_tables`, the `_changed_*` tables too. Returns rows per domain table."""
    sandbox = Sandbox(domain, init)
    sandbox.apply_changes(changes)
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # as a plain open() would create it; mkstemp makes it private
    try:
        dest = sqlite3.connect(tmp, isolation_level=None)
        try:
            with sandbox:
                sandbox.copy_to(dest)
            remove_change_log(dest)
            import sqlite_utils

            db = sqlite_utils.Database(dest)
            if diff_tables:
                add_changed_tables(db, domain, changes)
            dest.execute("VACUUM")
            counts = {t: db[t].count for t in domain.tables}
        finally:
            dest.close()
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return counts


def add_changed_tables(db: sqlite_utils.Database, domain: Domain, changes: Changes) -> None:
    """A `_changed_T` table for every domain table T (empty when the diff leaves T alone)."""
    for t in domain.tables.values():
        table = db[t.name]
        changed = db[CHANGED_PREFIX + t.name]
        changed.create({"_change": str, "_side": str, "_columns": str, **table.columns_dict},
                       pk=(*t.key, "_side"))
        changed.insert_all(changed_rows(table, t, changes.get(t.name, {})))


def changed_rows(table: sqlite_utils.db.Table, t: Table,
                 entry: dict[str, list[dict[str, Any]]]) -> Iterator[dict[str, Any]]:
    """Whole rows for each change of one table: an update's `before` is its row now with the
    recorded old values of the columns it changed."""
    for e in entry.get("inserted", ()):
        yield {"_change": "inserted", "_side": "after", **e["row"]}
    for e in entry.get("deleted", ()):
        yield {"_change": "deleted", "_side": "before", **e["row"]}
    for e in entry.get("updated", ()):
        key = tuple(e["key"][c] for c in t.key)
        now = table.get(key if len(key) > 1 else key[0])
        columns = ",".join(e["after"])
        yield {"_change": "updated", "_side": "before", "_columns": columns, **now, **e["before"]}
        yield {"_change": "updated", "_side": "after", "_columns": columns, **now}
