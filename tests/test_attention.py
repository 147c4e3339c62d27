"""Tests for scratchformer.attention: scaled dot-product attention and the causal mask."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from conftest import examples
from scratchformer import causal_mask, scaled_dot_product_attention

# Tolerances of the comparisons with PyTorch: a few units in the last place of each format,
# accumulated over sums of at most a few dozen terms.
TOL = {np.float64: 1e-12, np.float32: 1e-5}


@st.composite
def attention_inputs(draw, dtype=np.float64, max_batch_dims=3):
    """q, k, v with mutually broadcastable leading axes, and the scores' shape."""
    batch = draw(hnp.mutually_broadcastable_shapes(num_shapes=3, max_dims=max_batch_dims,
                                                   max_side=3))
    n_q, n_k, d_k, d_v = (draw(st.integers(1, 7)) for _ in range(4))
    elements = st.floats(-3, 3, width=np.dtype(dtype).itemsize * 8)
    q = draw(hnp.arrays(dtype, batch.input_shapes[0] + (n_q, d_k), elements=elements))
    k = draw(hnp.arrays(dtype, batch.input_shapes[1] + (n_k, d_k), elements=elements))
    v = draw(hnp.arrays(dtype, batch.input_shapes[2] + (n_k, d_v), elements=elements))
    return q, k, v, batch.result_shape + (n_q, n_k)


@st.composite
def inputs_with_mask(draw, dtype=np.float64, fully_masked_rows=False):
    q, k, v, scores_shape = draw(attention_inputs(dtype))
    # The mask may drop any of the leading axes, or have length 1 along them.
    mask_shape = tuple(draw(st.sampled_from([1, side])) for side in scores_shape)
    mask_shape = mask_shape[draw(st.integers(0, len(scores_shape) - 2)):]
    mask = draw(hnp.arrays(np.bool_, mask_shape))
    if not fully_masked_rows:
        mask[..., draw(st.integers(0, mask_shape[-1] - 1))] = True
    return q, k, v, mask


def reference_attention(q, k, v, mask=None):
    """Attention written out with Python loops and math.exp: slow, obvious, independent."""
    q, k, v = np.asarray(q, float), np.asarray(k, float), np.asarray(v, float)
    out = np.zeros(q.shape[:-1] + v.shape[-1:])
    weights = np.zeros(q.shape[:-1] + k.shape[-2:-1])
    for i in range(q.shape[-2]):
        scores = [float(q[i] @ k[j]) / math.sqrt(q.shape[-1]) for j in range(k.shape[-2])]
        allowed = [mask is None or bool(mask[i, j]) for j in range(k.shape[-2])]
        top = max(s for s, a in zip(scores, allowed) if a)
        e = [math.exp(s - top) if a else 0.0 for s, a in zip(scores, allowed)]
        weights[i] = [x / sum(e) for x in e]
        out[i] = weights[i] @ v
    return out, weights


def torch_attention(q, k, v, mask=None):
    """PyTorch's attention on the same inputs, broadcast up front (torch broadcasts less)."""
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    tensors = [torch.from_numpy(np.broadcast_to(a, batch + a.shape[-2:]).copy())
               for a in (q, k, v)]
    scores_shape = batch + (q.shape[-2], k.shape[-2])
    attn_mask = (None if mask is None else
                 torch.from_numpy(np.broadcast_to(mask, scores_shape).copy()))
    with torch.no_grad():
        return torch.nn.functional.scaled_dot_product_attention(*tensors,
                                                                attn_mask=attn_mask).numpy()


# --- values -------------------------------------------------------------------------------------

def test_a_small_case_by_hand():
    q = np.array([[1.0, 0.0]])
    k = np.array([[1.0, 0.0], [0.0, 1.0]])
    v = np.array([[1.0, 2.0], [3.0, 4.0]])
    a = math.exp(1 / math.sqrt(2)) / (math.exp(1 / math.sqrt(2)) + 1.0)
    out, weights = scaled_dot_product_attention(q, k, v)
    np.testing.assert_allclose(weights, [[a, 1 - a]], rtol=1e-15)
    np.testing.assert_allclose(out, [[a * 1 + (1 - a) * 3, a * 2 + (1 - a) * 4]], rtol=1e-15)


