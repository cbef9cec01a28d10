"""The memory plan of `grpo train --dry-run`: what one rank needs on its GPU and one node in host
memory, item by item, for a model config and a topology, before anything is started.

Bytes per parameter are the ZeRO paper's for mixed-precision AdamW (bf16 on GPU): 2 for the
16-bit weights, 2 for their gradients, 16 for the optimizer (fp32 master weights and gradients, and
Adam's m and v); fp32 on CPU: 4, 4 and 8. ZeRO-1 partitions the optimizer over the ranks, ZeRO-2
the gradients too, ZeRO-3 the weights too; offload moves the partitions to host memory (the
optimizer's with its gradients, the weights' with the reference model's). Activations are what a
decoder layer keeps for the backward per token (three tensors per RMSNorm, q, k, v and the
attention output, the gated MLP's four intermediate-wide tensors: flash/SDPA attention, no
sequence² term), for micro_batch × max_context tokens (sequences are padded to the longest of
their micro-batch); with activation checkpointing one hidden state per layer plus one layer
recomputed with its gradients. The logits are a chunk of positions
(logprobs.py). The colocated vLLM engine's share is planned item by item too, at its
tensor-parallel size (grpo/vllm_share.py: weights / TP, its start-up peak, the KV cache in the
rest). DeepSpeed's own estimator of the model states is printed beside the plan's.
GiB (2^30 bytes) throughout, as nvidia-smi (MiB) and DeepSpeed count memory: an H100 80GB reports
81559 MiB, --gpu-memory 79.6.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from endstate import CONFIGS_DIR
from endstate.core.errors import EndstateError
from endstate.grpo.vllm_share import (
    fraction_options,
    kv_room,
    share_bytes,
    share_fits,
    share_items,
    share_lines,
    tp_options,
    tp_problem,
)

GIB = 2 ** 30
MODELS_DIR = CONFIGS_DIR / "models"
CUDA_RESERVE = 2 * GIB  # CUDA context, NCCL buffers, allocator fragmentation: a flat allowance
LOGIT_COPIES = 4  # fp32 (chunk × vocab) tensors alive at once: logits, log-softmax, its gradient, one more
MOE_KEYS = ("num_experts", "num_local_experts", "n_routed_experts")


@dataclass(frozen=True)
class ModelShape:
    """A dense decoder's sizes, from its config.json."""

    name: str
    hidden: int
    layers: int
    vocab: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    tied: bool  # the lm_head shares the embedding matrix

    @property
    def params(self) -> int:
        attention = self.hidden * self.head_dim * 2 * (self.heads + self.kv_heads)  # q, o, k, v
        layer = attention + 3 * self.hidden * self.intermediate + 2 * self.hidden  # gated MLP, norms
        return self.layers * layer + self.vocab * self.hidden * (1 if self.tied else 2) + self.hidden

    @property
    def largest_layer(self) -> int:
        """The largest module's own parameters (DeepSpeed's largest_layer_params): ZeRO-3 gathers it whole."""
        return max(self.vocab * self.hidden, self.hidden * self.intermediate)

    @property
    def activations_per_token(self) -> int:
        """Elements one decoder layer keeps for the backward, per token: three per RMSNorm (its
        input, the normalised input, its output), q, k, v and the attention output, and the gated
        MLP's gate, activation, up and product (measured on the tests' Llama: within 7%)."""
        return 6 * self.hidden + 2 * (self.heads + self.kv_heads) * self.head_dim + 4 * self.intermediate


def model_shape(config: dict[str, Any], name: str) -> ModelShape:
    """The shape of a transformers config.json (a multimodal one's text_config)."""
    if not isinstance(config, dict):
        raise EndstateError(f"{name}: not a model config (a transformers config.json is a JSON object)")
    c = {**config, **config["text_config"]} if isinstance(config.get("text_config"), dict) else config
    if any(c.get(k) for k in MOE_KEYS):
        raise EndstateError(f"{name}: a mixture of experts; the memory plan covers dense decoders")
    needed = ("hidden_size", "num_hidden_layers", "vocab_size", "num_attention_heads", "intermediate_size")
    missing = [k for k in needed if c.get(k) is None]
    if missing:
        raise EndstateError(f"{name}: the memory plan needs {', '.join(missing)} in the model config")
    # a zero, a negative, a bool or a float would make a plan of nothing (or divide by zero)
    wrong = [f"{k} {c[k]!r}" for k in (*needed, "num_key_value_heads", "head_dim")
             if c.get(k) is not None and not (type(c[k]) is int and c[k] > 0)]
    if wrong:
        raise EndstateError(f"{name}: {', '.join(wrong)}: the memory plan needs positive integers "
                            "there (is this the model's config.json?)")
    heads = c["num_attention_heads"]
    return ModelShape(name, c["hidden_size"], c["num_hidden_layers"], c["vocab_size"], heads,
                      c.get("num_key_value_heads") or heads, c.get("head_dim") or c["hidden_size"] // heads,
                      c["intermediate_size"], bool(c.get("tie_word_embeddings", False)))


