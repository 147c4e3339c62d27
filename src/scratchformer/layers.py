"""The position-wise parts of a Transformer block: layer normalisation and the feed-forward net.

The book's chapter "The Transformer block" (``book/transformer_block.md``) derives both.
"""

from __future__ import annotations

import math
import operator

import numpy as np

from ._validation import as_float_array, require_finite

__all__ = ["layer_norm", "LayerNorm", "FeedForward"]


def layer_norm(x, gamma, beta, eps=1e-5):
    r"""Normalise each token to mean 0 and variance 1, then scale and shift.

    Parameters
    ----------
    x : array_like, shape (..., d_model)
    gamma, beta : array_like, shape (d_model,)
        Learned scale and shift.
    eps : float, default 1e-5
        Added to the variance, so that a constant token does not divide
        by zero.

    Returns
    -------
    y : ndarray, shape (..., d_model)

    Notes
    -----
    .. math::
        y = \gamma \odot \frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}} + \beta,
        \quad \mu = \frac{1}{d}\sum_j x_j,
        \quad \sigma^2 = \frac{1}{d}\sum_j (x_j - \mu)^2

    over the feature axis of each token separately (the biased variance, as
    in PyTorch).
    Derived in the chapter
    :doc:`The Transformer block </book/transformer_block>`.
    """
    x = as_float_array(x, "x")
    gamma, beta = as_float_array(gamma, "gamma"), as_float_array(beta, "beta")
    if x.ndim < 1:
        raise ValueError("x must have a feature axis")
    d_model = x.shape[-1]
    for name, p in (("gamma", gamma), ("beta", beta)):
        if p.shape != (d_model,):
            raise ValueError(f"{name} must have shape ({d_model},) to match "
                             f"x of shape {x.shape}, got {p.shape}")
    if not eps >= 0:
        raise ValueError(f"eps must be non-negative, got {eps}")
    require_finite(x, "x")
    mean = x.mean(axis=-1, keepdims=True)  # (..., 1)
    centred = x - mean  # (..., d_model)
    variance = (centred**2).mean(axis=-1, keepdims=True)  # (..., 1)
    return centred / np.sqrt(variance + eps) * gamma + beta


def _generator(rng):
    """``rng``, or a generator seeded with 0 when it is None."""
    if rng is None:
        return np.random.default_rng(0)
    if not isinstance(rng, np.random.Generator):
        raise TypeError(
            f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    return rng


class LayerNorm:
    """Layer normalisation with learned ``gamma`` (ones) and ``beta`` (zeros).

    Attributes
    ----------
    params : dict
        ``gamma`` and ``beta``, shape ``(d_model,)``.
    eps : float
    """

    def __init__(self, d_model, *, eps=1e-5, dtype=np.float64):
        d_model = operator.index(d_model)
        self.eps = float(eps)
        self.params = {"gamma": np.ones(d_model, dtype=dtype),
                       "beta": np.zeros(d_model, dtype=dtype)}

    def forward(self, x):
        """``layer_norm(x, gamma, beta, eps)``; shape (..., d_model) in and out."""
        return layer_norm(x, self.params["gamma"], self.params["beta"], self.eps)


class FeedForward:
    r"""The position-wise feed-forward network :math:`\max(0, x W_1 + b_1) W_2 + b_2`.

    Parameters
    ----------
    d_model, d_ff : int
        Width of the tokens and of the hidden layer.
    rng : numpy.random.Generator, optional
        Source of the initial weights (Glorot-uniform, biases zero); default seeded with 0.
    dtype : floating dtype, default float64

    Attributes
    ----------
    params : dict
        ``w_1`` (d_model, d_ff), ``b_1`` (d_ff,), ``w_2`` (d_ff, d_model), ``b_2`` (d_model,).
    """

    def __init__(self, d_model, d_ff, *, rng=None, dtype=np.float64):
        d_model, d_ff = operator.index(d_model), operator.index(d_ff)
        if d_model < 1 or d_ff < 1:
            raise ValueError(f"d_model and d_ff must be positive, got {d_model}, {d_ff}")
        rng = _generator(rng)
        limit = math.sqrt(6.0 / (d_model + d_ff))
        self.params = {
            "w_1": rng.uniform(-limit, limit, (d_model, d_ff)).astype(dtype),
            "b_1": np.zeros(d_ff, dtype=dtype),
            "w_2": rng.uniform(-limit, limit, (d_ff, d_model)).astype(dtype),
            "b_2": np.zeros(d_model, dtype=dtype),
        }

    def forward(self, x):
        """Apply the network to each token: (..., d_model) -> same shape."""
        p = self.params
        x = as_float_array(x, "x")
        if x.ndim < 1 or x.shape[-1] != p["w_1"].shape[0]:
            raise ValueError(f"x must have shape (..., {p['w_1'].shape[0]}), "
                             f"got {x.shape}")
        require_finite(x, "x")
        hidden = x @ p["w_1"] + p["b_1"]  # (..., d_ff)
        np.maximum(hidden, 0.0, out=hidden)  # ReLU
        return hidden @ p["w_2"] + p["b_2"]  # (..., d_model)