@examples(60)
@given(st.data())
def test_matches_a_loop_reference(data):
    q, k, v, _ = data.draw(attention_inputs(max_batch_dims=0))
    mask = data.draw(hnp.arrays(np.bool_, (q.shape[0], k.shape[0])))
    mask[:, 0] = True
    out, weights = scaled_dot_product_attention(q, k, v, mask=mask)
    ref_out, ref_weights = reference_attention(q, k, v, mask)
    np.testing.assert_allclose(weights, ref_weights, rtol=0, atol=1e-14)
    np.testing.assert_allclose(out, ref_out, rtol=0, atol=1e-13)


@given(inputs_with_mask())
def test_rows_sum_to_one_and_masked_keys_get_nothing(args):
    q, k, v, mask = args
    out, weights = scaled_dot_product_attention(q, k, v, mask=mask)
    full_mask = np.broadcast_to(mask, weights.shape)
    assert np.all(weights[~full_mask] == 0.0)
    assert np.all(weights >= 0.0)
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=0, atol=1e-12)
    # Each output is a convex combination of the values: inside their range.
    lo = np.broadcast_to(v.min(axis=-2, keepdims=True), out.shape)
    hi = np.broadcast_to(v.max(axis=-2, keepdims=True), out.shape)
    assert np.all((out >= lo - 1e-12) & (out <= hi + 1e-12))


@given(attention_inputs(max_batch_dims=1), st.floats(-50, 50))
def test_adding_a_constant_to_a_row_of_scores_changes_nothing(args, c):
    q, k, v, scores_shape = args
    row_shift = np.full(scores_shape[:-1] + (1,), c)  # (..., n_q, 1): one constant per row
    row_shift[..., 0, :] = -c  # different rows get different constants
    out, weights = scaled_dot_product_attention(q, k, v)
    out_s, weights_s = scaled_dot_product_attention(q, k, v, mask=row_shift)
    np.testing.assert_allclose(weights_s, weights, rtol=0, atol=1e-12)
    np.testing.assert_allclose(out_s, out, rtol=0, atol=1e-12)


@given(attention_inputs())
def test_leading_axes_broadcast_like_a_loop(args):
    q, k, v, scores_shape = args
    out, weights = scaled_dot_product_attention(q, k, v)
    batch = scores_shape[:-2]
    assert weights.shape == scores_shape and out.shape == batch + q.shape[-2:-1] + v.shape[-1:]
    qb, kb, vb = (np.broadcast_to(a, batch + a.shape[-2:]) for a in (q, k, v))
    for index in np.ndindex(*batch):
        out_i, weights_i = scaled_dot_product_attention(qb[index], kb[index], vb[index])
        np.testing.assert_allclose(out[index], out_i, rtol=0, atol=1e-13)
        np.testing.assert_allclose(weights[index], weights_i, rtol=0, atol=1e-14)


@given(inputs_with_mask(np.float64))
def test_agrees_with_torch_float64(args):
    q, k, v, mask = args
    out, _ = scaled_dot_product_attention(q, k, v, mask=mask)
    np.testing.assert_allclose(out, torch_attention(q, k, v, mask), rtol=0,
                               atol=TOL[np.float64])


@given(inputs_with_mask(np.float32))
def test_agrees_with_torch_float32(args):
    q, k, v, mask = args
    out, weights = scaled_dot_product_attention(q, k, v, mask=mask)
    assert out.dtype == weights.dtype == np.float32
    np.testing.assert_allclose(out, torch_attention(q, k, v, mask), rtol=0,
                               atol=TOL[np.float32])


@given(attention_inputs(max_batch_dims=1))
def test_float_mask_equals_boolean_mask(args):
    q, k, v, scores_shape = args
    mask = np.random.default_rng(0).random(scores_shape) > 0.4
    mask[..., 0] = True
    out_b, weights_b = scaled_dot_product_attention(q, k, v, mask=mask)
    out_f, weights_f = scaled_dot_product_attention(q, k, v, mask=np.where(mask, 0.0, -np.inf))
    np.testing.assert_array_equal(weights_b, weights_f)
    np.testing.assert_array_equal(out_b, out_f)


# --- masks --------------------------------------------------------------------------------------

def test_causal_mask():
    m = causal_mask(4)
    assert m.dtype == np.bool_ and m.shape == (4, 4)
    np.testing.assert_array_equal(m, [[i >= j for j in range(4)] for i in range(4)])


