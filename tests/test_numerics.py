"""The tolerance helper itself (tests/numerics.py): its bounds accept what rounding does and
reject what it cannot do, on torch tensors, numpy arrays and plain floats."""

import numpy as np
import pytest
import torch
from numerics import approx, assert_close, binomial_se, gamma, stated, tolerance, unit_roundoff

pytestmark = pytest.mark.numerics  # every test here compares floating-point kernels


def test_unit_roundoff_of_each_dtype():
    assert unit_roundoff(torch.float32) == unit_roundoff(np.float32) == unit_roundoff("float32") == 2.0 ** -24
    assert unit_roundoff(torch.float64) == unit_roundoff(float) == 2.0 ** -53
    assert unit_roundoff(torch.bfloat16) == 2.0 ** -8
    assert gamma(1, float) == 2.0 ** -53 / (1 - 2.0 ** -53)


def test_a_computation_needs_a_rounding_and_a_bound_that_holds():
    with pytest.raises(ValueError, match="compare an exact result with =="):
        tolerance(torch.float32, terms=0)
    with pytest.raises(ValueError, match="no bound holds"):
        tolerance(torch.bfloat16, terms=256)


def test_the_known_fp32_difference_passes_and_ten_times_its_bound_fails():
    """log-probs of a 66-term fp32 reduction of magnitude ~10, chunked vs direct: 1.9e-6 apart."""
    want = torch.tensor([-3.25, -1.5])
    assert_close(want + torch.tensor([1.9e-6, 0.0]), want, dtype=torch.float32, terms=66, magnitude=10)
    _, atol = tolerance(torch.float32, terms=66, magnitude=10)
    assert 7.8e-5 < atol < 8.0e-5  # 2 · 66 · 2⁻²⁴ · 10
    with pytest.raises(AssertionError):
        assert_close(want + torch.tensor([10 * atol, 0.0]), want, dtype=torch.float32, terms=66, magnitude=10)


def test_two_summation_orders_differ_within_the_bound():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4096, generator=g)  # float32
    forward, backward = x.sum(), x.flip(0).cumsum(0)[-1]
    exact = x.double().sum()
    assert forward != backward  # the bound is about something real
    assert_close(forward, backward, dtype=torch.float32, terms=x.numel(), magnitude=x.abs().sum())
    assert_close(forward.double(), exact, dtype=torch.float32, terms=x.numel(), magnitude=x.abs().sum(),
                 reference=torch.float64)


def test_relative_without_a_magnitude_on_floats_and_arrays():
    assert 0.1 + 0.2 == approx(0.3, dtype=float, terms=2)  # 5.6e-17 apart; the bound is 6.7e-17
    assert 0.1 + 0.2 != approx(0.3 + 1e-15, dtype=float, terms=2)
    assert [1.0 / 3.0, 2.0] == approx([1 / 3, 2.0], dtype=float)
    assert_close(np.float32(1) / np.float32(3), np.float64(1) / 3, dtype=np.float32, reference=np.float64)
    assert_close(np.array([0.1, 0.2], np.float32).astype(np.float64), np.array([0.1, 0.2]), dtype=np.float32,
                 reference=np.float64)
    with pytest.raises(AssertionError):
        assert_close(np.array([1.0 + 1e-6]), np.array([1.0]), dtype=np.float32)
    with pytest.raises(AssertionError, match="exp"):
        assert_close(1.0 + 1e-6, 1.0, dtype=float, msg="exp")


def test_stated_and_statistical_bounds():
    assert 1.0 + 5e-10 == stated(1.0, rel=1e-9) and 1.0 + 2e-9 != stated(1.0, rel=1e-9)
    assert 1.0 + 1e-12 != stated(1.0)  # no pytest default tolerance sneaks in
    assert 0.00487 < binomial_se(0.05, 2000) < 0.00488
