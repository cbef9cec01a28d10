"""GSPO (grpo/losses/gspo.py), the policy loss on the sequence-level importance ratio, against
references written out here: the loss and its gradient by hand over tokens in float64 (Python
math, the paper's formulas), and one batch through Policy.update (DeepSpeed, two micro-batches)
against the paper's sequence objective with autograd on a plain transformers model."""
# ruff: noqa: F811 - the grpo_fixtures fixtures are imported, then requested by name

from __future__ import annotations

import math

import pytest
import torch
from grpo_fixtures import step_gradients, tiny_model  # noqa: F401 - tiny_model: a pytest fixture
from numerics import approx, assert_close, decoder_terms, logprob_magnitude

from endstate.grpo.objective import LossConfig, micro_batch_loss

EPS_LOW, EPS_HIGH, DUAL = 0.2, 0.28, 3.0
# Per row: the advantage and each completion token's log π_θ − log π_old (None: padding). The
# rows' means put s_i = exp(mean) in each case: inside the bounds (0, 4: though row 0's first
# token alone is past 1 + ε_high, which a token-level ratio would clip), past the dual cap (1:
# e^1.5·0.5 > 3·0.5), clipped high (2: e^0.4 > 1.28, A > 0), clipped low (3: e^-0.5 < 0.8, A < 0).
ROWS = [(1.0, [0.6, -0.4, 0.1, -0.2, None]),
        (-0.5, [1.5, 1.2, 1.8, None, None]),
        (2.0, [0.4, 0.4, 0.2, 0.6, 0.4]),
        (-1.0, [-0.5, -0.7, -0.3, None, None]),
        (-1.0, [0.1, -0.3, 0.05, 0.0, 0.05])]


def by_hand(rows, old_rows):
    """(per-row loss, per-row gradient of the row's per-token loss w.r.t. each log π_θ, and which
    bound bit: 'high', 'low', 'dual' or None), in Python floats: s = exp(mean log ratio)."""
    out = []
    for (a, deltas), old in zip(rows, old_rows):
        known = [d for d in deltas if d is not None]
        s = math.exp(math.fsum(known) / len(known))
        clipped = min(max(s, 1 - EPS_LOW), 1 + EPS_HIGH)
        loss = max(-s * a, -clipped * a)
        bound = None if loss == -s * a else ("high" if a > 0 else "low")
        if a < 0 and loss > -DUAL * a:
            loss, bound = -DUAL * a, "dual"
        # d(−s·a)/d log π_θ,t = −a·s on every token of the row (s_i,t = sg[s]·π_θ/sg[π_θ]);
        # 0 once a bound bites
        out.append((loss, 0.0 if bound else -a * s, bound))
    return out


def tensors(dtype=torch.float64):
    g = torch.Generator().manual_seed(0)
    B, T = len(ROWS), len(ROWS[0][1])
    old = -torch.rand(B, T, generator=g, dtype=dtype) * 3  # (B, T)
    delta = torch.tensor([[d or 0.0 for d in row] for _, row in ROWS], dtype=dtype)
    mask = torch.tensor([[d is not None for d in row] for _, row in ROWS], dtype=dtype)
    adv = torch.tensor([a for a, _ in ROWS], dtype=dtype)[:, None].expand(B, T).clone()
    return old + delta, old, adv, mask


