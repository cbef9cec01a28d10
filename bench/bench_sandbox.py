"""Per-episode overhead of the sandbox, on the retail domain (~5 MB seed) or on every domain.

Prints, measured in one run on this machine:
  - provisioning (a sandbox for seed + task init) as a ratio to a plain memory copy of the seed
    bytes (target: <= 3x);
  - the median per-episode overhead: provision + 10 tool calls + diff + grade (target: <= 1.5 ms),
    and as a ratio to the same 10 calls run on a plain connection (the tools' own work);
  - the memory of 256 episodes in flight at once, each after one write, against the same 256
    episodes on a private copy of the database each (what a sandbox cost before it kept only
    its diff).

`--domain all` (or a domain name, repeatable) measures each domain on a task of its own, with
the best of 3 seed builds; a domain outside retail's ten calls makes its task's gold calls,
padded with its reads to ten. The domains are measured in rounds, alternating, and each figure is
the best round, so drift on a shared machine hits them alike; the last table gives each domain's
figures as ratios to the largest of the domains that had training tasks before the
out-of-distribution ones (insurance, consulting) were added.

    python bench/bench_sandbox.py [--episodes 200]
    python bench/bench_sandbox.py --domain all [--episodes 100] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import time

from results import record

from endstate.core.env.changes import upsert
from endstate.core.env.domain import Domains
from endstate.core.env.sandbox import Sandbox
from endstate.core.env.tools import Db, ToolError
from endstate.core.grading.grader import Grader, TaskIndex

TASK_ID = "retail-return-two-lines"
CALLS = [  # ten calls, reads and writes, as a short agent episode would make
    ("find_customer", {"email": "priya.raman@example.com"}),
    ("get_customer", {"customer_id": "C9003"}),
    ("list_orders", {"customer_id": "C9003"}),
    ("get_order", {"order_id": "W90081"}),
    ("search_products", {"query": "mug"}),
    ("request_return", {"order_id": "W90081", "line": 1, "quantity": 1, "reason": "no_longer_needed"}),
    ("get_order", {"order_id": "W90081"}),
    ("request_return", {"order_id": "W90081", "line": 2, "quantity": 1, "reason": "no_longer_needed"}),
    ("cancel_order", {"order_id": "W90081", "reason": "no_longer_needed"}),  # refused: delivered
    ("get_order", {"order_id": "W90081"}),
]


def median_ms(fn, n: int) -> float:
    samples = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t) * 1000)
    return statistics.median(samples)


# A task of each domain for --domain: several writes, as a real episode makes.
EPISODE_TASKS = {"travel": "travel-three-changes-one-needs-approval",
                 "support": "support-lost-report-and-claim",
                 "bank": "bank-fraud-charge-freeze-dispute-credit",
                 "insurance": "insurance-split-claim-repair-rental-tow",
                 "consulting": "consulting-discount-needs-partner-file-and-staff-at-card"}
TRAINED_BEFORE = ("retail", "travel", "support", "bank")


def episode_calls(domain, task: dict) -> list[tuple[str, dict]]:
    """Ten calls: retail's list, else the task's gold calls with its reads repeated to ten."""
    if domain.name == "retail":
        return CALLS
    calls = [(s["tool"], s["args"]) for s in task["gold"] if "tool" in s]
    reads = [c for c in calls if not domain.tools[c[0]].writes]
    while len(calls) < 10:
        calls.append(reads[(len(calls) - 1) % len(reads)])
    return calls


def timed(domain, grader: Grader, task: dict, calls: list[tuple[str, dict]], said: list[dict]):
    """(copy, provision, episode, raw_calls): what is timed, each run once to warm the caches. copy
    is a plain memory copy of the seed bytes; episode makes `calls` on a fresh sandbox and grades
    the diff; raw_calls makes them on a plain connection (the tools' own work, no sandbox)."""
    seed_bytes, _ = domain.seed()

    def copy():
        bytearray(seed_bytes)

    def provision():
        Sandbox(domain, task["init"]).close()

    def episode():
        with Sandbox(domain, task["init"]) as sandbox:
            for tool, args in calls:
                sandbox.call(tool, args)
            changes = sandbox.changes()
        results = grader.check(task, changes, said)
        assert all(r.passed for r in results), results

    plain = sqlite3.connect(":memory:", isolation_level=None)
    plain.deserialize(seed_bytes)
    for table, rows in task["init"].items():
        for row in rows:
            upsert(plain, domain.tables[table], row)

    def raw_calls():
        plain.execute("SAVEPOINT raw")
        for name, args in calls:
            try:
                domain.tools[name].fn(Db(plain, domain.now), **args)
            except ToolError:
                pass
        plain.execute("ROLLBACK TO raw")
        plain.execute("RELEASE raw")

    for fn in (copy, provision, episode, raw_calls):  # warm caches and the statement cache
        fn()
    return copy, provision, episode, raw_calls


def measure(domains: Domains, grader: Grader, index: TaskIndex, name: str, n: int) -> dict:
    """Seconds to build the seed (one build), and the provision/copy ratio and the episode's
    median overhead in ms, on the domain's task."""
    domain = domains[name]
    start = time.perf_counter()
    domain.build_seed()
    build = time.perf_counter() - start
    seed_bytes, _ = domain.seed()
    task = index.get(EPISODE_TASKS.get(name, TASK_ID))
    said = [{"role": "assistant", "content": s["say"]} for s in task["gold"] if "say" in s]
    copy, provision, episode, _ = timed(domain, grader, task, episode_calls(domain, task), said)
    copy_ms = median_ms(copy, n)
    return {"mb": len(seed_bytes) / 1e6, "build_s": build,
            "provision_x": median_ms(provision, n) / copy_ms, "episode_ms": median_ms(episode, n)}


def every_domain(names: list[str], n: int, rounds: int) -> None:
    domains = Domains()
    grader, index = Grader(domains), TaskIndex(domains)
    best: dict[str, dict] = {}
    for _ in range(rounds):
        for name in names:
            m = measure(domains, grader, index, name, n)
            best[name] = {k: min(v, best.get(name, {}).get(k, v)) for k, v in m.items()}
    print(f"{'domain':11} {'seed':>6} {'build':>8} {'provision/copy':>15} {'episode':>9}")
    for name in names:
        m = best[name]
        print(f"{name:11} {m['mb']:4.1f}MB {m['build_s'] * 1e3:6.0f}ms {m['provision_x']:14.2f}x "
              f"{m['episode_ms']:7.2f}ms")
    before = [best[x] for x in TRAINED_BEFORE if x in best]
    if not before:
        return
    top = {k: max(m[k] for m in before) for k in ("build_s", "provision_x", "episode_ms")}
    print(f"\nratio to the largest of {', '.join(x for x in TRAINED_BEFORE if x in best)} "
          "(<= 1: within their figures)")
    for name in names:
        m = best[name]
        print(f"{name:11} build {m['build_s'] / top['build_s']:.2f}  provision "
              f"{m['provision_x'] / top['provision_x']:.2f}  episode "
              f"{m['episode_ms'] / top['episode_ms']:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--domain", action="append", default=[],
                        help="a domain to measure on a task of its own (repeatable), or `all`")
    parser.add_argument("--rounds", type=int, default=3, help="--domain: rounds, best kept")
    args = parser.parse_args()
    n = args.episodes
    if args.domain:
        names = [d.name for d in Domains()] if args.domain == ["all"] else args.domain
        every_domain(names, n, args.rounds)
        return
    domains = Domains()
    domain = domains["retail"]
    seed_bytes, _ = domain.seed()
    task = TaskIndex(domains).get(TASK_ID)
    copy, provision, episode, raw_calls = timed(domain, Grader(domains), task, CALLS, [])
    copy_ms = median_ms(copy, n)
    provision_ms = median_ms(provision, n)
    episode_ms = median_ms(episode, n)
    raw_ms = median_ms(raw_calls, n)
    print(f"seed database:            {len(seed_bytes) / 1e6:.2f} MB")
    print(f"memory copy of the bytes: {copy_ms:.3f} ms (median of {n})")
    print(f"provision (seed + init):  {provision_ms:.3f} ms = {provision_ms / copy_ms:.2f}x the copy"
          "  (target <= 3x)")
    print(f"the 10 calls, no sandbox: {raw_ms:.3f} ms median (the tools' own work)")
    print(f"episode overhead:         {episode_ms:.3f} ms median = {episode_ms / raw_ms:.2f}x the "
          "calls alone  (provision + 10 tool calls + diff + grade; target <= 1.5 ms)")
    record("sandbox.episode_ms", episode_ms, "ms", better="lower")
    record("sandbox.episode_x_calls", episode_ms / raw_ms, "x", better="lower")
    record("sandbox.provision_x_copy", provision_ms / copy_ms, "x", better="lower")

    write = CALLS[5]
    before = rss_mb()
    in_flight = [Sandbox(domain, task["init"]) for _ in range(256)]
    assert all(s.call(*write).ok for s in in_flight)
    shared_mb = rss_mb() - before
    before = rss_mb()
    copies = []
    for _ in range(256):
        conn = sqlite3.connect(":memory:", isolation_level=None)
        conn.deserialize(seed_bytes)
        conn.execute("UPDATE orders SET status = status WHERE id = 'W90081'")
        copies.append(conn)
    copies_mb = rss_mb() - before
    print(f"256 episodes in flight:   {shared_mb:.2f} MB, against {copies_mb:.0f} MB with a private "
          f"copy of the database each")
    record("sandbox.in_flight_256_x_copies", shared_mb / copies_mb, "x", better="lower")


def rss_mb() -> float:
    """Resident memory of this process now (Linux)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


if __name__ == "__main__":
    main()
