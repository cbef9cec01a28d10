"""Off-policy safety of the GRPO update: the log-ratio clamp, the dual clip, truncated
importance weights (token and sequence), the mismatch metrics, and log-probs at the sampling
temperature. Every loss and gradient is held against a reference written out here, token by token
with Python loops, not through the library's functions."""
# ruff: noqa: F811 - the grpo_fixtures fixtures are imported, then requested by name

import math

import pytest
import torch
from grpo_fixtures import tiny_model  # noqa: F401 - pytest fixtures
from numerics import approx, assert_close, decoder_terms, logprob_magnitude, tolerance

from endstate.grpo.algorithm import clipped_surrogate, normalizer
from endstate.grpo.correction import importance_weights, mismatch, safe_log_ratio
from endstate.grpo.logprobs import shared_prefix as SHARED_PREFIX
from endstate.grpo.objective import LossConfig, micro_batch_loss

# -- the clamp and the dual clip -------------------------------------------------------------------


@pytest.mark.numerics
@pytest.mark.parametrize("log_rho", [100.0, -100.0, float("inf"), float("-inf"), float("nan")])
@pytest.mark.parametrize("advantage", [1.0, -1.0])
def test_any_log_ratio_gives_a_finite_loss_and_gradient(log_rho, advantage):
    logp = torch.tensor([[log_rho]], requires_grad=True)
    s = clipped_surrogate(logp, torch.zeros(1, 1), torch.tensor([[advantage]]), 0.2, 0.2, dual_clip=3.0)
    s.loss.sum().backward()
    assert torch.isfinite(s.loss).all() and torch.isfinite(logp.grad).all(), (s.loss, logp.grad)
    w = importance_weights(torch.tensor([[log_rho]]), torch.zeros(1, 1), torch.ones(1, 1), "token", 2.0)
    assert torch.isfinite(w.weights).all() and w.weights.item() <= 2.0


@pytest.mark.numerics
def test_log_ratio_100_without_the_dual_clip_is_bounded_by_the_clamp():
    # A = −1, log ρ = 100: unclamped exp(100) ≈ 2.7e43 (inf in fp16/bf16); clamped at e^20, one
    # float32 exp of an exact argument (2 roundings) against math.exp
    s = clipped_surrogate(torch.tensor([[100.0]]), torch.zeros(1, 1), -torch.ones(1, 1), 0.2, 0.2)
    assert s.loss.item() == approx(math.exp(20), dtype=torch.float32, terms=2, reference=float)
    assert safe_log_ratio(torch.tensor([float("nan"), 50.0, -50.0]), 20).tolist() == [0.0, 20.0, -20.0]


@pytest.mark.numerics
def test_dual_clip_caps_a_negative_advantage_and_counts_it():
    """A = −1, log ρ = 3: without the dual clip, loss and gradient e^3 = 20.09, uncounted."""
    logp = torch.tensor([[3.0, 3.0, 0.1]], requires_grad=True)
    adv = torch.tensor([[-1.0, 1.0, -1.0]])
    plain = clipped_surrogate(logp, torch.zeros(1, 3), adv, 0.2, 0.2)
    assert plain.loss[0, 0].item() == approx(math.exp(3), dtype=torch.float32, terms=2, reference=float)
    s = clipped_surrogate(logp, torch.zeros(1, 3), adv, 0.2, 0.2, dual_clip=3.0)
    s.loss.sum().backward()
    # token 0: capped at 3·|A| = 3, no gradient; token 1: A > 0, clipped at 1.2 (high);
    # token 2: ρ = e^0.1 ≈ 1.105 < 3, A < 0: the plain −ρA with gradient ρ. 3·|A| and the zeros
    # are exact; 1.2 is 1 + 0.2 in float64 then float32, e^0.1 an exp of 0.1 rounded to float32
    expected = approx([3.0, -1.2, math.exp(0.1)], dtype=torch.float32, terms=3, reference=float)
    assert s.loss.tolist()[0] == expected
    assert logp.grad.tolist()[0] == approx([0.0, 0.0, math.exp(0.1)], dtype=torch.float32, terms=3,
                                           reference=float)
    assert s.dual_clipped.tolist() == [[1.0, 0.0, 0.0]]
    assert s.clipped_high.tolist() == [[0.0, 1.0, 0.0]] and s.clipped_low.tolist() == [[0.0, 0.0, 0.0]]


