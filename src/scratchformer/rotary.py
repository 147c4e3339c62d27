"""Rotary position embedding (RoPE): queries and keys rotated by the angle of their position.

RoPE (Su et al., RoFormer, 2021) encodes position not by adding a vector to the tokens but by
rotating each pair of features of a query or a key by an angle proportional to its position.
The score of a query at position ``m`` and a key at position ``n`` then depends on their
offset ``m - n`` only. Values are never rotated.

Two layouts of the pairs are in use, and they are the same rotation up to a fixed permutation
of the features:

- **interleaved** (RoFormer, Meta's LLaMA reference code): features ``(2i, 2i + 1)`` form pair
  ``i`` -- :func:`rope`, the package's convention;
- **half-split** (GPT-NeoX, Hugging Face): features ``(i, i + d/2)`` form pair ``i`` --
  :func:`rope_half_split`. ``rope_half_split(x[..., p], m) == rope(x, m)[..., p]`` with
  ``p = half_split_permutation(d)``.

Pair ``i`` turns by ``position * base**(-2i/d)`` (``base`` 10000 unless given),
counter-clockwise: as the complex number ``x_{2i} + 1j * x_{2i+1}`` multiplied by
``exp(1j * position * theta_i)``. (The book's :func:`scratchformer.rotation_matrix` is the
transpose of RoFormer's :math:`R_m`: it shifts the sinusoidal encoding, which is a row vector,
and turns the other way when applied to a column.)
"""

from __future__ import annotations

import numpy as np

from ._validation import as_float_array, positive_int, require_finite, require_min_ndim
from .positional import BASE, frequencies

__all__ = ["rope", "rope_backward", "rope_half_split", "half_split_permutation"]


def _cos_sin(positions, shape, dtype, base):
    """``cos`` and ``sin`` of every pair's angle, shape ``(..., n, d/2)``, for ``x`` of
    ``shape``."""
    d = shape[-1]
    if d % 2:
        raise ValueError(f"rotary embedding rotates pairs of features: the last axis of x must "
                         f"be even, got shape {shape}")
    positions = as_float_array(positions, "positions")
    require_finite(positions, "positions")
    try:
        fits = np.broadcast_shapes(positions.shape, shape[:-1]) == shape[:-1]
    except ValueError:
        fits = False
    if not fits:  # broadcasting to more axes would change the shape of the result
        raise ValueError(f"positions of shape {positions.shape} do not broadcast to the "
                         f"tokens' axes {shape[:-1]} of x (shape {shape})")
    # (..., n, 1) * (d/2,) -> (..., n, d/2), in float64 whatever x is: angles of large
    # positions need the digits.
    angles = positions[..., None] * frequencies(d, base)
    return np.cos(angles).astype(dtype, copy=False), np.sin(angles).astype(dtype, copy=False)


def _pairs(x):
    """``x`` of shape (..., d) as d/2 complex numbers ``x[..., 2i] + 1j * x[..., 2i + 1]``:
    a view of ``x`` where its memory allows (float32 or float64, the last axis contiguous);
    float16 is computed in float32."""
    kind = np.result_type(x.dtype, np.complex64)  # complex64, complex128 or clongdouble
    x = np.asarray(x, dtype=np.finfo(kind).dtype)
    if x.strides[-1] != x.itemsize:
        x = np.ascontiguousarray(x)
    return x.view(kind)


def _check(x, name):
    x = as_float_array(x, name)
    require_min_ndim(x, 2, name, "(..., n, d)")
    require_finite(x, name)
    return x


