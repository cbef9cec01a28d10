"""Shared fixtures. Tests use the real retail domain (a ~5 MB SQLite seed) and real subprocesses."""

import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

# pytest -n 2 runs two workers on a 2-core box: one torch thread each, or OpenMP's spinning
# threads oversubscribe the cores and generation slows down ~15x. Subprocesses inherit this.
os.environ.setdefault("OMP_NUM_THREADS", "1")
# Seeds are cached by content digest; keep the test run's cache out of the user's home.
os.environ.setdefault("ENDSTATE_CACHE", os.path.join(tempfile.gettempdir(), "endstate-test-cache"))
# The tests' endpoints are loopback doubles: a proxy the environment names must not carry
# them (tests/test_proxy.py sets its own proxy variables).
for _name in ("no_proxy", "NO_PROXY"):
    os.environ[_name] = ",".join(filter(None, [os.environ.get(_name), "127.0.0.1", "localhost"]))

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
SLOW = "slow: make test-slow (ENDSTATE_SLOW=1) runs it, and CI"
WHEEL_SOURCES = ("pyproject.toml", "README.md", "tools", "schemas", "domains", "tasks", "configs")


def pytest_collection_modifyitems(config, items):
    """Tests marked slow (minutes on 2 cores) run only with ENDSTATE_SLOW=1: `make test` stays
    fast, `make test-slow` and CI run them."""
    if os.environ.get("ENDSTATE_SLOW"):
        return
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(pytest.mark.skip(reason=SLOW))


def build_wheel(tmp_path: Path) -> tuple[Path, str]:
    """endstate's wheel built from a copy of the sources (building in place would leave build/ in
    the checkout), and pip's output."""
    src = tmp_path / "src"
    src.mkdir()
    for name in WHEEL_SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, symlinks=True,
                            ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(ROOT / name, src / name)
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                            "-w", tmp_path / "dist", src], check=True, capture_output=True, text=True)
    return next((tmp_path / "dist").glob("endstate-*.whl")), built.stdout + built.stderr


@functools.cache
def without_judge(path: Path) -> str:
    """A file of `path`'s tasks but those with a judge check: a pool for tests of grpo's flags and
    plans, which configure no judge (the built-in training suites hold judged tasks, which grpo
    refuses to train on without one). One file per process."""
    kept = [line for line in path.read_text().splitlines() if '"kind": "judge"' not in line]
    target = Path(tempfile.mkdtemp(prefix="endstate-pool-")) / path.name
    target.write_text("\n".join(kept) + "\n")
    return str(target)


@pytest.fixture(scope="session")
def domains():
    from endstate.core.env.domain import Domains

    return Domains()


@pytest.fixture(scope="session")
def tasks(domains):
    from endstate.core.grading.grader import TaskIndex

    return TaskIndex(domains)


@pytest.fixture(scope="session")
def grader(domains):
    from endstate.core.grading.grader import Grader

    return Grader(domains)


def run_tool(*args: str, input: str | bytes | None = None, env: dict | None = None,
             cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run an installed console script as a user would, capturing text output. The limit only
    turns a hang into a failure: far above what any run here needs on a loaded 2-core box."""
    if isinstance(input, bytes):
        input = input.decode()
    return subprocess.run([str(BIN / args[0]), *args[1:]], input=input, capture_output=True,
                          text=True, env={**os.environ, **(env or {})}, cwd=cwd, timeout=900)


def read_jsonl(path: Path) -> list[dict]:
    """The records of a JSONL file, one a line."""
    return [json.loads(line) for line in path.read_text().splitlines()]


def grade_steps(grader, task: dict, steps: list[dict]) -> dict:
    """The graded episode of `steps` (gold-shaped: tool calls and says) made on the task's domain."""
    from endstate.core.episode.replays import replay

    return grader.grade(replay(grader.domains[task["domain"]], task, steps), task)


def failed_checks(graded: dict) -> dict[str, str]:
    """Check id -> detail of every check that failed."""
    return {c["id"]: c["detail"] for c in graded["checks"] if c["passed"] is False}
