"""One micro-batch's share of the GRPO loss, from log-probs to a scalar, and its statistics.

Pure over tensors (the engine supplies the model's log-probs), so the tests hold it against an
independent one-batch autograd reference. The pieces: algorithm.clipped_surrogate (dual-clipped,
log-ratio clamped), correction.importance_weights (truncated IS against the sampler),
algorithm.kl_k3 and algorithm.aggregate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from endstate.grpo.algorithm import aggregate, clipped_surrogate, kl_k3
from endstate.grpo.correction import importance_weights, mismatch

if TYPE_CHECKING:
    import torch

# Per-step statistics: summed over micro-batches and ranks, or maxed.
SUMS = ("loss", "tokens", "entropy", "kl", "clipped_low", "clipped_high", "dual_clipped",
        "mismatch", "mismatch_tokens", "is_weight", "is_truncated")
MAXIMA = ("mismatch_max", "is_weight_max")


@dataclass
class LossConfig:
    clip_low: float = 0.2
    clip_high: float = 0.2
    loss_agg: str = "token-mean"
    kl_coef: float = 0.0
    micro_batch: int = 4
    temperature: float = 1.0  # the sampling temperature: log-probs are taken at logits / T
    top_k: int | None = None  # ... then top-k and top-p renormalised, as the sampler drew them
    top_p: float = 1.0
    rollout_is: str = "off"  # off | token | sequence (correction.IS_LEVELS)
    rollout_is_cap: float = 2.0
    dual_clip: float = 0.0  # 0: off, else c > 1
    log_ratio_clamp: float = 20.0


def micro_batch_loss(logp: torch.Tensor, rollout_logp: torch.Tensor, advantages: torch.Tensor,
                     mask: torch.Tensor, cfg: LossConfig, norm: float,
                     ref_logp: torch.Tensor | None = None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """(this micro-batch's share of the batch loss, its statistics as 0-d tensors).

    logp (B, T): the trainer's log π_θ of the targets (with grad); rollout_logp (B, T): the
    sampler's (NaN where unknown); advantages, mask (B, T). With `rollout_is` off, π_old is the
    sampler (where known) and the clipped ratio guards the mismatch; on, π_old is the trainer's own
    log-prob before the step (logp, detached: one optimizer step per batch) and the mismatch is
    corrected by the truncated importance weight."""
    import torch

    weights = None
    if cfg.rollout_is != "off":
        old = logp.detach()
        weights = importance_weights(logp, rollout_logp, mask, cfg.rollout_is, cfg.rollout_is_cap,
                                     cfg.log_ratio_clamp)
    else:
        old = torch.where(torch.isnan(rollout_logp), logp.detach(), rollout_logp)
    s = clipped_surrogate(logp, old, advantages, cfg.clip_low, cfg.clip_high, cfg.dual_clip,
                          cfg.log_ratio_clamp)
    per_token = s.loss if weights is None else s.loss * weights.weights  # (B, T)
    zero = logp.new_zeros(())
    kl = zero
    if ref_logp is not None and cfg.kl_coef:
        kl_t = kl_k3(logp, ref_logp)  # (B, T)
        per_token = per_token + cfg.kl_coef * kl_t
        kl = (kl_t.detach() * mask).sum()
    objective = aggregate(per_token, mask, cfg.loss_agg, norm)
    gap, known = mismatch(logp, rollout_logp, mask, cfg.log_ratio_clamp)
    stats = {"loss": objective.detach(), "tokens": mask.sum(), "kl": kl,
             "clipped_low": (s.clipped_low * mask).sum(), "clipped_high": (s.clipped_high * mask).sum(),
             "dual_clipped": (s.dual_clipped * mask).sum(),
             "mismatch": gap.sum(), "mismatch_tokens": known.sum(),
             "mismatch_max": gap.max() if gap.numel() else zero,
             "is_weight": zero, "is_truncated": zero, "is_weight_max": zero}
    if weights is not None:
        stats.update(is_weight=(weights.weights * known).sum(), is_truncated=weights.truncated.sum(),
                     is_weight_max=(weights.ratio * known).max() if known.numel() else zero)
    return objective, stats


def accumulate(total: dict[str, torch.Tensor], part: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Sums add, maxima max; on the device, so a step costs one host sync, not one per number."""
    import torch

    if not total:
        return dict(part)
    return {k: torch.maximum(total[k], part[k]) if k in MAXIMA else total[k] + part[k] for k in total}
