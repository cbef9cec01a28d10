"""Tolerances for floating-point assertions, derived from what is compared, never guessed.

The rule every float assertion in tests/ follows:

1. u = eps(D)/2 is the unit roundoff of dtype D (2**-24 for float32, 2**-53 for float64), and
   γ_n = n·u / (1 − n·u). A value computed in D through n roundings has |fl(v) − v| ≤ γ_n·M:
   for a sum or dot product of n terms in any order, |fl(Σx) − Σx| ≤ γ_n·Σ|x_i| (Higham,
   Accuracy and Stability of Numerical Algorithms, 2nd ed., §3.1 and §4.2).
2. `terms` is n: the reduction lengths along the longest chain that produces the value, plus one
   per elementwise operation or conversion into D, plus two per library exp/log (≤ 1 ulp = 2u).
3. `magnitude` is M: Σ|x_i| of the last reduction, or the output's scale times its sensitivity to
   what came before. Left out, M = |expected|, which holds where nothing cancels (one chain of
   products and quotients, terms of one sign): the tolerance is then relative.
4. Two computations of one value (another summation order, kernel, thread count, or a reference
   in another dtype) differ by at most the sum of their bounds: γ_n(D)·M + γ_n(D_ref)·M.
5. `==` only where the result is exact: integers and counts, small-integer sums and dyadic
   quotients (2.5, 0.625), values copied bit for bit (one all-reduce result on every rank, a
   tensor saved and loaded, a rerun of the same ops in the same order).
6. A chain too long for the worst case to mean anything (a transformer's forward: ~10⁵ roundings,
   where n·u is 1%) takes the probabilistic bound instead (`probable=True`): with independent
   mean-zero rounding errors, |error| ≤ γ̃_n·M with γ̃_n = exp(λ√n·u + n·u²/(1 − u)) − 1, failing
   with probability ≤ 2n·exp(−λ²(1 − u)²/2) (Higham and Mary, "A new approach to probabilistic
   rounding error analysis", SIAM J. Sci. Comput. 41(5), 2019); λ is set for 10⁻⁶.
   `decoder_terms` counts n for a decoder-only transformer.
7. Bounds that rounding does not give are stated, with their source beside them: a reference
   library's documented accuracy or an iteration's stopping rule (`stated`), and a Monte-Carlo
   estimate's sampling error, z binomial standard errors (`binomial_se`).
"""

from __future__ import annotations

import math
from typing import Any

import pytest


def unit_roundoff(dtype: Any) -> float:
    """u = eps/2 of a torch or numpy dtype, a dtype name, or Python's float (binary64)."""
    if dtype is float:
        return 2.0 ** -53
    if type(dtype).__module__.startswith("torch"):
        import torch

        return torch.finfo(dtype).eps / 2
    import numpy as np

    return float(np.finfo(dtype).eps) / 2


FAILURE = 1e-6  # the probability the probabilistic bound is allowed to fail


def gamma(terms: int, dtype: Any, probable: bool = False) -> float:
    """γ_n = n·u / (1 − n·u), the relative error bound of n roundings in `dtype`; probable: γ̃_n."""
    if terms < 1:
        raise ValueError(f"terms={terms}: a computed value has at least one rounding; compare "
                         "an exact result with ==")
    u = unit_roundoff(dtype)
    if probable:
        lam = math.sqrt(2 * math.log(2 * terms / FAILURE)) / (1 - u)
        return math.expm1(lam * math.sqrt(terms) * u + terms * u * u / (1 - u))
    nu = terms * u
    if nu >= 1:
        raise ValueError(f"terms={terms}: n·u = {nu:g} ≥ 1 in {dtype}, no bound holds")
    return nu / (1 - nu)


def _scalar(magnitude: Any) -> float:
    if hasattr(magnitude, "detach"):  # a tensor: a number, not part of any graph
        magnitude = magnitude.detach()
    if hasattr(magnitude, "abs"):  # a tensor or array: its largest entry bounds every element
        return float(magnitude.abs().max())
    return abs(float(magnitude))


