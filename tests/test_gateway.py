"""`rollout serve-mcp --http`, the MCP gateway, driven by the MCP SDK's own streamable-HTTP client:
concurrent sessions each get one (task, attempt) key and play its gold steps (tool calls, and what
the agent tells the user through the user channel); the episodes in --out go through `grade` and
the `evalstats` coverage gate unchanged. A gateway killed with -9 and restarted with --resume
loses and duplicates nothing; a vanished client's session is written when it times out."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import time
import urllib.error
import urllib.request

import anyio
import orjson
import pytest
from conftest import BIN, ROOT, run_tool

mcp = pytest.importorskip("mcp", reason="the mcp extra: pip install 'endstate[mcp]'")
import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from endstate.rollout.mcp_server import USER_TOOL

TOKEN = "test-token-3f9a"
RETAIL = ROOT / "tasks" / "bench" / "retail.jsonl"


@pytest.fixture(scope="module")
def task_file(tmp_path_factory):
    """Eight retail tasks without judge checks (their gold steps score 1 offline)."""
    lines = [line for line in RETAIL.read_bytes().splitlines()
             if not any(c["kind"] == "judge" for c in orjson.loads(line)["checks"])][:8]
    path = tmp_path_factory.mktemp("gateway") / "tasks.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def tasks_of(path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


@pytest.fixture(autouse=True)
def no_gateway_outlives_its_test():
    yield
    for gateway in Gateway.started:  # a failed assertion skips wait(): kill what is left
        if gateway.proc.poll() is None:
            gateway.proc.kill()
            gateway.proc.wait()
    Gateway.started.clear()


class Gateway:
    """The gateway as a subprocess; its URL read from the line it prints when it listens."""

    started: list["Gateway"] = []

    def __init__(self, tmp_path, task_file, out, *args: str, token: str = TOKEN, preexec_fn=None):
        self.log = tmp_path / f"gateway-{time.monotonic_ns()}.log"
        with open(self.log, "wb") as err:
            self.proc = subprocess.Popen(
                [str(BIN / "rollout"), "serve-mcp", "--http", "127.0.0.1:0", str(task_file),
                 "--out", str(out), *args], stderr=err, stdout=subprocess.DEVNULL,
                env={**os.environ, "ENDSTATE_MCP_TOKEN": token}, preexec_fn=preexec_fn)
        Gateway.started.append(self)
        deadline = time.monotonic() + 120  # a cold start of the CLI on a loaded box: seconds, not minutes
        while "serving MCP at " not in self.stderr():
            assert self.proc.poll() is None, f"the gateway exited: {self.stderr()}"
            assert time.monotonic() < deadline, self.stderr()
            time.sleep(0.05)
        self.url = self.stderr().split("serving MCP at ")[1].split(";")[0]

    def stderr(self) -> str:
        return self.log.read_text()

    def wait(self) -> int:
        try:
            return self.proc.wait(timeout=120)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()


def as_call(step: dict) -> tuple[str, dict]:
    return (USER_TOOL, {"message": step["say"]}) if "say" in step else (step["tool"], step["args"])


async def agent(url: str, tasks: list[dict], *, stop_after: int | None = None,
                waiting: anyio.Event | None = None, hold: anyio.Event | None = None,
                end_session: bool = True,
                token: str = TOKEN) -> str:
    """An MCP client playing its session's task: the task is told by the opening in the server's
    instructions; its gold steps are played (the first `stop_after` of them, then it waits on
    `hold`, having set `waiting`); the session ends when the client closes (a DELETE, unless not `end_session`)."""
    async with (httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"},
                                   timeout=httpx2.Timeout(120, read=300)) as http,
                streamable_http_client(url, http_client=http, terminate_on_close=end_session)
                as (read, write),
                ClientSession(read, write) as session):
        init = await session.initialize()
        [task] = [t for t in tasks if f"The customer says: {t['user']['opening']}\n" in init.instructions]
        for step in task["gold"][:stop_after]:
            result = await session.call_tool(*as_call(step))
            assert not result.model_dump(by_alias=True)["isError"], result.content[0].text
        if hold is not None:
            if waiting is not None:
                waiting.set()
            await hold.wait()
    return task["id"]


async def agents(url: str, tasks: list[dict], n: int, **kw) -> list[str]:
    played: list[str] = []

    async def one() -> None:
        played.append(await agent(url, tasks, **kw))

    async with anyio.create_task_group() as group:
        for _ in range(n):
            group.start_soon(one)
    return played


def keys(out) -> list[tuple[str, int]]:
    return [(r["task_id"], r["attempt"]) for r in map(orjson.loads, out.read_bytes().splitlines())]


def graded_and_covered(out, task_file, repeats: int) -> list[dict]:
    graded = run_tool("grade", str(out), "--tasks", str(task_file))
    assert graded.returncode == 0, graded.stderr
    stats = run_tool("evalstats", "--expect-tasks", str(task_file), "--expect-repeats", str(repeats),
                     input=graded.stdout)
    assert stats.returncode == 0, stats.stderr
    return [orjson.loads(line) for line in graded.stdout.splitlines()]


async def refusal(url: str, tasks: list[dict], **kw) -> str:
    """The MCPError message a client gets when its session cannot open."""
    def leaves(error: BaseException):
        if isinstance(error, BaseExceptionGroup):
            for inner in error.exceptions:
                yield from leaves(inner)
        else:
            yield error

    try:
        await agent(url, tasks, **kw)
    except Exception as caught:  # noqa: BLE001 - the SDK raises it inside (nested) groups
        [error] = [e for e in leaves(caught) if isinstance(e, MCPError)]
        return str(error)
    raise AssertionError("the session opened")


def post(url: str, token: str | None, scheme: str = "Bearer") -> int:
    request = urllib.request.Request(url, data=b"{}", method="POST", headers={
        "Content-Type": "application/json", **({"Authorization": f"{scheme} {token}"} if token else {})})
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status
    except urllib.error.HTTPError as e:
        return e.code


def test_32_concurrent_sessions_cover_8_tasks_x_4_once_each_and_grade(tmp_path, task_file):
    tasks, out = tasks_of(task_file), tmp_path / "episodes.jsonl"
    gateway = Gateway(tmp_path, task_file, out, "-n", "4")
    assert post(gateway.url, None) == 401 and post(gateway.url, "wrong") == 401
    # past the token (the scheme is case-insensitive, RFC 7235): the transport wants an Accept header
    assert post(gateway.url, TOKEN, scheme="bearer") == 406
    assert "wrong bearer token" in anyio.run(lambda: refusal(gateway.url, tasks, token="wrong"))

    async def campaign() -> tuple[list[str], str]:
        played, waiting, release = [], anyio.Event(), anyio.Event()

        async def last_one() -> None:  # stays open: the gateway is still there to refuse a 33rd
            played.append(await agent(gateway.url, tasks, waiting=waiting, hold=release))

        async with anyio.create_task_group() as group:
            group.start_soon(last_one)
            played += await agents(gateway.url, tasks, 31)
            await waiting.wait()
            refused = await refusal(gateway.url, tasks)
            release.set()
        return played, refused

    played, refused = anyio.run(campaign)
    assert "handed out every (task, attempt) key of its plan (32)" in refused
    assert gateway.wait() == 0, gateway.stderr()

    assert sorted(played) == sorted(t["id"] for t in tasks for _ in range(4))
    assert sorted(keys(out)) == sorted((t["id"], a) for t in tasks for a in range(4))
    graded = graded_and_covered(out, task_file, 4)
    assert [g["reward"] for g in graded] == [1] * 32, [g["checks"] for g in graded if g["reward"] != 1]
    assert {g["policy"]["backend"] for g in graded} == {"mcp"}
    assert "32 episode(s)" in gateway.stderr() and "ok ×32" in gateway.stderr()


def test_a_killed_gateway_resumes_without_losing_or_duplicating_a_key(tmp_path, task_file):
    tasks, out = tasks_of(task_file), tmp_path / "episodes.jsonl"
    gateway = Gateway(tmp_path, task_file, out, "-n", "4")

    async def run_then_kill() -> None:
        hold, first_calls = anyio.Event(), [anyio.Event() for _ in range(4)]
        async with anyio.create_task_group() as held:  # four sessions in flight at the kill
            for made in first_calls:
                held.start_soon(lambda made=made: agent(gateway.url, tasks, stop_after=1, waiting=made, hold=hold))
            assert len(await agents(gateway.url, tasks, 12)) == 12
            assert len(keys(out)) == 12  # a closed session's DELETE returns once it is on disk
            for made in first_calls:  # the held ones have made their first call
                await made.wait()
            gateway.proc.send_signal(signal.SIGKILL)
            gateway.proc.wait()
            held.cancel_scope.cancel()

    anyio.run(run_then_kill)
    with open(out, "ab") as fh:  # as if killed in the middle of writing a 13th episode
        fh.write(b'{"episode_id": "retail-cancel-pending/3/ab')
    again = Gateway(tmp_path, task_file, out, "-n", "4", "--resume")
    assert "20 key(s) of 8 task(s) × 4 (12 already written)" in again.stderr()
    assert "removed a partial last line" in again.stderr()
    anyio.run(agents, again.url, tasks, 20)
    assert again.wait() == 0, again.stderr()

    assert sorted(keys(out)) == sorted((t["id"], a) for t in tasks for a in range(4))
    assert [g["reward"] for g in graded_and_covered(out, task_file, 4)] == [1] * 32


def test_a_vanished_client_is_written_at_its_timeout_and_resume_runs_it_again(tmp_path, task_file):
    one_task = tmp_path / "one.jsonl"
    one_task.write_bytes(task_file.read_bytes().splitlines()[0] + b"\n")
    tasks, out = tasks_of(one_task), tmp_path / "episodes.jsonl"
    # idle past 5 s: the client's one call comes well inside it, even on a loaded box
    gateway = Gateway(tmp_path, one_task, out, "--session-timeout", "5")
    anyio.run(lambda: agent(gateway.url, tasks, stop_after=1, end_session=False))
    assert gateway.wait() == 0, gateway.stderr()  # its only key is written: it stops
    [abandoned] = map(orjson.loads, out.read_bytes().splitlines())
    assert abandoned["status"] == "system_error" and abandoned["error"]["kind"] == "timeout"
    assert sum(1 for m in abandoned["messages"] if m["role"] == "tool") == 1

    refused = run_tool("rollout", "serve-mcp", "--http", "127.0.0.1:0", str(one_task),
                       "--out", str(out), env={"ENDSTATE_MCP_TOKEN": TOKEN})
    assert refused.returncode == 2 and "pass --resume" in refused.stderr
    again = Gateway(tmp_path, one_task, out, "--resume")
    anyio.run(lambda: agent(again.url, tasks))
    assert again.wait() == 0, again.stderr()
    graded = graded_and_covered(out, one_task, 1)  # the clean episode supersedes the error
    assert [g["reward"] for g in graded] == [None, 1]


def open_raw_session(url: str) -> str:
    """An MCP session opened by hand (an `initialize` POST); its id."""
    body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    request = urllib.request.Request(url, data=body, method="POST", headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
        "Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=60) as answer:
        return answer.headers["mcp-session-id"]


def test_sigterm_stops_the_gateway_saying_which_sessions_were_not_written(tmp_path, task_file):
    """uvicorn raises SIGTERM again once it has stopped: the gateway still reports the open
    session (--resume runs it) and exits 143, as a killed process. Its --out holds another task's
    key: the plan line counts only this plan's keys as already written."""
    out = tmp_path / "episodes.jsonl"
    out.write_bytes(orjson.dumps({"task_id": "other-task", "attempt": 0, "status": "ok"}) + b"\n")
    gateway = Gateway(tmp_path, task_file, out, "--resume")
    try:
        assert open_raw_session(gateway.url)
    finally:
        gateway.proc.send_signal(signal.SIGTERM)
    assert gateway.wait() == 128 + signal.SIGTERM, gateway.stderr()
    assert "8 key(s) of 8 task(s) × 1; serving" in gateway.stderr()  # not "(1 already written)"
    assert "1 session(s) were open when the gateway stopped" in gateway.stderr()
    assert "Traceback" not in gateway.stderr() and len(out.read_bytes().splitlines()) == 1


