"""GSPO: the clipped surrogate on a sequence-level importance ratio (Zheng et al. 2025, "Group
Sequence Policy Optimization"; verl's `gspo`).

    s_i = exp((1/|y_i|) Σ_t log(π_θ(y_i,t) / π_old(y_i,t)))    the token ratios' geometric mean
    s_i,t = sg[s_i] · π_θ(y_i,t) / sg[π_θ(y_i,t)]               (sg: stop-gradient)
    ℓ_i,t = −min(s_i,t·A_i, clip(s_i,t, 1 − ε_low, 1 + ε_high)·A_i)

s_i,t is GSPO-token's ratio: its value is s_i on every token of sequence i, its gradient s_i·∇log
π_θ(y_i,t), so per-token weights (the importance correction) act on their own token. Aggregated
`seq-mean-token-mean` this is the paper's sequence objective (1/G) Σ_i min(s_i A_i, clip(s_i) A_i);
every loss_agg mode applies as to the token-level loss. The paper clips at ε_low = 3e-4,
ε_high = 4e-4 (a sequence ratio moves far less than a token's): `--clip-low 3e-4 --clip-high 4e-4`.
A sequence's whole ratio is clipped or not, so clip_frac counts all its tokens; `dual_clip` caps an
A < 0 sequence's loss at c·|A| as for the token ratio.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from endstate.grpo.algorithm import POLICY_LOSSES, Surrogate, clipped_surrogate
from endstate.grpo.correction import safe_log_ratio

if TYPE_CHECKING:
    import torch

    from endstate.grpo.objective import LossConfig


@POLICY_LOSSES.register("gspo")
def gspo(logprobs: torch.Tensor, old_logprobs: torch.Tensor, advantages: torch.Tensor,
         mask: torch.Tensor, cfg: LossConfig) -> Surrogate:
    """logprobs (B, T) with grad, old_logprobs (B, T) detached, advantages (B, T) constant along a
    row, mask (B, T) 1 on completion tokens: the per-token loss (B, T), equal along a sequence."""
    log_ratio = safe_log_ratio(logprobs.detach() - old_logprobs, cfg.log_ratio_clamp) * mask  # (B, T)
    sequence = log_ratio.sum(-1, keepdim=True) / mask.sum(-1, keepdim=True).clamp(min=1)  # (B, 1)
    log_s = logprobs - logprobs.detach() + sequence  # (B, T): value log s_i, gradient ∇log π_θ
    # the clipped surrogate of ratio exp(log_s − 0): its clamp, clips and dual clip, on s_i,t
    return clipped_surrogate(log_s, log_s.new_zeros(log_s.shape), advantages, cfg.clip_low,
                             cfg.clip_high, cfg.dual_clip, cfg.log_ratio_clamp)
