"""Log-probs of the chosen tokens without the full-vocabulary logits.

The update needs log p(target) and the entropy at every completion position. Taken directly, the
model's lm_head writes (positions × vocabulary) logits and log_softmax keeps as many again for the
backward: ~20 GB at micro-batch 4 with 3k-token traces on the 135M model (49k vocabulary), ×3 for
a 150k vocabulary. Here the lm_head runs on the hidden states a chunk of positions at a time, each
chunk under activation checkpointing: the forward keeps only (logp, entropy) per position, the
backward recomputes one chunk's logits at a time, so the peak grows with the chunk, not with the
sequence × vocabulary. The arithmetic per chunk is the direct one, applied to that chunk's
logits: core.local_model.processed_logits (temperature, then top-k and top-p, as the sampler drew
the tokens) and algorithm.token_logprobs; the tests hold the two against each other.

Inside the model the chunked head replaces the lm_head's forward for one call (`head_logprobs`):
the model then runs its usual forward (one engine call, one lm_head call per micro-batch), which
under ZeRO-3 keeps every rank's all-gathers of the head in step and DeepSpeed's backward hooks on
the model's output, whatever the number of chunks on each rank.

A micro-batch's rows often begin alike: a GRPO group's G episodes share their task's first
prompt, and a domain's tasks share its system prompt and tool list. `forward` runs the common
prefix once, for one row, and the rest of every row on its keys and values (repeated for the rows;
the backward sums their gradients back): the same log-probs and gradient as the full forward, at
(B − 1) × prefix fewer positions through the decoder (tests/test_grpo_correction.py holds the two
against each other). The engine decides where to share (engine.Policy._prefixes: across ranks).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING

from endstate.core.agent.sampling import processed_logits
from endstate.core.errors import EndstateError
from endstate.grpo.algorithm import token_logprobs

if TYPE_CHECKING:
    import torch

MIN_SHARED = 16  # prefix positions below which a second forward call costs more than it saves
DEFAULT_CHUNK = 1024  # positions per lm_head chunk: 1024 × 152k vocabulary × 4 B = 0.6 GB a copy
# Model configs that transform the logits after the lm_head (Gemma 2's softcap, Cohere's scale,
# Granite's divisor): the chunked head would return something else than the model's logits.
LOGIT_TRANSFORMS = ("final_logit_softcapping", "logit_scale", "logits_scaling")


def _chunk_logprobs(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                    targets: torch.Tensor, temperature: float, top_k: int | None,
                    top_p: float) -> tuple[torch.Tensor, torch.Tensor]:
    import torch.nn.functional as F

    logits = processed_logits(F.linear(hidden, weight, bias).float(), temperature, top_k, top_p)  # (N, V)
    return token_logprobs(logits, targets)  # (N,) each


def chunked_token_logprobs(hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor,
                           temperature: float = 1.0, chunk_size: int = DEFAULT_CHUNK, *,
                           top_k: int | None = None, top_p: float = 1.0,
                           bias: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(log p(target), entropy) per position under the sampler's distribution (logits / T, then
    top-k and top-p), as processed_logits + token_logprobs compute them from hidden @ weightᵀ,
    `chunk_size` positions at a time. hidden (..., H), weight (V, H) (the lm_head's), targets (...)
    → (...) each, float32. With grad enabled each chunk is checkpointed: the backward recomputes
    its logits instead of keeping them."""
    import torch
    from torch.utils.checkpoint import checkpoint

    assert chunk_size > 0 and hidden.shape[:-1] == targets.shape, (hidden.shape, targets.shape)
    flat, goal = hidden.reshape(-1, hidden.shape[-1]), targets.reshape(-1)  # (N, H), (N,)
    logps, entropies = [hidden.new_zeros(0, dtype=torch.float32)], [hidden.new_zeros(0, dtype=torch.float32)]
    for start in range(0, goal.numel(), chunk_size):
        args = (flat[start:start + chunk_size], weight, bias, goal[start:start + chunk_size],
                temperature, top_k, top_p)
        if torch.is_grad_enabled():
            logp, entropy = checkpoint(_chunk_logprobs, *args, use_reentrant=False)
        else:
            logp, entropy = _chunk_logprobs(*args)
        logps.append(logp)
        entropies.append(entropy)
    return torch.cat(logps).view(targets.shape), torch.cat(entropies).view(targets.shape)