def read_model_config(spec: str | None, model_dir: Path | None) -> ModelShape:
    """--model-config (configs/models/NAME, a JSON file or a model folder), else the model's own."""
    if spec is None:
        path = Path(model_dir) / "config.json"
    else:
        path = Path(spec)
        path = path / "config.json" if path.is_dir() else path
        if not path.is_file():
            path = MODELS_DIR / f"{spec}.json"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in MODELS_DIR.glob("*.json")))
        raise EndstateError(f"model config {spec!r} not found: give a config.json path, a model "
                            f"folder or one of {known} (configs/models/)")
    try:
        config = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise EndstateError(f"{path}: cannot read the model config: {e}") from None
    named = path.parent.name if path.name == "config.json" else path.stem  # a folder, or x.json
    return model_shape(config, spec if spec and not Path(spec).exists() else named)


@dataclass(frozen=True)
class Setup:
    """The topology and the knobs the plan depends on."""

    nodes: int = 1
    gpus_per_node: int = 1
    stage: int = 2
    offload_param: bool = False
    offload_optimizer: bool = False
    cuda: bool = True  # bf16 on GPU; fp32 on CPU
    micro_batch: int = 4
    max_context: int = 8192
    logits_chunk: int = 1024
    checkpointing: bool = False
    reference: bool = False  # kl_coef > 0
    rollout: str = "local"
    vllm_fraction: float = 0.35
    vllm_tp: int = 1  # the colocated engine's tensor-parallel size
    vllm_batched_tokens: int = 4096
    gpu_bytes: int | None = None  # --gpu-memory
    host_bytes: int | None = None  # --host-memory
    episodes: int = 0  # B × G per step: a world size must divide it (0: no constraint)

    @property
    def world(self) -> int:
        return self.nodes * self.gpus_per_node


def setup_of(cfg, ds: dict[str, Any]) -> Setup:
    """A TrainConfig and its DeepSpeed JSON as a Setup."""
    zero = ds.get("zero_optimization", {})
    offloaded = {k: zero.get(k, {}).get("device", "none") not in ("none", None)
                 for k in ("offload_param", "offload_optimizer")}
    limits = {k: None if v is None else int(v * GIB) for k, v in
              (("gpu_bytes", cfg.gpu_memory), ("host_bytes", cfg.host_memory))}
    return Setup(cfg.nodes, cfg.gpus_per_node, int(zero.get("stage", 0)), **offloaded,
                 cuda=cfg.device != "cpu", micro_batch=cfg.micro_batch, max_context=cfg.max_context,
                 logits_chunk=cfg.logits_chunk, checkpointing=cfg.activation_checkpointing,
                 reference=cfg.kl_coef > 0, rollout=cfg.rollout_engine,
                 vllm_fraction=cfg.vllm_gpu_memory, vllm_tp=cfg.vllm_tensor_parallel,
                 vllm_batched_tokens=cfg.vllm_max_batched_tokens,
                 episodes=cfg.batch_tasks * cfg.group_size, **limits)


def logits_bytes(positions: int, vocab: int, dtype_bytes: int) -> int:
    """The log-probs' working set for `positions` rows of logits: the model-dtype logits and
    LOGIT_COPIES fp32 tensors of the same shape (see bench/bench_logprobs.py)."""
    return positions * vocab * ((dtype_bytes if dtype_bytes != 4 else 0) + 4 * LOGIT_COPIES)


