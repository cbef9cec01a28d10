"""256 concurrent MCP sessions through the gateway (`rollout serve-mcp --http`), 10 read tool calls
each, against the same calls made in-process.

The gateway runs in its own process on the retail bench tasks (one key per session); the clients
are the MCP SDK's streamable-HTTP client, all in this process, all sessions open at once: each
initializes, makes ten read calls (lookups on the domain seed, valid in every task) and closes.
The baseline is the same ten calls on a fresh sandbox of the same tasks through Sandbox.call, in
this process, in the same run. Prints sessions/s, p50/p99 latency per tool call (client-side:
from the request to its result) for both, their ratio, and the gateway's CPU per call (what the
server costs, whatever the client costs). Run it on a quiet machine: the clients and the gateway
share its cores.

    .venv/bin/python bench/bench_gateway.py [--sessions 256] [--calls 10]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
TOKEN = "bench"
READS = [  # lookups on the retail seed: the same answer in every task
    ("find_customer", {"email": "pedro.kim1@example.com"}),
    ("get_customer", {"customer_id": "C0001"}),
    ("list_orders", {"customer_id": "C0001"}),
    ("get_order", {"order_id": "W10001"}),
    ("search_products", {"query": "mug"}),
    ("get_order", {"order_id": "W10002"}),
    ("get_customer", {"customer_id": "C0002"}),
    ("list_orders", {"customer_id": "C0002"}),
    ("search_products", {"query": "lamp"}),
    ("find_customer", {"email": "dina.larsen2@example.com"}),
]


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def in_process(tasks: list[dict], sessions: int, calls: list) -> tuple[float, list[float]]:
    """(wall, per-call seconds) of the same calls on fresh sandboxes, one session after another."""
    from endstate.core.env.domain import Domains
    from endstate.core.env.sandbox import Sandbox

    domain, latencies = Domains()["retail"], []
    start = time.perf_counter()
    for i in range(sessions):
        task = tasks[i % len(tasks)]
        with Sandbox(domain, task.get("init"), task.get("tools")) as sandbox:
            for name, args in calls:
                t = time.perf_counter()
                assert sandbox.call(name, args).ok
                latencies.append(time.perf_counter() - t)
    return time.perf_counter() - start, latencies


async def one_session(url: str, calls: list, latencies: list[float]) -> None:
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with (httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"},
                                   timeout=httpx2.Timeout(120, read=600)) as http,
                streamable_http_client(url, http_client=http) as (read, write),
                ClientSession(read, write) as session):
        await session.initialize()
        for name, args in calls:
            t = time.perf_counter()
            result = await session.call_tool(name, args)
            latencies.append(time.perf_counter() - t)
            assert not result.model_dump(by_alias=True)["isError"], result.content[0].text


async def through_gateway(url: str, sessions: int, calls: list) -> tuple[float, list[float]]:
    import anyio

    latencies: list[float] = []
    start = time.perf_counter()
    async with anyio.create_task_group() as group:
        for _ in range(sessions):
            group.start_soon(one_session, url, calls, latencies)
    return time.perf_counter() - start, latencies


def start_gateway(tasks_file: Path, repeats: int, out: Path, log: Path) -> tuple[subprocess.Popen, str]:
    with open(log, "wb") as err:
        gateway = subprocess.Popen(
            [str(BIN / "rollout"), "serve-mcp", "--http", "127.0.0.1:0", str(tasks_file), "-n",
             str(repeats), "--out", str(out), "--quiet"], stderr=err, stdout=subprocess.DEVNULL,
            env={**os.environ, "ENDSTATE_MCP_TOKEN": TOKEN})
    deadline = time.monotonic() + 60
    while "serving MCP at " not in log.read_text():
        if gateway.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the gateway did not start: {log.read_text()}")
        time.sleep(0.05)
    return gateway, log.read_text().split("serving MCP at ")[1].split(";")[0]


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    import anyio

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=256, help="MCP sessions, all open at once")
    ap.add_argument("--calls", type=int, default=10, help="read tool calls per session")
    args = ap.parse_args()
    calls = [READS[i % len(READS)] for i in range(args.calls)]
    tasks = [orjson.loads(line) for line in (ROOT / "tasks" / "bench" / "retail.jsonl").read_bytes().splitlines()]
    repeats = -(-(args.sessions + 1) // len(tasks))  # + the warm-up session

    with tempfile.TemporaryDirectory() as tmp:
        tasks_file, out, log = Path(tmp) / "tasks.jsonl", Path(tmp) / "episodes.jsonl", Path(tmp) / "log"
        tasks_file.write_bytes(b"".join(orjson.dumps(t) + b"\n" for t in tasks))
        base_wall, base = in_process(tasks, args.sessions, calls)
        gateway, url = start_gateway(tasks_file, repeats, out, log)
        try:
            anyio.run(through_gateway, url, 1, calls)  # warm-up: imports, the domain seed, a session
            cpu = cpu_seconds(gateway.pid)
            wall, mcp = anyio.run(through_gateway, url, args.sessions, calls)
            cpu = cpu_seconds(gateway.pid) - cpu
        finally:
            gateway.terminate()
            gateway.wait(30)
        written = len(out.read_bytes().splitlines())
    report(args.sessions, len(calls), wall, mcp, cpu, base_wall, base, written)


def report(sessions: int, calls: int, wall: float, mcp: list[float], cpu: float,
           base_wall: float, base: list[float], written: int) -> None:
    ms = 1000
    p50, p99, b50, b99 = (percentile(mcp, 0.5), percentile(mcp, 0.99), percentile(base, 0.5),
                          percentile(base, 0.99))
    print(f"sessions            {sessions} open at once, {calls} read calls each "
          f"({len(mcp)} calls), {written - 1} episodes written")
    print(f"gateway             {wall:.2f} s, {sessions / wall:.1f} sessions/s, "
          f"{len(mcp) / wall:.0f} calls/s; gateway CPU {cpu:.2f} s ({cpu / len(mcp) * ms:.2f} ms per call)")
    print(f"per call, MCP/HTTP  p50 {p50 * ms:.2f} ms, p99 {p99 * ms:.2f} ms, "
          f"mean {statistics.fmean(mcp) * ms:.2f} ms")
    print(f"per call, in-process p50 {b50 * ms:.3f} ms, p99 {b99 * ms:.3f} ms "
          f"(Sandbox.call; {sessions / base_wall:.0f} sessions/s one after another)")
    print(f"ratio MCP/in-process p50 {p50 / b50:.0f}x, p99 {p99 / b99:.0f}x")


if __name__ == "__main__":
    main()