# -- importance weights and the one-batch reference ------------------------------------------------

def batch(seed=0, B=3, T=5):
    g = torch.Generator().manual_seed(seed)
    trainer = -torch.rand(B, T, generator=g) * 3  # (B, T) log-probs
    rollout = trainer + torch.randn(B, T, generator=g) * 0.8  # a visible mismatch
    rollout[0] -= 1.0  # the sampler found row 0 less likely: its sequence weight exceeds the cap
    rollout[0, 1] = float("nan")  # no sampler log-prob recorded there
    mask = torch.ones(B, T)
    mask[1, 3:] = 0  # padding / observation tokens
    mask[2, 0] = 0
    adv = torch.tensor([1.0, -0.5, -2.0])[:, None].expand(B, T).clone()
    return trainer, rollout, mask, adv


def reference_loss(logp, rollout, mask, adv, level, cap, norm, eps=0.2, dual=3.0):
    """Σ over completion tokens of w · ℓ, by hand: π_old is the trainer's detached log-prob, so
    ρ = exp(logp − logp.detach()) = 1 with gradient ∇logp; w = min(π_old/π_rollout, cap) per
    token, or per sequence from Σ_t log ratio; a token without a rollout log-prob has w = 1."""
    B, T = logp.shape
    total = logp.new_zeros(())
    for b in range(B):
        seq_log = sum(float(logp[b, t].detach() - rollout[b, t]) for t in range(T)
                      if mask[b, t] and not math.isnan(rollout[b, t]))
        for t in range(T):
            if not mask[b, t]:
                continue
            known = not math.isnan(rollout[b, t])
            log_w = float(logp[b, t].detach() - rollout[b, t]) if level == "token" else seq_log
            w = min(math.exp(log_w), cap) if known else 1.0
            a = float(adv[b, t])
            rho = torch.exp(logp[b, t] - logp[b, t].detach())
            surrogate = torch.maximum(-rho * a, -torch.clamp(rho, 1 - eps, 1 + eps) * a)
            if a < 0:
                surrogate = torch.minimum(surrogate, torch.tensor(-dual * a))
            total = total + w * surrogate
    return total / norm


def bound(logp, rollout, mask, adv, cap, norm, level):
    """(terms, magnitude of the objective, magnitude of each gradient entry) for Σ over the B·T
    tokens of w·ℓ / norm computed twice in float32. Here π_old = π_θ: ρ = 1, |ℓ| = |A|, |w·ℓ| ≤
    cap·|A|. A weight is exp of one log-ratio (token) or of a row's sum of T (sequence), whose error
    ≤ γ·L with L the largest |log π| + |log π_rollout| of a token or Σ of them over a row: exp turns
    it into w's relative error, so each entry's magnitude is scaled by 1 + L."""
    known = mask * ~torch.isnan(rollout)
    size = (logp.abs() + rollout.nan_to_num().abs()) * known  # (B, T)
    L = float(size.sum(-1).max() if level == "sequence" else size.max())
    entry = cap * float(adv.abs().max()) / norm * (1 + L)
    total = float((cap * adv.abs() * mask).sum()) / norm * (1 + L)
    B, T = logp.shape
    return B * T + T + 4, total, entry  # the sums, the exp, w·ℓ, / norm


@pytest.mark.numerics
@pytest.mark.parametrize("level", ["token", "sequence"])
def test_truncated_is_loss_and_gradient_match_a_reference_by_hand(level):
    trainer, rollout, mask, adv = batch()
    norm = float(mask.sum())
    cfg = LossConfig(rollout_is=level, rollout_is_cap=2.0, dual_clip=3.0)
    logp = trainer.clone().requires_grad_(True)
    objective, stats = micro_batch_loss(logp, rollout, adv, mask, cfg, norm)
    objective.backward()
    ref_logp = trainer.clone().requires_grad_(True)
    expected = reference_loss(ref_logp, rollout, mask, adv, level, 2.0, norm)
    expected.backward()
    terms, total, entry = bound(trainer, rollout, mask, adv, 2.0, norm, level)
    assert objective.item() == approx(expected.item(), dtype=torch.float32, terms=terms, magnitude=total)
    assert_close(logp.grad, ref_logp.grad, dtype=torch.float32, terms=terms, magnitude=entry)
    # some weights were truncated, or the test would not test the cap
    assert stats["is_truncated"].item() > 0 and stats["is_weight_max"].item() > 2.0