def activation_bytes(shape: ModelShape, s: Setup) -> int:
    tokens, p = s.micro_batch * s.max_context, 2 if s.cuda else 4
    layer = shape.activations_per_token * tokens * p
    if s.checkpointing:  # a hidden state per layer (+ the final norm's 3), one layer recomputed
        return (shape.layers + 3) * shape.hidden * tokens * p + 2 * layer
    return shape.layers * layer


@dataclass
class Plan:
    shape: ModelShape
    setup: Setup
    gpu: list[tuple[str, float]] = field(default_factory=list)  # (item, bytes) per rank
    host: list[tuple[str, float]] = field(default_factory=list)  # (item, bytes) per node
    states_gpu: float = 0.0  # weights, gradients and optimizer: what DeepSpeed's estimator covers
    states_host: float = 0.0

    @property
    def gpu_total(self) -> float:
        """Bytes per GPU, the colocated vLLM's share included when --gpu-memory gives its size."""
        vllm = self.setup.vllm_fraction * (self.setup.gpu_bytes or 0) if self.setup.rollout == "vllm" else 0
        return sum(b for _, b in self.gpu) + vllm

    @property
    def host_total(self) -> float:
        return sum(b for _, b in self.host)

    def fits(self) -> bool:
        s = self.setup
        return ((s.gpu_bytes is None or self.gpu_total <= s.gpu_bytes)
                and (s.host_bytes is None or self.host_total <= s.host_bytes)
                and (s.rollout != "vllm" or share_fits(self.shape, s)))


def _model_states(plan: Plan, shape: ModelShape, s: Setup) -> None:
    """Weights, gradients, optimizer states (and the reference model) on the GPU or the host."""
    n, w, p, g = shape.params, s.world, 2 if s.cuda else 4, s.gpus_per_node
    dtype = "bf16" if s.cuda else "fp32"
    optimizer = (16 if s.cuda else 8) * n / (w if s.stage >= 1 else 1)
    items = [(f"weights ({dtype}{', ZeRO-3 partition' if s.stage == 3 else ''})",
              n * p / (w if s.stage == 3 else 1), s.offload_param)]
    if not s.offload_optimizer:  # offloaded, they stream into the optimizer's fp32 gradients
        items.append((f"gradients ({dtype}{', partition' if s.stage >= 2 else ''})",
                       n * p / (w if s.stage >= 2 else 1), False))
    items.append(("optimizer states (fp32 master + grads, Adam m, v)" if s.cuda
                  else "optimizer states (Adam m, v)", optimizer, s.offload_optimizer))
    if s.stage == 3:
        items.append(("ZeRO-3 gathered layer (weights + gradients)", 2 * shape.largest_layer * p, False))
    for label, size, offloaded in items:
        if offloaded:
            plan.host.append((f"{label} × {g} ranks", size * g))
            plan.states_host += size * g
        else:
            plan.gpu.append((label, size))
            plan.states_gpu += size
    if s.reference:
        ref = n * p / (w if s.stage == 3 else 1)
        (plan.host if s.offload_param else plan.gpu).append(
            ("reference model (KL)", ref * (g if s.offload_param else 1)))


def make_plan(shape: ModelShape, s: Setup) -> Plan:
    plan = Plan(shape, s)
    _model_states(plan, shape, s)
    p, n, tokens = 2 if s.cuda else 4, shape.params, s.micro_batch * s.max_context
    checkpointed = ", checkpointed" if s.checkpointing else ""
    plan.gpu.append((f"activations ({s.micro_batch} × {s.max_context} tokens{checkpointed})",
                     activation_bytes(shape, s)))
    chunk = min(s.logits_chunk, tokens)
    plan.gpu.append((f"logits chunk ({chunk} positions × {shape.vocab})", logits_bytes(chunk, shape.vocab, p)))
    if s.rollout == "local" and s.stage == 3:
        plan.gpu.append(("rollout replica (local engine under ZeRO-3)", n * p))
    if s.cuda:
        plan.gpu.append(("CUDA context, NCCL, allocator (flat)", CUDA_RESERVE))
    if s.stage < 3 or s.rollout == "local":  # every rank reads a whole copy (the replica's, under ZeRO-3)
        plan.host.append((f"model load, transient (whole model × {s.gpus_per_node} ranks)", n * p * s.gpus_per_node))
    else:
        plan.host.append(("model load, transient (ZeRO-3: partitioned as it loads)", shape.largest_layer * p))
    return plan


