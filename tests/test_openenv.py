"""`rollout serve-openenv` driven by OpenEnv's own client (EnvClient over its WebSocket): episodes
give the rewards `rollout` + `grade` give on the same scripted calls (a success and a failure per
built-in domain), bad actions are observations, sessions are isolated, bounded and cleaned up, and
saved episodes go through `grade` and `grade audit`."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import threading
import time

import orjson
import pytest
from conftest import BIN, ROOT, run_tool

pytest.importorskip("openenv", reason="the openenv extra: pip install 'endstate[openenv]'")
from openai_double import FakeEndpoint, gold_policy
from openenv_server import Server

from endstate.core.env.domain import Domains
from endstate.rollout.gateway import listen
from endstate.rollout.openenv_cmd import served_tasks
from endstate.rollout.openenv_types import EndstateAction, EndstateEnvClient

SUITES = {"retail": "bench", "travel": "bench", "support": "bench", "bank": "bench",
          "insurance": "ood", "consulting": "ood"}


def parity_tasks(domains: Domains) -> list[dict]:
    """Per built-in domain, the first task of its suite graded without a judge whose gold writes."""
    chosen = []
    for domain, suite in SUITES.items():
        for line in (ROOT / "tasks" / suite / f"{domain}.jsonl").read_bytes().splitlines():
            task = orjson.loads(line)
            tools = domains[domain].tools
            if task.get("user", {}).get("script") and all(c["kind"] != "judge" for c in task["checks"]) \
                    and any("tool" in s and tools[s["tool"]].writes for s in task["gold"]):
                chosen.append(task)
                break
    assert [t["domain"] for t in chosen] == list(SUITES)
    return chosen


def without_writes(task: dict, domains: Domains) -> dict:
    """The task with its gold's writing calls left out: the scripted failure."""
    tools = domains[task["domain"]].tools
    return {**task, "gold": [s for s in task["gold"] if "tool" not in s or not tools[s["tool"]].writes]}


def as_action(step: dict) -> EndstateAction:
    return EndstateAction(message=step["say"]) if "say" in step else \
        EndstateAction(tool=step["tool"], arguments=step["args"])


def play(env, task: dict, done: str = "Done.") -> list:
    """What gold_policy does through rollout, as OpenEnv steps: the steps, then `done` to the user
    until the episode ends."""
    results = [env.reset(task_id=task["id"])]
    for step in task["gold"]:
        results.append(env.step(as_action(step)))
        if results[-1].done:
            return results
    while not results[-1].done:
        results.append(env.step(EndstateAction(message=done)))
    return results


def rollout_and_grade(tmp_path, tasks: list[dict], name: str) -> dict[str, dict]:
    """`rollout --backend chat` against a double replaying each task's gold, then `grade`."""
    task_file = tmp_path / f"{name}.jsonl"
    task_file.write_bytes(b"".join(orjson.dumps(t) + b"\n" for t in tasks))
    with FakeEndpoint(policy=gold_policy(tasks)) as agent:
        ran = run_tool("rollout", "run", str(task_file), "--backend", "chat", "--agent-url",
                       agent.base_url, "--model", "double", "-q")
    assert ran.returncode == 0, ran.stderr
    graded = run_tool("grade", "--tasks", str(task_file), "-q", input=ran.stdout)
    assert graded.returncode == 0, graded.stderr
    return {g["task_id"]: g for g in map(orjson.loads, graded.stdout.splitlines())}


def test_openenv_episodes_grade_as_rollout_and_grade_on_the_same_scripted_calls(tmp_path):
    domains = Domains()
    successes = parity_tasks(domains)
    failures = [without_writes(t, domains) for t in successes]
    by_rollout = {"success": rollout_and_grade(tmp_path, successes, "success"),
                  "failure": rollout_and_grade(tmp_path, failures, "failure")}
    table = []
    with Server(successes) as server, EndstateEnvClient(base_url=server.url).sync() as env:
        for variant, tasks in (("success", successes), ("failure", failures)):
            for task in tasks:
                end = play(env, task)[-1]
                graded = by_rollout[variant][task["id"]]
                checks = {c["id"]: c["passed"] for c in end.observation.checks}
                assert checks == {c["id"]: c["passed"] for c in graded["checks"]}, task["id"]
                assert end.observation.termination == graded["termination"], task["id"]
                table.append((task["domain"], task["id"], variant, end.reward, graded["reward"]))
    print("\n".join(f"{d:10} {t:42} {v:7} openenv={o} rollout+grade={r}" for d, t, v, o, r in table))
    assert [(o, r) for *_, o, r in table] == [(1.0, 1)] * 6 + [(0.0, 0)] * 6


