"""`rollout serve-mcp` driven by the MCP SDK's own stdio client: list the tools, call a task's gold
sequence, end the session, grade the episode the server wrote."""

from __future__ import annotations

import os

import anyio
import orjson
import pytest
from conftest import BIN, ROOT, run_tool

mcp = pytest.importorskip("mcp", reason="the mcp extra: pip install 'endstate[mcp]'")
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

TASKS = ROOT / "tasks" / "bench" / "retail.jsonl"
TASK_ID = "retail-cancel-pending"


def gold(task_id: str) -> list[dict]:
    for line in TASKS.read_bytes().splitlines():
        task = orjson.loads(line)
        if task["id"] == task_id:
            return task["gold"]
    raise KeyError(task_id)


async def drive(out, steps, bad_call=None):
    params = StdioServerParameters(command=str(BIN / "rollout"), env=dict(os.environ),
                                   args=["serve-mcp", str(TASKS), "--task", TASK_ID, "--out", str(out)])
    results = {}
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
        results["instructions"] = init.instructions
        results["tools"] = {t.name: t for t in (await session.list_tools()).tools}
        if bad_call:
            results["bad"] = await session.call_tool(*bad_call)
        results["calls"] = [await session.call_tool(s["tool"], s["args"]) for s in steps]
    return results


def test_an_mcp_client_doing_the_gold_calls_leaves_an_episode_that_grades_1(tmp_path):
    out = tmp_path / "mcp.jsonl"
    steps = gold(TASK_ID)
    seen = anyio.run(drive, out, steps, ("cancel_order", {"order_id": "W90001", "reason": "bored"}))

    from endstate.core.domain import Domains

    sandbox_tools = Domains()["retail"].tools
    assert set(seen["tools"]) == set(sandbox_tools)
    cancel = seen["tools"]["cancel_order"]
    assert cancel.model_dump(by_alias=True)["inputSchema"] == sandbox_tools["cancel_order"].parameters
    assert "I'd like to cancel an order" in seen["instructions"]
    assert seen["bad"].model_dump(by_alias=True)["isError"] is True  # validation error, no write
    assert "invalid arguments" in seen["bad"].content[0].text
    assert all(not r.model_dump(by_alias=True)["isError"] for r in seen["calls"])

    [episode] = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert episode["task_id"] == TASK_ID and episode["status"] == "ok"
    assert episode["changes"]["orders"]["updated"][0]["after"]["status"] == "cancelled"
    assert sum(1 for m in episode["messages"] if m["role"] == "tool") == len(steps) + 1
    graded = run_tool("grade", str(out))
    assert graded.returncode == 0, graded.stderr
    assert orjson.loads(graded.stdout)["reward"] == 1


def test_an_mcp_session_without_the_writes_grades_0(tmp_path):
    out = tmp_path / "mcp.jsonl"
    anyio.run(drive, out, gold(TASK_ID)[:2])  # looked up, never cancelled
    graded = run_tool("grade", str(out))
    assert orjson.loads(graded.stdout)["reward"] == 0 and not orjson.loads(out.read_bytes())["changes"]


def test_serve_mcp_needs_a_task_when_the_file_has_several(tmp_path):
    done = run_tool("rollout", "serve-mcp", str(TASKS), "--out", str(tmp_path / "x.jsonl"))
    assert done.returncode == 2 and "pick one with --task ID" in done.stderr
    done = run_tool("rollout", "serve-mcp", str(TASKS), "--task", "nope", "--out", str(tmp_path / "x.jsonl"))
    assert done.returncode == 2 and "no task 'nope'" in done.stderr
