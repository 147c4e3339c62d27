"""RoPE, against references written here: Meta's complex-number formula (NumPy and PyTorch),
Hugging Face's ``rotate_half`` for the half-split layout, finite differences and autograd for
the backward pass, and the property that makes it a *relative* position encoding."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import scratchformer as sf
from conftest import examples


def meta_rope(x, positions, base=10000.0):
    """Meta's LLaMA reference: pairs (2i, 2i+1) as complex numbers, times exp(i m theta_i)."""
    d = x.shape[-1]
    theta = 1.0 / base ** (np.arange(0, d, 2)[: d // 2] / d)
    pairs = x.reshape(*x.shape[:-1], d // 2, 2)
    z = pairs[..., 0] + 1j * pairs[..., 1]
    z = z * np.exp(1j * np.multiply.outer(np.asarray(positions, float), theta))
    return np.stack([z.real, z.imag], axis=-1).reshape(x.shape)


def meta_rope_torch(x, positions, base=10000.0):
    """The same in PyTorch, as Meta writes it (torch.polar, view_as_complex)."""
    d = x.shape[-1]
    freqs = 1.0 / base ** (torch.arange(0, d, 2, dtype=torch.float64)[: d // 2] / d)
    angles = torch.outer(torch.as_tensor(positions, dtype=torch.float64), freqs)
    rotation = torch.polar(torch.ones_like(angles), angles)
    z = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(z * rotation).flatten(-2)


def hugging_face_rope(x, positions, base=10000.0):
    """Hugging Face's half-split RoPE: ``x * cos + rotate_half(x) * sin``."""
    d = x.shape[-1]
    inv_freq = 1.0 / base ** (np.arange(0, d, 2) / d)
    freqs = np.multiply.outer(np.asarray(positions, float), inv_freq)
    emb = np.concatenate([freqs, freqs], axis=-1)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    rotate_half = np.concatenate([-x2, x1], axis=-1)
    return x * np.cos(emb) + rotate_half * np.sin(emb)


shapes = st.fixed_dictionaries({
    "batch": st.lists(st.integers(1, 3), max_size=2),
    "n": st.integers(1, 6),
    "half_d": st.integers(1, 8),
    "start": st.integers(0, 5000),
    "seed": st.integers(0, 2**16),
})


def draw(s):
    rng = np.random.default_rng(s["seed"])
    x = rng.standard_normal((*s["batch"], s["n"], 2 * s["half_d"]))
    return rng, x, s["start"] + np.arange(s["n"])


@examples(40)
@given(shapes)
def test_rope_is_metas_complex_multiplication(s):
    _, x, positions = draw(s)
    np.testing.assert_allclose(sf.rope(x, positions), meta_rope(x, positions),
                               rtol=0, atol=1e-12)


def test_rope_against_metas_torch_code():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 7, 16))  # (batch, heads, n, d_k)
    positions = 1000 + np.arange(7)
    expected = meta_rope_torch(torch.from_numpy(x), torch.from_numpy(positions)).numpy()
    np.testing.assert_allclose(sf.rope(x, positions), expected, rtol=0, atol=1e-12)


@examples(30)
@given(shapes)
def test_half_split_is_interleaved_up_to_a_fixed_permutation(s):
    _, x, positions = draw(s)
    p = sf.half_split_permutation(x.shape[-1])
    # the half-split layout agrees with Hugging Face's own formula...
    np.testing.assert_allclose(sf.rope_half_split(x, positions),
                               hugging_face_rope(x, positions), rtol=0, atol=1e-12)
    # ...and is the interleaved rotation of the permuted features
    np.testing.assert_allclose(sf.rope_half_split(x[..., p], positions),
                               sf.rope(x, positions)[..., p], rtol=0, atol=1e-12)


def test_the_two_layouts_differ_without_the_permutation():
    x = np.random.default_rng(1).standard_normal((5, 8))
    positions = np.arange(5)
    assert not np.allclose(sf.rope_half_split(x, positions), sf.rope(x, positions))
    assert sf.half_split_permutation(6).tolist() == [0, 2, 4, 1, 3, 5]


def test_rotation_matrix_of_the_positional_chapter_turns_the_other_way():
    # positional.rotation_matrix shifts row vectors of the sinusoidal encoding: applied to a
    # column it is RoFormer's R_m transposed, the rotation by -m.
    rng = np.random.default_rng(2)
    x, m, d = rng.standard_normal(8), 3.0, 8
    r = sf.rotation_matrix(m, d)
    np.testing.assert_allclose(sf.rope(x[None], [m])[0], x @ r, atol=1e-12)
    np.testing.assert_allclose(sf.rope(x[None], [-m])[0], r @ x, atol=1e-12)
    assert not np.allclose(sf.rope(x[None], [m])[0], r @ x)


far = st.integers(1000, 10**6)


@examples(50)
@given(far, far, st.integers(-10**5, 10**5), st.integers(0, 2**16))
def test_scores_depend_on_the_offset_only(m, n, shift, seed):
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal((2, 1, 32))
    score = float(sf.rope(q, [m])[0] @ sf.rope(k, [n])[0])
    shifted = float(sf.rope(q, [m + shift])[0] @ sf.rope(k, [n + shift])[0])
    relative = float(q[0] @ sf.rope(k, [n - m])[0])  # <R_m q, R_n k> = <q, R_(n-m) k>
    scale = np.linalg.norm(q) * np.linalg.norm(k)
    # angles of about 1e6 radians carry about 1e-10 of rounding
    assert abs(score - shifted) < 1e-8 * scale
    assert abs(score - relative) < 1e-8 * scale


def test_the_rotation_changes_scores_between_positions():
    rng = np.random.default_rng(3)
    q, k = rng.standard_normal((2, 1, 16))
    scores = [float(sf.rope(q, [0])[0] @ sf.rope(k, [n])[0]) for n in range(5)]
    assert np.ptp(scores) > 1e-2  # a property test above that could not fail would be no test


@examples(25)
@given(shapes)
def test_rope_backward_against_finite_differences(s):
    rng, x, positions = draw(s)
    g = rng.standard_normal(x.shape)
    numeric = sf.numerical_gradient(lambda: float(np.vdot(sf.rope(x, positions), g)), x)
    analytic = sf.rope_backward(g, positions)
    assert sf.relative_error(analytic, numeric) < 1e-8
    # the backward is the inverse rotation
    np.testing.assert_allclose(sf.rope_backward(sf.rope(x, positions), positions), x,
                               atol=1e-12)


def test_rope_backward_against_torch_autograd():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 2, 6, 10))
    g = rng.standard_normal(x.shape)
    positions = 2000 + np.arange(6)
    x_t = torch.tensor(x, requires_grad=True)
    (meta_rope_torch(x_t, torch.from_numpy(positions)) * torch.from_numpy(g)).sum().backward()
    np.testing.assert_allclose(sf.rope_backward(g, positions), x_t.grad.numpy(), rtol=0,
                               atol=1e-10)


def test_float32_stays_float32():
    x = np.ones((3, 4), np.float32)
    assert sf.rope(x, np.arange(3)).dtype == np.float32


@pytest.mark.parametrize("x, positions, message", [
    (np.zeros((2, 3)), np.arange(2), "last axis of x must be even"),
    (np.zeros((2, 4)), np.arange(3), r"positions of shape \(3,\) do not broadcast"),
    (np.zeros((2, 4)), [0.0, np.nan], "positions must be finite"),
    (np.zeros(4), [0], r"x must have at least 2 axes"),
])
def test_bad_input(x, positions, message):
    with pytest.raises(ValueError, match=message):
        sf.rope(x, positions)
