"""Sinusoidal positional encoding, and the rotations that shift it.

The book's chapter "Positional encoding" (``book/positional_encoding.md``) proves that a
shift of the position by ``k`` is a rotation of the encoding that depends on ``k`` only.
"""

from __future__ import annotations

import math

import numpy as np

from ._validation import base_above_one, positive_int, real_number

__all__ = ["positional_encoding", "rotation_matrix", "frequencies"]

BASE = 10_000.0  # the wavelength scale of the original Transformer


def _check_d_model(d_model):
    d_model = positive_int(d_model, "d_model")
    if d_model < 2 or d_model % 2:
        raise ValueError(f"d_model must be even and at least 2 (sine-cosine pairs), "
                         f"got {d_model}")
    return d_model


def frequencies(d_model, base=BASE):
    r"""Angular frequencies :math:`\omega_i = 10000^{-2i/d_\text{model}}`.

    Parameters
    ----------
    d_model : int
        Even width of the encoding.
    base : float, default 10000
        The wavelength scale: :math:`\omega_i = \text{base}^{-2i/d_\text{model}}`, the
        slowest pair turning once in nearly :math:`2\pi \cdot \text{base}` positions. RoPE
        models trained on long contexts raise it (Llama 3: 500000; SmolLM2: 100000).

    Returns
    -------
    omega : ndarray, shape (d_model // 2,)
        One frequency per sine-cosine pair, from 1 down to nearly ``1 / base``.
    """
    d_model = _check_d_model(d_model)
    return base_above_one(base, "base") ** (-np.arange(0, d_model, 2) / d_model)


def positional_encoding(n_positions, d_model):
    r"""The sinusoidal positional encoding of the original Transformer.

    Parameters
    ----------
    n_positions : int
        Number of positions ``0 .. n_positions - 1``.
    d_model : int
        Even width of the encoding.

    Returns
    -------
    pe : ndarray, shape (n_positions, d_model)
        ``pe[pos, 2i] = sin(pos * omega_i)``,
        ``pe[pos, 2i + 1] = cos(pos * omega_i)``.

    Notes
    -----
    .. math:: PE_{pos, 2i} &= \sin(pos\,\omega_i), \\
              PE_{pos, 2i+1} &= \cos(pos\,\omega_i), \\
              \omega_i &= 10000^{-2i/d_\text{model}}.

    Derived in the chapter
    :doc:`Positional encoding </book/positional_encoding>`.
    """
    n_positions = positive_int(n_positions, "n_positions")
    omega = frequencies(d_model)  # (d_model / 2,)
    # (n_positions, 1) * (d_model / 2,) -> (n_positions, d_model / 2)
    angles = np.arange(n_positions)[:, None] * omega
    pe = np.empty((n_positions, d_model))
    pe[:, 0::2] = np.sin(angles)
    pe[:, 1::2] = np.cos(angles)
    return pe


def rotation_matrix(k, d_model):
    r"""The matrix :math:`R_k` with :math:`PE(pos + k) = R_k\, PE(pos)`.

    Parameters
    ----------
    k : float
        The shift of position (any real number; negative shifts go back).
    d_model : int
        Even width of the encoding.

    Returns
    -------
    r : ndarray, shape (d_model, d_model)
        Block diagonal, one 2x2 rotation per sine-cosine pair:
        ``[[cos, sin], [-sin, cos]]`` of ``k * omega_i``. For row vectors,
        as :func:`positional_encoding` stores them,
        ``pe[pos + k] = pe[pos] @ r.T``.

    Notes
    -----
    From :math:`\sin(a + b) = \sin a \cos b + \cos a \sin b` and
    :math:`\cos(a + b) = \cos a \cos b - \sin a \sin b` with
    :math:`a = pos\,\omega_i`, :math:`b = k\,\omega_i`. Proved in the
    chapter :doc:`Positional encoding </book/positional_encoding>`.
    """
    k = real_number(k, "the shift k")
    if not math.isfinite(k):
        raise ValueError(f"the shift k must be finite, got {k}")
    omega = frequencies(d_model)  # (d_model / 2,)
    cos, sin = np.cos(k * omega), np.sin(k * omega)
    r = np.zeros((d_model, d_model))
    pairs = np.arange(0, d_model, 2)  # index of each pair's sine
    # new sine = cos * sine + sin * cosine
    r[pairs, pairs] = cos
    r[pairs, pairs + 1] = sin
    # new cosine = -sin * sine + cos * cosine
    r[pairs + 1, pairs] = -sin
    r[pairs + 1, pairs + 1] = cos
    return r