def test_bad_actions_are_observations_and_the_session_goes_on():
    task = parity_tasks(Domains())[0]
    with Server([task]) as server, EndstateEnvClient(base_url=server.url).sync() as env:
        before = env.step(EndstateAction(tool="get_order", arguments={"order_id": "W1"}))
        assert not before.observation.ok and "reset" in before.observation.content
        unknown = env.reset(task_id="no-such-task")
        assert unknown.done and "unknown task 'no-such-task'" in unknown.observation.content
        opening = env.reset(task_id=task["id"]).observation
        assert opening.content == task["user"]["opening"] and opening.system
        assert {t["function"]["name"] for t in opening.tools} == set(Domains()["retail"].tools)
        for action, says in ((EndstateAction(tool="nope"), "unknown tool 'nope'"),
                             (EndstateAction(tool="get_order", arguments="W1"), "invalid arguments"),
                             (EndstateAction(tool="get_order", message="hi"), "not both")):
            seen = env.step(action)
            assert not seen.observation.ok and not seen.done and says in seen.observation.content
        assert env.state().step_count == 2  # a refused action (both at once) is not a turn
        end = play(env, task)[-1]  # the same session, a new episode: still gradable to 1
        assert end.reward == 1.0
        after = env.step(EndstateAction(message="Still there?"))
        assert after.done and "The episode is over (user_stop)" in after.observation.content
        assert after.reward == 1.0
        asyncio.run(not_an_action(server.url, task["id"]))


async def not_an_action(url: str, task_id: str) -> None:
    """What is not an action at all is OpenEnv's server's to refuse (VALIDATION_ERROR, sent here
    off the socket: the typed client would not build it); the session goes on."""
    from websockets.asyncio.client import connect

    answers = []
    async with connect(url.replace("http", "ws") + "/ws") as ws:
        for data in ({"task_id": task_id}, {"tool": 123},
                     {"tool": "get_order", "arguments": {"order_id": "W1"}}):
            kind = "reset" if "task_id" in data else "step"
            await ws.send(orjson.dumps({"type": kind, "data": data}).decode())
            answers.append(orjson.loads(await ws.recv()))
    assert answers[1]["type"] == "error" and answers[1]["data"]["code"] == "VALIDATION_ERROR"
    assert answers[2]["data"]["observation"]["kind"] == "tool_result"


def test_a_user_whose_endpoint_fails_ends_the_episode_as_a_system_error_not_a_0():
    """The simulated user is an LLM behind an endpoint that answers 503: the message step ends the
    episode with reward None and status system_error, as rollout records it."""
    from openai_double import HTTP_503, always

    task = parity_tasks(Domains())[0]
    with FakeEndpoint(faults=always(HTTP_503)) as user, \
            Server([task], llm_user_url=user.base_url) as server, \
            EndstateEnvClient(base_url=server.url).sync() as env:
        env.reset(task_id=task["id"])
        end = env.step(EndstateAction(message="Which order is it?"))
    assert end.done and end.reward is None and end.observation.status == "system_error"
    assert end.observation.error["kind"] == "http_5xx" and end.observation.checks == []


def live_threads() -> set[int]:
    return {t.ident for t in threading.enumerate()}


