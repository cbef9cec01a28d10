"""Python checks in a process of their own, under a real wall-clock and memory bound.

A python check is the domain's code: it can loop in C (`sum(range(10**11))`, a catastrophic
regex), sleep, allocate without end, call sys.exit or os._exit. None of that may reach the grader.
So each (process, domain) keeps one check process warm: it loads the domain once, then per check
rebuilds the terminal state (seed + init + the episode's diff, on a connection of its own, read-only
and under the SQLite step budget) and runs the function under the Python line budget. The grader
waits PYTHON_SECONDS for the answer; past that, or if the process dies, it is killed, the check is
a task defect of that episode, and the next check starts a fresh process. The check process caps
its own address space (PYTHON_MEMORY above what it holds once loaded; Linux) and ignores Ctrl-C,
which stops the grader, which stops it. Cost per check: bench/bench_sandbox.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing.connection import Connection, Pipe
from pathlib import Path
from typing import Any

import orjson

from endstate.core.env.domain import Domain

PYTHON_SECONDS = 10.0  # wall-clock per check: past the line budget's ~3 s, far past a sound check
PYTHON_MEMORY = 2 << 30  # bytes of address space a check may add to its loaded process


class _PastLineBudget(BaseException):
    """Raised inside a python check past its line budget: a BaseException, so its own `except
    Exception` cannot swallow it (and it is raised again at every later line)."""


@contextmanager
def line_budget(lines: int) -> Iterator[None]:
    """Count the Python lines run in the block's calls: the deterministic bound on a check's Python
    (the same on every machine), beside the wall clock that also bounds work in C."""
    left = lines

    def count(frame, event, arg):
        nonlocal left
        if event == "line":
            left -= 1
            if left < 0:
                raise _PastLineBudget
        return count

    previous = sys.gettrace()
    sys.settrace(count)
    try:
        yield
    finally:
        sys.settrace(previous)


# -- the grader's side ----------------------------------------------------------------------------

class _CheckProcess:
    """One warm check process for one domain, talking over a socket pair."""

    def __init__(self, domain: Domain):
        ours, theirs = Pipe(duplex=True)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (_package_root(), os.environ.get("PYTHONPATH")) if p)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "endstate.core.grading.isolation", str(theirs.fileno()),
             domain.name, str(domain.path), str(PYTHON_MEMORY)],
            pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, stdout=2,
            env=env)
        theirs.close()
        self.conn: Connection = ours
        self.lock = threading.Lock()

    def ask(self, request: dict[str, Any], seconds: float) -> dict[str, Any]:
        with self.lock:
            try:
                self.conn.send_bytes(orjson.dumps(request))
                if not self.conn.poll(seconds):
                    self.kill()
                    return {"error": f"ran past {seconds:g} s of wall-clock time (work that never "
                                     "ends, in Python or in C, or a sleep?)", "dead": True}
                return orjson.loads(self.conn.recv_bytes())
            except (EOFError, OSError):
                code = self.kill()
                return {"error": f"its process died (exit code {code})", "dead": True}
            except BaseException:  # Ctrl-C while waiting: the check must not outlive the grader
                self.kill()
                raise

    def kill(self) -> int | None:
        self.conn.close()
        if self.proc.poll() is None:
            self.proc.kill()
        return self.proc.wait()


def _package_root() -> str:
    """The folder `import endstate` found this package in (a symlinked checkout too)."""
    import endstate

    return str(Path(endstate.__file__).parent.parent)


_PROCESSES: dict[tuple[int, str, str], _CheckProcess] = {}
_LOCK = threading.Lock()


def run_check(domain: Domain, request: dict[str, Any]) -> dict[str, Any]:
    """{"passed", "detail"} or {"error"} for one python check: `request` holds the task's init,
    the episode's changes and messages, the check's name and params and the line budget."""
    key = (os.getpid(), domain.name, str(domain.path))  # a forked process starts its own
    with _LOCK:
        process = _PROCESSES.get(key)
        if process is None or process.proc.poll() is not None:
            process = _PROCESSES[key] = _CheckProcess(domain)
    answer = process.ask(request, PYTHON_SECONDS)
    if answer.pop("dead", False):
        with _LOCK:
            if _PROCESSES.get(key) is process:
                del _PROCESSES[key]
    return answer


# -- the check process's side -----------------------------------------------------------------------

def _limit_memory(extra: int) -> None:
    try:
        import resource

        with open("/proc/self/statm") as f:
            size = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        limit = size + extra if hard == resource.RLIM_INFINITY else min(hard, size + extra)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    except (OSError, ValueError, ImportError):  # not Linux: the wall clock still holds
        pass


def _check(domain: Domain, request: dict[str, Any]) -> dict[str, Any]:
    from endstate.core.env.sandbox import Sandbox

    name, params = request["name"], request["params"]
    module = domain.checks_module
    fn = getattr(module, name, None) if module else None
    if not callable(fn) or name.startswith("_"):
        return {"error": f"no python check function {name!r} in {domain.path}/checks.py"}
    sandbox = Sandbox(domain, request["init"])
    sandbox.apply_changes(request["changes"])
    with sandbox, sandbox.read_only(private=True) as conn:
        try:
            with line_budget(request["lines"]):
                result = fn(conn, request["messages"], **params)
        except _PastLineBudget:
            return {"error": f"{name} ran past {request['lines']:,} Python lines (a loop that never "
                             "ends?)"}
        if not conn.in_transaction:
            return {"error": f"{name} ended the grading transaction; checks only read"}
    passed, detail = result if isinstance(result, tuple) and len(result) == 2 else (result, "")
    if type(passed) is not bool or not isinstance(detail, str):  # "False", [0], None: never guess
        return {"error": f"{name} returned {result!r:.80}; a python check returns True, False or "
                         "(bool, detail text)"}
    return {"passed": passed, "detail": detail}


def _prepare(domain: Domain) -> None:
    """The next check's fresh connection, built while the grader does other work."""
    from endstate.core.env.seats import prepare_private

    try:
        prepare_private(domain)
    except BaseException:  # noqa: BLE001 - the check will build its own and report why
        pass


def _answer(domain: Domain, request: dict[str, Any]) -> dict[str, Any]:
    try:
        return _check(domain, request)
    except BaseException as e:  # noqa: BLE001 - the task's or the domain's bug: named, never scored
        return {"error": f"{request['name']}(conn, messages, **{request['params']}) raised "
                         f"{type(e).__name__}: {e}"[:2000]}


def main(argv: list[str]) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the grader, and the grader us
    fd, name, path, memory = argv
    conn = Connection(int(fd))
    domain = Domain(name, Path(path))
    try:  # loaded before the cap, so that the cap is what a check may add
        domain.seed()
        domain.tools
        domain.checks_module
    except BaseException:  # noqa: BLE001 - reported, with its cause, by the first check
        pass
    _limit_memory(int(memory))
    while True:
        _prepare(domain)
        try:
            request = orjson.loads(conn.recv_bytes())
        except (EOFError, OSError):  # the grader is gone
            return
        answer = _answer(domain, request)
        try:
            data = orjson.dumps(answer)
        except TypeError as e:  # a detail text JSON cannot carry (a lone surrogate)
            data = orjson.dumps({"error": f"{request['name']} returned a detail that is not text "
                                          f"JSON can carry: {e}"})
        conn.send_bytes(data)


if __name__ == "__main__":
    main(sys.argv[1:])