@given(attention_inputs(max_batch_dims=1), st.data())
def test_causal_outputs_ignore_the_future(args, data):
    q, k, v, _ = args
    n = min(q.shape[-2], k.shape[-2])
    q, k, v = q[..., :n, :], k[..., :n, :], v[..., :n, :]
    t = data.draw(st.integers(0, n - 1))
    out, _ = scaled_dot_product_attention(q, k, v, mask=causal_mask(n))
    k2, v2 = k.copy(), v.copy()
    k2[..., t + 1:, :] += 1.5  # change every key and value after position t
    v2[..., t + 1:, :] -= 2.0
    out2, _ = scaled_dot_product_attention(q, k2, v2, mask=causal_mask(n))
    np.testing.assert_array_equal(out2[..., :t + 1, :], out[..., :t + 1, :])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fully_masked_rows_are_zero_without_warning(dtype):
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 4, 3)).astype(dtype) for _ in range(3))
    mask = np.ones((2, 4, 4), dtype=bool)
    mask[0, 1] = False
    mask[1, 3] = False
    for m in (mask, np.where(mask, 0.0, -np.inf).astype(dtype)):
        out, weights = scaled_dot_product_attention(q, k, v, mask=m)  # warnings are errors
        assert np.all(weights[0, 1] == 0) and np.all(out[0, 1] == 0)
        assert np.all(weights[1, 3] == 0) and np.all(out[1, 3] == 0)
        assert np.isfinite(out).all() and np.isfinite(weights).all()
        open_rows = mask.any(axis=-1)
        np.testing.assert_allclose(weights.sum(-1)[open_rows], 1.0, rtol=1e-6)


def test_large_finite_negative_mask_is_not_blocking():
    q, k, v = np.ones((1, 2)), np.ones((3, 2)), np.arange(6.0).reshape(3, 2)
    _, weights = scaled_dot_product_attention(q, k, v, mask=np.full((1, 3), -1e9))
    np.testing.assert_allclose(weights, np.full((1, 3), 1 / 3), rtol=1e-15)


# --- dtypes and inputs --------------------------------------------------------------------------

def test_dtypes():
    q = np.ones((2, 3), dtype=np.float32)
    out, weights = scaled_dot_product_attention(q, q, q)
    assert out.dtype == weights.dtype == np.float32
    out, weights = scaled_dot_product_attention(q, q, q.astype(np.float64))
    assert out.dtype == weights.dtype == np.float64
    qi = np.arange(6).reshape(2, 3)
    out, weights = scaled_dot_product_attention(qi, qi, qi)
    assert out.dtype == weights.dtype == np.float64
    again, _ = scaled_dot_product_attention(qi * 1.0, qi * 1.0, qi * 1.0)
    np.testing.assert_array_equal(out, again)
    # A float64 mask does not promote float32 attention.
    out, _ = scaled_dot_product_attention(q, q, q, mask=np.zeros((2, 2)))
    assert out.dtype == np.float32


def test_inputs_are_not_modified():
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((3, 4)) for _ in range(3))
    mask = np.where(causal_mask(3), 0.0, -np.inf)
    copies = [a.copy() for a in (q, k, v, mask)]
    scaled_dot_product_attention(q, k, v, mask=mask)
    for before, after in zip(copies, (q, k, v, mask)):
        np.testing.assert_array_equal(before, after)


def test_accepts_nested_lists():
    out, weights = scaled_dot_product_attention([[1, 0]], [[1, 0], [0, 1]], [[1.0], [2.0]])
    assert out.shape == (1, 1) and weights.shape == (1, 2)


# --- errors -------------------------------------------------------------------------------------

def good(n_q=3, n_k=4, d_k=5, d_v=2):
    rng = np.random.default_rng(0)
    return rng.random((n_q, d_k)), rng.random((n_k, d_k)), rng.random((n_k, d_v))


def with_nan(a):
    a = a.copy()
    a[0, 0] = np.nan
    return a


