"""grade state: the end state of an episode, of its task's gold replay and of seed + init, written
as SQLite files that hold what the grader sees, opened here with sqlite-utils' Python API."""

from contextlib import closing

import orjson
import pytest
import sqlite_utils
from click.testing import CliRunner
from conftest import ROOT

from endstate.core.env.domain import LOG_PREFIX
from endstate.core.env.sandbox import PIN_ROWS, Sandbox
from endstate.core.episode.replays import replay
from endstate.core.grading.grader import Grader
from endstate.grade.cli import cli
from endstate.grade.state import CHANGED_PREFIX, write_state

BUILTIN = sorted(p.name for p in (ROOT / "domains").iterdir() if (p / "schema.sql").exists())


def grade(*args):
    return CliRunner().invoke(cli, ["state", *map(str, args)])


def graders_view(domain, task, changes):
    """Every row of every table, in key order, on the connection the grader checks: seed + init +
    `changes` through Sandbox.apply_changes, locked read-only (core.grader.Grader.check)."""
    sandbox = Sandbox(domain, task.get("init"))
    sandbox.apply_changes(changes)
    with sandbox, sandbox.read_only() as conn:
        return {t.name: conn.execute(f'SELECT * FROM "{t.name}" ORDER BY {order(t)}').fetchall()
                for t in domain.tables.values()}


def file_rows(db, domain):
    return {t.name: [tuple(r.values()) for r in db[t.name].rows_where(order_by=order(t))]
            for t in domain.tables.values()}


def order(table):
    return ", ".join(f'"{c}"' for c in table.key)


def writing_task(domain, tasks):
    """The first task of the domain whose gold calls write."""
    writes = {n for n, t in domain.tools.items() if t.writes}
    return next(t for t in tasks if t["domain"] == domain.name
                and any(s.get("tool") in writes for s in t.get("gold", [])))


def expected_changed(changes, table, terminal):
    """The rows `_changed_<table>` must hold, as (_change, _side, _columns, row) sorted: whole rows,
    an update's sides being its terminal row with the recorded before/after values."""
    entry = changes.get(table, {})
    rows = [("inserted", "after", None, e["row"]) for e in entry.get("inserted", [])]
    rows += [("deleted", "before", None, e["row"]) for e in entry.get("deleted", [])]
    for e in entry.get("updated", []):
        now = terminal[tuple(e["key"].values())]
        assert {c: now[c] for c in e["after"]} == e["after"]
        columns = ",".join(e["after"])
        rows += [("updated", "before", columns, {**now, **e["before"]}),
                 ("updated", "after", columns, now)]
    return sorted(rows, key=repr)


@pytest.mark.parametrize("name", BUILTIN)
def test_episode_gold_and_initial_states_are_what_the_grader_sees(name, domains, tasks, tmp_path):
    domain = domains[name]
    task = writing_task(domain, tasks)
    episode = replay(domain, task, task["gold"])
    episode["attempt"] = 3
    decoy = replay(domain, task, [])  # the same task, attempt 0, nothing done
    episodes = tmp_path / "episodes.jsonl"
    episodes.write_bytes(orjson.dumps(decoy) + b"\n" + orjson.dumps(episode) + b"\n")
    assert episode["changes"], "the gold replay should write"

    end, gold, initial = tmp_path / "end.db", tmp_path / "gold.db", tmp_path / "initial.db"
    for args in ([episodes, "--task", task["id"], "--attempt", 3, "--diff-db", "-o", end],
                 ["--gold", "--task", task["id"], "-o", gold],
                 ["--initial", "--task", task["id"], "-o", initial]):
        result = grade(*args)
        assert result.exit_code == 0, result.output
    gold_changes = Grader(domains).gold_changes(task)
    for path, changes in ((end, episode["changes"]), (gold, gold_changes), (initial, {})):
        with closing(sqlite_utils.Database(path)) as db:
            assert file_rows(db, domain) == graders_view(domain, task, changes), path.name
            extra = {CHANGED_PREFIX + t for t in domain.tables} if path == end else set()
            assert set(db.table_names()) == set(domain.tables) | extra
            assert not [n for n in db.table_names() if n.startswith(LOG_PREFIX)] and db.triggers == []

    with closing(sqlite_utils.Database(end)) as db:
        for t in domain.tables.values():
            terminal = {tuple(r[c] for c in t.key): r for r in db[t.name].rows}
            got = sorted(((r.pop("_change"), r.pop("_side"), r.pop("_columns"), r)
                          for r in db[CHANGED_PREFIX + t.name].rows), key=repr)
            assert got == expected_changed(episode["changes"], t.name, terminal), t.name