def deepspeed_estimate(shape: ModelShape, s: Setup) -> tuple[float, float] | None:
    """(per GPU, per node host) bytes from DeepSpeed's own model-states estimator for this ZeRO
    stage (with its 1.5× host buffer factor), or None: stage 0, or DeepSpeed not installed."""
    os.environ.setdefault("DS_ACCELERATOR", "cpu")  # arithmetic only: no accelerator probe, no warning
    try:
        if s.stage == 3:
            from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs

            cpu, gpu, _ = estimate_zero3_model_states_mem_needs(
                shape.params, shape.largest_layer, s.gpus_per_node, s.nodes,
                cpu_offload=s.offload_optimizer, cpu_offload_params=s.offload_param, zero_init=True)
        elif s.stage in (1, 2):
            from deepspeed.runtime.zero.stage_1_and_2 import estimate_zero2_model_states_mem_needs

            cpu, gpu = estimate_zero2_model_states_mem_needs(shape.params, s.gpus_per_node, s.nodes,
                                                             cpu_offload=s.offload_optimizer)
        else:
            return None
    except ImportError:
        return None
    return float(gpu), float(cpu)


# -- the printed plan, and what to change when it does not fit ---------------------------------

def _row(label: str, size: float, limit: int | None = None) -> str:
    text = f"    {label:<66}{size / GIB:9.2f}"
    if limit is not None:
        text += f"  of {limit / GIB:g}: {'fits' if size <= limit else 'DOES NOT FIT'}"
    return text


def render(plan: Plan) -> list[str]:
    """The plan as the lines --dry-run prints (GiB)."""
    s, shape = plan.setup, plan.shape
    offload = " + ".join(k for k, on in (("weights", s.offload_param), ("optimizer", s.offload_optimizer))
                         if on) or "none"
    lines = [(f"memory_plan: {shape.name}, {shape.params / 1e9:.2f}B parameters (largest layer "
              f"{shape.largest_layer / 1e9:.2f}B); {s.nodes} node(s) × {s.gpus_per_node} = {s.world} "
              f"rank(s); ZeRO-{s.stage}, offload: {offload}; {'bf16' if s.cuda else 'fp32'}"),
             f"{'  per GPU (one rank)' if s.cuda else '  per rank (on CPU, host memory too)':<76}GiB",
             *(_row(label, size) for label, size in plan.gpu)]
    engine = f"vLLM colocated ({s.vllm_fraction:g} of the GPU, tensor parallel {s.vllm_tp})"
    if s.rollout == "vllm" and s.gpu_bytes:
        lines.append(_row(engine, s.vllm_fraction * s.gpu_bytes))
    elif s.rollout == "vllm":
        lines.append(f"    {engine}: not in the total (give --gpu-memory)")
    lines.append(_row("total", plan.gpu_total, s.gpu_bytes))
    if s.rollout == "vllm":
        lines += share_lines(shape, s, _row)
    lines += [f"{'  per node (host memory)':<76}GiB", *(_row(label, size) for label, size in plan.host),
              _row("total", plan.host_total, s.host_bytes)]
    estimate = deepspeed_estimate(shape, s)
    if estimate is None:
        lines.append("  DeepSpeed's estimator: none for ZeRO-0 (or DeepSpeed is not installed)")
    else:
        lines += [f"{'  weights + gradients + optimizer states, GiB':<70}{'plan':>9}{'DeepSpeed':>12}",
                  f"    {'per GPU':<66}{plan.states_gpu / GIB:9.2f}{estimate[0] / GIB:12.2f}",
                  (f"    {'per node, host (DeepSpeed adds a 1.5× buffer)':<66}"
                   f"{plan.states_host / GIB:9.2f}{estimate[1] / GIB:12.2f}")]
    return lines


CONTEXTS = (65536, 32768, 24576, 16384, 12288, 8192, 6144, 4096, 3072, 2048, 1024)


