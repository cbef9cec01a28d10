"""One micro-batch's share of the GRPO loss, from log-probs to a scalar, and its statistics; and
the update's settings, declared here once (LossSettings: grpo's TrainConfig inherits them as flags
and YAML keys).

Pure over tensors (the engine supplies the model's log-probs), so the tests hold it against an
independent one-batch autograd reference. The pieces: the policy loss (algorithm.POLICY_LOSSES,
dual-clipped, log-ratio clamped), correction.importance_weights (truncated IS against the
sampler), the KL penalty (algorithm.KL_PENALTIES) and algorithm.aggregate.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import endstate.grpo.losses  # noqa: F401 - registers the policy losses of grpo/losses/
from endstate.core.cli.ranges import count, number
from endstate.grpo.algorithm import KL_PENALTIES, LOSS_AGGREGATIONS, POLICY_LOSSES, aggregate
from endstate.grpo.correction import importance_weights, mismatch
from endstate.grpo.settings import Needs, setting

if TYPE_CHECKING:
    import torch

# Per-step statistics: summed over micro-batches and ranks, or maxed.
SUMS = ("loss", "tokens", "entropy", "kl", "clipped_low", "clipped_high", "dual_clipped",
        "mismatch", "mismatch_tokens", "is_weight", "is_truncated")
MAXIMA = ("mismatch_max", "is_weight_max")


@dataclass
class LossSettings:
    """The update's settings (flags and YAML keys of grpo train, TrainConfig inherits them)."""

    policy_loss: str = setting("ppo-clip", "The policy loss: ppo-clip (the clipped surrogate per "
                               "token), or another registered one: grpo/losses/, a plugin "
                               "(docs/grpo.md).", POLICY_LOSSES.choice(), metric="policy_loss")
    clip_low: float = setting(0.2, "ε_low of the clipped surrogate.", number(0, 1))
    clip_high: float = setting(0.2, "ε_high of the clipped surrogate (DAPO uses 0.28).", number(0, 10))
    dual_clip: float = setting(3.0, "Cap the loss of a negative-advantage token at c·|A| (0: off; "
                               "else above 1).", number(0, 1e6))
    log_ratio_clamp: float = setting(20.0, "Clamp every log-ratio to ±this before exp (no inf or NaN).",
                                     number(0, 80, min_open=True))  # exp(88) overflows fp32
    loss_agg: str = setting("token-mean", "Loss aggregation over the batch (docs/grpo.md).",
                            LOSS_AGGREGATIONS.choice())
    kl_coef: float = setting(0.0, "KL(π‖π_ref) coefficient; > 0 loads a reference model.", number(0, 100))
    kl_penalty: str = setting("k3", "The per-token KL estimator added × kl_coef: k3 (exp(r) − r − 1), "
                              "k1 (log π − log π_ref), k2 (½ (log π − log π_ref)²).",
                              KL_PENALTIES.choice(), metric="kl_penalty",
                              needs=Needs(lambda c: c.kl_coef > 0, "--kl-coef above 0"))
    rollout_is_cap: float = setting(2.0, "Truncate the importance weights at this cap C.", number(1, 1e6),
                                    needs=Needs(lambda c: c.rollout_is_level != "off",  # a TrainConfig's
                                                "importance weights: --rollout-is token|sequence (auto: "
                                                "on with --rollout-engine vllm)"))
    micro_batch: int = setting(4, "Sequences per forward/backward.", count(1, 2**16))


@dataclass
class LossConfig(LossSettings):
    """What one update runs with: the loss settings, the importance-weight level in force, and
    the distribution the tokens were sampled from (the trainer's log-probs follow it)."""

    rollout_is: str = "off"  # off | token | sequence (correction.IS_LEVELS): TrainConfig.rollout_is_level
    temperature: float = 1.0  # the sampling temperature: log-probs are taken at logits / T
    top_k: int | None = None  # ... then top-k and top-p renormalised, as the sampler drew them
    top_p: float = 1.0

    @classmethod
    def of(cls, cfg: Any) -> LossConfig:
        """The update's config from a TrainConfig: its loss settings by name, the importance level
        `auto` resolved, and the sampling temperature (0, greedy, reads the raw logits: 1)."""
        settings = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(LossSettings)}
        return cls(**settings, rollout_is=cfg.rollout_is_level, temperature=cfg.temperature or 1.0,
                   top_k=cfg.top_k, top_p=cfg.top_p)


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
    s = POLICY_LOSSES[cfg.policy_loss](logp, old, advantages, mask, cfg)  # the one dispatch point
    per_token = s.loss if weights is None else s.loss * weights.weights  # (B, T)
    zero = logp.new_zeros(())
    kl = zero
    if ref_logp is not None and cfg.kl_coef:
        kl_t = KL_PENALTIES[cfg.kl_penalty](logp, ref_logp)  # (B, T): the one dispatch point
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
