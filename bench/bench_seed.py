"""Building the domain seeds: endstate's `insert_rows` (one executemany per table) against the same
rows through sqlite-utils' `insert_all`, every built-in domain, measured in one run.

Each build is the whole `Domain.build_seed` (schema, the domain's seed.py, content digest, change
log, VACUUM, serialize); only the insert helper the seed modules call differs, and both builds must
give the same content digest. Prints per domain the best of --repeats builds and the time spent
inside the helper, as ratios sqlite-utils / sqlite3 (above 1: sqlite-utils is slower).

    python bench/bench_seed.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import sqlite_utils

import endstate.core.env.tools as core_tools
from endstate.core.env.domain import Domain, Domains


def insert_all(conn, **rows) -> None:
    """What `insert_rows` would be on sqlite-utils: list mode (a header of column names, then
    value rows; sqlite-utils 4 has it, 3.x takes only dicts, slower still) into the tables
    schema.sql created."""
    db = sqlite_utils.Database(conn)
    for table, values in rows.items():
        t = db[table]
        t.insert_all([[c.name for c in t.columns], *values])


def timed_build(domain: Domain, helper: Callable) -> tuple[float, float, str]:
    """(seconds for the whole build, seconds inside the helper, content digest)."""
    inside = 0.0

    def timed(conn, **rows):
        nonlocal inside
        start = time.perf_counter()
        helper(conn, **rows)
        inside += time.perf_counter() - start

    core_tools.insert_rows = timed  # seed.py imports it from here when build_seed loads it
    try:
        start = time.perf_counter()
        _, digest = domain.build_seed()
        return time.perf_counter() - start, inside, digest
    finally:
        core_tools.insert_rows = BASELINE


BASELINE = core_tools.insert_rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    repeats = parser.parse_args().repeats
    print(f"{'domain':8} {'build sqlite3':>14} {'sqlite-utils':>13} {'ratio':>6}   "
          f"{'insert sqlite3':>15} {'sqlite-utils':>13} {'ratio':>6}")
    totals = [0.0, 0.0, 0.0, 0.0]
    for domain in Domains():
        best: dict[str, tuple[float, float]] = {}
        digests = set()
        for _ in range(repeats):  # interleaved, so drift on a shared machine hits both alike
            for name, helper in (("sqlite3", BASELINE), ("sqlite-utils", insert_all)):
                build, inside, digest = timed_build(domain, helper)
                digests.add(digest)
                old = best.get(name, (float("inf"), float("inf")))
                best[name] = (min(old[0], build), min(old[1], inside))
        assert len(digests) == 1, f"{domain.name}: the two builds give different seeds"
        (b0, i0), (b1, i1) = best["sqlite3"], best["sqlite-utils"]
        for k, v in enumerate((b0, b1, i0, i1)):
            totals[k] += v
        print(f"{domain.name:8} {b0 * 1e3:11.0f} ms {b1 * 1e3:10.0f} ms {b1 / b0:5.2f}x   "
              f"{i0 * 1e3:12.0f} ms {i1 * 1e3:10.0f} ms {i1 / i0:5.2f}x")
    b0, b1, i0, i1 = totals
    print(f"{'all':8} {b0 * 1e3:11.0f} ms {b1 * 1e3:10.0f} ms {b1 / b0:5.2f}x   "
          f"{i0 * 1e3:12.0f} ms {i1 * 1e3:10.0f} ms {i1 / i0:5.2f}x")


if __name__ == "__main__":
    main()