def test_concurrent_sessions_are_isolated_bounded_and_leave_nothing_behind():
    """12 sessions hold a sandbox each at once on one task; the 13th is refused; each sees only its
    own writes; after they disconnect no sandbox, session or worker thread is left."""
    task = parity_tasks(Domains())[0]
    write = next(s for s in task["gold"] if s.get("tool") == "cancel_order")
    read = {"tool": "get_order", "args": {"order_id": write["args"]["order_id"]}}
    sessions = 12

    async def session(server, i: int, opened: list, all_open, release) -> tuple[str, bool]:
        async with EndstateEnvClient(base_url=server.url) as env:
            await env.reset(task_id=task["id"])
            if i % 2:
                await env.step(as_action(write))
            seen = await env.step(as_action(read))
            opened.append(i)
            if len(opened) == sessions:
                all_open.set()
            await release.wait()  # every session holds its sandbox until the extra one was refused
            return seen.observation.content, i % 2 == 1

    async def extra(server, all_open, release) -> str:
        """One session more: OpenEnv's server answers the connection with its refusal and closes
        it (read here off the socket: the client only sees the connection closed)."""
        from websockets.asyncio.client import connect

        await all_open.wait()
        try:
            async with connect(server.url.replace("http", "ws") + "/ws") as ws:
                return await ws.recv()
        finally:
            release.set()

    async def main(server):
        opened, all_open, release = [], asyncio.Event(), asyncio.Event()
        return await asyncio.gather(*(session(server, i, opened, all_open, release)
                                      for i in range(sessions)), extra(server, all_open, release))

    with Server([task], max_sessions=sessions) as server:
        baseline = live_threads()
        *seen, refused = asyncio.run(main(server))
        assert "CAPACITY_REACHED" in refused
        for content, wrote in seen:  # a write shows in its own session only
            assert ('"status":"cancelled"' in content) == wrote, content
        deadline = time.monotonic() + 10
        while (server.served.live or live_threads() - baseline) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.served.live == set()
        assert live_threads() - baseline == set()


def test_served_episodes_are_saved_and_graded_again_and_audited(tmp_path):
    """The command as a user runs it: episodes saved with --save-episodes grade as they were
    served, and `grade audit` reads them; SIGTERM stops the server with exit 0."""
    task = parity_tasks(Domains())[0]
    task_file, saved = tmp_path / "t.jsonl", tmp_path / "served.jsonl"
    task_file.write_bytes(orjson.dumps(task) + b"\n")
    sock = listen("127.0.0.1:0")
    port = sock.getsockname()[1]
    sock.close()
    server = subprocess.Popen([str(BIN / "rollout"), "serve-openenv", str(task_file), "--http",
                               f"127.0.0.1:{port}", "--save-episodes", str(saved)],
                              stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        assert "serving OpenEnv at" in server.stderr.readline()
        with EndstateEnvClient(base_url=f"http://127.0.0.1:{port}").sync() as env:
            served = [play(env, task)[-1].reward,
                      play(env, without_writes(task, Domains()))[-1].reward]
    finally:
        server.send_signal(signal.SIGTERM)
        assert server.wait(20) == 0, server.stderr.read()
    episodes = [orjson.loads(line) for line in saved.read_bytes().splitlines()]
    assert [(e["attempt"], e["policy"]["backend"]) for e in episodes] == [(0, "openenv"), (1, "openenv")]
    graded = run_tool("grade", "--tasks", str(task_file), str(saved))
    assert graded.returncode == 0, graded.stderr
    assert [orjson.loads(g)["reward"] for g in graded.stdout.splitlines()] == [1, 0] == served
    from endstate.core.grading.grader import Grader

    again = served_tasks([task], Domains(), None, Grader(Domains()), str(saved))  # a restart
    assert again.attempt(task["id"]) == 2  # goes on after the file's attempts: ids stay distinct
    again.log.close()
    audited = run_tool("grade", "audit", "--tasks", str(task_file), "-", input=graded.stdout)
    assert audited.returncode == 0, audited.stderr
    assert "1 audited, 0 another way" in audited.stderr and audited.stdout == ""  # the success


def test_the_client_and_action_come_from_the_public_api():
    from endstate import api

    assert api.EndstateEnvClient is EndstateEnvClient and api.EndstateAction is EndstateAction
    assert not set(api.OPENENV) & set(api.__all__)  # `import *` needs no openenv-core
