"""acceptance/gpu_check.sh cannot rot: its CPU dry mode runs every stage (model conversion, rollout on the
local backend, 2 grpo steps, Policy.update under ZeRO-2 and ZeRO-3, the vllm stage's skip) at tiny
shapes. And the local generator's GPU-path fix that CPU can show: transformers' auto-compilation
of the forward for a static cache (which recompiles for every batch shape on a GPU) never runs."""
# ruff: noqa: F811 - the grpo_fixtures fixtures are imported, then requested by name

import json
import os
import subprocess

import pytest
import torch
from conftest import BIN, ROOT
from grpo_fixtures import tiny_model  # noqa: F401 - pytest fixtures
from numerics import assert_close, decoder_terms, logprob_magnitude

# What an in-process DeepSpeed test leaves in os.environ (init_distributed's world of one): a
# child must pick its own rendezvous, not the port this process's store still holds.
LAUNCH_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


@pytest.mark.slow
def test_gpu_check_dry_run_runs_every_stage(tmp_path):
    env = {**{k: v for k, v in os.environ.items() if k not in LAUNCH_VARS},
           "OUT": str(tmp_path / "check"), "PYTHON": str(BIN / "python"), "STAGE_TIMEOUT": "600"}
    # The limits turn a hang into a failure, nothing more: the run takes ~70 s on an idle 2-core box
    # alone and ~140 s beside the rest of the suite, its longest stage ~25-50 s. The whole run's
    # limit covers its five stages' so that a stage's own message is what a hang shows.
    done = subprocess.run(["bash", str(ROOT / "acceptance/gpu_check.sh"), "--device", "cpu"], capture_output=True,
                          text=True, timeout=3600, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[-1] == "gpu_check: all stages ok", lines
    assert any(line.startswith("gpu_check: rollout: 2 episodes") for line in lines), lines
    assert sum(line.startswith("gpu_check: grpo step") for line in lines) == 2
    updates = [json.loads(line) for line in lines if line.startswith('{"check": "update"')]
    assert [u["deepspeed"] for u in updates] == ["zero2", "zero3"]
    assert all(u["tokens_per_s"] > 0 and u["mfu"] is None for u in updates)


def test_gpu_check_refuses_an_unknown_device():
    done = subprocess.run(["bash", str(ROOT / "acceptance/gpu_check.sh"), "--device", "tpu"], capture_output=True,
                          text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 2 and "cuda or cpu" in done.stderr


def test_local_generator_never_compiles_the_forward(tiny_model, monkeypatch):
    """transformers compiles the forward when generating with a static cache on a GPU; CPU can be
    made to meet the same criterion (compile_config for all devices). The generator opts out, so
    torch.compile is never reached."""
    from transformers import CompileConfig

    from endstate.core.agent.local_model import LocalGenerator, load
    from endstate.core.agent.sampling import Sampling

    model, tokenizer = load(tiny_model)
    config = CompileConfig()
    config._compile_all_devices = True
    model.generation_config.compile_config = config

    def refuse(*args, **kwargs):
        raise AssertionError("torch.compile was called")

    monkeypatch.setattr(torch, "compile", refuse)
    generator = LocalGenerator(model, tokenizer, Sampling(max_new_tokens=4, temperature=1.0), seed=0)
    prompt = tokenizer("<|im_start|> user press red <|im_end|>")["input_ids"]
    out = generator.generate([prompt, prompt[:3]])
    assert len(out) == 2 and all(len(g.ids) == len(g.logprobs) for g in out)


@pytest.mark.numerics
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_sampler_log_probs_equal_a_teacher_forced_pass(tiny_model, temperature):
    """The log-probs now computed step by step on the device equal log_softmax(logits / T) of a
    plain forward pass over prompt + completion."""
    from endstate.core.agent.local_model import LocalGenerator, load
    from endstate.core.agent.sampling import Sampling

    model, tokenizer = load(tiny_model)
    generator = LocalGenerator(model, tokenizer, Sampling(max_new_tokens=6, temperature=temperature), seed=1,
                               logprobs_at_temperature=True)
    prompt = tokenizer("<|im_start|> user press blue <|im_end|> <|im_start|> assistant")["input_ids"]
    (g,) = generator.generate([prompt])
    ids = torch.tensor([prompt + g.ids])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, len(prompt) - 1:-1] / temperature  # (N, V)
    expected = torch.log_softmax(logits, -1).gather(-1, torch.tensor(g.ids)[:, None]).squeeze(-1)
    # two float32 forward passes (step by step with a cache, and whole): numerics rule 6
    assert_close(torch.tensor(g.logprobs), expected, dtype=torch.float32, terms=decoder_terms(model.config, ids.shape[1]),
                 magnitude=logprob_magnitude(logits), probable=True)