def test_a_diff_that_pins_its_sandbox_is_written_whole(domains, tasks, tmp_path):
    """Past PIN_ROWS rows the sandbox keeps its connection; the copy takes the state from there."""
    domain = domains["retail"]
    task = tasks.get("retail-cancel-pending")
    before = graders_view(domain, task, {})["orders"][:300]
    columns = domain.tables["orders"].columns
    stamp = "2026-01-15T12:00:00"
    updated = [{"key": {"id": row[0]}, "before": {"updated_at": row[columns.index("updated_at")]},
                "after": {"updated_at": stamp}} for row in before if row[columns.index("updated_at")] != stamp]
    assert len(updated) > PIN_ROWS
    changes = {"orders": {"updated": updated}}
    out = tmp_path / "pinned.db"
    counts = write_state(domain, task.get("init"), changes, out, diff_tables=True)
    assert counts["orders"] == len(graders_view(domain, task, changes)["orders"])
    with closing(sqlite_utils.Database(out)) as db:
        assert file_rows(db, domain) == graders_view(domain, task, changes)
        assert db["_changed_orders"].count == 2 * len(updated)


@pytest.fixture
def stored(domains, tasks, tmp_path):
    """Two attempts of one retail task and one of another."""
    lines = []
    for task_id, attempt, steps in (("retail-cancel-pending", 0, None), ("retail-cancel-pending", 1, []),
                                    ("retail-update-address", 0, None)):
        task = tasks.get(task_id)
        episode = replay(domains["retail"], task, task["gold"] if steps is None else steps)
        episode["attempt"] = attempt
        lines.append(orjson.dumps(episode) + b"\n")
    path = tmp_path / "episodes.jsonl"
    path.write_bytes(b"".join(lines))
    return path


@pytest.mark.parametrize("args, message", [
    (["--task", "retail-cancel-pending", "--attempt", "5"],
     "no episode in {f} matches --task retail-cancel-pending --attempt 5: its attempts of "
     "retail-cancel-pending are 0, 1"),
    (["--task", "nope"], "no episode in {f} matches --task nope: it holds episodes of 2 task(s): "
     "retail-cancel-pending, retail-update-address"),
    (["--task", "retail-cancel-pending"], "2 episodes in {f} match --task retail-cancel-pending "
     "({f}:1, {f}:2); pick one with --attempt N or --episode-id ID, e.g. --episode-id "),
    ([], "3 episodes are in {f} ({f}:1, {f}:2, {f}:3); pick one with --task ID --attempt N or "
     "--episode-id ID"),
    (["--gold", "--task", "nope"], "unknown task id 'nope' (not in the built-in suites); pass "
     "--tasks FILE that defines it"),
])
def test_errors_say_which_flag_picks_the_episode(stored, tmp_path, args, message):
    result = grade(*([] if "--gold" in args else [stored]), *args, "-o", tmp_path / "out.db")
    assert result.exit_code == 2
    assert result.stderr.startswith(message.format(f=stored)), result.stderr
    assert not list(tmp_path.glob("*.db")) and not list(tmp_path.glob(".*.tmp"))


def test_an_existing_file_is_kept_unless_forced(stored, tmp_path):
    out = tmp_path / "end.db"
    out.write_text("keep me")
    args = [stored, "--task", "retail-update-address", "-o", out]
    result = grade(*args)
    assert result.exit_code == 2
    assert result.stderr == f"{out} exists; pass --force to overwrite it, or another -o FILE\n"
    assert out.read_text() == "keep me"
    result = grade(*args, "--force")
    assert result.exit_code == 0, result.output
    assert result.stderr.startswith(f"wrote {out}: episode retail-update-address/replay/")
    with closing(sqlite_utils.Database(out)) as db:
        assert db["orders"].get("W90031")["shipping_address"] == "400 Lake Shore Dr, Madison, WI 53703"


def test_a_diff_that_no_longer_applies_names_its_line(stored, tmp_path):
    lines = stored.read_bytes().splitlines(keepends=True)
    episode = orjson.loads(lines[2])
    episode["changes"]["orders"]["updated"][0]["before"]["shipping_address"] = "somewhere else"
    stored.write_bytes(lines[0] + lines[1] + orjson.dumps(episode) + b"\n")
    result = grade(stored, "--task", "retail-update-address", "-o", tmp_path / "end.db")
    assert result.exit_code == 4
    assert result.stderr.startswith(f"{stored}:3: orders[W90031] was {{'shipping_address': "
                                    "'somewhere else', "), result.stderr
    assert result.stderr.endswith("the domain seed or the task init changed since; re-run the episode\n")
    assert not list(tmp_path.glob("*.db"))


@pytest.mark.parametrize("args, message", [
    (["--gold", "--initial"], "--gold and --initial are alternatives"),
    (["--initial", "--diff-db"], "--initial has no changes"),
])
def test_flags_that_contradict_each_other(tmp_path, args, message):
    result = grade("--task", "retail-cancel-pending", *args, "-o", tmp_path / "x.db")
    assert result.exit_code == 2 and message in result.stderr