@pytest.mark.numerics
def test_micro_batches_sum_to_the_one_batch_gradient_with_weights():
    trainer, rollout, mask, adv = batch(seed=1)
    norm = normalizer([int(m) for m in mask.sum(-1).tolist()], "token-mean", 5)
    cfg = LossConfig(rollout_is="token")
    whole = trainer.clone().requires_grad_(True)
    micro_batch_loss(whole, rollout, adv, mask, cfg, norm)[0].backward()
    parts = trainer.clone().requires_grad_(True)
    for rows in ([0], [1, 2]):
        micro_batch_loss(parts[rows], rollout[rows], adv[rows], mask[rows], cfg, norm)[0].backward()
    terms, _, entry = bound(trainer, rollout, mask, adv, cfg.rollout_is_cap, norm, "token")
    assert_close(whole.grad, parts.grad, dtype=torch.float32, terms=terms, magnitude=entry)


@pytest.mark.numerics
def test_without_correction_the_sampler_is_pi_old():
    """rollout_is off: ρ = π_θ / π_rollout, clipped (and dual-clipped) as the plain surrogate."""
    trainer, rollout, mask, adv = batch(seed=2)
    cfg = LossConfig(rollout_is="off", dual_clip=3.0)
    objective, _ = micro_batch_loss(trainer, rollout, adv, mask, cfg, 1.0)
    old = torch.where(torch.isnan(rollout), trainer, rollout)
    per_token = clipped_surrogate(trainer, old, adv, 0.2, 0.2, 3.0).loss * mask  # (B, T)
    # the same per-token losses, summed in another order: B·T terms; ρ = exp(log π − log π_old)
    # carries a relative error ≤ γ·max(|log π| + |log π_old|)
    scale = 1 + float((trainer.abs() + old.abs()).max())
    assert objective.item() == approx(per_token.sum().item(), dtype=torch.float32, terms=trainer.numel() + 4,
                                      magnitude=float(per_token.abs().sum()) * scale)


@pytest.mark.numerics
def test_mismatch_and_weight_statistics_by_hand():
    trainer = torch.tensor([[-1.0, -2.0, -0.5, -3.0]])
    rollout = torch.tensor([[-1.5, float("nan"), -0.5, -1.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]])  # the last token is not trained on
    gap, known = mismatch(trainer, rollout, mask)
    assert gap.tolist() == [[0.5, 0.0, 0.0, 0.0]] and known.tolist() == [[1.0, 0.0, 1.0, 0.0]]
    _, stats = micro_batch_loss(trainer, rollout, torch.ones(1, 4), mask,
                                LossConfig(rollout_is="token", rollout_is_cap=1.5), 1.0)
    # weights e^0.5 ≈ 1.6487 → truncated to 1.5, and e^0 = 1: mean (1.5 + 1) / 2, one truncated.
    # |−1 − (−1.5)|, the cap 1.5, e^0 and their sums are exact in float32; e^0.5 is one exp
    assert stats["mismatch"].item() == 0.5 and stats["mismatch_tokens"].item() == 2
    assert stats["mismatch_max"].item() == 0.5
    assert stats["is_weight"].item() == 2.5 and stats["is_truncated"].item() == 1
    assert stats["is_weight_max"].item() == approx(math.exp(0.5), dtype=torch.float32, terms=2, reference=float)


