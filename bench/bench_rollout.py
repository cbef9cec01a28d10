"""256 and 1,024 concurrent episodes against a local OpenAI-compatible endpoint, 100 ms per call.

The endpoint is the test double (tests/openai_double.py) in its own process, playing a policy that
performs each task's gold calls; rollout runs in this process with `-j 256` on the chat backend,
then split over `--procs 2` forked processes. With every episode in flight at once, the ideal wall
time is the longest episode's model calls × the latency: everything else (the client, the sandbox,
the tools, the bookkeeping) should hide inside the waits. Prints wall / ideal for each; the target
is <= 1.1x.

Each timed run is a process that has been running a while, on tasks new to it: its domains are
loaded (seeds read, tools imported) and, in the same event loop just before the window, a run of
*other* tasks of the same suites with as many in flight has opened the seats and the keep-alive
connections, as the episodes before them do in a long run; the timed tasks' inits are built inside
the window, as a run pays them. The one-time load of the domains is timed apart ("domains load").
With --procs 2 the forked workers open their own seats and connections inside the window (a worker
lives for one run and keeps no seat of its parent), so those figures include them.

Beside each --procs 1 figure, the box's floor: the same number of episodes in flight, each
making as many calls as its rollout episode did, but plain HTTP exchanges with the same double (a
fixed request it answers after the latency) on kept connections: the client, the loopback TCP and
the double, without endstate's episode. The floor's request is small, so the double spends less
on it than on a whole conversation (both printed): the difference from the floor is an upper
bound on what rollout adds.

    .venv/bin/python bench/bench_rollout.py [--episodes 256 1024] [--latency 0.1] [--procs 1 2] [--profile out.prof]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson
from results import record

ROOT = Path(__file__).resolve().parent.parent
DOUBLE = ROOT / "tests" / "openai_double.py"


def bench_keys(per_domain: int = 16, skip: int = 0) -> list[dict]:
    """per_domain tasks of each bench suite (after its first `skip`)."""
    tasks = []
    for suite in sorted((ROOT / "tasks" / "bench").glob("*.jsonl")):
        tasks += [orjson.loads(line) for line in suite.read_bytes().splitlines() if line.strip()][
            skip:skip + per_domain]
    return tasks


def _config(url: str, jobs: int, procs: int = 1):
    from endstate.core.episode.config import RunConfig

    return RunConfig(backend="chat", model="double", agent_urls=[url], jobs=jobs, procs=procs, timeout=30.0)


def _keys(tasks_file: str, repeats: int, limit: int | None = None) -> list:
    from endstate.core.episode.plan import load_tasks, plan

    return plan(load_tasks([tasks_file], None), repeats, set())[:limit]


class Window:
    """The timed part of a run: its wall, this process's CPU (and its forked workers'), the
    double's CPU, and with --profile a cProfile of this process."""

    def __init__(self, double_pid: int, profile: str | None):
        self.double_pid, self.profile = double_pid, profile

    def __enter__(self) -> Window:
        self.profiler = None
        if self.profile:
            import cProfile

            self.profiler = cProfile.Profile()
            self.profiler.enable()
        self.double_cpu, self.cpu = cpu_seconds(self.double_pid), cpu_seconds_here()
        self.wall = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        self.wall = time.perf_counter() - self.wall
        self.cpu = cpu_seconds_here() - self.cpu
        self.double_cpu = cpu_seconds(self.double_pid) - self.double_cpu
        if self.profiler:
            self.profiler.disable()
            self.profiler.dump_stats(self.profile)


def run(tasks_file: str, url: str, repeats: int, jobs: int, limit: int | None = None, procs: int = 1,
        domains=None, window: Window | None = None) -> list:
    """The episodes of a run as rollout makes it (run_episodes: a new event loop, and forked
    workers with procs > 1), on `domains` (new ones if None), timed by `window` if given."""
    from contextlib import nullcontext

    from endstate.core.env.domain import Domains
    from endstate.core.episode.backends import build_backend
    from endstate.core.episode.runtime import run_episodes

    cfg = _config(url, jobs, procs)
    keys = _keys(tasks_file, repeats, limit)
    backend, domains, episodes = build_backend(cfg), domains or Domains(), []
    with window or nullcontext():
        run_episodes(keys, cfg, domains, backend, lambda task, episode: episodes.append(episode))
    return episodes


