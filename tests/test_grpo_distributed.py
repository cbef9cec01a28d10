"""grpo on several ranks and with the vLLM engine's bookkeeping, on CPU:

- ZeRO-3 + the local engine on 2 gloo ranks, one of which has no task to generate: it used to
  deadlock (generate on partitioned weights, ranks out of step); now each rank samples from a
  full replica refreshed collectively after the step. Run through the real CLI under torchrun,
  with a timeout that turns a hang into a failure.
- The vLLM request-seed counter goes into the checkpoint and comes back on --resume. vLLM itself
  is an edge endstate does not own and is not installed here: a stand-in samples with the local
  generator but takes its seeds from the real RequestSeeds, as VLLMGenerator does.
"""
# ruff: noqa: F811 - the grpo_fixtures fixtures are imported, then requested by name

import json
import sys

import orjson
import torch
from grpo_fixtures import buttons, launcher_env, run_to_the_end, tiny_model  # noqa: F401 - buttons, tiny_model: pytest fixtures

from endstate.grpo.config import TrainConfig

ROOT = __import__("pathlib").Path(__file__).resolve().parent.parent


def tiny_config(model, buttons, out, **kw) -> TrainConfig:
    base = {"pool": buttons["pool"], "model": str(model), "out": str(out), "domains": [buttons["domain"]],
            "batch_tasks": 2, "group_size": 4, "lr": 2e-2, "max_new_tokens": 3, "max_context": 512,
            "few_shot": False, "deepspeed": "zero0", "micro_batch": 8, "save_freq": 1, "seed": 0}
    return TrainConfig(**{**base, **kw})


def test_zero3_local_engine_on_two_ranks_finishes(tmp_path, tiny_model, buttons):
    """1 task × 8 rollouts per round over 2 ranks: rank 1 generates nothing, rank 0 everything
    (the seed gives an informative group in round 4); then each rank trains on 4 episodes, and the
    update, the replica refresh and the ZeRO-3 checkpoint are collective. A hang hits the timeout."""
    out = tmp_path / "run"
    args = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
            "-m", "endstate.grpo.cli", "train", "--pool", buttons["pool"], "--model", str(tiny_model),
            "--domains", buttons["domain"], "--out", str(out), "--deepspeed", "zero3", "--steps", "1",
            "--batch-tasks", "1", "--group-size", "8", "--max-rounds", "4", "--max-new-tokens", "3",
            "--max-context", "512", "--no-few-shot", "--micro-batch", "1", "--gpus-per-node", "2",
            "--temperature", "1.5", "--quiet"]
    # ~25 s beside the rest of the suite on 2 cores; the limit is there to catch a deadlock
    run_to_the_end(args, timeout=900, what="the 2-rank ZeRO-3 run (deadlock?)", env=launcher_env())
    rows = [orjson.loads(x) for x in (out / "metrics.jsonl").read_bytes().splitlines()]
    assert [m["step"] for m in rows] == [1] and rows[0]["groups"] == 1 and not rows[0]["skipped"], rows
    assert (out / "checkpoints/step-000001/hf/model.safetensors").exists()
    assert len((out / "attempts.jsonl").read_bytes().splitlines()) == 8 * rows[0]["rounds"]


def test_zero3_replica_follows_the_trained_weights(tmp_path, tiny_model, buttons):
    """One rank, ZeRO-3: the local engine samples from the replica, and after a step the replica
    holds exactly the gathered trained weights."""
    from endstate.grpo.train import Trainer

    trainer = Trainer(tiny_config(tiny_model, buttons, tmp_path / "run", deepspeed="zero3", steps=1,
                                  batch_tasks=4, group_size=8, temperature=1.5), quiet=True)
    assert trainer.policy.replica is not None and trainer.policy.rollout_model() is trainer.policy.replica
    before = {n: p.clone() for n, p in trainer.policy.replica.named_parameters()}
    metrics = trainer.train_step()
    assert not metrics["skipped"], metrics
    trained = dict(trainer.policy.named_weights())
    replica = dict(trainer.policy.replica.named_parameters())
    assert trained.keys() == replica.keys()
    for name, tensor in trained.items():  # copied, not recomputed: bit for bit
        assert torch.equal(replica[name].data, tensor), name
    assert any(not torch.equal(before[n], replica[n]) for n in replica)


class StandInVLLM:
    """Samples with the local generator; request seeds from the real RequestSeeds, recorded."""

    sent: list[list[int]] = []

    def __init__(self, model_dir, max_model_len, gpu_memory_utilization, seed, max_batched_tokens=4096,
                 device="cuda", tensor_parallel=1):
        from endstate.core.agent.local_model import load
        from endstate.grpo.vllm_engine import RequestSeeds

        self.model, self.tokenizer = load(model_dir)
        self.seeds = RequestSeeds()

    def sampler(self, sampling, seed):
        from endstate.core.agent.local_model import LocalGenerator

        StandInVLLM.sampling = sampling
        local = LocalGenerator(self.model, self.tokenizer, sampling,
                               seed=seed, max_batch=64, logprobs_at_temperature=True)

        def generate(prompts, prefix_lens=None):
            StandInVLLM.sent.append(self.seeds.take(seed, len(prompts)))
            return local.generate(prompts, prefix_lens or 0)

        return generate

    def push(self, weights):
        for _ in weights:  # consumes the gather, as the real push does
            pass


def test_vllm_request_seed_counter_survives_a_resume(tmp_path, tiny_model, buttons, monkeypatch):
    from endstate.grpo import vllm_engine
    from endstate.grpo.train import train

    monkeypatch.setattr(vllm_engine, "VLLMGenerator", StandInVLLM)
    kw = {"rollout_engine": "vllm", "max_rounds": 1}
    StandInVLLM.sent = []
    train(tiny_config(tiny_model, buttons, tmp_path / "straight", steps=2, **kw), quiet=True)
    straight = list(StandInVLLM.sent)
    StandInVLLM.sent = []
    train(tiny_config(tiny_model, buttons, tmp_path / "split", steps=1, **kw), quiet=True)
    first = list(StandInVLLM.sent)
    state = json.loads((tmp_path / "split/checkpoints/step-000001/state.json").read_text())
    assert state["vllm_seeds"] == [{"count": sum(map(len, first))}] and sum(map(len, first)) > 0
    StandInVLLM.sent = []
    train(tiny_config(tiny_model, buttons, tmp_path / "split", steps=2, resume=True, **kw), quiet=True)
    assert first + StandInVLLM.sent == straight  # the resumed step sent the straight run's seeds
    metrics = [orjson.loads(x) for x in (tmp_path / "split/metrics.jsonl").read_bytes().splitlines()]
    assert metrics[-1]["rollout_is"] == "token"  # on by default for the vllm engine
