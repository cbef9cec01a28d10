"""Fixtures for the grpo tests: the buttons domain and its tasks, and a tiny model (see tiny.py)."""

import os
import signal
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
BUTTONS = {"domain": str(HERE / "buttons"), "pool": str(HERE / "buttons.jsonl")}


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    from grpo_fixtures.tiny import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("tiny-model"), seed=0)


@pytest.fixture(scope="session")
def buttons():
    return BUTTONS


LAUNCH_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


def launcher_env(**extra: str) -> dict[str, str]:
    """This environment without an in-process test's rank variables, one thread per rank."""
    return {**{k: v for k, v in os.environ.items() if k not in LAUNCH_VARS}, "OMP_NUM_THREADS": "1",
            **extra}


def run_to_the_end(args: list[str], *, timeout: float, what: str, **popen) -> str:
    """Run a launcher (torchrun, an sbatch script) in its own process group and return its stderr;
    past `timeout` the whole group (launcher and ranks) is killed and the test fails naming `what`.
    A nonzero exit fails the test with the end of stderr."""
    with subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          start_new_session=True, **popen) as launcher:
        try:
            _, stderr = launcher.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(launcher.pid, signal.SIGKILL)
            _, stderr = launcher.communicate()
            pytest.fail(f"{what} did not finish in {timeout:g} s:\n{stderr[-4000:]}")
    assert launcher.returncode == 0, stderr[-4000:]
    return stderr


def step_gradients(policy) -> dict:
    """{parameter name: its gradient}, filled just before each optimizer step of `policy` (a
    grpo.engine.Policy): what Policy.update accumulated over its micro-batches."""
    captured: dict = {}
    step = policy.engine.step

    def capture():
        captured.update({n: p.grad.clone() for n, p in policy.module.named_parameters()})
        step()

    policy.engine.step = capture
    return captured
