"""Nothing a check or a tool does escapes its episode: a python check runs in a process of its own
under a wall-clock and a memory bound that also hold for work done in C and for sleeps, and its
SystemExit, KeyboardInterrupt or os._exit is a task defect of that episode; a tool's SystemExit or
KeyboardInterrupt, and its transaction control, cost that call only."""

from __future__ import annotations

import os
import time

import orjson
import pytest
from conftest import run_tool
from openai_double import FakeEndpoint, gold_policy
from test_fault_containment import COMMITS
from test_sandbox import make_domain

from endstate.core.env import sandbox as sandbox_module
from endstate.core.env.domain import Domains
from endstate.core.env.sandbox import Sandbox
from endstate.core.env.seats import SandboxLost
from endstate.core.episode.replays import replay
from endstate.core.grading import isolation
from endstate.core.grading.grader import Grader

CHECKS = '''
import os, re, sys, time

def fine(conn, messages):
    return conn.execute("SELECT qty FROM items WHERE id = 'I1'").fetchone()[0] == 5

def c_loop(conn, messages):
    return sum(range(10**11)) > 0

def sleeps(conn, messages):
    time.sleep(1e6)

def regex(conn, messages):
    return re.match(r"(a+)+$", "a" * 64 + "b") is not None

def hungry(conn, messages):
    return len(bytearray(512 << 20)) > 0

def exits(conn, messages):
    sys.exit(0)

def interrupts(conn, messages):
    raise KeyboardInterrupt

def dies(conn, messages):
    os._exit(3)
''' + COMMITS

TOOLS_EXTRA = '''

@tool(writes=True)
def leave(db: Db) -> dict:
    """A tool that exits."""
    raise SystemExit(0)

@tool(writes=True)
def bypass(db: Db) -> dict:
    """A tool that removes the authorizer and rolls back: deliberate, in-process code."""
    db._conn.set_authorizer(None)
    db._conn.execute("ROLLBACK")
    return {}

@tool(writes=True)
def stop(db: Db) -> dict:
    """A tool that raises KeyboardInterrupt."""
    raise KeyboardInterrupt
'''


@pytest.fixture
def shop(tmp_path, monkeypatch):
    monkeypatch.setenv("ENDSTATE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(isolation, "PYTHON_SECONDS", 3.0)  # 10 s in production
    monkeypatch.setattr(isolation, "PYTHON_MEMORY", 256 << 20)  # 2 GiB in production
    d = make_domain(tmp_path / "domains")
    (d / "checks.py").write_text(CHECKS)
    (d / "tools.py").write_text((d / "tools.py").read_text() + TOOLS_EXTRA)
    return Domains([str(d)])


def task(*names: str, gold=None) -> dict:
    checks = [{"kind": "python", "name": n} for n in names]
    return {"id": "s1", "domain": "shop", "user": {"instruction": "i", "opening": "o"},
            "checks": checks, "gold": gold or [{"tool": "set_qty", "args": {"item_id": "I1", "qty": 5}}]}


@pytest.mark.parametrize("name, says", [
    ("c_loop", "ran past 3 s"), ("sleeps", "ran past 3 s"), ("regex", "ran past 3 s"),
    ("hungry", "MemoryError"), ("exits", "SystemExit"), ("interrupts", "KeyboardInterrupt"),
    ("dies", "its process died (exit code 3)"),
    ("commits", "ended the grading transaction"),
])
def test_a_check_that_escapes_its_bounds_is_a_task_defect_of_its_episode(shop, name, says):
    """Before: sum(range(10**11)), a sleep or a catastrophic regex hung grade (the line budget
    counts Python lines, not work in C), and sys.exit(0) ended grade with exit 0 and no output."""
    t = task("fine", name)
    grader = Grader(shop)
    started = time.monotonic()
    graded = grader.grade(replay(shop["shop"], t, t["gold"]), t)
    assert time.monotonic() - started < 30
    assert (graded["status"], graded["reward"], graded["error"]["kind"]) == ("system_error", None, "task")
    assert graded["error"]["message"].startswith(f"task s1 check 1:python: {name}")
    assert says in graded["error"]["message"]
    again = task("fine")  # the next check runs, in a fresh process if the last one was killed
    assert grader.grade(replay(shop["shop"], again, again["gold"]), again)["reward"] == 1


def test_grade_writes_every_episode_when_a_check_exits(shop, tmp_path):
    tasks = [task("exits") | {"id": "s1"}, task("fine") | {"id": "s2"}]
    episodes = [replay(shop["shop"], t, t["gold"]) for t in tasks]
    (tmp_path / "t.jsonl").write_bytes(b"".join(orjson.dumps(t) + b"\n" for t in tasks))
    (tmp_path / "e.jsonl").write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in episodes))
    p = run_tool("grade", "--domains", str(tmp_path / "domains"), "--tasks", str(tmp_path / "t.jsonl"),
                 str(tmp_path / "e.jsonl"), env={"ENDSTATE_CACHE": str(tmp_path / "cache")})
    assert p.returncode == 0, p.stderr
    graded = [orjson.loads(line) for line in p.stdout.splitlines()]
    assert [(g["task_id"], g["reward"]) for g in graded] == [("s1", None), ("s2", 1)]


