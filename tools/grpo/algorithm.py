"""The GRPO arithmetic: advantages, the clipped surrogate, loss aggregation, KL. Pure functions.

Shapes: B sequences in a micro-batch, T tokens (right-padded). `mask` is 1 on completion tokens
(the ones the policy sampled and is trained on) and 0 on prompt, observation and padding tokens.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NamedTuple

from endstate.core.registry import Registry
from endstate.grpo.correction import safe_log_ratio

if TYPE_CHECKING:  # torch is imported where used: `grpo --help` and --dry-run stay light
    import torch


def group_advantages(rewards: Sequence[float], std_norm: bool = True, eps: float = 1e-6) -> list[float]:
    """reward − group mean, over (group std + eps) when std_norm (sample std, as TRL and verl)."""
    import torch

    r = torch.tensor(rewards, dtype=torch.float64)  # (G,)
    a = r - r.mean()
    return (a / (r.std() + eps) if std_norm else a).tolist()


def zero_variance(rewards: Sequence[float]) -> bool:
    """All equal (all 0 or all 1): the group carries no learning signal."""
    return max(rewards) == min(rewards)


class Surrogate(NamedTuple):
    loss: torch.Tensor  # (B, T) per-token loss
    clipped_low: torch.Tensor  # (B, T) 1.0 where A < 0 and the ratio was clipped at 1 − ε_low
    clipped_high: torch.Tensor  # (B, T) 1.0 where A > 0 and the ratio was clipped at 1 + ε_high
    dual_clipped: torch.Tensor  # (B, T) 1.0 where A < 0 and the loss was capped at c·|A|


def clipped_surrogate(logprobs: torch.Tensor, old_logprobs: torch.Tensor, advantages: torch.Tensor,
                      clip_low: float, clip_high: float, dual_clip: float = 0.0,
                      log_ratio_clamp: float = 20.0) -> Surrogate:
    """Per-token PPO-clip loss −min(ρA, clip(ρ, 1−ε_low, 1+ε_high)A), capped at c·|A| where A < 0
    when `dual_clip` c > 1 (0: off; Ye et al. 2020, verl's clip_ratio_c), and where each bound bit.
    ρ = exp(log π − log π_old) with the log-ratio clamped (correction.safe_log_ratio): finite
    for any input. All (B, T); `advantages` is the sequence's advantage broadcast over its tokens."""
    import torch

    assert logprobs.shape == old_logprobs.shape == advantages.shape, (logprobs.shape, old_logprobs.shape)
    assert dual_clip == 0 or dual_clip > 1, dual_clip
    ratio = torch.exp(safe_log_ratio(logprobs - old_logprobs, log_ratio_clamp))  # (B, T)
    unclipped = -ratio * advantages
    clipped = -torch.clamp(ratio, 1 - clip_low, 1 + clip_high) * advantages
    loss = torch.maximum(unclipped, clipped)  # (B, T)
    bit = (clipped > unclipped).float()
    dual = torch.zeros_like(loss)
    if dual_clip:
        cap = -dual_clip * advantages  # (B, T), > 0 where A < 0
        dual = ((advantages < 0) & (loss > cap)).float()
        loss = torch.where(advantages < 0, torch.minimum(loss, cap), loss)
    return Surrogate(loss, bit * (advantages < 0).float(), bit * (advantages > 0).float(), dual)


def kl_k3(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimator of KL(π‖π_ref): exp(r) − r − 1 with r = log π_ref − log π (≥ 0)."""
    r = ref_logprobs - logprobs  # (B, T)
    return r.exp() - r - 1


def _token_sum(masked: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return masked.sum()


def _sequence_token_means(masked: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (masked.sum(-1) / mask.sum(-1).clamp(min=1)).sum()  # Σ over (B,) per-sequence means


def _tokens(completion_tokens: Sequence[int], max_tokens: int) -> float:
    return float(sum(completion_tokens))


def _sequences(completion_tokens: Sequence[int], max_tokens: int) -> float:
    return float(len(completion_tokens))


def _sequences_times_max_tokens(completion_tokens: Sequence[int], max_tokens: int) -> float:
    return float(len(completion_tokens) * max_tokens)


class LossAgg(NamedTuple):
    """A loss aggregation: the batch loss is the sum over micro-batches (and ranks) of
    numerator(micro-batch) / denominator(batch)."""

    # (masked loss, mask), (B, T) each -> the micro-batch's sum, a scalar
    numerator: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    # (completion tokens per sequence of the batch, max completion tokens) -> the denominator
    denominator: Callable[[Sequence[int], int], float]


# The one dispatch point for loss aggregation: a mode is one registered LossAgg.
LOSS_AGGREGATIONS: Registry[LossAgg] = Registry("loss aggregation")
# Σ_tokens loss / (completion tokens in the batch)
LOSS_AGGREGATIONS.register("token-mean")(LossAgg(_token_sum, _tokens))
# Σ_seq (Σ_t loss / tokens of seq) / (sequences in the batch)
LOSS_AGGREGATIONS.register("seq-mean-token-mean")(LossAgg(_sequence_token_means, _sequences))
# Σ_tokens loss / (sequences × max completion tokens)  (Dr. GRPO)
LOSS_AGGREGATIONS.register("seq-mean-token-sum-norm")(LossAgg(_token_sum, _sequences_times_max_tokens))


def _loss_agg(mode: str) -> LossAgg:
    try:
        return LOSS_AGGREGATIONS[mode]
    except KeyError as e:
        raise ValueError(e.args[0]) from None


def aggregate(loss: torch.Tensor, mask: torch.Tensor, mode: str, norm: float) -> torch.Tensor:
    """The micro-batch's share of the batch loss; summing the shares over every micro-batch (and
    rank) gives the batch loss. `norm` is the batch-level denominator, computed once over the
    whole batch by `normalizer`. The modes: LOSS_AGGREGATIONS."""
    assert loss.shape == mask.shape, (loss.shape, mask.shape)
    assert norm > 0, norm
    return _loss_agg(mode).numerator(loss * mask, mask) / norm  # (B, T) -> ()


def normalizer(completion_tokens: Sequence[int], mode: str, max_tokens: int) -> float:
    """The batch denominator for `aggregate`: completion-token count per sequence in, one number out."""
    return _loss_agg(mode).denominator(completion_tokens, max_tokens)


def token_logprobs(logits: torch.Tensor, targets: torch.Tensor,
                   temperature: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """log p(target) and the entropy per position at the sampling temperature (logits / T, as
    the sampler drew them; T = 0, greedy, counts as 1), in float32. logits (B, T, V), targets (B, T)."""
    import torch

    logits = logits.float()
    if temperature and temperature != 1.0:
        logits = logits / temperature
    logp = torch.log_softmax(logits, -1)  # (B, T, V)
    chosen = logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # (B, T)
    with torch.no_grad():
        entropy = -(logp.exp() * logp).sum(-1)  # (B, T)
    return chosen, entropy
