"""Log-probs without full-vocabulary logits: the chunked lm_head against the
direct computation (processed_logits + token_logprobs on the whole logits), values and gradients
in fp32; what the forward keeps for the backward; the chunked head inside a real model."""

# ruff: noqa: F811 - the grpo_fixtures fixture is imported, then requested by name
from __future__ import annotations

import math

import pytest
import torch
from grpo_fixtures import tiny_model  # noqa: F401 - a pytest fixture
from numerics import assert_close

from endstate.core.agent.sampling import processed_logits
from endstate.grpo.algorithm import token_logprobs
from endstate.grpo.logprobs import chunked_token_logprobs, head_logprobs

V, H = 50, 16

pytestmark = pytest.mark.numerics  # every test here compares floating-point kernels


def inputs(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    hidden = torch.randn(2, 13, H, generator=g, dtype=torch.float32, requires_grad=True)  # (B, C, H)
    weight = (torch.randn(V, H, generator=g) * 0.5).requires_grad_()  # (V, H)
    targets = torch.randint(0, V, (2, 13), generator=g)  # (B, C)
    return hidden, weight, targets


def direct(hidden, weight, targets, temperature, top_k=None, top_p=1.0):
    logits = processed_logits((hidden @ weight.T).float(), temperature, top_k, top_p)  # (B, C, V)
    return token_logprobs(logits, targets)


def assert_same_logprobs(got, want, hidden, weight, temperature, advantage=None):
    """Two fp32 computations of (log p, entropy) and, given the advantage weighting the log-probs'
    sum, of its gradients (hidden's, weight's), each within the bound of tests/numerics.py.

    A logit is an H-term dot product over T, its error ≤ γ·s with s = max Σ_i |h_i|·|W_ji| / T.
    log_softmax adds V exps and a log (+5 roundings with the division) and rounds at the
    log-sum-exp's scale (≤ s + log V); log p moves by ≤ 2× its logits' error (each Jacobian row has
    ℓ1 norm ≤ 2): M = 3s + log V. The entropy lse − Σ p·z moves by ≤ Σ_k p_k·|z_k − z̄| ≤ 2s times
    it: M = 2s² + 2s + log V. A gradient adds the sum over the B·C positions (weight's) or the V
    tokens (hidden's) of adv·(onehot − p)/T times h or W, whose Σ|terms| is at most
    G = Σ|adv|·max|h|/T or 2·max|adv|·max|W|/T; p carries log p's error: M = G·(1 + M_logp)."""
    T = temperature or 1.0  # 0 is greedy: raw logits
    H, V = weight.shape[1], weight.shape[0]
    s = float((hidden.detach().abs() @ weight.detach().abs().T).max()) / T
    terms, magnitude = H + V + 5, 3 * s + math.log(V)
    assert_close(got[0], want[0], dtype=torch.float32, terms=terms, magnitude=magnitude, msg="log p")
    assert_close(got[1], want[1], dtype=torch.float32, terms=terms, magnitude=2 * s * s + 2 * s + math.log(V),
                 msg="entropy")
    if advantage is None:
        return
    positions = advantage.numel()
    spread = {"hidden": 2 * float(advantage.abs().max()) * float(weight.detach().abs().max()) / T,
              "weight": float(advantage.abs().sum()) * float(hidden.detach().abs().max()) / T}
    for g, w, (name, G) in zip(got[2:], want[2:], spread.items()):
        if g is None:  # not asked for
            continue
        assert_close(g, w, dtype=torch.float32, terms=terms + max(positions, V),
                     magnitude=G * (1 + magnitude), msg=f"the {name}'s gradient")


@pytest.mark.parametrize("chunk", [1, 5, 13, 26, 1000])
@pytest.mark.parametrize("temperature, top_k, top_p", [(1.0, None, 1.0), (0.7, None, 1.0),
                                                       (1.3, 7, 1.0), (0.7, None, 0.8), (0.0, 5, 0.9)])
def test_chunked_equals_direct_values_and_gradients(chunk, temperature, top_k, top_p):
    hidden, weight, targets = inputs()
    advantage = torch.linspace(-1, 1, 26).view(2, 13)  # a weighted sum: every position's gradient counts
    want_logp, want_entropy = direct(hidden, weight, targets, temperature, top_k, top_p)
    want_grads = torch.autograd.grad((want_logp * advantage).sum(), (hidden, weight))
    logp, entropy = chunked_token_logprobs(hidden, weight, targets, temperature, chunk,
                                           top_k=top_k, top_p=top_p)
    grads = torch.autograd.grad((logp * advantage).sum(), (hidden, weight))
    assert logp.shape == entropy.shape == targets.shape and logp.dtype == torch.float32
    # the weight's gradient sums over chunks in another order
    assert_same_logprobs((logp, entropy, *grads), (want_logp, want_entropy, *want_grads), hidden, weight,
                         temperature, advantage)
    assert not entropy.requires_grad  # a statistic, as token_logprobs makes it


def test_nothing_to_score_gives_empty_results():
    hidden, weight, _ = inputs()
    logp, entropy = chunked_token_logprobs(hidden[:, :0], weight, torch.zeros(2, 0, dtype=torch.long))
    assert logp.shape == entropy.shape == (2, 0)


def saved_bytes(fn) -> int:
    """Bytes of the tensors autograd keeps from the forward for the backward (outside checkpoints),
    each storage once (every chunk keeps a reference to the same weight)."""
    kept = {}

    def pack(t):
        kept[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    return sum(kept.values())


def test_the_forward_keeps_no_logits_for_the_backward():
    """Direct: the (positions × vocabulary) log-softmax stays alive until the backward. Chunked:
    only the inputs of each checkpointed chunk, recomputed one at a time in the backward."""
    g = torch.Generator().manual_seed(1)
    n, vocab = 512, 4096
    hidden = torch.randn(1, n, H, generator=g, requires_grad=True)
    weight = torch.randn(vocab, H, generator=g, requires_grad=True)
    targets = torch.randint(0, vocab, (1, n), generator=g)
    logits_bytes = n * vocab * 4
    assert saved_bytes(lambda: direct(hidden, weight, targets, 0.7)) >= logits_bytes
    assert saved_bytes(lambda: chunked_token_logprobs(hidden, weight, targets, 0.7, 64)) < logits_bytes / 20


def test_the_chunked_head_inside_the_model_gives_the_models_log_probs(tiny_model):
    """head_logprobs on the tiny Llama: its forward returns (B, C, 2) = (log p, entropy) equal to
    the direct computation from the model's own logits, and the lm_head is itself again after."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
    ids = torch.tensor([[4, 5, 6, 7, 8, 9, 10, 11], [12, 13, 14, 15, 4, 5, 6, 7]])
    columns = torch.tensor([3, 4, 5, 6])
    targets = ids[:, columns + 1]  # (B, C)
    out = model(input_ids=ids, logits_to_keep=columns, output_hidden_states=True)
    full, hidden = out.logits, out.hidden_states[-1][:, columns]  # (B, C, V), (B, C, H)
    assert_close(hidden @ model.lm_head.weight.T, full, dtype=torch.float32, terms=hidden.shape[-1],  # the
                 magnitude=hidden.abs() @ model.lm_head.weight.abs().T)  # head's input: after the final norm
    want_logp, want_entropy = token_logprobs(processed_logits(full.float(), 0.7, 4, 1.0), targets)
    want_grad = torch.autograd.grad(want_logp.sum(), model.lm_head.weight)[0]
    with head_logprobs(model.lm_head, targets, 3, 0.7, 4):
        out = model(input_ids=ids, logits_to_keep=columns).logits
    assert out.shape == (2, 4, 2)
    grad = torch.autograd.grad(out[..., 0].sum(), model.lm_head.weight)[0]
    # the hidden states are the model's either way: only the head's arithmetic differs
    assert_same_logprobs((out[..., 0], out[..., 1], None, grad), (want_logp, want_entropy, None, want_grad),
                         hidden, model.lm_head.weight, 0.7, torch.ones_like(want_logp))
    assert "forward" not in vars(model.lm_head)
    assert model(input_ids=ids, logits_to_keep=columns).logits.shape == full.shape


def test_a_model_that_transforms_its_logits_is_refused():
    from transformers import PretrainedConfig

    from endstate.core.errors import EndstateError
    from endstate.grpo.logprobs import check_plain_head

    check_plain_head(PretrainedConfig(final_logit_softcapping=None))
    with pytest.raises(EndstateError, match="final_logit_softcapping=30.0"):
        check_plain_head(PretrainedConfig(final_logit_softcapping=30.0))


def tiny_decoder(family: str):
    """A randomly initialised 2-layer model of `family`; Gemma 3 and Mistral with a sliding window
    of 8 positions, shorter than the shared prefix below."""
    import transformers as tf

    shape = dict(vocab_size=64, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2)
    torch.manual_seed(0)
    if family == "gemma3":
        return tf.Gemma3ForCausalLM(tf.Gemma3TextConfig(**shape, head_dim=16, sliding_window=8,
                                                        final_logit_softcapping=None))
    if family == "mistral":
        return tf.MistralForCausalLM(tf.MistralConfig(**shape, sliding_window=8))
    if family == "qwen3":
        return tf.Qwen3ForCausalLM(tf.Qwen3Config(**shape, head_dim=16))
    return tf.LlamaForCausalLM(tf.LlamaConfig(**shape))


@pytest.mark.parametrize("family", ["llama", "qwen3", "gemma3", "mistral"])
def test_a_common_prefix_run_once_gives_the_full_forwards_logprobs_and_gradient(family):
    """logprobs.forward with the shared prefix: the rows' common positions up to the first
    log-prob (23) once, for one row, then each row's rest on their keys and values; against the
    one full forward, the same log-probs and the same gradient of every weight (one row
    right-padded)."""
    from numerics import decoder_terms, logprob_magnitude

    from endstate.grpo.logprobs import forward, shared_prefix

    model = tiny_decoder(family)
    g = torch.Generator().manual_seed(1)
    ids = torch.cat([torch.randint(0, 64, (1, 24), generator=g).expand(3, 24),
                     torch.randint(0, 64, (3, 10), generator=g)], 1)  # (3, 34)
    attention = torch.ones_like(ids)
    attention[2, -3:] = 0
    inputs, targets, columns = ids[:, :-1], ids[:, 1:], torch.arange(23, 33)
    head = model.get_output_embeddings()

    prefix = shared_prefix(inputs, attention[:, :-1], int(columns[0]))
    assert prefix == 23

    def run(prefix: int):
        model.zero_grad(set_to_none=True)
        out = forward(model, inputs, attention[:, :-1], columns,
                      lambda: head_logprobs(head, targets[:, columns], 1024, 1.0), prefix)
        out.logits[..., 0].sum().backward()
        return out.logits[..., 0].detach(), {n: p.grad.clone() for n, p in model.named_parameters()}

    (want, want_grads), (got, grads) = run(0), run(prefix)
    with torch.no_grad():
        logits = model(input_ids=inputs).logits
    B, S = inputs.shape
    terms, magnitude = decoder_terms(model.config, S), logprob_magnitude(logits)
    assert_close(got, want, dtype=torch.float32, terms=terms, probable=True, magnitude=magnitude)
    for name, grad in want_grads.items():  # as the one-batch reference test (test_grpo_correction)
        assert_close(grads[name], grad, dtype=torch.float32, terms=2 * terms + B * S, probable=True,
                     magnitude=grad.abs().max() * (1 + magnitude), msg=name)