@pytest.mark.numerics
@pytest.mark.parametrize("loss_agg", ["token-mean", "seq-mean-token-mean"])
def test_gspo_loss_and_gradient_match_the_papers_formulas_by_hand(loss_agg):
    logp, old, adv, mask = tensors()
    logp.requires_grad_(True)
    cfg = LossConfig(policy_loss="gspo", clip_low=EPS_LOW, clip_high=EPS_HIGH, dual_clip=DUAL,
                     loss_agg=loss_agg, rollout_is="off")
    counts = [int(m) for m in mask.sum(-1).tolist()]
    norm = float(sum(counts)) if loss_agg == "token-mean" else float(len(ROWS))
    objective, stats = micro_batch_loss(logp, old, adv, mask, cfg, norm)  # π_old: the sampler's
    objective.backward()
    expected = by_hand(ROWS, old.tolist())
    # token-mean: Σ_i n_i·loss_i / N; seq-mean-token-mean: Σ_i loss_i / B (the paper's (1/G) Σ_i)
    weight = [n if loss_agg == "token-mean" else 1 for n in counts]
    total = math.fsum(w * loss for w, (loss, _, _) in zip(weight, expected)) / norm
    # a row's mean of ≤ 5 float64 log ratios (exact deltas plus old: 2 roundings each), one exp,
    # the clamp, the products and the batch sum: ~3·T + 8 roundings on terms of Σ|w·loss|/norm
    magnitude = math.fsum(abs(w * loss) for w, (loss, _, _) in zip(weight, expected)) / norm * 2
    assert objective.item() == approx(total, dtype=torch.float64, terms=3 * 5 + 8, magnitude=magnitude)
    for i, (_, grad, _) in enumerate(expected):
        per_token = grad / norm if loss_agg == "token-mean" else grad / counts[i] / norm
        want = [per_token * m for m in mask[i].tolist()]
        assert logp.grad[i].tolist() == approx(want, dtype=torch.float64, terms=3 * 5 + 8,
                                               magnitude=abs(per_token) * 2 + 1e-300), i
    bits = {b: sum(n for n, (_, _, bound) in zip(counts, expected) if bound == b)
            for b in ("high", "low", "dual")}
    assert bits == {"high": 5, "low": 3, "dual": 3}  # every case of ROWS is met
    assert (stats["clipped_high"].item(), stats["clipped_low"].item(), stats["dual_clipped"].item()) == (
        bits["high"], bits["low"], bits["dual"])


@pytest.mark.numerics
def test_gspo_is_not_the_token_level_loss():
    """Row 0's first token has log ratio 0.6 > log 1.28: the token-level surrogate clips it (no
    gradient there), GSPO's ratio of the whole row does not."""
    logp, old, adv, mask = tensors()
    grads = {}
    for loss in ("gspo", "ppo-clip"):
        x = logp.clone().requires_grad_(True)
        cfg = LossConfig(policy_loss=loss, clip_low=EPS_LOW, clip_high=EPS_HIGH, rollout_is="off")
        micro_batch_loss(x, old, adv, mask, cfg, 1.0)[0].backward()
        grads[loss] = x.grad[0, 0].item()
    assert grads["ppo-clip"] == 0.0 and grads["gspo"] < 0


# -- through the DeepSpeed engine --------------------------------------------------------------------

def paper_objective(logp, old, mask, adv, norm):
    """The GSPO paper's sequence objective, by hand: per row s_i = exp((1/|y_i|) Σ_t (log π_θ −
    log π_old)) with the gradient through every token's log π_θ, ℓ_i = max(−s_i·A, −clip(s_i)·A),
    capped at DUAL·|A| for A < 0; Σ_i |y_i|·ℓ_i / norm (token-mean)."""
    total = logp.new_zeros(())
    for b in range(logp.shape[0]):
        tokens = [t for t in range(logp.shape[1]) if mask[b, t]]
        s = torch.exp(sum(logp[b, t] - old[b, t] for t in tokens) / len(tokens))
        a = float(adv[b, tokens[0]])
        loss = torch.maximum(-s * a, -torch.clamp(s, 1 - EPS_LOW, 1 + EPS_HIGH) * a)
        if a < 0:
            loss = torch.minimum(loss, torch.tensor(-DUAL * a))
        total = total + len(tokens) * loss
    return total / norm


