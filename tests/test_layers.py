"""Tests for scratchformer.layers: layer normalisation and the feed-forward network."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from scratchformer.layers import FeedForward, LayerNorm, RMSNorm, layer_norm


@given(hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=3, min_side=2, max_side=8),
                  elements=st.floats(-1e3, 1e3)))
def test_each_token_gets_mean_zero_and_unit_variance(x):
    d, eps = x.shape[-1], 1e-5
    y = layer_norm(x, np.ones(d), np.zeros(d), eps=eps)
    variance = x.var(axis=-1)
    np.testing.assert_allclose(y.mean(axis=-1), 0.0, atol=1e-9)
    # Exactly sigma^2 / (sigma^2 + eps): 1 up to eps, for tokens that are not (nearly) constant.
    ok = variance > 1e-4
    np.testing.assert_allclose(y.var(axis=-1)[ok], (variance / (variance + eps))[ok], rtol=1e-9)


@given(hnp.arrays(np.float64, (3, 6), elements=st.floats(-10, 10)),
       hnp.arrays(np.float64, 6, elements=st.floats(-3, 3)),
       hnp.arrays(np.float64, 6, elements=st.floats(-3, 3)))
def test_agrees_with_torch(x, gamma, beta):
    expected = torch.nn.functional.layer_norm(torch.from_numpy(x), (6,), torch.from_numpy(gamma),
                                              torch.from_numpy(beta), eps=1e-5).numpy()
    # Rounding in the mean (a few ulps of |x|) is amplified by gamma / sqrt(var + eps), which is
    # large for (nearly) constant tokens: the tolerance follows that conditioning.
    eps64 = np.finfo(np.float64).eps
    atol = 8 * eps64 * np.abs(x).max() * np.abs(gamma).max() / np.sqrt(x.var(-1).min() + 1e-5)
    np.testing.assert_allclose(layer_norm(x, gamma, beta), expected, rtol=0, atol=atol + 1e-13)


def test_invariant_to_shift_and_scale_of_a_token():
    x = np.random.default_rng(0).standard_normal((4, 8))
    g, b = np.linspace(0.5, 2, 8), np.linspace(-1, 1, 8)
    np.testing.assert_allclose(layer_norm(3.0 * x + 7.0, g, b, eps=0.0),
                               layer_norm(x, g, b, eps=0.0), atol=1e-12)


@pytest.mark.parametrize("norm", [LayerNorm, RMSNorm])
def test_float16_tokens_are_normalised_in_float32(norm):
    x = np.array([[300, -300, 0, 0], [1, 2, 3, 4]], np.float16)  # 300**2 overflows float16
    layer = norm(4, dtype=np.float16)
    y = layer.forward(x)
    assert y.dtype == np.float16
    np.testing.assert_allclose(y, norm(4).forward(x.astype(np.float64)), rtol=2e-3, atol=2e-3)
    d_x = layer.backward(np.ones_like(y))
    assert d_x.dtype == np.float16 and np.isfinite(d_x).all()


def test_eps_0_is_refused_only_for_a_token_it_cannot_normalise():
    x = np.random.default_rng(1).standard_normal((3, 4))
    assert np.isfinite(LayerNorm(4, eps=0.0).forward(x)).all()
    with pytest.raises(ValueError, match="cannot be normalised with eps=0"):
        LayerNorm(4, eps=0.0).forward(np.vstack([x, np.full((1, 4), 2.0)]))


def test_constant_token_gives_beta_not_nan():
    y = layer_norm(np.full((1, 4), 5.0), np.ones(4), np.arange(4.0))
    np.testing.assert_array_equal(y, [np.arange(4.0)])


@pytest.mark.parametrize("args, message", [
    ((np.zeros((2, 4)), np.ones(3), np.zeros(4)), r"gamma must have shape \(4,\)"),
    ((np.zeros((2, 4)), np.ones(4), np.zeros((1, 4))), r"beta must have shape \(4,\)"),
    ((np.full((2, 4), np.nan), np.ones(4), np.zeros(4)), "x must be finite"),
])
def test_layer_norm_bad_input(args, message):
    with pytest.raises(ValueError, match=message):
        layer_norm(*args)


def test_layer_norm_class():
    norm = LayerNorm(5, eps=1e-3)
    x = np.arange(10.0).reshape(2, 5)
    np.testing.assert_array_equal(norm.forward(x), layer_norm(x, np.ones(5), np.zeros(5), 1e-3))


def test_feed_forward_is_relu_mlp_per_token():
    ffn = FeedForward(4, 6, rng=np.random.default_rng(1))
    p = ffn.params
    p["b_1"][:] = 0.1
    x = np.random.default_rng(2).standard_normal((2, 3, 4))
    expected = np.maximum(x @ p["w_1"] + p["b_1"], 0) @ p["w_2"] + p["b_2"]
    np.testing.assert_array_equal(ffn.forward(x), expected)
    # Position-wise: each token on its own gives the same result.
    np.testing.assert_allclose(ffn.forward(x[1, 2]), expected[1, 2], atol=1e-15)
    with pytest.raises(ValueError, match="positive"):
        FeedForward(4, 0)


def test_feed_forward_rejects_bad_input():
    ffn = FeedForward(4, 6)
    with pytest.raises(ValueError, match=r"shape \(\.\.\., 4\)"):
        ffn.forward(np.zeros((2, 5)))
    with pytest.raises(ValueError, match="finite"):
        ffn.forward(np.full((2, 4), np.inf))
    with pytest.raises(TypeError, match="Generator"):
        FeedForward(4, 6, rng=1)
