"""Tests for scratchformer.book.rnn: the influence of the first state on later ones."""

from __future__ import annotations

import numpy as np
import pytest

from scratchformer.book import rnn_influence


def make(d=6, d_in=3, T=12, gain=0.9, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.normal(0, gain / np.sqrt(d), (d, d)), rng.normal(0, 1 / np.sqrt(d_in), (d_in, d)),
            rng.normal(0, 1, (T, d_in)))


def final_state(w_hh, w_xh, inputs, h0):
    h = h0
    for x in inputs:
        h = np.tanh(h @ w_hh + x @ w_xh)
    return h


def test_influence_is_the_norm_of_the_finite_difference_jacobian():
    w_hh, w_xh, inputs = make()
    rng = np.random.default_rng(1)
    h0 = rng.normal(0, 0.5, 6)
    influence, _ = rnn_influence(w_hh, w_xh, inputs, h0=h0)
    for t in (1, 5, 12):
        eps = 1e-6
        jac = np.stack([(final_state(w_hh, w_xh, inputs[:t], h0 + eps * e)
                         - final_state(w_hh, w_xh, inputs[:t], h0 - eps * e)) / (2 * eps)
                        for e in np.eye(6)], axis=1)  # column j: d h_t / d h0_j
        # Central differences: rounding error about 1e-16 / eps = 1e-10 per entry.
        np.testing.assert_allclose(influence[t - 1], np.linalg.norm(jac, 2), rtol=1e-6, atol=1e-9)


def test_influence_is_bounded_by_the_product_of_step_norms():
    influence, steps = rnn_influence(*make(T=40))
    assert np.all(influence <= np.cumprod(steps) * (1 + 1e-12))
    assert np.all(steps <= np.linalg.norm(make(T=40)[0], 2) + 1e-12)  # |tanh'| <= 1


def test_contracting_recurrence_forgets_exponentially():
    influence, _ = rnn_influence(*make(T=60, gain=0.5))
    assert influence[-1] < 1e-10 * influence[0]


@pytest.mark.parametrize("args, message", [
    ((np.zeros((3, 4)), np.zeros((2, 3)), np.zeros((5, 2))), "square"),
    ((np.zeros((3, 3)), np.zeros((2, 4)), np.zeros((5, 2))), "do not chain"),
    ((np.zeros((3, 3)), np.zeros((2, 3)), np.zeros(5)), "inputs must be 2-D"),
    ((np.full((3, 3), np.nan), np.zeros((2, 3)), np.zeros((5, 2))), "w_hh must be finite"),
])
def test_bad_input(args, message):
    with pytest.raises(ValueError, match=message):
        rnn_influence(*args)
