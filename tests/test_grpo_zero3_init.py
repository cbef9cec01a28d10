"""ZeRO-3 loads the model partitioned from the start, on 2 gloo ranks on CPU.

This file is also the worker: `torchrun ... tests/test_grpo_zero3_init.py OUT MODEL` builds a
Policy under ZeRO-3 with a KL reference (so both models load), records what every rank holds the
moment each model comes back from loading, trains one step on fixed samples (rank 1 has one sample
fewer, so it runs a filler pass; the lm_head is chunked three positions at a time, so the ranks run
different numbers of chunks), saves a checkpoint and exports it. The test compares all that with
the same step in one plain process (ZeRO-0, whole model): loss, KL, gradient norm, the HF weights
written at save and those `grpo export` rebuilds.

The DeepSpeed config keeps no parameter whole (persistence threshold 0): with the stock zero3.json
every weight of the tiny model is under the 1e5-element threshold and would stay unpartitioned.
"""

# ruff: noqa: F811 - the grpo_fixtures fixture is imported, then requested by name
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from grpo_fixtures import launcher_env, run_to_the_end, tiny_model  # noqa: F401 - tiny_model: a pytest fixture
from numerics import approx, decoder_terms, gamma, logprob_magnitude, tolerance

ROOT = Path(__file__).resolve().parent.parent
LR = 1e-3
ADAM_EPS = 1e-8  # torch's AdamW default, which engine.Policy keeps
CHUNK = 3  # lm_head positions per chunk: several chunks per micro-batch, a different count per rank


def samples():
    """Five sequences over the tiny vocabulary (ids 4..15), completions of different lengths."""
    from endstate.grpo.batch import Sample

    rows = [([4, 5, 6, 7, 8, 9, 10], 3, 1.0), ([5, 6, 14, 15, 7], 2, -1.0),
            ([4, 8, 9, 12, 13, 14, 15, 6, 7], 5, 0.5), ([6, 7, 8, 9], 2, -0.5),
            ([10, 11, 12, 13, 14, 15], 4, 1.5)]
    return [Sample(ids, [False] * (len(ids) - n) + [True] * n, [float("nan")] * len(ids), a)
            for ids, n, a in rows]


def loss_config():
    from endstate.grpo.objective import LossConfig

    return LossConfig(kl_coef=0.1, micro_batch=1, temperature=0.7)


def held(model) -> tuple[int, int]:
    """(elements this rank holds, elements of the whole model) over the model's parameters: a
    ZeRO-3 parameter holds its partition (ds_tensor) and, only while gathered, its data."""
    mine = full = 0
    for p in model.parameters():
        partition = getattr(p, "ds_tensor", None)
        mine += p.data.numel() + (partition.numel() if partition is not None else 0)
        full += getattr(p, "ds_numel", p.numel())
    return mine, full


def run_step(policy, rank: int, world: int) -> dict[str, float]:
    from endstate.grpo.algorithm import normalizer
    from endstate.grpo.batch import micro_batches
    from endstate.grpo.metrics import reduce_stats
    from endstate.grpo.train import shard_samples

    every = samples()
    loss = loss_config()
    norm = normalizer([s.completion_tokens for s in every], loss.loss_agg, 8)
    mine = shard_samples(every, rank, world)
    most = max(len(micro_batches(shard_samples(every, r, world), 1)) for r in range(world))
    stats = policy.update(mine, loss, norm, most)
    return reduce_stats(stats, world, policy.engine.device)


def worker(out: Path, model_dir: Path, ds_path: Path) -> None:
    """One rank of the ZeRO-3 run (under torchrun)."""
    import torch.distributed as dist

    from endstate.grpo import engine
    from endstate.grpo.distributed import end_rank, init_distributed, leave_distributed
    from endstate.grpo.engine import Policy, ds_config
    from endstate.grpo.export import export_checkpoint

    rank, world = init_distributed("cpu")
    loads = []
    original = engine.load_model

    def recording_load(*args):  # what the rank holds the moment a model comes back from loading
        model = original(*args)
        loads.append(held(model))
        return model

    engine.load_model = recording_load
    ds = ds_config(ds_path, micro_batch=1, grad_accum=3, world=world, bf16=False, grad_clip=1.0)
    policy = Policy(model_dir, ds, LR, 0.0, "cpu", reference=True, seed=0, logits_chunk=CHUNK,
                    checkpointing=True)
    stats = run_step(policy, rank, world)
    policy.save(out / "ckpt", {"step": 1})
    every_rank = [None] * world
    dist.all_gather_object(every_rank, {"loads": loads, "ref": held(policy.ref.module),
                                        "policy": held(policy.module)})
    if rank == 0:
        export_checkpoint(out / "ckpt", out / "export")
        (out / "result.json").write_text(json.dumps({"stats": stats, "ranks": every_rank}))
    leave_distributed(policy.engine, policy.ref)
    end_rank()