def rope(x, positions, *, base=BASE):
    r"""Rotate each pair of features ``(2i, 2i + 1)`` by ``position * base**(-2i/d)``.

    Parameters
    ----------
    x : array_like, shape (..., n, d)
        Queries or keys (one head's, or every head's with a head axis among ``...``); ``d``
        even.
    positions : array_like, shape broadcasting to (..., n)
        The absolute position of each token: ``np.arange(n)`` for a whole sequence,
        ``start + np.arange(n)`` after ``start`` cached tokens.
    base : float, default 10000
        The wavelength scale of the angles (:func:`scratchformer.frequencies`): RoFormer's
        10000; models trained on long contexts raise it (SmolLM2: 100000).

    Returns
    -------
    ndarray, shape of ``x``
        Of the dtype of ``x`` (integers become float64).

    Notes
    -----
    The interleaved (RoFormer, Meta) convention. With
    :math:`\theta_i = \text{base}^{-2i/d}` and position :math:`m`,

    .. math::
        \begin{pmatrix} y_{2i} \\ y_{2i+1} \end{pmatrix} =
        R(m\theta_i) \begin{pmatrix} x_{2i} \\ x_{2i+1} \end{pmatrix},
        \quad R(\alpha) = \begin{pmatrix} \cos \alpha & -\sin \alpha \\
                        \sin \alpha & \cos \alpha \end{pmatrix},

    computed as the complex product
    :math:`(x_{2i} + \mathrm{i}\, x_{2i+1})\, e^{\mathrm{i} m \theta_i}`, whose real and
    imaginary parts are the two rows; so
    :math:`\langle \operatorname{rope}(q, m), \operatorname{rope}(k, n)\rangle` depends on
    :math:`m - n` only. Applied to queries and keys, never to values.
    """
    x = _check(x, "x")
    cos, sin = _cos_sin(positions, x.shape, x.dtype, base)
    pairs = _pairs(x)  # (..., n, d/2): pair i as the number x_2i + i x_2i+1
    turn = np.empty(cos.shape, pairs.dtype)  # e^(i m theta_i), (..., n, d/2)
    turn.real, turn.imag = cos, sin
    # real part x_2i cos - x_2i+1 sin, imaginary part x_2i sin + x_2i+1 cos
    rotated = pairs * turn
    return rotated.view(rotated.real.dtype).astype(x.dtype, copy=False)


def rope_backward(d_y, positions, *, base=BASE):
    """Gradient of :func:`rope` for ``x``: the rotation by minus the angle.

    A rotation is orthogonal, so its transpose, which backpropagation applies, is its
    inverse: ``rope_backward(d_y, m) == rope(d_y, -m)``.

    Parameters
    ----------
    d_y : array_like, shape (..., n, d)
        Gradient of the loss with respect to the output of ``rope(x, positions)``.
    positions : array_like
        The positions of that forward pass.
    base : float, default 10000
        Its base.

    Returns
    -------
    d_x : ndarray, shape of ``d_y``
    """
    return rope(d_y, -as_float_array(positions, "positions"), base=base)


def half_split_permutation(d):
    """The features' order that turns the interleaved pairs into half-split ones.

    Returns
    -------
    p : ndarray of int, shape (d,)
        ``[0, 2, 4, ..., 1, 3, 5, ...]``: ``x[..., p]`` puts feature ``2i`` at ``i`` and
        ``2i + 1`` at ``i + d/2``, so that
        ``rope_half_split(x[..., p], m) == rope(x, m)[..., p]``.
    """
    d = positive_int(d, "d")
    if d < 2 or d % 2:
        raise ValueError(f"d must be even and at least 2, got {d}")
    return np.concatenate([np.arange(0, d, 2), np.arange(1, d, 2)])


def rope_half_split(x, positions, *, base=BASE):
    """RoPE in the half-split layout of GPT-NeoX and Hugging Face: pairs ``(i, i + d/2)``.

    The same angles as :func:`rope`; only which features form a pair differs (see
    :func:`half_split_permutation`). Given for comparison with those implementations: weights
    trained with one layout work with the other once the columns of ``W_Q`` and ``W_K`` are
    permuted.

    Parameters
    ----------
    x : array_like, shape (..., n, d)
    positions : array_like, shape broadcasting to (..., n)
    base : float, default 10000

    Returns
    -------
    ndarray, shape of ``x``
    """
    x = _check(x, "x")
    cos, sin = _cos_sin(positions, x.shape, x.dtype, base)
    half = x.shape[-1] // 2
    first, second = x[..., :half], x[..., half:]
    return np.concatenate([first * cos - second * sin, first * sin + second * cos], axis=-1)
