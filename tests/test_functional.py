"""Tests for scratchformer.functional: the stable softmax."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from scratchformer import softmax

finite = st.floats(min_value=-1e300, max_value=1e300, allow_nan=False, allow_infinity=False)
moderate = st.floats(min_value=-100, max_value=100, allow_nan=False)
shapes = hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=6)


def test_matches_the_definition_on_small_logits():
    x = np.array([0.5, -1.0, 2.0, 0.0])
    e = [math.exp(v) for v in x]
    np.testing.assert_allclose(softmax(x), [v / sum(e) for v in e], rtol=1e-15)


def test_huge_logits_give_exact_weights():
    # exp(1e4) overflows every float format; the shifted computation must not care.
    x = np.array([1e4, 1e4 - math.log(3.0), -1e4])
    gap = x[0] - x[1]  # exact (Sterbenz); log(3) itself is not representable near 1e4
    expected = [1 / (1 + math.exp(-gap)), math.exp(-gap) / (1 + math.exp(-gap)), 0.0]
    np.testing.assert_allclose(softmax(x), expected, rtol=1e-15, atol=0)
    np.testing.assert_allclose(softmax(x), [0.75, 0.25, 0.0], rtol=1e-12, atol=0)
    np.testing.assert_array_equal(softmax(np.full(4, 1e4)), np.full(4, 0.25))
    np.testing.assert_array_equal(softmax(np.full(4, -1e4, dtype=np.float32)),
                                  np.full(4, 0.25, dtype=np.float32))


@given(hnp.arrays(np.float64, shapes, elements=finite), st.integers(-4, 3))
def test_rows_are_distributions_for_any_magnitude(x, axis):
    axis = axis % x.ndim
    w = softmax(x, axis=axis)
    assert w.shape == x.shape and np.isfinite(w).all() and (w >= 0).all()
    np.testing.assert_allclose(w.sum(axis=axis), 1.0, rtol=0, atol=1e-12)
    # The largest logit of each slice gets the largest weight.
    at_argmax = np.take_along_axis(w, np.expand_dims(np.argmax(x, axis=axis), axis), axis=axis)
    np.testing.assert_array_equal(at_argmax, w.max(axis=axis, keepdims=True))


@given(hnp.arrays(np.float64, shapes, elements=moderate), st.floats(-1e3, 1e3))
def test_invariant_to_adding_a_constant(x, c):
    np.testing.assert_allclose(softmax(x + c), softmax(x), rtol=0, atol=1e-12)


@given(hnp.arrays(np.float64, shapes, elements=moderate))
def test_agrees_with_torch(x):
    expected = torch.softmax(torch.from_numpy(x), dim=-1).numpy()
    np.testing.assert_allclose(softmax(x), expected, rtol=0, atol=1e-14)


def test_minus_infinity_gets_zero_weight():
    w = softmax(np.array([[0.0, -np.inf, 1.0], [-np.inf, 3.0, -np.inf]]))
    assert w[0, 1] == 0.0 and np.array_equal(w[1], [0.0, 1.0, 0.0])
    np.testing.assert_allclose(w[0], [1 / (1 + math.e), 0.0, math.e / (1 + math.e)], rtol=1e-15)


def test_axis_argument():
    x = np.random.default_rng(0).standard_normal((3, 4))
    np.testing.assert_array_equal(softmax(x, axis=0), softmax(x.T, axis=-1).T)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_floating_dtype_is_kept(dtype):
    assert softmax(np.arange(4, dtype=dtype)).dtype == dtype


def test_integers_are_promoted_to_float64():
    w = softmax(np.array([1, 2, 3]))
    assert w.dtype == np.float64
    np.testing.assert_allclose(w, softmax(np.array([1.0, 2.0, 3.0])), rtol=0, atol=0)


def test_input_is_not_modified():
    x = np.array([3.0, 1.0, 2.0])
    softmax(x)
    np.testing.assert_array_equal(x, [3.0, 1.0, 2.0])


@pytest.mark.parametrize("bad, error, message", [
    (np.array([1.0, np.nan]), ValueError, "NaN"),
    (np.array([1.0, np.inf]), ValueError, r"\+inf"),
    (np.array([[0.0, 1.0], [-np.inf, -np.inf]]), ValueError, "all -inf"),
    (np.zeros((2, 0)), ValueError, "empty axis"),
    (np.float64(1.0), ValueError, "0-d"),
    (np.array([1 + 2j]), TypeError, "complex"),
    (np.array([1.0, None], dtype=object), TypeError, "object"),
    (np.array(["a", "b"]), TypeError, "dtype"),
])
def test_bad_input_is_named(bad, error, message):
    with pytest.raises(error, match=message):
        softmax(bad)


def test_bad_axis():
    with pytest.raises(np.exceptions.AxisError):
        softmax(np.zeros((2, 3)), axis=2)


@given(hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=3, max_side=5),
                  elements=st.floats(-5, 5)))
def test_softmax_jacobian_matches_finite_differences(x):
    from scratchformer import softmax_jacobian

    a = softmax(x)
    jacobian = softmax_jacobian(a)
    assert jacobian.shape == x.shape + x.shape[-1:]
    eps = 1e-6
    for j in range(x.shape[-1]):
        step = np.zeros(x.shape[-1])
        step[j] = eps
        column = (softmax(x + step) - softmax(x - step)) / (2 * eps)  # d a / d x_j
        np.testing.assert_allclose(jacobian[..., :, j], column, rtol=0, atol=1e-8)
    # Symmetric, rows sum to 0 (the weights always sum to 1), and the norm bound of the book.
    np.testing.assert_allclose(jacobian, np.swapaxes(jacobian, -1, -2), atol=1e-16)
    np.testing.assert_allclose(jacobian.sum(-1), 0.0, atol=1e-15)
    norms = np.linalg.norm(jacobian, 2, axis=(-2, -1))
    assert np.all(norms <= 1 - (a**2).sum(-1) + 1e-12)
    assert np.all(norms <= 1 - a.max(-1) ** 2 + 1e-12)


def test_softmax_jacobian_of_a_one_hot_is_zero_and_rejects_bad_input():
    from scratchformer import softmax_jacobian

    np.testing.assert_array_equal(softmax_jacobian(np.array([0.0, 1.0, 0.0])), np.zeros((3, 3)))
    with pytest.raises(ValueError, match="non-negative"):
        softmax_jacobian(np.array([0.5, -0.5, 1.0]))
    with pytest.raises(ValueError, match="at least one axis"):
        softmax_jacobian(np.float64(1.0))
