"""GPU check for grpo: 2 steps with DeepSpeed ZeRO-3 and vLLM colocated in the training process,
on a small model, through the real `grpo train` code path (rollout episodes, grader, lockstep
sampling on vLLM, weight push after each step). ≤ 10 minutes on one H100/H200.

Reports step time, update tokens/s, MFU (6·N·tokens / update time / peak bf16 FLOP/s) and peak
GPU memory. Fails fast, with the fix, when a piece is missing (GPU, vllm, deepspeed, the model).

    python bench/gpu_grpo.py [--model DIR|embedded] [--pool tasks/train/retail.jsonl] [--out /tmp/gpu_grpo]

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


def preflight(model: str, pool: str) -> tuple[str, float]:
    try:
        import torch
    except ImportError:
        fail("torch is not installed: pip install -e '.[train,serve]'")
    if not torch.cuda.is_available():
        fail("no CUDA GPU visible (this check needs one H100/H200); torch " + torch.__version__)
    for module, fix in (("deepspeed", "DS_BUILD_OPS=0 pip install --no-build-isolation deepspeed"),
                        ("vllm", "pip install vllm (a build matching this torch/CUDA)"),
                        ("transformers", "pip install -e '.[train]'")):
        try:
            __import__(module)
        except ImportError as e:
            fail(f"{module} cannot be imported ({e}): {fix}")
    if not Path(pool).exists():
        fail(f"{pool}: no such pool file")
    from endstate.core.local_model import resolve_model

    try:
        resolve_model(model)
    except Exception as e:  # noqa: BLE001 - reported with the fix
        fail(f"model {model!r}: {e}")
    name = torch.cuda.get_device_name(0)
    peak = next((v for k, v in PEAK_BF16.items() if k in name), None)
    if peak is None:
        print(f"gpu_grpo: unknown GPU {name!r}; MFU assumes H100 bf16 peak", file=sys.stderr)
        peak = PEAK_BF16["H100"]
    return name, peak


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="embedded")
    p.add_argument("--pool", default="tests/grpo_fixtures/buttons.jsonl",
                   help="Default: the one-tool buttons tasks, which SmolLM2 sometimes solves, so the "
                   "groups have variance and the update runs (retail tasks at 135M are all-zero).")
    p.add_argument("--domains", default="tests/grpo_fixtures/buttons")
    p.add_argument("--out", default="/tmp/gpu_grpo")
    p.add_argument("--batch-tasks", type=int, default=8)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--max-turns", type=int, default=None)
    a = p.parse_args()
    gpu, peak = preflight(a.model, a.pool)

    import shutil

    import torch

    from endstate.grpo.config import TrainConfig
    from endstate.grpo.train import train

    shutil.rmtree(a.out, ignore_errors=True)
    cfg = TrainConfig(pool=a.pool, model=a.model, out=a.out, domains=[a.domains] if a.domains else [], steps=2, batch_tasks=a.batch_tasks,
                      group_size=a.group_size, max_rounds=4, lr=1e-6, micro_batch=8,
                      deepspeed="zero3", rollout_engine="vllm", device="cuda", jobs=256,
                      max_new_tokens=a.max_new_tokens, max_turns=a.max_turns, max_context=8192,
                      vllm_gpu_memory=0.3, save_freq=2, seed=0)
    torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    history = train(cfg)
    total = time.perf_counter() - started
    from transformers import AutoConfig

    from endstate.core.local_model import resolve_model

    hf = AutoConfig.from_pretrained(resolve_model(a.model))
    n_params = sum(p.numel() for p in __import__("transformers").AutoModelForCausalLM.from_config(hf).parameters())
    peak_mem = torch.cuda.max_memory_allocated() / 2 ** 30
    reserved = torch.cuda.max_memory_reserved() / 2 ** 30
    print(f"gpu: {gpu}; model {a.model} ({n_params / 1e6:.0f}M params); torch {torch.__version__}")
    for m in history:
        flops = 6 * n_params * m["tokens"]  # forward + backward, dense
        mfu = flops / m["update_s"] / peak if m["update_s"] and not m["skipped"] else 0.0
        print(json.dumps({"step": m["step"], "step_s": m["step_s"], "rollout_s": m["rollout_s"],
                          "update_s": m["update_s"], "tokens": m["tokens"],
                          "update_tokens_per_s": m["tokens_per_s"], "mfu": round(mfu, 4),
                          "reward_mean": m["reward_mean"], "groups": m["groups"],
                          "skipped": m["skipped"]}))
    print(f"total {total:.1f} s (incl. engine and vLLM start-up); peak memory allocated by torch "
          f"{peak_mem:.1f} GiB, reserved {reserved:.1f} GiB (vLLM's own pool is outside torch's "
          f"allocator stats: see nvidia-smi)")


if __name__ == "__main__":
    main()