@pytest.mark.numerics
def test_deepspeed_gspo_gradient_equals_the_papers_one_batch_objective(tiny_model):
    """Policy.update (2 micro-batches, T = 0.7, the sampler's log-probs as π_old) with
    --policy-loss gspo produces the gradient of the paper's sequence objective on a plain
    transformers model; the rows' sequence ratios sit inside the bounds, past the high clip and
    past the dual cap."""
    from transformers import AutoModelForCausalLM

    from endstate.grpo.batch import Sample, collate
    from endstate.grpo.distributed import init_distributed
    from endstate.grpo.engine import Policy, ds_config, resolve_ds_config

    g = torch.Generator().manual_seed(5)
    rows = []
    for i in range(4):
        prompt = torch.randint(4, 16, (3 + i,), generator=g).tolist()
        rows.append((prompt, torch.randint(4, 16, (4,), generator=g).tolist()))
    advantages = [1.0, 1.0, -1.0, -0.5]
    offsets = [[0.3, -0.2, 0.0, 0.1], [0.5, 0.5, 0.6, 0.4], [0.2, -0.4, 0.1, 0.0], [1.4, 1.6, 1.5, 1.5]]
    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
    plain = [Sample(p + c, [False] * len(p) + [True] * 4, [float("nan")] * (len(p) + 4), a)
             for (p, c), a in zip(rows, advantages)]
    full = collate(plain, 0)
    with torch.no_grad():  # the sampler's log-probs: the model's own, less each token's offset
        logits = model(input_ids=full.input_ids, attention_mask=full.attention_mask).logits / 0.7
        own = torch.log_softmax(logits, -1).gather(-1, full.targets.unsqueeze(-1)).squeeze(-1)  # (B, T)
    samples = []
    for b, ((p, c), a) in enumerate(zip(rows, advantages)):
        first = len(p) - 1  # target index of the first completion token
        sampled = [float(own[b, first + t]) - offsets[b][t] for t in range(4)]
        samples.append(Sample(p + c, [False] * len(p) + [True] * 4, [float("nan")] * len(p) + sampled, a))
    init_distributed("cpu")
    ds = ds_config(resolve_ds_config("zero0"), micro_batch=2, grad_accum=2, world=1, bf16=False,
                   grad_clip=1.0)
    policy = Policy(tiny_model, ds, 1e-3, 0.0, "cpu", reference=False, seed=0)
    captured = step_gradients(policy)
    norm = float(sum(s.completion_tokens for s in samples))
    cfg = LossConfig(policy_loss="gspo", micro_batch=2, temperature=0.7, clip_low=EPS_LOW,
                     clip_high=EPS_HIGH, dual_clip=DUAL, rollout_is="off")
    stats = policy.update(samples, cfg, norm, 2)
    # row 1 (A > 0, s = e^0.5) clipped high, row 3 (A < 0, s = e^1.5 > 3) dual-capped: 4 tokens each
    assert (stats["clipped_high"], stats["dual_clipped"], stats["clipped_low"]) == (4.0, 4.0, 0.0)

    full = collate(samples, policy.pad_id)
    logits = model(input_ids=full.input_ids, attention_mask=full.attention_mask).logits / 0.7
    logp = torch.log_softmax(logits, -1).gather(-1, full.targets.unsqueeze(-1)).squeeze(-1)  # (B, T)
    paper_objective(logp, full.old_logprobs, full.mask, full.advantages, norm).backward()
    # as the token-level test (tests/test_grpo_correction.py): two float32 forward + backward
    # passes (numerics rule 6), the log-probs' error scaling each entry; s ≤ e^0.25 scales it too
    B, S = full.input_ids.shape
    terms = 2 * decoder_terms(model.config, S) + B * S
    forward = logprob_magnitude(logits)
    for name, p in model.named_parameters():
        assert_close(captured[name], p.grad, dtype=torch.float32, terms=terms, probable=True,
                     magnitude=p.grad.abs().max() * (1 + forward) * math.exp(0.25), msg=name)
    assert any(p.grad.abs().max() > 0 for p in model.parameters())  # rows 0 and 2 train
