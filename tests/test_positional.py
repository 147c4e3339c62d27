"""Tests for scratchformer.positional: the encoding and its rotation property."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from scratchformer.positional import frequencies, positional_encoding, rotation_matrix

even_widths = st.integers(1, 64).map(lambda half: 2 * half)


def test_definition_entry_by_entry():
    pe = positional_encoding(7, 6)
    for pos in range(7):
        for i in range(3):
            omega = 10000 ** (-2 * i / 6)
            assert pe[pos, 2 * i] == pytest.approx(math.sin(pos * omega), abs=1e-15)
            assert pe[pos, 2 * i + 1] == pytest.approx(math.cos(pos * omega), abs=1e-15)


def test_frequencies():
    omega = frequencies(8)
    np.testing.assert_allclose(omega, [1, 10000 ** -0.25, 10000 ** -0.5, 10000 ** -0.75])


@given(st.integers(0, 5000), st.integers(-2000, 2000), even_widths)
def test_shift_is_a_rotation(pos, k, d_model):
    if pos + k < 0:
        k = -pos
    pe = positional_encoding(pos + max(k, 0) + 1, d_model)
    r = rotation_matrix(k, d_model)
    # pe[pos] has entries of size <= 1; angles up to ~7000 rad lose ~1e-12 to rounding.
    np.testing.assert_allclose(r @ pe[pos], pe[pos + k], rtol=0, atol=1e-9)
    np.testing.assert_allclose(pe[pos] @ r.T, pe[pos + k], rtol=0, atol=1e-9)


@given(st.floats(-1e3, 1e3), st.floats(-1e3, 1e3), even_widths)
def test_rotations_are_orthogonal_and_compose(a, b, d_model):
    ra, rb = rotation_matrix(a, d_model), rotation_matrix(b, d_model)
    np.testing.assert_allclose(ra @ ra.T, np.eye(d_model), atol=1e-12)
    np.testing.assert_allclose(ra @ rb, rotation_matrix(a + b, d_model), atol=1e-9)
    np.testing.assert_allclose(rotation_matrix(-a, d_model), ra.T, atol=1e-15)


def test_dot_products_depend_on_the_offset_only():
    pe = positional_encoding(200, 32)
    for k in (0, 1, 5, 37):
        dots = np.einsum("pd,pd->p", pe[:200 - k], pe[k:])
        np.testing.assert_allclose(dots, dots[0], atol=1e-11)


def test_distinct_positions_get_distinct_codes():
    pe = positional_encoding(512, 64)
    distances = np.linalg.norm(pe[:, None] - pe[None], axis=-1)
    assert distances[~np.eye(512, dtype=bool)].min() > 0.1


@pytest.mark.parametrize("call, error, message", [
    (lambda: positional_encoding(4, 7), ValueError, "even"),
    (lambda: rotation_matrix(1, 5), ValueError, "even"),
    (lambda: positional_encoding(0, 8), ValueError, "n_positions must be a positive integer"),
    (lambda: positional_encoding(2.5, 8), TypeError, "integer"),
    (lambda: rotation_matrix(1, 8.0), TypeError, "integer"),
])
def test_bad_input(call, error, message):
    with pytest.raises(error, match=message):
        call()


@pytest.mark.parametrize("k", [float("nan"), float("inf")])
def test_rotation_matrix_rejects_non_finite_shifts(k):
    with pytest.raises(ValueError, match="finite"):
        rotation_matrix(k, 8)