def test_update_metrics_turn_sums_into_means():
    from endstate.grpo.metrics import update_metrics

    stats = {"loss": 0.1, "tokens": 10.0, "entropy": 5.0, "kl": 0.0, "clipped_low": 1.0,
             "clipped_high": 2.0, "dual_clipped": 1.0, "mismatch": 2.0, "mismatch_tokens": 8.0,
             "mismatch_max": 0.9, "is_weight": 8.8, "is_truncated": 2.0, "is_weight_max": 3.5,
             "grad_norm": 1.0}
    m = update_metrics(stats, "token")
    # float64 quotients of the sums, clip_frac the sum of two: 2 roundings (0.1 + 0.2 ≠ 0.3)
    assert (m["clip_frac"], m["clip_frac_low"], m["clip_frac_high"]) == approx((0.3, 0.1, 0.2), dtype=float, terms=2)
    assert (m["mismatch_mean"], m["mismatch_max"]) == approx((0.25, 0.9), dtype=float, terms=2)
    assert (m["is_weight_mean"], m["is_weight_max"], m["is_truncated_frac"]) == approx((1.1, 3.5, 0.25), dtype=float,
                                                                                        terms=2)
    off = update_metrics(stats, "off")
    assert off["is_weight_mean"] is None and off["mismatch_mean"] == approx(0.25, dtype=float, terms=2)


# -- through the DeepSpeed engine ------------------------------------------------------------------

def test_the_shared_prefix_ends_at_a_difference_padding_or_the_first_log_prob():
    rows = torch.tensor([[5] * 18 + [1, 2, 3, 4], [5] * 18 + [1, 2, 9, 9]])  # (2, 22): 20 alike
    ones = torch.ones_like(rows)
    assert SHARED_PREFIX(rows, ones, 21) == 20 and SHARED_PREFIX(rows, ones, 17) == 17
    assert SHARED_PREFIX(rows, ones, 15) == 0  # below MIN_SHARED: one forward
    assert SHARED_PREFIX(rows[:1], ones[:1], 21) == 0  # one row: nothing to share
    padded = ones.clone()
    padded[1, 19:] = 0  # a pad id may equal a real one: the mask decides
    assert SHARED_PREFIX(rows, padded, 21) == 19


@pytest.mark.numerics
@pytest.mark.parametrize("common", [0, 20])
def test_deepspeed_gradient_equals_the_one_batch_reference_at_temperature(tiny_model, common,
                                                                          monkeypatch):
    """Policy.update (2 micro-batches, token IS, T = 0.7) produces the gradient of the hand-written
    one-batch loss on a plain transformers model: temperature, masking, weights and the batch
    normalisation all included. With `common` prompt tokens every row begins with, each
    micro-batch runs them once (logprobs.forward): the same gradient."""
    from transformers import AutoModelForCausalLM

    from endstate.grpo import engine
    from endstate.grpo.batch import Sample, collate
    from endstate.grpo.distributed import init_distributed
    from endstate.grpo.engine import Policy, ds_config, resolve_ds_config

    shared: list[int] = []
    monkeypatch.setattr(engine, "shared_prefix", lambda *a: shared.append(
        prefix := SHARED_PREFIX(*a)) or prefix)
    init_distributed("cpu")
    ds = ds_config(resolve_ds_config("zero0"), micro_batch=2, grad_accum=2, world=1, bf16=False, grad_clip=1.0)
    policy = Policy(tiny_model, ds, 1e-3, 0.0, "cpu", reference=False, seed=0)
    g = torch.Generator().manual_seed(3)
    start = torch.randint(4, 16, (common,), generator=g).tolist()
    samples = []
    for i, adv in enumerate([1.0, -1.0, 0.5, -0.5]):
        prompt = start + torch.randint(4, 16, (3 + i,), generator=g).tolist()
        done = torch.randint(4, 16, (4,), generator=g).tolist()
        rollout = (-torch.rand(4, generator=g) * 4).tolist()  # far from the model: weights truncate
        samples.append(Sample(prompt + done, [False] * len(prompt) + [True] * 4,
                              [float("nan")] * len(prompt) + rollout, adv))
    norm = float(sum(s.completion_tokens for s in samples))
    captured = {}
    step = policy.engine.step

    def capture():
        captured.update({n: p.grad.clone() for n, p in policy.module.named_parameters()})
        step()

    policy.engine.step = capture
    cfg = LossConfig(micro_batch=2, temperature=0.7, rollout_is="token", rollout_is_cap=2.0, dual_clip=3.0)
    stats = policy.update(samples, cfg, norm, 2)
    assert stats["is_truncated"] > 0

    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
    full = collate(samples, policy.pad_id)
    logits = model(input_ids=full.input_ids, attention_mask=full.attention_mask).logits / 0.7
    logp = torch.log_softmax(logits, -1).gather(-1, full.targets.unsqueeze(-1)).squeeze(-1)  # (B, T)
    reference_loss(logp, full.old_logprobs, full.mask, full.advantages, "token", 2.0, norm).backward()
    # two float32 forward + backward passes (numerics rule 6): the backward runs the forward's
    # chain again and sums over the B·S positions; the log-probs' error scales each gradient
    # entry, as in test_logprobs_chunked: M = max|g|·(1 + M_logp)
    B, S = full.input_ids.shape
    terms = 2 * decoder_terms(model.config, S) + B * S
    forward = logprob_magnitude(logits)
    for name, p in model.named_parameters():
        assert_close(captured[name], p.grad, dtype=torch.float32, terms=terms, probable=True,
                     magnitude=p.grad.abs().max() * (1 + forward), msg=name)
    # one forward per micro-batch without a common start; with one, it ran once
    assert len(shared) == 2 and (max(shared) == 0 if common == 0 else min(shared) >= common), shared