def check_plain_head(config) -> None:
    """Refuse a model whose logits are transformed after the lm_head (see LOGIT_TRANSFORMS)."""
    for name in LOGIT_TRANSFORMS:
        value = getattr(config, name, None)
        if value not in (None, 0, 1, 0.0, 1.0):
            raise EndstateError(f"the model config sets {name}={value}: grpo computes log-probs from the "
                                "lm_head alone (chunked), which would miss that transform; train a model "
                                "whose logits are the lm_head's output")


@contextmanager
def head_logprobs(lm_head, targets: torch.Tensor, chunk_size: int, temperature: float,
                  top_k: int | None = None, top_p: float = 1.0) -> Iterator[None]:
    """While active, a call lm_head(hidden (B, C, H)) returns (B, C, 2): log p(targets) (B, C) and
    the entropy (no gradient) stacked, chunk by chunk, instead of (B, C, V) logits. The model calls
    its lm_head once per forward, so under ZeRO-3 the head is gathered once for the forward and
    once for the backward, by the module hooks DeepSpeed put on it."""
    import torch

    def forward(hidden: torch.Tensor) -> torch.Tensor:
        logp, entropy = chunked_token_logprobs(hidden, lm_head.weight, targets, temperature, chunk_size,
                                               top_k=top_k, top_p=top_p, bias=getattr(lm_head, "bias", None))
        return torch.stack([logp, entropy.detach()], -1)  # (B, C, 2)

    lm_head.forward = forward  # an instance attribute shadows the class's forward
    try:
        yield
    finally:
        del lm_head.forward


def shared_prefix(input_ids: torch.Tensor, attention_mask: torch.Tensor, first_column: int) -> int:
    """How many leading positions every row has in common (the same ids, none of them padding),
    at most up to `first_column` (the first position whose log-prob is needed: the suffix
    forward computes those); 0 below two rows or MIN_SHARED positions."""
    if input_ids.shape[0] < 2:
        return 0
    differs = ((input_ids != input_ids[:1]).any(0) | (attention_mask == 0).any(0)).nonzero()  # (K, 1)
    common = int(differs[0, 0]) if differs.numel() else input_ids.shape[1]
    shared = min(common, first_column)
    return shared if shared >= MIN_SHARED else 0


def forward(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, columns: torch.Tensor,
            head: Callable[[], AbstractContextManager], prefix: int):
    """`model`'s output at `columns` (a 1-D tensor of positions) with `head()` active (the
    chunked lm_head of head_logprobs); the first `prefix` positions (shared_prefix: the same in
    every row) run once, for one row, when `prefix` > 0."""
    if not prefix:
        with head():
            return model(input_ids=input_ids, attention_mask=attention_mask, logits_to_keep=columns,
                         use_cache=False)
    from transformers import DynamicCache

    module = getattr(model, "module", model)
    cache = DynamicCache(config=module.config)
    given = {_cache_argument(module): cache}
    model(input_ids=input_ids[:1, :prefix], use_cache=True, logits_to_keep=1, **given)  # (1, L)
    cache.batch_repeat_interleave(input_ids.shape[0])
    with head():
        return model(input_ids=input_ids[:, prefix:], attention_mask=attention_mask,
                     logits_to_keep=columns - prefix, use_cache=True, **given)


def _cache_argument(module) -> str:
    """The forward's name for the KV cache: `cache` from transformers 5.24, `past_key_values`
    before (and deprecated since)."""
    import inspect

    return "cache" if "cache" in inspect.signature(module.forward).parameters else "past_key_values"
