"""The layers' fast kernels compute the same function as the reference attention kernel."""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from conftest import examples
from scratchformer import fast_attention as fa
from scratchformer._threads import blas_thread_count, blas_threads, cores, parallel_map
from scratchformer.attention import attention_backward, attention_kernel, causal_mask
from scratchformer.fast_attention import (
    fast_attention,
    fast_attention_backward,
    fast_attention_output,
)


@st.composite
def problems(draw):
    batch = draw(hnp.mutually_broadcastable_shapes(num_shapes=3, max_dims=2, max_side=3))
    n_q, n_k, d_k, d_v = (draw(st.integers(1, 10)) for _ in range(4))
    dtype = draw(st.sampled_from([np.float64, np.float32]))
    # Small scores take the path that skips the row maximum, large ones the other path.
    size = draw(st.sampled_from([1.0, 10.0, 100.0]))
    elements = st.floats(-1, 1, width=32).map(lambda x: x * size)
    q = draw(hnp.arrays(dtype, batch.input_shapes[0] + (n_q, d_k), elements=elements))
    k = draw(hnp.arrays(dtype, batch.input_shapes[1] + (n_k, d_k), elements=elements))
    v = draw(hnp.arrays(dtype, batch.input_shapes[2] + (n_k, d_v), elements=st.floats(-3, 3)))
    kind = draw(st.sampled_from(["none", "bool", "float"]))
    mask = None
    if kind != "none":  # fully masked rows are allowed; a mask may broadcast
        shape = draw(st.sampled_from([(n_q, n_k), (1, n_k), (n_q, 1), (n_k,),
                                      batch.result_shape + (n_q, n_k)]))
        mask = draw(hnp.arrays(np.bool_, shape))
        if kind == "float":
            mask = np.where(mask, draw(st.floats(-2, 2)), -np.inf).astype(dtype)
    return q, k, v, mask, draw(st.one_of(st.none(), st.integers(1, 7)))


def tolerance(dtype, q, k):
    # float32 rounding grows with the size of the scores that the exponentials amplify.
    scores = float(np.abs(q).max(initial=0) * np.abs(k).max(initial=0) * q.shape[-1])
    return 1e-12 * max(1.0, scores) if dtype == np.float64 else 2e-5 * max(1.0, scores / 10)


@examples(300)
@given(problems(), st.integers(1, 12))
def test_same_output_and_weights_as_the_reference(problem, key_block):
    # key_block < n_k: the keys are taken in blocks (on the path without the row maximum)
    q, k, v, mask, block_q = problem
    expected_out, expected_weights = attention_kernel(q, k, v, mask)
    with mock.patch.object(fa, "_KEY_BLOCK", key_block):
        out, weights = fast_attention(q, k, v, mask, block_q=block_q)
        only_out = fast_attention_output(q, k, v, mask, block_q=block_q)
    atol = tolerance(q.dtype, q, k)
    assert out.shape == expected_out.shape and out.dtype == expected_out.dtype
    assert weights.shape == expected_weights.shape and weights.dtype == q.dtype
    np.testing.assert_allclose(out, expected_out, rtol=0, atol=atol)
    np.testing.assert_allclose(only_out, expected_out, rtol=0, atol=atol)
    np.testing.assert_allclose(weights, expected_weights, rtol=0, atol=atol)
    if mask is not None:  # blocked pairs get exactly nothing
        blocked = np.broadcast_to(~mask if mask.dtype == np.bool_ else np.isneginf(mask),
                                  weights.shape)
        assert np.all(weights[blocked] == 0)


def test_fully_masked_rows_are_zero_on_both_paths():
    rng = np.random.default_rng(0)
    for size in (0.1, 100.0):  # skip-max path, max-subtracting path
        q, k, v = (size * rng.standard_normal((2, 6, 8)) for _ in range(3))
        mask = causal_mask(6)
        mask[3] = False
        out, weights = fast_attention(q, k, v, mask)
        assert np.all(out[:, 3] == 0) and np.all(weights[:, 3] == 0)
        assert np.isfinite(out).all() and np.isfinite(weights).all()


@pytest.mark.parametrize("size", [0.1, 100.0])
def test_values_near_the_dtype_limit_do_not_overflow(size):
    # The sum of 8 values of 1e38 overflows float32; their weighted average does not.
    q = np.full((3, 4), size, dtype=np.float32)
    v = np.full((8, 3), 1e38, dtype=np.float32)
    k = np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32)
    expected, expected_weights = attention_kernel(q, k, v)
    out, weights = fast_attention(q, k, v)  # warnings are errors
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out, expected, rtol=1e-5)
    np.testing.assert_allclose(weights, expected_weights, atol=1e-6)
    np.testing.assert_allclose(fast_attention_output(q, k, v), expected, rtol=1e-5)


