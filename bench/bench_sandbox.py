"""Per-episode overhead of the sandbox on the retail domain (~5 MB seed).

Prints, measured in one run on this machine:
  - provisioning (fresh in-memory database from the cached seed bytes + task init) as a ratio to a
    plain memory copy of the same bytes (target: <= 3x);
  - the median per-episode overhead: provision + 10 tool calls + diff + grade (target: <= 5 ms).

    python bench/bench_sandbox.py [--episodes 200]
"""

from __future__ import annotations

import argparse
import statistics
import time

from endstate.core.domain import Domains
from endstate.core.sandbox import Sandbox
from endstate.grade.grader import Grader, TaskIndex

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

    for fn in (copy, provision, episode):  # warm caches and the statement cache
        fn()
    copy_ms = median_ms(copy, n)
    provision_ms = median_ms(provision, n)
    episode_ms = median_ms(episode, n)
    print(f"seed database:            {len(seed_bytes) / 1e6:.2f} MB")
    print(f"memory copy of the bytes: {copy_ms:.3f} ms (median of {n})")
    print(f"provision (seed + init):  {provision_ms:.3f} ms = {provision_ms / copy_ms:.2f}x the copy"
          "  (target <= 3x)")
    print(f"episode overhead:         {episode_ms:.3f} ms median"
          "  (provision + 10 tool calls + diff + grade; target <= 5 ms)")


if __name__ == "__main__":
    main()
