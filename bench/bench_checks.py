"""What the bound on python checks costs (core/grading/isolation.py), on the retail domain.

Prints, measured in one run on this machine:
  - the median cost of one python check (retail's refund_matches_return on its bench task) run as
    before, in the grader's process on a private connection under the line budget, and run now,
    in the domain's warm check process (the state rebuilt there from the episode's diff);
  - the start of a check process (the first check of a domain in a process);
  - a hostile check (`time.sleep(1e6)`) under a wall-clock bound of --bound seconds: how long the
    grader waits for its verdict, and the next check, which starts a fresh process.

    python bench/bench_checks.py [--checks 200] [--bound 1.0]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from bench_sandbox import median_ms  # bench/ is the script's folder, first on sys.path

from endstate.core.env.domain import Domain, Domains
from endstate.core.env.sandbox import Sandbox
from endstate.core.episode.replays import replay
from endstate.core.grading import checks, isolation
from endstate.core.grading.grader import Grader, TaskIndex

TASK_ID = "retail-refund-received-return"


def timed_ms(fn) -> float:
    t = time.perf_counter()
    fn()
    return (time.perf_counter() - t) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checks", type=int, default=200)
    parser.add_argument("--bound", type=float, default=1.0)
    args = parser.parse_args()
    domains = Domains()
    domain = domains["retail"]
    task = TaskIndex(domains).get(TASK_ID)
    check = next(c for c in task["checks"] if c["kind"] == "python")
    episode = replay(domain, task, task["gold"])
    fn = getattr(domain.checks_module, check["name"])

    def in_process():  # the path before: the grader's process, a private connection, line budget
        sandbox = Sandbox(domain, task.get("init"))
        sandbox.apply_changes(episode["changes"])
        with sandbox, sandbox.read_only(private=True) as conn, isolation.line_budget(checks.PYTHON_LINES):
            assert fn(conn, episode["messages"], **check["params"])[0] is True

    request = {"name": check["name"], "params": check["params"], "init": task.get("init"),
               "changes": episode["changes"], "messages": episode["messages"],
               "lines": checks.PYTHON_LINES}

    def isolated():
        assert isolation.run_check(domain, request)["passed"] is True

    grader = Grader(domains)

    def graded():  # the whole task: its row and said checks too, on the grader's connection
        assert all(r.passed for r in grader.check(task, episode["changes"], episode["messages"]))

    start_ms = timed_ms(isolated)  # the first check of the domain starts its process
    in_process()
    before, now = median_ms(in_process, args.checks), median_ms(isolated, args.checks)
    graded()
    task_ms = median_ms(graded, args.checks)
    print(f"python check, in process (before):   {before:.3f} ms median of {args.checks}")
    print(f"python check, check process (now):   {now:.3f} ms median = {now / before:.2f}x, "
          f"+{now - before:.3f} ms a check")
    print(f"grading the task (3 checks, 1 python): {task_ms:.3f} ms median")
    print(f"first check of a domain (starts it): {start_ms:.0f} ms")
    hostile(args.bound)


def hostile(bound: float) -> None:
    """A check that sleeps forever, under a bound of `bound` s, then a sound one."""
    folder = Path(tempfile.mkdtemp()) / "sleepy"
    folder.mkdir()
    (folder / "schema.sql").write_text("CREATE TABLE t (id TEXT PRIMARY KEY);\n")
    (folder / "seed.py").write_text("def build(db, rng):\n    db.execute(\"INSERT INTO t VALUES ('a')\")\n")
    (folder / "tools.py").write_text("from endstate.core.env.tools import Db, tool\n\n@tool\n"
                                     "def look(db: Db) -> dict:\n    \"\"\"Look.\"\"\"\n    return {}\n")
    (folder / "checks.py").write_text("import time\n\ndef sleeps(conn, messages):\n    time.sleep(1e6)\n\n"
                                      "def fine(conn, messages):\n    return True\n")
    domain = Domain("sleepy", folder)
    isolation.PYTHON_SECONDS = bound
    base = {"params": {}, "init": None, "changes": {}, "messages": [], "lines": checks.PYTHON_LINES}
    isolation.run_check(domain, {**base, "name": "fine"})  # started
    waited = timed_ms(lambda: isolation.run_check(domain, {**base, "name": "sleeps"}))
    restart = timed_ms(lambda: isolation.run_check(domain, {**base, "name": "fine"}))
    print(f"a check that sleeps forever:         {waited:.0f} ms to its verdict "
          f"(bound {bound:g} s: {waited - bound * 1000:.0f} ms past it)")
    print(f"the next check (a fresh process):    {restart:.0f} ms")


if __name__ == "__main__":
    sys.exit(main())