def tolerance(dtype: Any, *, terms: int = 1, magnitude: Any = None, reference: Any = None,
              probable: bool = False) -> tuple[float, float]:
    """(rtol, atol) for two computations of one value: `dtype` with `terms` roundings against a
    reference computed the same way in `reference` (default: the same dtype). With `magnitude`
    the bound is absolute, (0, (γ + γ_ref)·M); without it relative, (γ + γ_ref, 0)."""
    bound = (gamma(terms, dtype, probable)
             + gamma(terms, dtype if reference is None else reference, probable))
    if magnitude is None:
        return bound, 0.0
    return 0.0, bound * _scalar(magnitude)


def approx(expected: Any, *, dtype: Any, terms: int = 1, magnitude: Any = None,
           reference: Any = None, probable: bool = False):
    """pytest.approx(expected) within `tolerance(...)`, for `actual == approx(...)`; works on
    numbers, sequences and dicts as pytest.approx does (and without its default 1e-6)."""
    rtol, atol = tolerance(dtype, terms=terms, magnitude=magnitude, reference=reference,
                           probable=probable)
    return pytest.approx(expected, rel=rtol, abs=atol)


def assert_close(actual: Any, expected: Any, *, dtype: Any, terms: int = 1, magnitude: Any = None,
                 reference: Any = None, probable: bool = False, msg: str | None = None) -> None:
    """Fail unless |actual − expected| ≤ atol + rtol·|expected| everywhere, with (rtol, atol) from
    `tolerance(...)`. Torch tensors go through torch.testing.assert_close (which also checks
    shape and dtype), numpy arrays through numpy.testing, anything else through `approx`."""
    rtol, atol = tolerance(dtype, terms=terms, magnitude=magnitude, reference=reference,
                           probable=probable)
    if type(actual).__module__.startswith("torch"):
        import torch

        torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol, msg=msg)
    elif type(actual).__module__.startswith("numpy"):
        import numpy as np

        np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol, err_msg=msg or "")
    else:
        assert actual == pytest.approx(expected, rel=rtol, abs=atol), msg


def decoder_terms(config: Any, positions: int) -> int:
    """n for one log-prob of a decoder-only transformer (a transformers config): per layer two
    RMSNorms and the q/k/v, o and gate/up projections (H terms each), the scores (head dim), the
    softmax and the attention sum (`positions` each) and the down projection (intermediate);
    then the final norm and the lm_head (H each) and the log-softmax (vocabulary)."""
    H = config.hidden_size
    layer = 5 * H + H // config.num_attention_heads + 2 * positions + config.intermediate_size
    return config.num_hidden_layers * layer + 2 * H + config.vocab_size


def logprob_magnitude(logits: Any) -> float:
    """M for log-probs log_softmax(z) of logits z (..., V), whose error bound is max|z|'s: log p
    moves by at most twice its logits' error (each Jacobian row has ℓ1 norm ≤ 2), and the
    log-sum-exp rounds at its own scale (≤ max|z| + log V): 3·max|z| + log V."""
    return 3 * _scalar(logits) + math.log(logits.shape[-1])


# scipy's betainc (and stats.beta, stdtr) is Cephes' incbet up to scipy 1.11, the floor this suite
# also runs on; its accuracy table gives the peak relative error by the domain of a and b.
INCBET_PEAK = ((5, 6.9e-15), (85, 2.2e-13), (1000, 5.3e-12), (1e4, 9.3e-11), (1e5, 8.7e-10))


def incbet_error(a: float, b: float) -> float:
    """Cephes incbet's documented peak relative error for parameters up to max(a, b)."""
    return next(peak for bound, peak in INCBET_PEAK if max(a, b) <= bound)


def stated(expected: Any, *, rel: float = 0.0, abs: float = 0.0):
    """pytest.approx(expected) within a bound that is not rounding: a reference's documented
    accuracy, an iteration's stopping rule. The caller's comment names the source."""
    return pytest.approx(expected, rel=rel, abs=abs)


def binomial_se(p: float, n: int) -> float:
    """The standard error sqrt(p(1 − p)/n) of a proportion estimated from n independent draws."""
    return math.sqrt(p * (1 - p) / n)