def test_an_episode_that_cannot_be_written_is_not_answered_as_ended(tmp_path, task_file):
    """A full disk, made by a file-size limit (RLIMIT_FSIZE) below the size --out already has: the
    append fails with EFBIG. The client's DELETE gets 500 with the reason, not success, and the
    gateway exits 5 (I/O error)."""
    out = tmp_path / "episodes.jsonl"
    out.write_bytes(orjson.dumps({"task_id": "other-task", "attempt": 0, "status": "ok",
                                  "padding": "x" * 8192}) + b"\n")
    full_past_4k = lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))  # noqa: E731
    gateway = Gateway(tmp_path, task_file, out, "--resume", preexec_fn=full_past_4k)
    session = open_raw_session(gateway.url)
    request = urllib.request.Request(gateway.url, method="DELETE", headers={
        "mcp-session-id": session, "Authorization": f"Bearer {TOKEN}"})
    with pytest.raises(urllib.error.HTTPError) as answer:
        urllib.request.urlopen(request, timeout=120)
    assert answer.value.code == 500
    assert "episode could not be written" in orjson.loads(answer.value.read())["error"]["message"]
    assert gateway.wait() == 5, gateway.stderr()
    assert "File too large" in gateway.stderr() and "Traceback" not in gateway.stderr()

@pytest.mark.parametrize("flags, message", [
    (["--http", "8765"], "'8765': give HOST:PORT with a port from 0 to 65535"),  # not every interface
    (["--http", ":8765"], "or 0.0.0.0:8765 (every interface)"),
    (["--http", "127.0.0.1:0", "--session-timeout", "nan"], "nan is not a finite number"),
    (["--http", "127.0.0.1:0", "--timeout", "inf"], "inf is not a finite number"),
])
def test_an_address_without_host_or_a_timeout_that_is_not_a_number_is_refused(tmp_path, task_file,
                                                                              flags, message):
    done = run_tool("rollout", "serve-mcp", str(task_file), "--out", str(tmp_path / "o.jsonl"),
                    *flags, env={"ENDSTATE_MCP_TOKEN": TOKEN})
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_an_out_that_is_a_device_is_refused_rather_than_read_forever(task_file):
    done = run_tool("rollout", "serve-mcp", str(task_file), "--out", "/dev/zero", "--http",
                    "127.0.0.1:0", env={"ENDSTATE_MCP_TOKEN": TOKEN})
    assert done.returncode == 5 and "/dev/zero: --out takes a regular file" in done.stderr, done.stderr