@pytest.mark.parametrize("make, error, message", [
    (lambda q, k, v: (q[:, :4], k, v, None), ValueError, r"d_k.*\(3, 4\).*\(4, 5\)"),
    (lambda q, k, v: (q, k, v[:3], None), ValueError, r"n_k.*\(4, 5\).*\(3, 2\)"),
    (lambda q, k, v: (q, k, v, np.ones((3, 5), bool)), ValueError,
     r"mask of shape \(3, 5\) does not broadcast.*\(3, 4\)"),
    (lambda q, k, v: (q, k, v, np.ones((2, 3, 4), bool)), ValueError, r"\(2, 3, 4\)"),
    (lambda q, k, v: (with_nan(q), k, v, None), ValueError, "q must be finite"),
    (lambda q, k, v: (q, k * np.inf, v, None), ValueError, "k must be finite"),
    (lambda q, k, v: (q, k, with_nan(v), None), ValueError, "v must be finite"),
    (lambda q, k, v: (q + 1j, k, v, None), TypeError, "q.*complex"),
    (lambda q, k, v: (q, k.astype(object), v, None), TypeError, "k.*object"),
    (lambda q, k, v: (q[0], k, v, None), ValueError, r"q must have at least 2 axes.*\(5,\)"),
    (lambda q, k, v: (q, k, np.float64(1.0), None), ValueError, "v must have at least 2 axes"),
    (lambda q, k, v: (q[None].repeat(2, 0), k[None].repeat(3, 0), v, None), ValueError,
     "do not broadcast"),
    (lambda q, k, v: (q, k, v, np.ones((3, 4), int)), TypeError, "boolean.*floating.*int64"),
    (lambda q, k, v: (q, k, v, np.full((3, 4), np.nan)), ValueError, "NaN"),
    (lambda q, k, v: (q, k, v, np.full((3, 4), np.inf)), ValueError, r"\+inf"),
])
def test_bad_input_is_named(make, error, message):
    q, k, v, mask = make(*good())
    with pytest.raises(error, match=message):
        scaled_dot_product_attention(q, k, v, mask=mask)


def test_overflowing_scores_raise_instead_of_nan():
    q = np.full((2, 4), 2e19, dtype=np.float32)  # q . k / sqrt(4) = 8e38 > float32 max
    with pytest.raises(ValueError, match="overflowed float32"):
        scaled_dot_product_attention(q, q, q)
    with pytest.raises(ValueError, match="overflowed"):
        scaled_dot_product_attention(q, -q, q)  # -inf in every open entry
    out, _ = scaled_dot_product_attention(q.astype(np.float64), q.astype(np.float64), q)
    assert np.isfinite(out).all()  # fine in float64


@pytest.mark.parametrize("n, error", [(0, ValueError), (-2, ValueError), (2.5, TypeError),
                                      ("3", TypeError), (True, TypeError)])
def test_causal_mask_rejects_bad_sizes(n, error):
    with pytest.raises(error, match="n_q must be a positive integer"):
        causal_mask(n)


@pytest.mark.parametrize("n_q, n_k", [(1, 1), (1, 5), (3, 3), (3, 7), (6, 8)])
def test_causal_mask_after_a_cached_prefix_is_aligned_bottom_right(n_q, n_k):
    mask = causal_mask(n_q, n_k)
    assert mask.shape == (n_q, n_k)
    prefix = n_k - n_q
    for i in range(n_q):  # query i sits at absolute position prefix + i
        assert mask[i].tolist() == [j <= prefix + i for j in range(n_k)]
    # the last n_q rows of the full square mask: what the uncached pass uses for these queries
    np.testing.assert_array_equal(mask, np.tril(np.ones((n_k, n_k), bool))[prefix:])


def test_causal_mask_needs_as_many_keys_as_queries():
    with pytest.raises(ValueError, match="n_k=2 keys cannot follow n_q=3 queries"):
        causal_mask(3, 2)
    with pytest.raises(TypeError, match="n_k must be a positive integer"):
        causal_mask(3, 4.0)


def test_causal_mask_accepts_numpy_integers():
    assert causal_mask(np.int64(3)).shape == (3, 3)


@pytest.mark.parametrize("mask", [None, np.array([[-np.inf, 0.0]], dtype=np.float32)])
def test_overflow_to_nan_raises_in_every_kernel(mask):
    from scratchformer.fast_attention import fast_attention, fast_attention_output
    from scratchformer.tiled import tiled_attention

    # float32 products of 1e40 overflow with opposite signs: inf - inf = NaN in the score.
    q = np.array([[1e20, 1e20]], dtype=np.float32)
    k = np.array([[1e20, -1e20], [1e20, 1e20]], dtype=np.float32)
    v = np.ones((2, 3), dtype=np.float32)
    for attention in (lambda: scaled_dot_product_attention(q, k, v, mask=mask),
                      lambda: tiled_attention(q, k, v, mask=mask),
                      lambda: fast_attention(q, k, v, mask),
                      lambda: fast_attention_output(q, k, v, mask)):
        with pytest.raises(ValueError, match="overflowed float32"):
            attention()
