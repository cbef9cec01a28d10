"""`rollout serve-mcp` driven by the MCP SDK's own stdio client: list the tools, call a task's gold
sequence (tool calls, and what the agent tells the user through the user channel), end the
session, grade the episode the server wrote."""

from __future__ import annotations

import os

import anyio
import orjson
import pytest
from conftest import BIN, ROOT, run_tool

mcp = pytest.importorskip("mcp", reason="the mcp extra: pip install 'endstate[mcp]'")
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from endstate.rollout.mcp_server import USER_LEFT, USER_TOOL

TASKS = ROOT / "tasks" / "bench" / "retail.jsonl"
TASK_ID = "retail-cancel-pending"
SAID_TASK = "retail-refund-received-return"  # a refund (tool calls) and the amount, told (`said`)


def task(task_id: str) -> dict:
    for line in TASKS.read_bytes().splitlines():
        if orjson.loads(line)["id"] == task_id:
            return orjson.loads(line)
    raise KeyError(task_id)


def as_call(step: dict) -> tuple[str, dict]:
    """A gold step as an MCP tool call: a tool call, or a `say` sent through the user channel."""
    return (USER_TOOL, {"message": step["say"]}) if "say" in step else (step["tool"], step["args"])


async def drive(out, calls, task_id=TASK_ID, bad_call=None, flags=()):
    params = StdioServerParameters(command=str(BIN / "rollout"), env=dict(os.environ),
                                   args=["serve-mcp", str(TASKS), "--task", task_id, "--out", str(out),
                                         *flags])
    results = {}
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
        results["instructions"] = init.instructions
        results["tools"] = {t.name: t for t in (await session.list_tools()).tools}
        if bad_call:
            results["bad"] = await session.call_tool(*bad_call)
        results["calls"] = [await session.call_tool(*c) for c in calls]
    return results


def is_error(result) -> bool:
    return result.model_dump(by_alias=True)["isError"] is True


def test_an_mcp_client_doing_the_gold_calls_leaves_an_episode_that_grades_1(tmp_path):
    out = tmp_path / "mcp.jsonl"
    steps = task(TASK_ID)["gold"]
    seen = anyio.run(drive, out, [as_call(s) for s in steps],
                     TASK_ID, ("cancel_order", {"order_id": "W90001", "reason": "bored"}))

    from endstate.core.env.domain import Domains

    sandbox_tools = Domains()["retail"].tools
    assert set(seen["tools"]) == set(sandbox_tools) | {USER_TOOL}
    cancel = seen["tools"]["cancel_order"]
    assert cancel.model_dump(by_alias=True)["inputSchema"] == sandbox_tools["cancel_order"].parameters
    assert "I'd like to cancel an order" in seen["instructions"] and USER_TOOL in seen["instructions"]
    assert is_error(seen["bad"])  # validation error, no write
    assert "invalid arguments" in seen["bad"].content[0].text
    assert not any(is_error(r) for r in seen["calls"])

    [episode] = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert episode["task_id"] == TASK_ID and episode["status"] == "ok"
    assert episode["changes"]["orders"]["updated"][0]["after"]["status"] == "cancelled"
    assert sum(1 for m in episode["messages"] if m["role"] == "tool") == len(steps) + 1
    graded = run_tool("grade", str(out))
    assert graded.returncode == 0, graded.stderr
    assert orjson.loads(graded.stdout)["reward"] == 1


def test_the_user_channel_carries_a_said_task_to_reward_1_and_reports_the_user_leaving(tmp_path):
    """Tool calls plus a message the `said` check needs; the scripted user answers each message in
    turn and, when its script runs out, ends the conversation: the tool says so, and the episode
    is over (a later call is refused and not recorded)."""
    out = tmp_path / "mcp.jsonl"
    said_task = task(SAID_TASK)
    calls = [(USER_TOOL, {"message": "Which email and return is this about?"}),
             *(as_call(s) for s in said_task["gold"]),
             (USER_TOOL, {"message": "Anything else?"}),
             (USER_TOOL, {"message": "Goodbye!"}),
             ("get_order", {"order_id": "W90022"})]
    seen = anyio.run(drive, out, calls, SAID_TASK)
    replies = [r.content[0].text for r in seen["calls"]]
    script = said_task["user"]["script"]
    assert [replies[0], replies[4], replies[5]] == script
    assert replies[6] == USER_LEFT and not is_error(seen["calls"][6])
    assert is_error(seen["calls"][7]) and "the user ended it" in replies[7]

    [episode] = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert episode["termination"] == "user_stop" and episode["status"] == "ok"
    talk = [(m["role"], m["content"]) for m in episode["messages"]
            if m["role"] in ("user", "assistant") and m.get("content")]
    assert talk[:3] == [("user", said_task["user"]["opening"]),
                        ("assistant", "Which email and return is this about?"), ("user", script[0])]
    assert ("assistant", said_task["gold"][-1]["say"]) in talk
    assert talk[-1] == ("assistant", "Goodbye!")  # the user left: no reply recorded
    assert sum(1 for m in episode["messages"] if m["role"] == "tool") == 3  # not the refused call
    graded = orjson.loads(run_tool("grade", str(out)).stdout)
    assert graded["reward"] == 1, graded["checks"]


