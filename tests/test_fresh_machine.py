"""A machine that has never run endstate: an empty ENDSTATE_CACHE and HOME, each tool a subprocess,
stdout piped into the next tool as a user's shell would. Every stdout line must be a record of the
kind the next tool reads: the first model conversion, DeepSpeed's import-time warning and
transformers' loading output all belong on stderr (core.stdio)."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import BIN, ROOT

from endstate.core.records import schemas

TOOLS = ("grade", "bucket", "evalstats", "rollout", "probe", "grpo")
EPISODE = ("--max-new-tokens", "8", "--max-turns", "1", "--seed", "0")


def records(stdout: str, kind: str) -> list[dict]:
    """Every line of `stdout` as a `kind` record; fails on the first line that is not one."""
    out = []
    for n, line in enumerate(stdout.splitlines(), 1):
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            pytest.fail(f"stdout line {n} is not JSON: {line[:200]!r}")
        assert schemas.problem(kind, record) is None, f"stdout line {n}: {schemas.problem(kind, record)}"
        out.append(record)
    return out


@pytest.mark.slow
def test_a_fresh_machine_runs_every_tool_with_records_only_on_stdout(tmp_path):
    env = {"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(tmp_path / "home"),
           "ENDSTATE_CACHE": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}
    (tmp_path / "home").mkdir()

    def tool(*args: str, input: str | None = None) -> subprocess.CompletedProcess:
        # probe's first conversion and generation: ~2 min of this test's ~4 beside the rest of
        # the suite on 2 cores; the limit only turns a hang into a failure
        p = subprocess.run([str(BIN / args[0]), *args[1:]], input=input, capture_output=True,
                           text=True, env=env, cwd=tmp_path, timeout=1800)
        assert p.returncode == 0, f"{args[0]} exit {p.returncode}: {p.stderr[-2000:]}"
        return p

    # a train-split task: grpo refuses held-out (bench, ood) tasks in its pool
    tasks = (ROOT / "tasks" / "train" / "retail.jsonl").read_text().splitlines()[:1]
    (tmp_path / "one.jsonl").write_text("\n".join(tasks) + "\n")

    probed = tool("probe", "one.jsonl", "-n", "2", *EPISODE, "--episodes", "graded.jsonl")
    assert "converting the embedded" in probed.stderr  # this run did the first conversion
    attempts = records(probed.stdout, "attempt")
    assert len(attempts) == 2
    assert "probe: 2 episode(s) in " in probed.stderr  # the summary line, also off a terminal

    difficulty = tool("bucket", "--all", "-", input=probed.stdout)
    assert [r["task_id"] for r in records(difficulty.stdout, "difficulty")] == [attempts[0]["task_id"]]

    metrics = tool("evalstats", "--allow-incomplete", "-", input=probed.stdout)
    records(metrics.stdout, "metrics")

    rolled = tool("rollout", "one.jsonl", "-n", "1", *EPISODE)
    assert "rollout: 1 episode(s) in " in rolled.stderr
    episodes = records(rolled.stdout, "episode")
    graded = tool("grade", "-", input=rolled.stdout)
    assert [g["episode_id"] for g in records(graded.stdout, "graded_episode")] == \
        [episodes[0]["episode_id"]]

    verdicts = tool("grade", "validate", "one.jsonl")
    assert all(v["sound"] for v in records(verdicts.stdout, "verdict"))

    # grpo writes its records into --out; its stdout stays empty even while DeepSpeed starts
    trained = tool("grpo", "train", "--pool", "one.jsonl", "--model", "embedded", "--out", "run",
                   "--steps", "1", "--batch-tasks", "1", "--group-size", "2", "--max-rounds", "1",
                   "--micro-batch", "1", *EPISODE)
    assert trained.stdout == ""
    assert "grpo: 1 step(s) in " in trained.stderr
    # nothing compiled on the way (DeepSpeed's CPU shared-memory op: ~30 s and a compiler)
    assert not (tmp_path / "home" / ".cache" / "torch_extensions").exists()
    records((tmp_path / "run" / "attempts.jsonl").read_text(), "attempt")


@pytest.mark.parametrize("tool", TOOLS)
def test_every_tool_runs_as_a_module_and_tells_its_version(tool):
    for argv in ([sys.executable, "-m", f"endstate.{tool}"], [sys.executable, "-m", f"endstate.{tool}.cli"]):
        usage = subprocess.run([*argv, "--help"], capture_output=True, text=True, timeout=120)
        assert usage.returncode == 0 and usage.stdout.startswith("Usage: "), usage.stderr
    version = subprocess.run([str(BIN / tool), "--version"], capture_output=True, text=True, timeout=120)
    assert version.returncode == 0 and version.stdout == f"{tool} (endstate) 0.1.0\n"


@pytest.mark.parametrize("failures, code", [(2, 0), (3, 1)])
def test_the_install_retries_pip_after_a_dropped_download(tmp_path, failures, code):
    # A test double for pip (an edge we do not own): a "python" whose `-m pip install` fails the
    # first `failures` times, as a download cut mid-wheel does, and logs its arguments.
    fake = tmp_path / "python"
    fake.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path}/calls\n'
                    f'[ "$(wc -l < {tmp_path}/calls)" -gt {failures} ]\n')
    fake.chmod(0o755)
    p = subprocess.run([str(ROOT / "scripts/pip_install.sh"), str(fake), "torch==2.13.0"],
                       capture_output=True, text=True, env={"PATH": "/usr/bin:/bin",
                                                           "PIP_INSTALL_PAUSE": "0"})
    calls = (tmp_path / "calls").read_text().splitlines()
    assert p.returncode == code, p.stderr
    assert calls == ["-m pip install -q torch==2.13.0"] * min(failures + 1, 3)
    assert ("failed 3 times" in p.stderr) == (code == 1)


def test_ctrl_c_stops_the_install_instead_of_retrying(tmp_path):
    # The pip double answers Ctrl-C as pip does, exit 1; the script must not take that for a
    # dropped download and run pip again. SIGINT's default is restored in the child: pytest-xdist
    # workers ignore it, and a shell started with it ignored cannot trap it.
    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\necho \"$@\" >> {tmp_path}/calls\ntrap 'exit 1' INT\n"
                    f"touch {tmp_path}/started\nsleep 30 & wait\n")
    fake.chmod(0o755)
    p = subprocess.Popen([str(ROOT / "scripts/pip_install.sh"), str(fake), "x"], text=True,
                         stderr=subprocess.PIPE, start_new_session=True,
                         env={"PATH": "/usr/bin:/bin", "PIP_INSTALL_PAUSE": "0"},
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while not (tmp_path / "started").exists():
        assert p.poll() is None and time.monotonic() < deadline, p.stderr.read()
        time.sleep(0.05)
    os.killpg(p.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole foreground group
    assert p.wait(timeout=120) == 130, p.stderr.read()
    assert len((tmp_path / "calls").read_text().splitlines()) == 1
