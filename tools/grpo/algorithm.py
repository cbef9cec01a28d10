"""The GRPO arithmetic: advantages, the policy loss, loss aggregation, KL. Pure functions, and the
registries that name them: each setting that chooses an algorithm (`advantage`, `policy_loss`,
`kl_penalty`, `loss_agg`) is looked up in one registry at one dispatch point, so a new estimator
or loss is one decorated function, as in verl's core_algos.py. The registered functions:

  ADVANTAGES     (rewards (G,), settings) -> advantages (G,)             train.py, once per group
  POLICY_LOSSES  (logprobs, old_logprobs, advantages, mask (B, T), cfg) -> Surrogate   objective.py
  KL_PENALTIES   (logprobs, ref_logprobs (B, T)) -> per-token penalty (B, T)           objective.py
  LOSS_AGGREGATIONS  LossAgg: per-token loss -> the micro-batch's share of the batch loss

Policy losses beyond the clipped surrogate live one per module in grpo/losses/ (every module there
is imported when the update or the CLI needs the names); an installed package adds one through the
entry-point group `endstate.policy_losses`, into POLICY_LOSSES (docs/grpo.md).

Shapes: B sequences in a micro-batch, T tokens (right-padded). `mask` is 1 on completion tokens
(the ones the policy sampled and is trained on) and 0 on prompt, observation and padding tokens.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from endstate.core.registry import Registry
from endstate.grpo.correction import safe_log_ratio

if TYPE_CHECKING:  # torch is imported where used: `grpo --help` and --dry-run stay light
    import torch

    from endstate.grpo.objective import LossConfig


# -- advantages --------------------------------------------------------------------------------------

# A group's advantages: (its G rewards, the run's settings (TrainConfig), from which an estimator
# reads what it needs) -> G advantages, one per episode, in the rewards' order.
AdvantageEstimator = Callable[[Sequence[float], Any], list[float]]
ADVANTAGES: Registry[AdvantageEstimator] = Registry("advantage estimator")


def group_advantages(rewards: Sequence[float], std_norm: bool = True, eps: float = 1e-6) -> list[float]:
    """reward − group mean, over (group std + eps) when std_norm (sample std, as TRL and verl)."""
    import torch

    r = torch.tensor(rewards, dtype=torch.float64)  # (G,)
    a = r - r.mean()
    return (a / (r.std() + eps) if std_norm else a).tolist()


@ADVANTAGES.register("grpo")
def grpo_advantages(rewards: Sequence[float], settings: Any) -> list[float]:
    """GRPO's (Shao et al. 2024): group_advantages with the run's std_norm and adv_eps."""
    return group_advantages(rewards, settings.std_norm, settings.adv_eps)


@ADVANTAGES.register("rloo")
def rloo_advantages(rewards: Sequence[float], settings: Any) -> list[float]:
    """REINFORCE leave-one-out (Ahmadian et al. 2024, verl's `rloo`): reward − the mean of the
    group's other G − 1 rewards, = G/(G − 1)·(reward − group mean); no std normalisation."""
    import torch

    r = torch.tensor(rewards, dtype=torch.float64)  # (G,)
    return (r - (r.sum() - r) / (len(r) - 1)).tolist()  # G ≥ 2: TrainConfig.validate


def advantages(rewards: Sequence[float], settings: Any) -> list[float]:
    """The dispatch point of the advantage estimator (`settings.advantage`)."""
    return ADVANTAGES[settings.advantage](rewards, settings)


def zero_variance(rewards: Sequence[float]) -> bool:
    """All equal (all 0 or all 1): the group carries no learning signal."""
    return max(rewards) == min(rewards)


# -- the policy loss ---------------------------------------------------------------------------------

class Surrogate(NamedTuple):
    """What a policy loss returns, per token; the update weights it (importance correction), adds
    the KL penalty, aggregates it over the batch, and sums the three flags into clip_frac_low,
    clip_frac_high and dual_clip_frac (0 where a loss has no such bound)."""

    loss: torch.Tensor  # (B, T) per-token loss
    clipped_low: torch.Tensor  # (B, T) 1.0 where A < 0 and the ratio was clipped at 1 − ε_low
    clipped_high: torch.Tensor  # (B, T) 1.0 where A > 0 and the ratio was clipped at 1 + ε_high
    dual_clipped: torch.Tensor  # (B, T) 1.0 where A < 0 and the loss was capped at c·|A|


class PolicyLoss(Protocol):
    def __call__(self, logprobs: torch.Tensor, old_logprobs: torch.Tensor, advantages: torch.Tensor,
                 mask: torch.Tensor, cfg: LossConfig) -> Surrogate:
        """logprobs (B, T): log π_θ of each target, with grad; old_logprobs (B, T): log π_old,
        detached (the sampler's, or the trainer's own before the step: objective.py); advantages
        (B, T): each sequence's advantage broadcast over its tokens; mask (B, T): 1 on completion
        tokens; cfg: the update's settings (clip_low, clip_high, dual_clip, log_ratio_clamp ...)."""
        ...


POLICY_LOSSES: Registry[PolicyLoss] = Registry("policy loss")


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



@POLICY_LOSSES.register("ppo-clip")
def ppo_clip(logprobs: torch.Tensor, old_logprobs: torch.Tensor, advantages: torch.Tensor,
             mask: torch.Tensor, cfg: LossConfig) -> Surrogate:
    """The default: clipped_surrogate per token (PPO's, as GRPO and DAPO use it), dual-clipped."""
    return clipped_surrogate(logprobs, old_logprobs, advantages, cfg.clip_low, cfg.clip_high,
                             cfg.dual_clip, cfg.log_ratio_clamp)


# -- the KL penalty ----------------------------------------------------------------------------------

# (logprobs (B, T) with grad, ref_logprobs (B, T) of the frozen reference) -> per-token penalty (B, T),
# added to the loss × kl_coef. Schulman's estimators of KL(π‖π_ref) on tokens sampled from π.
KLPenalty = Callable[["torch.Tensor", "torch.Tensor"], "torch.Tensor"]
KL_PENALTIES: Registry[KLPenalty] = Registry("KL penalty")


@KL_PENALTIES.register("k3")
def kl_k3(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimator of KL(π‖π_ref): exp(r) − r − 1 with r = log π_ref − log π (≥ 0)."""
    r = ref_logprobs - logprobs  # (B, T)
    return r.exp() - r - 1


@KL_PENALTIES.register("k1")
def kl_k1(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """Per-token k1: log π − log π_ref (unbiased, of either sign; verl's `kl`)."""
    return logprobs - ref_logprobs  # (B, T)


@KL_PENALTIES.register("k2")
def kl_k2(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """Per-token k2: ½ (log π − log π_ref)² (≥ 0; verl's `mse`)."""
    return 0.5 * (logprobs - ref_logprobs).square()  # (B, T)


# -- loss aggregation ----------------------------------------------------------------------------------

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