def zero3_config(path: Path) -> Path:
    config = json.loads((ROOT / "configs/deepspeed/zero3.json").read_text())
    config["zero_optimization"]["stage3_param_persistence_threshold"] = 0
    path.write_text(json.dumps(config))
    return path


def launch(out: Path, model_dir: Path, ds_path: Path) -> None:
    args = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
            __file__, str(out), str(model_dir), str(ds_path)]
    env = launcher_env(PYTHONPATH=os.pathsep.join([str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")]))
    # ~30 s beside the rest of the suite on 2 cores; the limit is there to catch a deadlock
    run_to_the_end(args, timeout=900, what="the 2-rank ZeRO-3 step (ranks out of step?)", env=env)


def plain_step(model_dir: Path):
    """The same step in this process: one rank, ZeRO-0, the whole model, no chunking."""
    from endstate.grpo.distributed import init_distributed
    from endstate.grpo.engine import Policy, ds_config, resolve_ds_config

    init_distributed("cpu")
    ds = ds_config(resolve_ds_config("zero0"), micro_batch=1, grad_accum=5, world=1, bf16=False,
                   grad_clip=1.0)
    policy = Policy(model_dir, ds, LR, 0.0, "cpu", reference=True, seed=0, logits_chunk=10 ** 6)
    grads, step = {}, policy.engine.step

    def capture():  # the last call's: the accumulated gradient the optimizer steps with
        grads.update({n: p.grad.detach().clone() for n, p in policy.module.named_parameters()
                      if p.grad is not None})
        step()

    policy.engine.step = capture
    stats = run_step(policy, 0, 1)
    return stats, {n: p.detach().clone() for n, p in policy.module.named_parameters()}, grads


def bounds(model_dir: Path, grads: dict, grad_norm: float) -> tuple[dict, float, dict]:
    """What two float32 runs of this step (2 ZeRO-3 ranks, chunked head; 1 plain rank) may differ
    by under tests/numerics.py: (numerics arguments per statistic, the gradient norm's absolute
    bound, each gradient's absolute bound).

    loss: Σ over the completion tokens of (−A·ρ + 0.1·k3)/norm with ρ ≡ 1 (π_old is the trainer's
    own log-prob): |terms| ≤ |A| + 0.1·2. kl: Σ k3 = e^r − r − 1 with |r| ≈ 0, rounded at 2 per
    token. entropy: Σ of entropies after a forward (rule 6), each at M = 2s² + 2s + log V with s the
    largest |logit|/T (test_logprobs_chunked). A gradient: the forward's chain twice plus the sum
    over positions, at M = max|g|·(1 + M_logp). The norm: ‖Δg‖ plus its own sum of squares."""
    import math

    import torch
    from transformers import AutoModelForCausalLM

    every, cfg = samples(), loss_config()
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    with torch.no_grad():
        logits = [model(input_ids=torch.tensor([x.ids])).logits / cfg.temperature for x in every]
    s = max(float(z.abs().max()) for z in logits)
    V, tokens = model.config.vocab_size, sum(x.completion_tokens for x in every)
    forward = decoder_terms(model.config, max(len(x.ids) for x in every))
    norm = tokens  # token-mean: the batch's completion tokens
    f32 = torch.float32
    stats = {"loss": {"dtype": f32, "terms": tokens + 6,
                      "magnitude": sum(x.completion_tokens * (abs(x.advantage) + 0.2) for x in every) / norm},
             "kl": {"dtype": f32, "terms": tokens + 4, "magnitude": 2 * tokens},
             "entropy": {"dtype": f32, "terms": forward + tokens, "probable": True,
                         "magnitude": tokens * (2 * s * s + 2 * s + math.log(V))}}
    m_logp = max(logprob_magnitude(z) for z in logits)
    positions = sum(len(x.ids) for x in every)
    grad_atol = {name: tolerance(f32, terms=2 * forward + positions, probable=True,
                                 magnitude=g.abs().max() * (1 + m_logp))[1] for name, g in grads.items()}
    delta = math.sqrt(sum(grads[n].numel() * a * a for n, a in grad_atol.items()))
    elements = sum(g.numel() for g in grads.values())
    return stats, delta + 2 * gamma(elements + 1, f32) * grad_norm, grad_atol


def adam_step_bound(g, grad_atol: float, norm_rel: float, w):
    """The bound, per element, on two first AdamW steps from gradients g and g' with |g − g'| ≤
    grad_atol, elementwise: the step is lr·c·g/(c·|g| + ε) with c the clip factor (min(1, 1/‖g‖)).
    Its slope in g is ε'/(|g| + ε')² (ε' = ε/c ≥ ε), at most 1/ε and, with |g| − grad_atol ≥ a > 0,
    at most 1/(4a); a relative change of c moves it by ≤ that much (norm_rel); a sign flip by ≤ 2.
    Then w − step rounds twice in float32 on each side."""
    import torch

    a = (g.abs() - grad_atol).clamp(min=0)
    slope = 1 / torch.maximum(4 * a, torch.full_like(a, ADAM_EPS))
    step = (grad_atol * slope + norm_rel).clamp(max=2)
    return LR * step + 2 * gamma(2, torch.float32) * (w.abs() + LR)


@pytest.mark.numerics
def test_zero3_loads_partitioned_and_trains_like_the_whole_model(tmp_path, tiny_model):
    import torch
    from safetensors.torch import load_file

    launch(tmp_path, tiny_model, zero3_config(tmp_path / "zero3-all-partitioned.json"))
    result = json.loads((tmp_path / "result.json").read_text())
    for rank in result["ranks"]:
        assert len(rank["loads"]) == 2, rank  # the policy and the KL reference
        for mine, full in [*rank["loads"], rank["ref"], rank["policy"]]:
            assert 0.45 * full <= mine <= 0.55 * full, (mine, full)  # about half, never the whole
    plain, weights, grads = plain_step(tiny_model)
    zero3 = result["stats"]
    assert plain["tokens"] == zero3["tokens"] == 16
    stat_bounds, norm_atol, grad_atol = bounds(tiny_model, grads, plain["grad_norm"])
    for key, bound in stat_bounds.items():
        assert zero3[key] == approx(plain[key], **bound), key
    assert plain["kl"] == 0  # the reference is the initial policy, the same forward bit for bit
    assert abs(zero3["grad_norm"] - plain["grad_norm"]) <= norm_atol, (zero3["grad_norm"], plain["grad_norm"])
    clipped = plain["grad_norm"] > 1.0  # grad_clip
    norm_rel = norm_atol / (plain["grad_norm"] - norm_atol) if clipped else 0.0
    saved = load_file(tmp_path / "ckpt/hf/model.safetensors")
    exported = load_file(tmp_path / "export/model.safetensors")
    moved = 0
    for name, tensor in weights.items():
        if name == "lm_head.weight":  # tied to the embeddings: not a separate tensor on disk
            continue
        # Adam's first step is ±lr wherever |g| ≫ ε: a gradient that differs in the last bits
        # moves a weight by a sliver of that (adam_step_bound)
        bound = adam_step_bound(grads[name], grad_atol[name], norm_rel, tensor)
        for written in (saved[name], exported[name]):
            assert ((written - tensor).abs() <= bound).all(), (name, ((written - tensor).abs() / bound).max())
        moved += int(not torch.equal(tensor, load_file(tiny_model / "model.safetensors")[name]))
    assert moved > len(weights) // 2  # the step changed most tensors: the comparison means something


if __name__ == "__main__":  # a rank of the 2-rank run: OUT MODEL DS_CONFIG
    worker(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]))
