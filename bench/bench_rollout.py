"""256 and 1,024 concurrent episodes against a local OpenAI-compatible endpoint, 100 ms per call.

The endpoint is the test double (tests/openai_double.py) in its own process, playing a policy that
performs each task's gold calls; rollout runs in this process with `-j 256` on the chat backend,
then split over `--procs 2` forked processes. With every episode in flight at once, the ideal wall
time is the longest episode's model calls × the latency: everything else (the client, the sandbox,
the tools, the bookkeeping) should hide inside the waits. Prints wall / ideal for each; the target
is <= 1.1x.

Each timed run is a process that has been running a while, on tasks new to it: its domains are
loaded (seeds read, tools imported, seats open) by a first run of *other* tasks of the same
suites, while the timed tasks' inits are built inside the timed window, as a run pays them. The
one-time load of the domains is timed apart and printed ("domains load").

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


def bench_keys(episodes: int, per_domain: int = 16, skip: int = 0) -> list[dict]:
    """per_domain tasks of each bench suite (after its first `skip`)."""
    tasks = []
    for suite in sorted((ROOT / "tasks" / "bench").glob("*.jsonl")):
        tasks += [orjson.loads(line) for line in suite.read_bytes().splitlines() if line.strip()][
            skip:skip + per_domain]
    return tasks


def run(tasks_file: str, url: str, repeats: int, jobs: int, limit: int | None = None, procs: int = 1,
        domains=None) -> tuple[float, float, list[dict]]:
    """(wall, CPU of this process and its episode workers, episodes), on `domains` (new ones if
    None: they load inside the timed window)."""
    from endstate.core.env.domain import Domains
    from endstate.core.episode.backends import build_backend
    from endstate.core.episode.config import RunConfig
    from endstate.core.episode.plan import load_tasks, plan
    from endstate.core.episode.runtime import run_episodes

    cfg = RunConfig(backend="chat", model="double", agent_urls=[url], jobs=jobs, procs=procs, timeout=30.0)
    keys = plan(load_tasks([tasks_file], None), repeats, set())[:limit]
    backend, domains, episodes = build_backend(cfg), domains or Domains(), []
    start, cpu = time.perf_counter(), cpu_seconds_here()
    run_episodes(keys, cfg, domains, backend, lambda task, episode: episodes.append(episode))
    return time.perf_counter() - start, cpu_seconds_here() - cpu, episodes


def loaded_domains(warm_file: str, url: str) -> tuple[object, float]:
    """New domains, loaded: seeds read, tables and tools read (timed: the second value), then the
    seats opened by a run of the warm-up tasks with 64 in flight."""
    from endstate.core.env.domain import Domains

    domains, start = Domains(), time.perf_counter()
    for name in {orjson.loads(line)["domain"] for line in Path(warm_file).read_bytes().splitlines()}:
        domain = domains[name]
        domain.seed(), domain.tables, domain.tools
    load = time.perf_counter() - start
    run(warm_file, url, 1, 64, domains=domains)
    return domains, load


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
    ap.add_argument("--profile", help="write a cProfile of the timed run here (this process only)")
    args = ap.parse_args()

    tasks, others = bench_keys(max(args.episodes)), bench_keys(0, skip=16)
    repeats = -(-max(args.episodes) // len(tasks))
    with tempfile.TemporaryDirectory() as tmp:
        tasks_file, warm_file = Path(tmp) / "tasks.jsonl", Path(tmp) / "warm.jsonl"
        tasks_file.write_bytes(b"".join(orjson.dumps(t) + b"\n" for t in tasks))
        warm_file.write_bytes(b"".join(orjson.dumps(t) + b"\n" for t in others))
        double = subprocess.Popen([sys.executable, str(DOUBLE), str(args.latency), str(tasks_file),
                                   str(warm_file)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            url = double.stdout.readline().strip()
            run(str(warm_file), url, 1, 8)  # imports, the first connections
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
    domains, load = loaded_domains(warm_file, url)
    if args.profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    double_cpu = cpu_seconds(double_pid)
    wall, cpu, episodes = run(tasks_file, url, repeats, n, n, procs, domains)
    double_cpu = cpu_seconds(double_pid) - double_cpu
    if args.profile:
        profiler.disable()
        profiler.dump_stats(args.profile)
    ratio = report(episodes, wall, cpu, double_cpu, args.latency, tasks, -(-n // tasks), procs, load)
    record(f"rollout.wall_x_ideal.{n}.procs{procs}", ratio, "x", better="lower")


def report(episodes: list, wall: float, cpu: float, double_cpu: float, latency: float,
           tasks: int, repeats: int, procs: int, load: float) -> float:
    """Print the run's figures; its wall / ideal."""
    from endstate.core.records.structs import AssistantMessage

    calls = [sum(isinstance(m, AssistantMessage) for m in e.messages) for e in episodes]
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
          "once per process), then a run of other tasks opens the seats")
    print(f"throughput          {sum(calls) / wall:.0f} calls/s, {len(episodes) / wall * 60:.0f} episodes/min")
    return wall / ideal


if __name__ == "__main__":
    main()
