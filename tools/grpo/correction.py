"""Off-policy safety of the update: the rollout/trainer mismatch and what bounds it. Pure functions.

The sampler (vLLM in bf16 with its own kernels, or the local generator) and the trainer compute
log π of the same tokens differently. With one optimizer step per batch the trainer's log-probs
before the step are the true π_old, so the update splits as TRL and verl split it:

    loss_t = w_t · ℓ(r_t, A),   r_t = π_θ / π_old(trainer),   w_t = min(π_old(trainer) / π_rollout, C)

w is a truncated importance weight (detached): per token (`token`, verl's default level, TRL's
original TIS) or one weight per sequence, the product of its token ratios (`sequence`); C is
`rollout_is_cap` (2.0: verl's `rollout_is_threshold` and TRL's original cap). ℓ is the clipped
surrogate (algorithm.clipped_surrogate), dual-clipped for negative advantages (at most c·|A|,
c = 3 as verl's clip_ratio_c) so a token the sampler found much less likely than the trainer
cannot blow up the loss. Every log-ratio
is clamped to ±`log_ratio_clamp` (20, verl's SAFETY_BOUND) after NaN/±inf are mapped into range,
so no exponential overflows: no inf or NaN reaches the loss or the gradient.

Shapes: (B, T) per token, `mask` 1 on completion tokens.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    import torch

IS_LEVELS = ("off", "token", "sequence")  # the importance-weight levels (`auto` picks one)


def safe_log_ratio(log_ratio: torch.Tensor, bound: float) -> torch.Tensor:
    """log_ratio with NaN → 0 and everything (±inf included) clamped to [−bound, bound]."""
    import torch

    assert bound > 0, bound
    return torch.clamp(torch.nan_to_num(log_ratio, nan=0.0, posinf=bound, neginf=-bound), -bound, bound)


class ISWeights(NamedTuple):
    weights: torch.Tensor  # (B, T) applied weights (truncated, detached; 1 where unknown)
    ratio: torch.Tensor  # (B, T) the weight before truncation (clamped)
    truncated: torch.Tensor  # (B, T) 1.0 where the cap bit


def importance_weights(trainer_logprobs: torch.Tensor, rollout_logprobs: torch.Tensor,
                       mask: torch.Tensor, level: str, cap: float, log_ratio_clamp: float = 20.0) -> ISWeights:
    """Truncated importance weights π_trainer / π_rollout, detached. `rollout_logprobs` is NaN
    where the sampler recorded none (those tokens get weight 1). `level`: token or sequence."""
    import torch

    assert level in ("token", "sequence"), level
    assert cap >= 1, cap
    known = mask * (~torch.isnan(rollout_logprobs)).float()  # (B, T)
    log_ratio = torch.where(known > 0, trainer_logprobs.detach() - rollout_logprobs,
                            torch.zeros_like(trainer_logprobs))  # (B, T)
    if level == "sequence":  # one weight per row: Σ_t log ratio, broadcast over the row
        log_ratio = (log_ratio * known).sum(-1, keepdim=True).expand_as(log_ratio)  # (B, T)
    ratio = torch.exp(safe_log_ratio(log_ratio, log_ratio_clamp))  # (B, T)
    truncated = (ratio > cap).float() * known
    weights = torch.where(known > 0, torch.clamp(ratio, max=cap), torch.ones_like(ratio))
    return ISWeights(weights.detach(), ratio.detach(), truncated)


def mismatch(trainer_logprobs: torch.Tensor, rollout_logprobs: torch.Tensor,
             mask: torch.Tensor, log_ratio_clamp: float = 20.0) -> tuple[torch.Tensor, torch.Tensor]:
    """(|log π_train − log π_rollout| on completion tokens with a rollout log-prob (0 elsewhere),
    the 0/1 mask of those tokens), both (B, T)."""
    import torch

    known = mask * (~torch.isnan(rollout_logprobs)).float()
    gap = safe_log_ratio(trainer_logprobs.detach() - torch.nan_to_num(rollout_logprobs, nan=0.0),
                         log_ratio_clamp).abs()  # a −inf rollout log-prob reads as the bound
    return torch.where(known > 0, gap, torch.zeros_like(gap)), known