class _KeptOpen:
    """The backend, lent to the warm-up run: run_all closes what it is given at its end, and the
    timed run is to find the connections open."""

    def __init__(self, backend):
        self.backend = backend

    def __getattr__(self, name: str):
        return getattr(self.backend, name)

    def close(self) -> None:
        pass


def run_warm(tasks_file: str, warm_file: str, url: str, repeats: int, n: int, domains,
             window: Window) -> list:
    """The episodes of `n` in flight on one event loop (rollout's run_all), timed by `window` after
    a run of the warm-up tasks with `n` in flight on the same loop and backend."""
    import asyncio

    from endstate.core.console.progress import Progress
    from endstate.core.episode.backends import build_backend
    from endstate.core.episode.runtime import run_all

    cfg, episodes = _config(url, n), []
    keys, warm = _keys(tasks_file, repeats, n), _keys(warm_file, -(-n // len(_keys(warm_file, 1))), n)
    backend = build_backend(cfg)

    async def both() -> None:
        warmed = []
        await run_all(warm, cfg, domains, _KeptOpen(backend), lambda task, episode: warmed.append(episode),
                      Progress(0, "", quiet=True))
        if any(e.status != "ok" for e in warmed):  # its connections would not be open
            raise SystemExit("bench_rollout: the warm-up run had system errors, e.g. "
                             f"{next(e.error for e in warmed if e.status != 'ok')}")
        with window:
            await run_all(keys, cfg, domains, backend, lambda task, episode: episodes.append(episode),
                          Progress(0, "", quiet=True))

    asyncio.run(both())
    return episodes


def transport_floor(url: str, calls: list[int], latency: float, double_pid: int) -> tuple[float, float]:
    """wall / ideal of plain HTTP exchanges with the double, and the double's CPU seconds per
    request in them: len(calls) sequences in flight, the i-th making calls[i] POSTs of one fixed
    request, on connections opened before the window."""
    import asyncio

    from endstate.core.wire.http import HttpClient

    body = orjson.dumps({"model": "double", "messages": [
        {"role": "system", "content": "The transport floor: no task."}, {"role": "user", "content": "hello"}]})
    headers = {"Content-Type": "application/json"}
    chat = url.rstrip("/") + "/chat/completions"

    async def sequence(client: HttpClient, count: int) -> None:
        for _ in range(count):
            status, _ = await client.post(chat, body, headers)
            assert status == 200, status

    async def floor() -> tuple[float, float]:
        client = HttpClient(30.0)
        try:
            await asyncio.gather(*(sequence(client, 1) for _ in calls))  # the connections
            start, double = time.perf_counter(), cpu_seconds(double_pid)
            await asyncio.gather(*(sequence(client, c) for c in calls))
            return time.perf_counter() - start, cpu_seconds(double_pid) - double
        finally:
            client.close()

    wall, double = asyncio.run(floor())
    return wall / (max(calls) * latency), double / sum(calls)


def loaded_domains(warm_file: str) -> tuple[object, float]:
    """New domains, loaded: seeds read, tables and tools read (timed: the second value)."""
    from endstate.core.env.domain import Domains

    domains, start = Domains(), time.perf_counter()
    for name in {orjson.loads(line)["domain"] for line in Path(warm_file).read_bytes().splitlines()}:
        domain = domains[name]
        domain.seed(), domain.tables, domain.tools
    return domains, time.perf_counter() - start


def cpu_seconds_here() -> float:
    """User + system CPU seconds of this process and its finished children (forked workers)."""
    return sum(getattr(resource.getrusage(who), f) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
               for f in ("ru_utime", "ru_stime"))


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, nargs="+", default=[256, 1024],
                    help="one timed run per value and --procs value, all of them in flight at once")
    ap.add_argument("--latency", type=float, default=0.1)
    ap.add_argument("--procs", type=int, nargs="+", default=[1, 2], help="one timed run per value")
    ap.add_argument("--profile", help="write a cProfile of the timed window here (this process only)")
    args = ap.parse_args()

    tasks, others = bench_keys(), bench_keys(skip=16)
    repeats = -(-max(args.episodes) // len(tasks))
    with tempfile.TemporaryDirectory() as tmp:
        tasks_file, warm_file = Path(tmp) / "tasks.jsonl", Path(tmp) / "warm.jsonl"
        tasks_file.write_bytes(b"".join(orjson.dumps(t) + b"\n" for t in tasks))
        warm_file.write_bytes(b"".join(orjson.dumps(t) + b"\n" for t in others))
        double = subprocess.Popen([sys.executable, str(DOUBLE), str(args.latency), str(tasks_file),
                                   str(warm_file)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            url = double.stdout.readline().strip()
            run(str(warm_file), url, 1, 8)  # this process's imports, before any timed run
            for n in args.episodes:
                for procs in args.procs:
                    timed(str(tasks_file), str(warm_file), url, repeats, n, procs, double.pid, args,
                          len(tasks))
        finally:
            double.stdin.close()
            double.wait(10)


def timed(tasks_file: str, warm_file: str, url: str, repeats: int, n: int, procs: int,
          double_pid: int, args, tasks: int) -> None:
    """One timed run of `n` episodes in flight over `procs` processes, reported and recorded."""
    domains, load = loaded_domains(warm_file)
    window = Window(double_pid, args.profile)
    if procs > 1:
        episodes = run(tasks_file, url, repeats, n, n, procs, domains, window)
    else:
        episodes = run_warm(tasks_file, warm_file, url, repeats, n, domains, window)
    calls = model_calls(episodes)
    ratio = report(episodes, calls, window, args.latency, tasks, -(-n // tasks), procs, load)
    if procs == 1:
        floor, double = transport_floor(url, calls, args.latency, double_pid)
        print(f"floor               {floor:.2f}x   (plain HTTP with the double, as many calls per episode, "
              f"kept connections; the double {double * 1000:.2f} ms a request, against "
              f"{window.double_cpu / sum(calls) * 1000:.2f} in the run)")
    record(f"rollout.wall_x_ideal.{n}.procs{procs}", ratio, "x", better="lower")


def model_calls(episodes: list) -> list[int]:
    from endstate.core.records.structs import AssistantMessage

    return [sum(isinstance(m, AssistantMessage) for m in e.messages) for e in episodes]


def report(episodes: list, calls: list[int], window: Window, latency: float, tasks: int, repeats: int,
           procs: int, load: float) -> float:
    """Print the run's figures (`calls`: each episode's model calls); its wall / ideal."""
    wall, cpu, double_cpu = window.wall, window.cpu, window.double_cpu
    errors = sum(e.status != "ok" for e in episodes)
    ideal = max(calls) * latency
    per_episode = sorted(e.timing["total_s"] / (c * latency) for e, c in zip(episodes, calls))
    print(f"--procs {procs}")
    print(f"episodes            {len(episodes)} in flight at once ({tasks} tasks x {repeats}), "
          f"system errors {errors}")
    print(f"model calls         {sum(calls)} ({min(calls)}..{max(calls)} per episode), "
          f"latency {latency * 1000:.0f} ms per call")
    print(f"wall                {wall:.3f} s")
    print(f"ideal               {ideal:.3f} s (longest episode: {max(calls)} calls x latency)")
    print(f"wall / ideal        {wall / ideal:.2f}x   (target <= 1.1x)")
    print(f"episode / its ideal median {per_episode[len(per_episode) // 2]:.2f}x, "
          f"max {per_episode[-1]:.2f}x")
    print(f"CPU                 rollout {cpu:.2f} s ({cpu / sum(calls) * 1000:.2f} ms per call), "
          f"endpoint double {double_cpu:.2f} s")
    print(f"domains load        {load * 1000:.0f} ms before the timed window (seeds, tables, tools; "
          "once per process)" + (", then a run of other tasks opens the seats and connections"
                                 if procs == 1 else "; each worker opens its seats and connections"))
    print(f"throughput          {sum(calls) / wall:.0f} calls/s, {len(episodes) / wall * 60:.0f} episodes/min")
    return wall / ideal


if __name__ == "__main__":
    main()