def test_an_llm_user_answers_through_the_channel_and_its_failure_is_a_system_error(tmp_path):
    from openai_double import HTTP_503, FakeEndpoint, always

    out = tmp_path / "mcp.jsonl"
    with FakeEndpoint(["It's jonas.weber@example.com.", "###STOP###"]) as user:
        flags = ("--user", "llm", "--user-url", user.base_url, "--user-model", "user-llm")
        seen = anyio.run(drive, out, [(USER_TOOL, {"message": "Your email, please?"}),
                                      (USER_TOOL, {"message": "Thanks, bye."})], SAID_TASK, None, flags)
        asked = user.requests[0]["messages"]
    assert [r.content[0].text for r in seen["calls"]] == ["It's jonas.weber@example.com.", USER_LEFT]
    assert task(SAID_TASK)["user"]["instruction"] in asked[0]["content"]
    assert asked[-1] == {"role": "user", "content": "Your email, please?"}  # roles swapped for it
    [episode] = map(orjson.loads, out.read_bytes().splitlines())
    assert episode["termination"] == "user_stop" and episode["usage"]["user"]["completion_tokens"] > 0

    with FakeEndpoint(faults=always(HTTP_503)) as user:
        flags = ("--user", "llm", "--user-url", user.base_url, "--user-model", "u", "--retries", "1")
        seen = anyio.run(drive, out, [(USER_TOOL, {"message": "Hello?"})], SAID_TASK, None, flags)
    assert is_error(seen["calls"][0]) and "system error" in seen["calls"][0].content[0].text
    failed = orjson.loads(out.read_bytes().splitlines()[1])
    assert failed["status"] == "system_error" and failed["error"]["kind"] == "http_5xx"
    assert orjson.loads(run_tool("grade", str(out)).stdout.splitlines()[1])["reward"] is None


def test_without_the_message_the_said_check_fails(tmp_path):
    out = tmp_path / "mcp.jsonl"
    steps = [s for s in task(SAID_TASK)["gold"] if "say" not in s]
    anyio.run(drive, out, [as_call(s) for s in steps], SAID_TASK)
    graded = orjson.loads(run_tool("grade", str(out)).stdout)
    assert graded["reward"] == 0
    assert [c["id"] for c in graded["checks"] if not c["passed"]] == ["told-amount"]


def test_an_mcp_session_without_the_writes_grades_0(tmp_path):
    out = tmp_path / "mcp.jsonl"
    anyio.run(drive, out, [as_call(s) for s in task(TASK_ID)["gold"][:2]])  # looked up, never cancelled
    graded = run_tool("grade", str(out))
    assert orjson.loads(graded.stdout)["reward"] == 0 and not orjson.loads(out.read_bytes())["changes"]


def test_serve_mcp_needs_one_task_over_stdio(tmp_path):
    done = run_tool("rollout", "serve-mcp", str(TASKS), "--out", str(tmp_path / "x.jsonl"))
    assert done.returncode == 2 and "pick one with --task ID" in done.stderr
    done = run_tool("rollout", "serve-mcp", str(TASKS), "--task", "nope", "--out", str(tmp_path / "x.jsonl"))
    assert done.returncode == 2 and "--task 'nope' selects no task" in done.stderr
    done = run_tool("rollout", "serve-mcp", str(TASKS), "--task", TASK_ID, "-n", "4",
                    "--out", str(tmp_path / "x.jsonl"))
    assert done.returncode == 2 and "--repeats only with --http" in done.stderr
    done = run_tool("rollout", "serve-mcp", str(TASKS), "--task", TASK_ID, "--out", "-", cwd=tmp_path)
    assert done.returncode == 2 and "--out: takes a file, not stdout" in done.stderr
    assert not (tmp_path / "-").exists()