def _alternatives(shape: ModelShape, s: Setup):
    """Per knob, the (flag, changed setup) to try, the mildest change first."""
    yield [(f"--micro-batch {m}", replace(s, micro_batch=m)) for m in range(s.micro_batch - 1, 0, -1)]
    if not s.checkpointing:
        yield [("--activation-checkpointing", replace(s, checkpointing=True))]
    if s.rollout == "vllm":
        yield [(f"--vllm-gpu-memory {f:g}", replace(s, vllm_fraction=f)) for f in fraction_options(s)]
        yield [(f"--vllm-tensor-parallel {tp}", replace(s, vllm_tp=tp)) for tp in tp_options(shape, s)]
    if not (s.stage == 3 and s.offload_param and s.offload_optimizer):
        yield [("--deepspeed zero3-offload", replace(s, stage=3, offload_param=True, offload_optimizer=True))]
    else:  # the host is what overflows: keep the states on the GPUs
        yield [("--deepspeed zero3", replace(s, offload_param=False, offload_optimizer=False))]
    yield [(f"--nodes {n}", replace(s, nodes=n)) for n in range(s.nodes + 1, 8 * s.nodes + 1)
           if not s.episodes or s.episodes % (n * s.gpus_per_node) == 0]  # B × G over the ranks
    yield [(f"--max-context {c}", replace(s, max_context=c)) for c in CONTEXTS if c < s.max_context]
    yield [(f"--logits-chunk {c}", replace(s, logits_chunk=c)) for c in (512, 256, 128) if c < s.logits_chunk]


def changes_that_fit(plan: Plan) -> list[str]:
    """One flag per knob that alone makes the plan fit."""
    found = []
    for options in _alternatives(plan.shape, plan.setup):
        flag = next((flag for flag, changed in options if make_plan(plan.shape, changed).fits()), None)
        if flag:
            found.append(flag)
    return found


def require_fit(plan: Plan) -> None:
    """A usage error naming the knobs when the plan exceeds --gpu-memory or --host-memory."""
    from endstate.core.errors import ConfigurationError

    if plan.fits():
        return
    s, over = plan.setup, []
    if s.gpu_bytes is not None and plan.gpu_total > s.gpu_bytes:
        over.append(f"{plan.gpu_total / GIB:.1f} GiB per GPU, --gpu-memory {s.gpu_bytes / GIB:g}")
    if s.host_bytes is not None and plan.host_total > s.host_bytes:
        over.append(f"{plan.host_total / GIB:.1f} GiB of host memory per node, --host-memory {s.host_bytes / GIB:g}")
    if s.rollout == "vllm" and not share_fits(plan.shape, s):
        weights = share_items(plan.shape, s)[0][1]
        said = ("its weights alone exceed it" if weights > share_bytes(s) else
                f"{max(kv_room(plan.shape, s), 0) / GIB:.1f} GiB are left for the KV cache, less "
                f"than one {s.max_context}-token sequence")
        over.append(f"the colocated vLLM's share, {share_bytes(s) / GIB:.1f} GiB (--vllm-gpu-memory "
                    f"{s.vllm_fraction:g} of --gpu-memory {s.gpu_bytes / GIB:g}), holds "
                    f"{weights / GIB:.1f} GiB of weights per GPU at --vllm-tensor-parallel "
                    f"{s.vllm_tp}: {said}")
    changes = changes_that_fit(plan)
    largest = sorted(plan.gpu + plan.host, key=lambda item: -item[1])[:3]
    advice = (f"any one of these fits: {'; '.join(changes)}" if changes else
              "no single change fits; the largest items are " + ", ".join(
                  f"{label} {size / GIB:.1f} GiB" for label, size in largest)
              + ": combine --micro-batch, --activation-checkpointing, --deepspeed zero3-offload, "
              "--nodes, --vllm-gpu-memory, --vllm-tensor-parallel, --max-context")
    raise ConfigurationError(f"the memory plan does not fit ({'; '.join(over)}): {advice}")


def plan_lines(cfg, model_dir: Path | None, ds_path: Path) -> tuple[Plan, list[str]]:
    """The plan of a resolved TrainConfig (--dry-run): the plan and its printed lines."""
    shape = read_model_config(cfg.model_config, model_dir)
    problem = tp_problem(shape, cfg.gpus_per_node, cfg.vllm_tensor_parallel)
    if cfg.rollout_engine == "vllm" and problem:
        raise EndstateError(f"--vllm-tensor-parallel {cfg.vllm_tensor_parallel}: {problem} "
                            f"({shape.name}); choose another size")
    plan = make_plan(shape, setup_of(cfg, json.loads(ds_path.read_text())))
    return plan, render(plan)
