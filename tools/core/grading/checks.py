"""Check kinds: each reads the terminal state (read-only) and the transcript and says pass or fail
with a detail a person can act on, e.g. `orders[W1042].status: expected 'cancelled', got 'pending'`.

A check that cannot be evaluated (unknown table, broken SQL, missing python check) is a bug in the
task, not in the agent: it raises TaskError instead of scoring 0.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from endstate.core.env.changes import Changes, key_text
from endstate.core.env.domain import Domain, Table
from endstate.core.env.nested import readable_row
from endstate.core.errors import EndstateError
from endstate.core.grading import footprint, isolation, match
from endstate.core.grading.judge import Judge
from endstate.core.records.structs import Usage
from endstate.core.registry import Registry


class TaskError(EndstateError):
    """A task whose checks cannot be evaluated as written."""


@dataclass
class Context:
    domain: Domain
    task: dict[str, Any]
    conn: sqlite3.Connection | None  # the terminal state, read-only (None for coroutine kinds)
    changes: Changes
    messages: list[dict[str, Any]]
    replayed: Callable[[list[dict[str, Any]]], Changes]  # a list of gold calls' diff (cached by the caller)
    judge: Judge | None
    judge_usage: Usage = field(default_factory=lambda: Usage(calls=0, cache_hits=0))  # this episode's


Outcome = tuple[bool, str]
Check = Callable[[dict, Context], Outcome | Awaitable[Outcome]]
# A check kind: a function of the check record and the terminal state that says pass or fail with
# a detail; a module outside core adds one with @CHECK_KINDS.register("name"). A coroutine function
# (the judge) runs after the database checks, without the database, and only while none failed.
CHECK_KINDS: Registry[Check] = Registry("check kind")


def _table(ctx: Context, name: str, columns: list[str] = ()) -> Table:
    t = ctx.domain.tables.get(name)
    if t is None:
        raise TaskError(f"unknown table {name!r}; tables: {', '.join(ctx.domain.tables)}")
    unknown = [c for c in columns if c not in t.columns]
    if unknown:
        raise TaskError(f"table {name} has no column(s) {unknown}; columns: {', '.join(t.columns)}")
    return t


def rows_where(ctx: Context, table: str, where: dict[str, Any] | None) -> list[dict[str, Any]]:
    where = where or {}
    t = _table(ctx, table, list(where))
    literal = match.literal_filters(where)
    sql = f'SELECT * FROM "{t.name}"'
    if literal:
        sql += " WHERE " + " AND ".join(f'"{c}" IS ?' for c in literal)
    cur = ctx.conn.execute(sql, list(literal.values()))
    rows = [dict(zip(t.columns, r)) for r in cur]
    return [r for r in rows if all(match.matches(test, r[c]) for c, test in where.items())]


def _name(t: Table, row: dict[str, Any]) -> str:
    return f"{t.name}[{key_text({c: row[c] for c in t.key})}]"


@CHECK_KINDS.register("row")
def check_row(check: dict, ctx: Context) -> Outcome:
    """Exactly one row matches `where`, and its columns meet `expect`; without `expect`, that the
    row exists is the whole check."""
    expect = check.get("expect") or {}
    t = _table(ctx, check["table"], list(expect))
    rows = rows_where(ctx, check["table"], check["where"])
    if len(rows) != 1:
        found = "no row" if not rows else f"{len(rows)} rows (make `where` identify one row)"
        return False, f"{t.name} where {match.describe_where(check['where'])}: expected one row, found {found}"
    row = rows[0]
    wrong = [f"{_name(t, row)}.{c}: expected {match.describe(test)}, got {row[c]!r}"
             for c, test in expect.items() if not match.matches(test, row[c])]
    if wrong:
        return False, "; ".join(wrong)
    if not expect:
        return True, f"{_name(t, row)} exists"
    return True, f"{_name(t, row)}: " + ", ".join(f"{c}={row[c]!r}" for c in expect)


@CHECK_KINDS.register("absent")
def check_absent(check: dict, ctx: Context) -> Outcome:
    t = _table(ctx, check["table"])
    rows = rows_where(ctx, check["table"], check["where"])
    what = f"{t.name} where {match.describe_where(check['where'])}"
    if rows:
        names = ", ".join(_name(t, r) for r in rows[:3]) + (" …" if len(rows) > 3 else "")
        return False, f"{what}: expected no row, found {len(rows)}: {names}"
    return True, f"{what}: no row"


@CHECK_KINDS.register("count")
def check_count(check: dict, ctx: Context) -> Outcome:
    rows = rows_where(ctx, check["table"], check.get("where"))
    what = check["table"] + (f" where {match.describe_where(check['where'])}" if check.get("where") else "")
    ok = match.matches(check["expect"], len(rows))
    return ok, f"{what}: expected {match.describe(check['expect'])} row(s), got {len(rows)}"


@CHECK_KINDS.register("sql")
def check_sql(check: dict, ctx: Context) -> Outcome:
    try:
        rows = [list(r) for r in ctx.conn.execute(check["query"], check.get("params", []))]
    except sqlite3.DatabaseError as e:
        raise TaskError(f"query failed: {e} (checks run read-only: SELECT only)") from None
    expect = check["expect"]
    if isinstance(expect, list):
        return rows == expect, f"query returned {rows!r}, expected {expect!r}"
    actual = rows[0][0] if rows else None
    return match.matches(expect, actual), f"query returned {actual!r}, expected {match.describe(expect)}"


# -- side effects -----------------------------------------------------------------------------

def ignored(check: dict) -> Callable[[str, str], bool]:
    """Whether `check`'s ignore_columns (each `col` or `table.col`) cover a table's column."""
    spec = set(check.get("ignore_columns", []))
    return lambda table, col: col in spec or f"{table}.{col}" in spec


def changed_rows(ctx: Context, changes: Changes, ignore: Callable[[str, str], bool]):
    """(table, kind, key, full row, changed columns) for each change that is not only in ignored
    columns. The full row is the current one (deleted rows: the one that was there)."""
    for table, entry in changes.items():
        t = _table(ctx, table)
        for e in entry.get("inserted", []):
            yield t, "inserted", e["key"], e["row"], {c: (None, v) for c, v in e["row"].items()}
        for e in entry.get("deleted", []):
            yield t, "deleted", e["key"], e["row"], {c: (v, None) for c, v in e["row"].items()}
        for e in entry.get("updated", []):
            cols = {c: (e["before"][c], v) for c, v in e["after"].items() if not ignore(table, c)}
            if cols:
                row = rows_where(ctx, table, {c: v for c, v in e["key"].items()})
                yield t, "updated", e["key"], (row[0] if row else e["after"]), cols


def _describe_change(t: Table, kind: str, key: dict, cols: dict) -> str:
    name = f"{t.name}[{key_text(key)}] {kind}"
    if kind == "updated":
        return name + " (" + ", ".join(f"{c}: {b!r} → {a!r}" for c, (b, a) in cols.items()) + ")"
    return name


@CHECK_KINDS.register("only_changes")
def check_only_changes(check: dict, ctx: Context) -> Outcome:
    changes = list(changed_rows(ctx, ctx.changes, ignored(check)))
    claimed = [0] * len(changes)
    problems = []
    for allow in check["allow"]:
        _table(ctx, allow["table"], list(allow.get("where", {})))
        hits = [i for i, (t, _, _, row, _) in enumerate(changes) if t.name == allow["table"]
                and all(match.matches(test, row.get(c)) for c, test in allow.get("where", {}).items())]
        want = allow.get("count", 1)
        if len(hits) != want:
            where = f" where {match.describe_where(allow['where'])}" if allow.get("where") else ""
            problems.append(f"expected {want} change(s) in {allow['table']}{where}, found {len(hits)}")
        for i in hits:
            claimed[i] += 1
    extra = [_describe_change(t, kind, key, cols)
             for (t, kind, key, _, cols), n in zip(changes, claimed) if n == 0]
    problems += [f"unexpected change: {e}" for e in extra]
    if problems:
        return False, "; ".join(problems)
    return True, f"{len(changes)} change(s), all expected"


def terminal(changes: Changes, ignore: Callable[[str, str], bool] = lambda table, col: False
             ) -> dict[tuple[str, str], Any]:
    """What `changes` leaves in each row it touches, by (table, key_text): "deleted", or the
    values it set (an insert's whole row), ignored columns left out; a row changed only in ignored
    columns is left out too. Two diffs of one start state end alike exactly when these are equal:
    gold_state's comparison, and `grade audit`'s."""
    ends: dict[tuple[str, str], Any] = {}
    for table, entry in changes.items():
        for e in entry.get("inserted", []):
            ends[table, key_text(e["key"])] = {c: v for c, v in e["row"].items() if not ignore(table, c)}
        for e in entry.get("deleted", []):
            ends[table, key_text(e["key"])] = "deleted"
        for e in entry.get("updated", []):
            cols = {c: v for c, v in e["after"].items() if not ignore(table, c)}
            if cols:
                ends[table, key_text(e["key"])] = cols
    return ends


@CHECK_KINDS.register("gold_state")
def check_gold_state(check: dict, ctx: Context) -> Outcome:
    ignore = ignored(check)
    mine, gold = terminal(ctx.changes, ignore), terminal(ctx.replayed(ctx.task.get("gold", [])), ignore)
    diffs = []
    for where in sorted(mine.keys() | gold.keys()):
        a, b = mine.get(where, "unchanged"), gold.get(where, "unchanged")
        if a != b:
            diffs.append(f"{where[0]}[{where[1]}]: gold leaves {_readable(b)!r}, episode leaves "
                         f"{_readable(a)!r}")
    if diffs:
        more = f" (+{len(diffs) - 3} more)" if len(diffs) > 3 else ""
        return False, "terminal state differs from gold: " + "; ".join(diffs[:3]) + more
    return True, f"terminal state equals gold ({len(gold)} changed row(s))"


@CHECK_KINDS.register("footprint")
def check_footprint(check: dict, ctx: Context) -> Outcome:
    """Nothing changed that the gold (or one of the check's `alternatives`) leaves alone, but
    what the domain and the check declare free (core.grading.footprint). Every task has one."""
    free = check.get("free", [])
    unknown = [n for n in free if not ctx.domain.holds(n)]
    if unknown:
        raise TaskError(f"footprint check frees {unknown}: neither a table, a table.column nor a "
                        f"column of domain {ctx.domain.name}; tables: {', '.join(ctx.domain.tables)}")
    paths = [ctx.replayed(ctx.task.get("gold", [])), *map(ctx.replayed, check.get("alternatives", []))]
    return footprint.guard(ctx.changes, paths, footprint.free_of([*ctx.domain.free, *free]))


def _readable(end: Any) -> Any:
    """What a row ends as, for a detail: an imported document's `_absent` bookkeeping folded in."""
    return readable_row(end) if isinstance(end, dict) else end


# -- the transcript ---------------------------------------------------------------------------

@CHECK_KINDS.register("said")
def check_said(check: dict, ctx: Context) -> Outcome:
    value = check["value"]
    options = value["any_of"] if isinstance(value, dict) else [value]
    text = match.visible_assistant_text(ctx.messages)
    for v in options:
        if match.said(v, text):
            return True, f"the agent said {v!r}"
    return False, "the agent never told the user " + " or ".join(map(repr, options))


PYTHON_LINES = 20_000_000  # lines a python check may run (~3 s traced); a sound one runs thousands


@CHECK_KINDS.register("python")
def check_python(check: dict, ctx: Context) -> Outcome:
    """The domain's checks.py function, in a process of its own (core.grading.isolation): under
    the line budget, a wall-clock and a memory bound; whatever it does, it costs this episode."""
    name = check["name"]
    if name.startswith("_"):
        raise TaskError(f"no python check function {name!r} in {ctx.domain.path}/checks.py")
    answer = isolation.run_check(ctx.domain, {
        "name": name, "params": check.get("params", {}), "init": ctx.task.get("init"),
        "changes": ctx.changes, "messages": ctx.messages, "lines": PYTHON_LINES})
    if "error" in answer:
        error = answer["error"]
        raise TaskError(error if error.startswith(name) else f"{name}: {error}")
    passed = answer["passed"]
    return passed, answer["detail"] or f"{name}: {'passed' if passed else 'failed'}"


@CHECK_KINDS.register("judge")
async def check_judge(check: dict, ctx: Context) -> Outcome:
    if ctx.judge is None:
        raise TaskError("this task has a judge check: pass --judge-model and --judge-base-url "
                        "(or set ENDSTATE_JUDGE_MODEL and ENDSTATE_JUDGE_BASE_URL)")
    verdict = await ctx.judge.ask(ctx.messages, check["question"])
    ctx.judge_usage.add(verdict.usage)
    said = "YES" if verdict.passed else "NO"
    return verdict.passed, f"judge {ctx.judge.model} answered {said}: {check['question']}"