def test_overflow_is_reported_like_the_reference():
    big = np.full((2, 4), 2e19, dtype=np.float32)
    with pytest.raises(ValueError, match="overflowed float32"):
        fast_attention(big, big, big)
    with pytest.raises(ValueError, match="overflowed"):
        fast_attention_output(big, -big, big)


@examples(100)
@given(problems())
def test_heads_shared_among_threads_give_the_same_result(problem):
    # Every problem with two or more (sequence, head) pairs takes the threaded path here.
    q, k, v, mask, block_q = problem
    with mock.patch.object(fa, "_PARALLEL_SCORES", 0), blas_threads(2):
        threaded = fast_attention(q, k, v, mask, block_q=block_q)
        threaded_out = fast_attention_output(q, k, v, mask, block_q=block_q)
    with mock.patch.object(fa, "_PARALLEL_SCORES", 1 << 62):
        serial = fast_attention(q, k, v, mask, block_q=block_q)
    np.testing.assert_array_equal(threaded[0], serial[0])  # the same operations, in order
    np.testing.assert_array_equal(threaded[1], serial[1])
    np.testing.assert_array_equal(threaded_out, serial[0])


def test_long_sequences_use_every_core_and_match_the_reference(monkeypatch):
    calls = []

    def spy(function, shares, workers):
        calls.append(workers)
        return parallel_map(function, shares, workers)

    monkeypatch.setattr(fa, "parallel_map", spy)
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((4, 768, 16)).astype(np.float32) for _ in range(3))
    mask = causal_mask(768)
    assert 4 * 768 * 768 >= fa._PARALLEL_SCORES  # large enough for threads
    assert 768 % fa._KEY_BLOCK  # blocks of keys, the last one shorter
    out, weights = fast_attention(q, k, v, mask)
    expected, expected_weights = attention_kernel(q, k, v, mask)
    np.testing.assert_allclose(out, expected, rtol=2e-5, atol=2e-6)
    np.testing.assert_allclose(weights, expected_weights, rtol=2e-5, atol=2e-7)
    np.testing.assert_allclose(fast_attention_output(q, k, v, mask), expected, rtol=2e-5,
                               atol=2e-6)
    assert calls == [min(cores(), blas_thread_count() or cores(), 4)] * 2


@examples(100)
@given(problems())
def test_the_backward_kernel_gives_the_floats_of_the_reference(problem):
    q, k, v, mask, _ = problem
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    q, k, v = (np.broadcast_to(a, batch + a.shape[-2:]) for a in (q, k, v))
    weights = attention_kernel(q, k, v, mask)[1]
    rng = np.random.default_rng(0)
    d_out = rng.standard_normal(weights.shape[:-1] + v.shape[-1:]).astype(q.dtype)
    for got, expected in zip(fast_attention_backward(d_out, q, k, v, weights),
                             attention_backward(d_out, q, k, v, weights), strict=True):
        assert got.dtype == expected.dtype and np.array_equal(got, expected)


def test_the_backward_kernel_at_a_language_model_s_size_shares_heads_among_threads():
    rng = np.random.default_rng(0)
    q, k, v, d_out = (rng.standard_normal((16, 4, 128, 32)).astype(np.float32)
                      for _ in range(4))
    weights = fast_attention(q, k, v, causal_mask(128))[1]
    with blas_threads(1):  # each thread of the kernel multiplies with BLAS on one thread
        expected = attention_backward(d_out, q, k, v, weights)
    for threads in (1, 2):
        with blas_threads(threads):
            got = fast_attention_backward(d_out, q, k, v, weights)
        for a, b in zip(got, expected, strict=True):
            assert np.array_equal(a, b)
    with pytest.raises(TypeError, match="one float dtype"):
        fast_attention_backward(d_out, q, k, v, weights.astype(np.float64))
    with pytest.raises(ValueError, match="same leading axes"):
        fast_attention_backward(d_out[:1], q, k, v, weights)


def test_an_error_in_one_thread_is_raised_to_the_caller():
    big = np.full((4, 2, 4), 2e19, dtype=np.float32)
    big[:2] = 1.0  # two heads are fine, two overflow
    with mock.patch.object(fa, "_PARALLEL_SCORES", 0), blas_threads(2):
        with pytest.raises(ValueError, match="overflowed float32"):
            fast_attention(big, big, big)
