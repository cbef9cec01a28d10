"""Benchmark bucket and evalstats on 1,000,000 attempt records.

Prints, from one run on the same file, the wall time of each tool against two baselines:
(a) a plain orjson parse loop over the file (a Python subprocess, like the tools), and
(b) jq counting successes per task (`jq -s 'group_by(.task_id) | ...'`).
Targets: each tool <= 1.5x the orjson parse and >= 4x faster than jq.
Every figure is the best of --repeats runs (on a shared box the minimum is the least noisy);
the tools run as their console scripts, interpreter start-up and imports included.

    .venv/bin/python bench/bench_stats.py [--records 1000000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson
from results import record

BIN = Path(sys.executable).parent
DOMAINS = ("retail", "travel", "support", "bank")
PARSE = "import orjson,sys\nfor line in open(sys.argv[1],'rb'): orjson.loads(line)"
JQ = ("group_by(.task_id) | map({task_id: .[0].task_id, "
      "successes: map(select(.reward == 1)) | length})")


def generate(path: Path, records: int, repeats: int = 20, seed: int = 0) -> None:
    """Probe-shaped attempts: tasks × 20 repeats, 1% system errors, a cost on every attempt."""
    rng = random.Random(seed)
    with open(path, "wb") as out:
        for t in range(records // repeats):
            p, domain = rng.random(), DOMAINS[t % len(DOMAINS)]
            task_id = f"{domain}-task-{t:06d}"
            for a in range(repeats):
                error = rng.random() < 0.01
                out.write(orjson.dumps({
                    "task_id": task_id, "domain": domain, "attempt": a,
                    "reward": None if error else int(rng.random() < p),
                    "status": "system_error" if error else "ok",
                    "model": "SmolLM2-135M-Instruct",
                    "usage": {"agent": {"prompt_tokens": rng.randint(1000, 9000),
                                        "completion_tokens": rng.randint(50, 900)}},
                    "cost_usd": round(rng.random() * 0.01, 6),
                    "episode_id": f"{task_id}/{a}/{rng.getrandbits(32):08x}",
                }, option=orjson.OPT_APPEND_NEWLINE))


def seconds(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-jq", action="store_true", help="skip the (slow) jq baseline")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "attempts.jsonl"
        start = time.perf_counter()
        generate(path, args.records)
        print(f"generated {args.records:,} attempt records ({path.stat().st_size / 1e6:.0f} MB) "
              f"in {time.perf_counter() - start:.1f} s", file=sys.stderr)
        f = str(path)
        runs = {
            "orjson parse loop": [sys.executable, "-c", PARSE, f],
            "bucket": [str(BIN / "bucket"), f],
            "bucket --procs 1": [str(BIN / "bucket"), "--procs", "1", f],
            "evalstats --by domain": [str(BIN / "evalstats"), "--by", "domain", f],
            "evalstats --by domain --procs 1": [str(BIN / "evalstats"), "--by", "domain",
                                                  "--procs", "1", f],
        }
        best = {name: float("inf") for name in runs}
        for _ in range(args.repeats):  # interleaved, so drift on a shared box hits all alike
            for name, cmd in runs.items():
                best[name] = min(best[name], seconds(cmd))
        jq = shutil.which("jq") or "/usr/bin/jq"
        if not args.no_jq and Path(jq).exists():
            best["jq -s group_by count"] = seconds([jq, "-s", JQ, f])
    parse = best["orjson parse loop"]
    jq_s = best.get("jq -s group_by count")
    print(f"{'command':<36} {'seconds':>8} {'x parse':>8} {'jq / x':>8}")
    for name, s in best.items():
        vs_jq = f"{jq_s / s:8.1f}" if jq_s else f"{'-':>8}"
        print(f"{name:<36} {s:8.2f} {s / parse:8.2f} {vs_jq}")
    for name, figure in (("bucket", "stats.bucket_x_parse"),
                         ("bucket --procs 1", "stats.bucket_procs1_x_parse"),
                         ("evalstats --by domain", "stats.evalstats_x_parse"),
                         ("evalstats --by domain --procs 1", "stats.evalstats_procs1_x_parse")):
        record(figure, best[name] / parse, "x", better="lower")
    print(f"targets: tool <= 1.50 x parse, jq / tool >= 4.0  (default --procs = {len(_cpus())} "
          "CPUs; --procs 1 shown for the single-process figure)")


def _cpus() -> list[int]:
    import os

    return list(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [0]


if __name__ == "__main__":
    main()