def test_the_bound_holds_in_a_forked_worker_too(shop):
    """Each process has its own check process: a forked episode worker never writes into its
    parent's pipe."""
    t = task("fine")
    grader = Grader(shop)
    assert grader.grade(replay(shop["shop"], t, t["gold"]), t)["reward"] == 1
    pid = os.fork()
    if pid == 0:
        ok = grader.grade(replay(shop["shop"], t, t["gold"]), t)["reward"] == 1
        os._exit(0 if ok else 1)
    assert os.waitpid(pid, 0)[1] == 0
    assert grader.grade(replay(shop["shop"], t, t["gold"]), t)["reward"] == 1


@pytest.mark.parametrize("pinned", [False, True])
@pytest.mark.parametrize("sql", ["ROLLBACK", "BEGIN", "COMMIT", "END", "SAVEPOINT x",
                                 "RELEASE x", "ROLLBACK TO x", "ROLLBACK TO _endstate_call"])
def test_transaction_control_in_a_tool_costs_that_call_only(shop, sql, pinned, monkeypatch):
    """Before: a ROLLBACK stopped the run (exit 2); BEGIN, SAVEPOINT and RELEASE got through."""
    if pinned:  # a sandbox past PIN_ROWS keeps its connection, a savepoint around each call
        monkeypatch.setattr(sandbox_module, "PIN_ROWS", 0)
    with Sandbox(shop["shop"]) as s:
        assert s.call("set_qty", {"item_id": "I1", "qty": 107}).ok
        result = s.call("escape", {"sql": sql})
        assert not result.ok and "not authorized" in result.content
        assert s.call("set_qty", {"item_id": "I2", "qty": 108}).ok
        assert set(s.changes()["items"]) == {"updated"} and len(s.changes()["items"]["updated"]) == 2


def test_a_tool_that_works_around_the_authorizer_costs_its_episode(shop):
    with Sandbox(shop["shop"]) as s, pytest.raises(SandboxLost, match="the episode's state is lost"):
        s.call("bypass", {})
    with Sandbox(shop["shop"]) as s:  # the connection was dropped, the next episode is whole
        assert s.call("set_qty", {"item_id": "I1", "qty": 5}).ok


@pytest.mark.parametrize("tool, says", [("leave", "SystemExit"), ("stop", "KeyboardInterrupt")])
def test_a_tool_that_exits_or_interrupts_costs_that_call_only(shop, tool, says):
    with Sandbox(shop["shop"]) as s:
        result = s.call(tool, {})
        assert not result.ok and f"{tool} failed: {says}" in result.content
        assert s.call("set_qty", {"item_id": "I1", "qty": 5}).ok


def test_a_rollout_run_survives_tools_that_roll_back_or_exit(shop, tmp_path):
    """Before: a tool running ROLLBACK stopped the whole run (exit 2, naming neither tool nor
    task, some episodes never written). A tool that works around the authorizer costs its
    episode (system_error, kind tool), not the run."""
    gold = [{"tool": "escape", "args": {"sql": "ROLLBACK"}}, {"tool": "leave", "args": {}},
            {"tool": "set_qty", "args": {"item_id": "I1", "qty": 5}}]
    tasks = [task("fine", gold=gold) | {"id": f"s{i}", "user": {"instruction": "i", "opening": f"o{i}",
                                                                 "script": []}}
             for i in range(3)]
    tasks.append(task("fine", gold=[{"tool": "bypass", "args": {}}]) | {
        "id": "lost", "user": {"instruction": "i", "opening": "o-lost", "script": []}})
    (tmp_path / "t.jsonl").write_bytes(b"".join(orjson.dumps(t) + b"\n" for t in tasks))
    with FakeEndpoint(policy=gold_policy(tasks)) as endpoint:
        p = run_tool("rollout", "run", str(tmp_path / "t.jsonl"), "-n", "3", "--domains",
                     str(tmp_path / "domains"), "--backend", "chat", "--agent-url", endpoint.base_url,
                     "--model", "double", "-q", env={"ENDSTATE_CACHE": str(tmp_path / "cache")})
    assert p.returncode == 0, p.stderr
    episodes = [orjson.loads(line) for line in p.stdout.splitlines()]
    ok = [e for e in episodes if e["task_id"] != "lost"]
    assert len(ok) == 9 and {e["status"] for e in ok} == {"ok"}
    assert all(e["changes"]["items"]["updated"][0]["after"] == {"qty": 5} for e in ok)
    lost = [e for e in episodes if e["task_id"] == "lost"]
    assert [(e["status"], e["error"]["kind"]) for e in lost] == [("system_error", "tool")] * 3
