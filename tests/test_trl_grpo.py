"""examples/trl_grpo.py: TRL's GRPOTrainer trains through `rollout serve-openenv` with real
episodes, and the rewards TRL saw are endstate's grades of the episodes the server saved.

The model is the tests' tiny one on the buttons domain (grpo_fixtures/tiny.py), not the embedded
SmolLM2: one GRPO step of SmolLM2 through TRL's tool loop takes minutes on 2 CPU cores (its prompt
carries a domain's policy and tool schemas), and its calls are rarely well-formed, so every reward
would be 0. The tiny model's vocabulary holds the buttons domain's two complete tool calls as
tokens: it presses a button now and then, so the rewards are a mix of 1 and 0 to compare."""

from __future__ import annotations

import importlib.util
import statistics

import orjson
import pytest
from conftest import ROOT, read_jsonl, run_tool
from grpo_fixtures import BUTTONS
from grpo_fixtures.tiny import make_tiny_model

pytest.importorskip("openenv", reason="the openenv extra: pip install 'endstate[openenv]'")
pytest.importorskip("trl", reason="the trl extra: pip install 'endstate[trl]'")
pytest.importorskip("datasets", reason="the trl extra: pip install 'endstate[trl]'")
from openenv_server import Server


def example():
    spec = importlib.util.spec_from_file_location("trl_grpo", ROOT / "examples" / "trl_grpo.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_two_grpo_steps_train_on_served_episodes_and_see_endstate_rewards(tmp_path):
    tiny_model = make_tiny_model(tmp_path / "tiny", seed=0)
    tasks = read_jsonl(ROOT / BUTTONS["pool"])
    saved, seen_file = tmp_path / "served.jsonl", tmp_path / "rewards.jsonl"
    with Server(tasks, save_file=saved, domain_folders=(BUTTONS["domain"],)) as server:
        history = example().main([
            "--env-url", server.url, "--tasks", BUTTONS["pool"], "--model", str(tiny_model),
            "--steps", "2", "--generations", "4", "--max-completion-length", "6",
            "--max-tool-calls", "1", "--lr", "1e-3", "--out", str(tmp_path / "run"),
            "--rewards-out", str(seen_file)])
        assert server.served.live == set()  # every rollout's episode was ended and closed

    seen = read_jsonl(seen_file)
    assert len(seen) == 8  # 2 steps × 1 task × 4 rollouts
    graded = run_tool("grade", "--tasks", BUTTONS["pool"], "--domains", BUTTONS["domain"], str(saved))
    assert graded.returncode == 0, graded.stderr
    by_id = {g["episode_id"]: g["reward"] for g in map(orjson.loads, graded.stdout.splitlines())}
    assert {s["episode_id"]: s["reward"] for s in seen} == by_id  # TRL's rewards are endstate's
    steps = [h for h in history if "reward" in h]
    assert len(steps) == 2
    for step, entry in enumerate(steps):  # what TRL logged per step: the mean of those rewards
        rewards = [s["reward"] for s in seen[4 * step:4 * step + 4]]
        # the mean of four 0/1 rewards is a multiple of 1/4: exact in TRL's float32, no tolerance
        assert entry["reward"] == statistics.fmean(rewards)
    episodes = read_jsonl(saved)
    assert {e["termination"] for e in episodes} <= {"agent_done", "max_turns"}
    assert any(m.get("tool_calls") for e in episodes for m in e["messages"])  # real calls ran
