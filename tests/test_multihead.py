"""Tests for scratchformer.multihead: split/merge of heads and the MultiHeadAttention layer."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from conftest import examples
from scratchformer import (
    MultiHeadAttention,
    causal_mask,
    merge_heads,
    scaled_dot_product_attention,
    split_heads,
)
from scratchformer.pytorch import from_torch, to_torch

TOL = {np.float64: 1e-12, np.float32: 1e-5}


@st.composite
def head_layouts(draw):
    h, d_k = draw(st.integers(1, 6)), draw(st.integers(1, 5))
    batch = draw(hnp.array_shapes(min_dims=0, max_dims=2, max_side=3))
    n = draw(st.integers(1, 6))
    x = draw(hnp.arrays(np.float64, batch + (n, h * d_k), elements=st.floats(-5, 5)))
    return x, h


@given(head_layouts())
def test_split_then_merge_is_the_identity(args):
    x, h = args
    heads = split_heads(x, h)
    *batch, n, d_model = x.shape
    assert heads.shape == (*batch, h, n, d_model // h)
    np.testing.assert_array_equal(merge_heads(heads), x)


@given(head_layouts())
def test_head_i_sees_its_own_block_of_features(args):
    x, h = args
    d_k = x.shape[-1] // h
    heads = split_heads(x, h)
    for i in range(h):
        np.testing.assert_array_equal(heads[..., i, :, :], x[..., i * d_k:(i + 1) * d_k])


def test_split_heads_is_a_view():
    x = np.arange(24.0).reshape(2, 12)
    assert np.shares_memory(split_heads(x, 3), x)


def random_layer(d_model=12, n_heads=3, dtype=np.float64, bias=True, seed=0):
    layer = MultiHeadAttention(d_model, n_heads, bias=bias, dtype=dtype,
                               rng=np.random.default_rng(seed))
    if bias:  # non-zero biases, so that the tests see them
        for name in ("b_q", "b_k", "b_v", "b_o"):
            values = np.random.default_rng(seed + 1).normal(0, 0.5, d_model)
            layer.params[name] = values.astype(dtype)
    return layer


def loop_over_heads(layer, x, mask=None, context=None):
    """Multi-head attention written head by head from the definition."""
    context = x if context is None else context
    p, d_k = layer.params, layer.d_k

    def bias(name, cols=slice(None)):
        return p[name][cols] if layer.bias else 0.0

    heads, weights = [], []
    for i in range(layer.n_heads):
        cols = slice(i * d_k, (i + 1) * d_k)  # head i's block of columns
        q = x @ p["w_q"][:, cols] + bias("b_q", cols)
        k = context @ p["w_k"][:, cols] + bias("b_k", cols)
        v = context @ p["w_v"][:, cols] + bias("b_v", cols)
        head_mask = None if mask is None else np.broadcast_to(
            mask, x.shape[:-2] + (layer.n_heads, x.shape[-2], context.shape[-2]))[..., i, :, :]
        out, w = scaled_dot_product_attention(q, k, v, mask=head_mask)
        heads.append(out)
        weights.append(w)
    out = np.concatenate(heads, axis=-1) @ p["w_o"] + bias("b_o")
    return out, np.stack(weights, axis=-3)


@pytest.mark.parametrize("bias", [True, False])
def test_forward_equals_a_loop_over_heads(bias):
    layer = random_layer(bias=bias)
    x = np.random.default_rng(3).standard_normal((2, 5, 12))
    mask = causal_mask(5)
    out = layer.forward(x, mask=mask)
    weights = layer.attention_weights
    ref_out, ref_weights = loop_over_heads(layer, x, mask)
    assert out.shape == (2, 5, 12) and weights.shape == (2, 3, 5, 5)
    np.testing.assert_allclose(out, ref_out, rtol=0, atol=1e-13)
    np.testing.assert_allclose(weights, ref_weights, rtol=0, atol=1e-14)


def test_cross_attention_uses_context_for_keys_and_values():
    layer = random_layer()
    rng = np.random.default_rng(4)
    x, context = rng.standard_normal((2, 3, 12)), rng.standard_normal((2, 7, 12))
    out = layer.forward(x, context=context)
    weights = layer.attention_weights
    assert out.shape == (2, 3, 12) and weights.shape == (2, 3, 3, 7)
    ref_out, ref_weights = loop_over_heads(layer, x, context=context)
    np.testing.assert_allclose(out, ref_out, rtol=0, atol=1e-13)
    np.testing.assert_allclose(weights, ref_weights, rtol=0, atol=1e-14)


@examples(30)
@given(st.integers(1, 4), st.integers(1, 4), st.integers(1, 6), st.data())
def test_padding_mask_and_permutation_equivariance(h, d_k, n, data):
    layer = random_layer(h * d_k, h, seed=data.draw(st.integers(0, 100)))
    x = data.draw(hnp.arrays(np.float64, (2, n, h * d_k), elements=st.floats(-3, 3)))
    perm = np.array(data.draw(st.permutations(range(n))))
    out = layer.forward(x)
    weights = layer.attention_weights
    out_p = layer.forward(x[:, perm])
    weights_p = layer.attention_weights
    np.testing.assert_allclose(out_p, out[:, perm], rtol=0, atol=1e-12)
    np.testing.assert_allclose(weights_p, weights[:, :, perm][..., perm], rtol=0, atol=1e-13)
    # A padding mask (batch, 1, 1, n_k) removes the last key of the first sequence only.
    pad = np.ones((2, 1, 1, n), dtype=bool)
    pad[0, ..., -1] = n == 1  # keep one key when there is only one
    layer.forward(x, mask=pad)
    weights_pad = layer.attention_weights
    if n > 1:
        assert np.all(weights_pad[0, ..., -1] == 0)
        np.testing.assert_allclose(weights_pad[0].sum(-1), 1.0, atol=1e-12)
    np.testing.assert_array_equal(weights_pad[1], weights[1])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("bias", [True, False])
def test_agrees_with_torch(dtype, bias):
    layer = random_layer(16, 4, dtype=dtype, bias=bias)
    module = to_torch(layer)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 6, 16)).astype(dtype)
    context = rng.standard_normal((3, 8, 16)).astype(dtype)
    mask = rng.random((6, 8)) > 0.3
    mask[:, 0] = True
    out = layer.forward(x, mask=mask, context=context)
    weights = layer.attention_weights
    assert out.dtype == weights.dtype == dtype
    with torch.no_grad():
        t_out, t_weights = module(torch.from_numpy(x), torch.from_numpy(context),
                                  torch.from_numpy(context), attn_mask=torch.from_numpy(~mask),
                                  average_attn_weights=False)
    np.testing.assert_allclose(out, t_out.numpy(), rtol=0, atol=TOL[dtype])
    np.testing.assert_allclose(weights, t_weights.numpy(), rtol=0, atol=TOL[dtype])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("bias", [True, False])
def test_torch_round_trip_is_exact(dtype, bias):
    torch.manual_seed(0)
    module = torch.nn.MultiheadAttention(8, 2, bias=bias, batch_first=True, dtype=dtype)
    if bias:
        with torch.no_grad():
            module.in_proj_bias.normal_()
            module.out_proj.bias.normal_()
    layer = from_torch(module, MultiHeadAttention)
    assert layer.params["w_q"].dtype == torch.empty(0, dtype=dtype).numpy().dtype
    back = to_torch(layer)
    for (name, a), (name_b, b) in zip(module.state_dict().items(), back.state_dict().items()):
        assert name == name_b and torch.equal(a, b), name
    again = from_torch(back, MultiHeadAttention)
    assert again.params.keys() == layer.params.keys()
    for name in layer.params:
        np.testing.assert_array_equal(again.params[name], layer.params[name])


def test_parameter_count():
    assert MultiHeadAttention(512, 8).num_parameters == 4 * 512**2 + 4 * 512
    assert MultiHeadAttention(512, 8, bias=False).num_parameters == 4 * 512**2
    # The same as one head of width d_model: heads split the width, they do not add to it.
    assert MultiHeadAttention(512, 1).num_parameters == MultiHeadAttention(512, 8).num_parameters
    module = torch.nn.MultiheadAttention(512, 8)
    assert sum(p.numel() for p in module.parameters()) == MultiHeadAttention(512, 8).num_parameters


def test_initialisation_is_reproducible_and_seeded():
    a = MultiHeadAttention(8, 2, rng=np.random.default_rng(7))
    b = MultiHeadAttention(8, 2, rng=np.random.default_rng(7))
    c = MultiHeadAttention(8, 2, rng=np.random.default_rng(8))
    assert all(np.array_equal(a.params[k], b.params[k]) for k in a.params)
    assert not np.array_equal(a.params["w_q"], c.params["w_q"])
    assert MultiHeadAttention(8, 2, dtype=np.float32).params["w_o"].dtype == np.float32


@pytest.mark.parametrize("args, kwargs, error, message", [
    ((10, 3), {}, ValueError, "d_model=10 is not divisible by n_heads=3"),
    ((0, 1), {}, ValueError, "positive"),
    ((8.0, 2), {}, TypeError, "d_model must be a positive integer, got 8.0"),
    ((8, True), {}, TypeError, "n_heads must be a positive integer, got the bool True"),
    ((8, 2), {"dtype": np.int32}, TypeError, "floating"),
    ((8, 2), {"rng": 0}, TypeError, "Generator"),
])
def test_bad_construction(args, kwargs, error, message):
    with pytest.raises(error, match=message):
        MultiHeadAttention(*args, **kwargs)


def test_split_heads_rejects_indivisible_width():
    with pytest.raises(ValueError, match="not divisible"):
        split_heads(np.zeros((2, 10)), 3)


@pytest.mark.parametrize("x, kwargs, error, message", [
    (np.zeros((4, 6)), {}, ValueError, r"x must have shape \(\.\.\., n_q, 8\), got shape \(4, 6\)"),
    (np.zeros(8), {}, ValueError, r"x must have shape \(\.\.\., n_q, 8\), got shape \(8,\)"),
    (np.full((4, 8), np.nan), {}, ValueError, "x must be finite"),
    (np.zeros((4, 8)), {"context": np.zeros((3, 5))}, ValueError,
     r"context must have shape \(\.\.\., n_k, 8\)"),
    (np.zeros((2, 4, 8)), {"context": np.zeros((3, 5, 8))}, ValueError, "do not broadcast"),
    (np.zeros((4, 8)), {"mask": np.ones((4, 5), bool)}, ValueError,
     r"mask of shape \(4, 5\) does not broadcast.*\(2, 4, 4\)"),
    (np.zeros((4, 8), complex), {}, TypeError, "complex"),
])
def test_bad_forward_input(x, kwargs, error, message):
    with pytest.raises(error, match=message):
        MultiHeadAttention(8, 2).forward(x, **kwargs)


def test_from_torch_rejects_what_it_cannot_represent():
    with pytest.raises(TypeError, match="converted from torch.nn.MultiheadAttention, got Linear"):
        from_torch(torch.nn.Linear(4, 4), MultiHeadAttention)
    with pytest.raises(ValueError, match="kdim"):
        from_torch(torch.nn.MultiheadAttention(8, 2, kdim=4, vdim=4), MultiHeadAttention)
    with pytest.raises(ValueError, match="add_bias_kv"):
        from_torch(torch.nn.MultiheadAttention(8, 2, add_bias_kv=True), MultiHeadAttention)


@pytest.mark.parametrize("n_heads", [0, -2])
def test_split_heads_rejects_non_positive_heads(n_heads):
    with pytest.raises(ValueError, match="positive integer"):
        split_heads(np.zeros((2, 8)), n_heads)
