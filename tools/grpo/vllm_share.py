"""The colocated vLLM engine's part of the memory plan: what must fit inside its share of each GPU
(`vllm_gpu_memory` × the GPU, vLLM's gpu_memory_utilization), at tensor-parallel size TP.

- weights: bf16, 1/TP of the model per GPU (vLLM shards the attention heads, the MLP and the
  vocabulary over the group);
- the peak of one forward of `vllm_max_batched_tokens` tokens (vLLM profiles it at start-up), its
  sampler's logits and probabilities for 256 sequences (vLLM's max_num_seqs) in fp32, and a flat
  GiB for CUDA graphs;
- the KV cache: the rest of the share. vLLM refuses to start when it cannot hold one sequence of
  max_model_len (`max_context`) tokens: 2 (K and V) × layers × the KV heads one GPU holds
  (KV heads / TP, at least one) × head_dim × 2 bytes a token (full attention in every layer: an
  upper bound for models with sliding-window layers).

A TP group is TP consecutive ranks of one node (vLLM's external_launcher), so TP divides
gpus_per_node, the attention heads, and the KV heads (or is a multiple of them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from endstate.grpo.memory_plan import ModelShape, Setup

GIB = 2 ** 30
MAX_SEQS = 256  # vLLM's max_num_seqs: the sampler's rows at its start-up profile
CUDA_GRAPHS = GIB  # captured graphs and vLLM's own buffers: a flat allowance


def tp_problem(shape: ModelShape, gpus_per_node: int, tp: int) -> str | None:
    """Why tensor-parallel size `tp` cannot serve `shape` on nodes of `gpus_per_node` ranks."""
    if gpus_per_node % tp:
        return f"a tensor-parallel group is {tp} ranks of one node, and a node has {gpus_per_node}"
    if shape.heads % tp:
        return f"{shape.heads} attention heads do not split over {tp} GPUs"
    if shape.kv_heads % tp and tp % shape.kv_heads:
        return f"{shape.kv_heads} KV heads neither split over {tp} GPUs nor divide {tp}"
    return None


def kv_bytes_per_token(shape: ModelShape, tp: int) -> int:
    return 2 * shape.layers * max(1, shape.kv_heads // tp) * shape.head_dim * 2


def share_items(shape: ModelShape, s: Setup) -> list[tuple[str, float]]:
    """(item, bytes per GPU) of what the engine holds besides its KV cache."""
    tp = s.vllm_tp
    width = 2 * shape.hidden + 2 * shape.intermediate // tp + (shape.heads + 2 * shape.kv_heads) * shape.head_dim // tp
    forward = s.vllm_batched_tokens * width * 2
    sampler = MAX_SEQS * shape.vocab * 4 * 2
    return [(f"weights (bf16, {'the whole model' if tp == 1 else f'1/{tp} of the model'})",
             shape.params * 2 / tp),
            (f"forward peak, sampler, CUDA graphs ({s.vllm_batched_tokens} batched tokens)",
             forward + sampler + CUDA_GRAPHS)]


def share_bytes(s: Setup) -> float | None:
    return s.vllm_fraction * s.gpu_bytes if s.gpu_bytes else None


def kv_room(shape: ModelShape, s: Setup) -> float | None:
    """Bytes left for the KV cache in the share (None: no --gpu-memory to size the share)."""
    share = share_bytes(s)
    return None if share is None else share - sum(b for _, b in share_items(shape, s))


def share_fits(shape: ModelShape, s: Setup) -> bool:
    """The weights, the start-up peak and one max_context sequence's KV cache fit the share."""
    room = kv_room(shape, s)
    return room is None or room >= s.max_context * kv_bytes_per_token(shape, s.vllm_tp)


def share_lines(shape: ModelShape, s: Setup, row) -> list[str]:
    """The printed part of the plan: the share's items, its KV cache, whether they fit."""
    tp, share = s.vllm_tp, share_bytes(s)
    lines = [f"{f'  inside the colocated vLLM share, per GPU (tensor parallel {tp})':<76}GiB",
             *(row(label, size) for label, size in share_items(shape, s))]
    per_token = kv_bytes_per_token(shape, tp)
    needed = s.max_context * per_token
    if share is None:
        return [*lines, (f"    KV cache: one {s.max_context}-token sequence needs {needed / GIB:.2f} "
                         "GiB (the share is not checked: give --gpu-memory)")]
    room = kv_room(shape, s)
    sequences = f"{max(room, 0) / needed:.1f} sequence(s) of {s.max_context} tokens"
    lines.append(row(f"KV cache: the rest, {sequences}", room))
    used = sum(b for _, b in share_items(shape, s)) + needed
    lines.append(row(f"with one {s.max_context}-token sequence's KV cache", used, int(share)))
    return lines


def tp_options(shape: ModelShape, s: Setup) -> list[int]:
    """The tensor-parallel sizes above the current one that this model and node allow."""
    return [tp for tp in range(s.vllm_tp + 1, s.gpus_per_node + 1)
            if tp_problem(shape, s.gpus_per_node, tp) is None]


def fraction_options(s: Setup) -> list[float]:
    """Other shares to try, the nearest first: larger ones let the engine fit, smaller ones the
    trainer."""
    now = round(s.vllm_fraction * 100)
    steps = [f for f in range(10, 96, 5) if f != now]
    return [f / 100 for f in sorted(steps, key=lambda f: (abs(f - now), f))]
