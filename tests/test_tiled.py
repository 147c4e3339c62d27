"""Tests for scratchformer.tiled: tiled attention equals attention, in any tiling."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from conftest import examples
from scratchformer import causal_mask, scaled_dot_product_attention
from scratchformer.tiled import tiled_attention


@st.composite
def problems(draw):
    batch = draw(hnp.mutually_broadcastable_shapes(num_shapes=3, max_dims=2, max_side=3))
    n_q, n_k, d_k, d_v = (draw(st.integers(1, 12)) for _ in range(4))
    dtype = draw(st.sampled_from([np.float64, np.float32]))
    elements = st.floats(-4, 4, width=32)
    q = draw(hnp.arrays(dtype, batch.input_shapes[0] + (n_q, d_k), elements=elements))
    k = draw(hnp.arrays(dtype, batch.input_shapes[1] + (n_k, d_k), elements=elements))
    v = draw(hnp.arrays(dtype, batch.input_shapes[2] + (n_k, d_v), elements=elements))
    kind = draw(st.sampled_from(["none", "bool", "float"]))
    mask = None
    if kind != "none":  # fully masked rows allowed
        mask = draw(hnp.arrays(np.bool_, batch.result_shape[-1:] + (n_q, n_k)))
        if kind == "float":
            mask = np.where(mask, draw(st.floats(-2, 2)), -np.inf)
    return q, k, v, mask, draw(st.integers(1, 13)), draw(st.integers(1, 13))


@examples(150)
@given(problems())
def test_equals_untiled_attention(problem):
    q, k, v, mask, block_q, block_k = problem
    expected, _ = scaled_dot_product_attention(q, k, v, mask=mask)
    out = tiled_attention(q, k, v, mask=mask, block_q=block_q, block_k=block_k)
    assert out.shape == expected.shape and out.dtype == expected.dtype
    atol = 1e-12 if expected.dtype == np.float64 else 1e-5
    np.testing.assert_allclose(out, expected, rtol=0, atol=atol)


def test_fully_masked_rows_are_zero():
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((6, 4)) for _ in range(3))
    mask = causal_mask(6)
    mask[2] = False
    out = tiled_attention(q, k, v, mask=mask, block_q=4, block_k=2)
    assert np.all(out[2] == 0) and np.isfinite(out).all()


def test_same_errors_as_untiled():
    q = np.zeros((3, 4))
    with pytest.raises(ValueError, match="d_k"):
        tiled_attention(q, np.zeros((5, 3)), np.zeros((5, 2)))
    with pytest.raises(ValueError, match="does not broadcast"):
        tiled_attention(q, q, q, mask=np.ones((2, 3), bool))
    with pytest.raises(ValueError, match="overflowed"):
        big = np.full((2, 4), 2e19, dtype=np.float32)
        tiled_attention(big, big, big)
    with pytest.raises(ValueError, match="block_q must be a positive integer, got 0"):
        tiled_attention(q, q, q, block_q=0)