@pytest.mark.numerics
def test_sampler_and_trainer_agree_at_temperature_0_7_on_the_embedded_model():
    """SmolLM2-135M samples at T = 0.7 (log-probs at the sampling temperature) and the trainer
    recomputes them at logits / 0.7 through the engine's own path: ρ ≈ 1. Before the fix the
    trainer used raw logits: the ratio is then visibly off, which this test also shows."""
    from endstate.core.agent.local_model import LocalGenerator, load, resolve_model
    from endstate.core.agent.sampling import Sampling
    from endstate.core.agent.trace import ChatTemplate
    from endstate.grpo.batch import collate, sample_of
    from endstate.grpo.distributed import init_distributed
    from endstate.grpo.engine import Policy, ds_config, resolve_ds_config

    model_dir = resolve_model("embedded")
    model, tokenizer = load(model_dir)
    generator = LocalGenerator(model, tokenizer, Sampling(max_new_tokens=12, temperature=0.7), seed=5,
                               logprobs_at_temperature=True)
    template = ChatTemplate(tokenizer)
    prompts = [template.first_prompt([{"role": "user", "content": text}])
               for text in ("Where is my order #W100?", "Cancel my hotel booking, please.")]
    generations = generator.generate(prompts)
    samples = [sample_of([{"prompt_ids": p, "completion_ids": g.ids, "logprobs": g.logprobs}], 1.0)
               for p, g in zip(prompts, generations)]
    init_distributed("cpu")
    ds = ds_config(resolve_ds_config("zero0"), micro_batch=2, grad_accum=1, world=1, bf16=False, grad_clip=1.0)
    policy = Policy(model_dir, ds, 1e-6, 0.0, "cpu", reference=False, seed=0)
    b = collate(samples, policy.pad_id)
    columns = b.columns
    mask = b.mask[:, columns]
    with torch.no_grad():
        at_t, _ = policy._logprobs(policy.engine, b, columns, 0.7)
        raw, _ = policy._logprobs(policy.engine, b, columns, 1.0)
    sampler = b.old_logprobs[:, columns]
    gap, known = mismatch(at_t, sampler, mask)
    with torch.no_grad():  # the logits' scale, for the bound between two float32 forwards (numerics rule 6)
        logits = model(input_ids=b.input_ids, attention_mask=b.attention_mask).logits / 0.7
    _, bound = tolerance(torch.float32, terms=decoder_terms(model.config, b.input_ids.shape[1]),
                         magnitude=logprob_magnitude(logits), probable=True)
    assert known.sum() >= 12 and gap.max().item() <= bound, (gap.max(), bound)
    assert mismatch(raw, sampler, mask)[0].max().item() > max(0.05, bound)  # the old bug is visible
