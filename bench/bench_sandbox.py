"""Per-episode overhead of the sandbox on the retail domain (~5 MB seed).

Prints, measured in one run on this machine:
  - provisioning (a sandbox for seed + task init) as a ratio to a plain memory copy of the seed
    bytes (target: <= 3x);
  - the median per-episode overhead: provision + 10 tool calls + diff + grade (target: <= 1.5 ms),
    and as a ratio to the same 10 calls run on a plain connection (the tools' own work);
  - the memory of 256 episodes in flight at once, each after one write, against the same 256
    episodes on a private copy of the database each (what a sandbox cost before it kept only
    its diff).

    python bench/bench_sandbox.py [--episodes 200]
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=200)
    n = parser.parse_args().episodes
    domains = Domains()
    domain = domains["retail"]
    seed_bytes, _ = domain.seed()
    task = TaskIndex(domains).get(TASK_ID)
    grader = Grader(domains)

    def copy():
        bytearray(seed_bytes)

    def provision():
        Sandbox(domain, task["init"]).close()

    def episode():
        with Sandbox(domain, task["init"]) as sandbox:
            for name, args in CALLS:
                sandbox.call(name, args)
            changes = sandbox.changes()
        results = grader.check(task, changes, [])
        assert all(r["passed"] for r in results), results

    plain = sqlite3.connect(":memory:", isolation_level=None)
    plain.deserialize(seed_bytes)
    for table, rows in task["init"].items():
        for row in rows:
            upsert(plain, domain.tables[table], row)

    def raw_calls():  # the tools' own work: the same calls on a plain connection, no sandbox
        plain.execute("SAVEPOINT raw")
        for name, args in CALLS:
            try:
                domain.tools[name].fn(Db(plain, domain.now), **args)
            except ToolError:
                pass
        plain.execute("ROLLBACK TO raw")
        plain.execute("RELEASE raw")

    for fn in (copy, provision, episode, raw_calls):  # warm caches and the statement cache
        fn()
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
