"""The position-wise parts of a Transformer: layer normalisation, the feed-forward net, and the
linear layers and token embedding around the blocks.

The book's chapter "The Transformer block" (``book/transformer_block.md``) derives the first
two; "Backpropagation through attention" (``book/backpropagation.md``) their backward passes.
"""

from __future__ import annotations

import math

import numpy as np

from ._validation import (
    as_float_array,
    features,
    floating_dtype,
    generator,
    non_negative_float,
    positive_int,
    require_finite,
    token_ids,
)
from .module import Layer

__all__ = ["layer_norm", "layer_norm_backward", "LayerNorm", "FeedForward", "Linear",
           "Embedding"]


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
        \begin{gathered}
        y = \gamma \odot \frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}} + \beta, \\
        \mu = \frac{1}{d}\sum_j x_j,
        \quad \sigma^2 = \frac{1}{d}\sum_j (x_j - \mu)^2
        \end{gathered}

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
    y, _, _ = _layer_norm(x, gamma, beta, eps)
    return y


def _layer_norm(x, gamma, beta, eps):
    """Layer norm of checked inputs: ``y``, ``x_hat`` and ``inv_std``.

    The last two are what :func:`layer_norm_backward` needs.
    """
    mean = x.mean(axis=-1, keepdims=True)  # (..., 1)
    centred = x - mean  # (..., d_model)
    variance = np.einsum("...i,...i->...", centred, centred)[..., None]
    variance /= x.shape[-1]  # (..., 1), the biased variance
    inv_std = 1.0 / np.sqrt(variance + eps)  # (..., 1)
    x_hat = centred * inv_std  # (..., d_model)
    return x_hat * gamma + beta, x_hat, inv_std


def layer_norm_backward(d_y, x_hat, inv_std, gamma):
    r"""Gradients of :func:`layer_norm` for ``x``, ``gamma`` and ``beta``.

    Parameters
    ----------
    d_y : ndarray, shape (..., d_model)
        Gradient of the loss with respect to the output.
    x_hat : ndarray, shape (..., d_model)
        The normalised input of the forward pass,
        :math:`\hat x = (x - \mu)/\sqrt{\sigma^2 + \epsilon}`.
    inv_std : ndarray, shape (..., 1)
        :math:`1/\sqrt{\sigma^2 + \epsilon}` of each token.
    gamma : ndarray, shape (d_model,)

    Returns
    -------
    d_x : ndarray, shape (..., d_model)
    d_gamma, d_beta : ndarray, shape (d_model,)
        Summed over every token.

    Notes
    -----
    With :math:`g = \gamma \odot dy` and means over the features of one token,

    .. math:: dx = \frac{g - \operatorname{mean}(g)
              - \hat x\,\operatorname{mean}(g \odot \hat x)}
              {\sqrt{\sigma^2+\epsilon}}.

    The two subtracted terms remove the components along :math:`\mathbf 1` and
    :math:`\hat x`, the directions that normalisation makes invisible (exactly
    for :math:`\epsilon = 0`, nearly when :math:`\sigma^2 \gg \epsilon`).
    Derived in the chapter
    :doc:`Backpropagation through attention </book/backpropagation>`.
    """
    d_model = x_hat.shape[-1]
    flat_dy = d_y.reshape(-1, d_model)  # (tokens, d_model)
    flat_x_hat = x_hat.reshape(-1, d_model)
    d_gamma = np.einsum("ti,ti->i", flat_dy, flat_x_hat)  # (d_model,)
    d_beta = flat_dy.sum(axis=0)  # (d_model,)
    g = d_y * gamma  # (..., d_model)
    g_mean = g.mean(axis=-1, keepdims=True)  # (..., 1)
    projection = np.einsum("...i,...i->...", g, x_hat)[..., None] / d_model
    d_x = (g - g_mean - x_hat * projection) * inv_std
    return d_x, d_gamma, d_beta


def _affine_grads(x, d_y):
    """Gradients of ``y = x @ W + b`` for ``W`` and ``b``, summed over every token.

    ``x`` (..., d_in) and ``d_y`` (..., d_out) give ``x^T dy`` of shape (d_in, d_out) and the
    column sums of ``dy``, shape (d_out,).
    """
    flat_dy = d_y.reshape(-1, d_y.shape[-1])  # (tokens, d_out)
    return x.reshape(-1, x.shape[-1]).T @ flat_dy, flat_dy.sum(axis=0)


class LayerNorm(Layer):
    """Layer normalisation with learned ``gamma`` (ones) and ``beta`` (zeros).

    Attributes
    ----------
    params : dict
        ``gamma`` and ``beta``, shape ``(d_model,)``.
    eps : float
    """

    def __init__(self, d_model, *, eps=1e-5, dtype=np.float64):
        super().__init__()
        d_model = positive_int(d_model, "d_model")
        dtype = floating_dtype(dtype)
        self.eps = non_negative_float(eps, "eps")
        self.params = {"gamma": np.ones(d_model, dtype=dtype),
                       "beta": np.zeros(d_model, dtype=dtype)}

    def forward(self, x):
        """``layer_norm(x, gamma, beta, eps)``; shape (..., d_model) in and out."""
        p = self.params
        x = features(x, p["gamma"].shape[0], "x")
        y, x_hat, inv_std = _layer_norm(x, p["gamma"], p["beta"], self.eps)
        self._save(x_hat=x_hat, inv_std=inv_std)
        return y

    def backward(self, d_y):
        """Gradient with respect to the input of the last :meth:`forward`; sets ``grads``.

        Parameters
        ----------
        d_y : ndarray, shape (..., d_model)

        Returns
        -------
        d_x : ndarray, shape (..., d_model)
        """
        saved = self._saved_for_backward()
        d_x, d_gamma, d_beta = layer_norm_backward(
            d_y, saved["x_hat"], saved["inv_std"], self.params["gamma"])
        self.grads = {"gamma": d_gamma, "beta": d_beta}
        return d_x


class FeedForward(Layer):
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
        super().__init__()
        d_model, d_ff = positive_int(d_model, "d_model"), positive_int(d_ff, "d_ff")
        dtype, rng = floating_dtype(dtype), generator(rng)
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
        x = features(x, p["w_1"].shape[0], "x")
        # (..., d_model) @ (d_model, d_ff) -> (..., d_ff)
        hidden = x @ p["w_1"]
        hidden += p["b_1"]
        np.maximum(hidden, 0.0, out=hidden)  # ReLU
        self._save(x=x, hidden=hidden)
        # (..., d_ff) @ (d_ff, d_model) -> (..., d_model)
        y = hidden @ p["w_2"]
        y += p["b_2"]
        return y

    def backward(self, d_y):
        r"""Gradient with respect to the input of the last :meth:`forward`; sets ``grads``.

        Parameters
        ----------
        d_y : ndarray, shape (..., d_model)

        Returns
        -------
        d_x : ndarray, shape (..., d_model)

        Notes
        -----
        With :math:`h = \max(0, xW_1 + b_1)`: :math:`dW_2 = h^\top dy`,
        :math:`dh = dy\,W_2^\top \odot [h > 0]`, :math:`dW_1 = x^\top dh`,
        :math:`dx = dh\,W_1^\top`, biases the column sums; sums run over every token.
        """
        p, saved = self.params, self._saved_for_backward()
        x, hidden = saved["x"], saved["hidden"]
        d_hidden = d_y @ p["w_2"].T  # (..., d_model) @ (d_model, d_ff) -> (..., d_ff)
        d_hidden *= hidden > 0  # ReLU passes the gradient where it passed the input
        d_w_1, d_b_1 = _affine_grads(x, d_hidden)  # (d_model, d_ff), (d_ff,)
        d_w_2, d_b_2 = _affine_grads(hidden, d_y)  # (d_ff, d_model), (d_model,)
        self.grads = {"w_1": d_w_1, "b_1": d_b_1, "w_2": d_w_2, "b_2": d_b_2}
        return d_hidden @ p["w_1"].T  # (..., d_ff) @ (d_ff, d_model) -> (..., d_model)


class Linear(Layer):
    r"""An affine map of each token, :math:`y = x W + b`: the model's output head.

    Parameters
    ----------
    d_in, d_out : int
    rng : numpy.random.Generator, optional
        Source of the initial weights (Glorot-uniform, bias zero); default seeded with 0.
    dtype : floating dtype, default float64

    Attributes
    ----------
    params : dict
        ``w`` (d_in, d_out) and ``b`` (d_out,).
    """

    def __init__(self, d_in, d_out, *, rng=None, dtype=np.float64):
        super().__init__()
        d_in, d_out = positive_int(d_in, "d_in"), positive_int(d_out, "d_out")
        dtype, rng = floating_dtype(dtype), generator(rng)
        limit = math.sqrt(6.0 / (d_in + d_out))
        self.params = {"w": rng.uniform(-limit, limit, (d_in, d_out)).astype(dtype),
                       "b": np.zeros(d_out, dtype=dtype)}

    def forward(self, x):
        """(..., d_in) -> (..., d_out)."""
        w = self.params["w"]
        x = features(x, w.shape[0], "x")
        self._save(x=x)
        y = x @ w  # (..., d_in) @ (d_in, d_out) -> (..., d_out)
        y += self.params["b"]
        return y

    def backward(self, d_y):
        """Gradient with respect to the input of the last :meth:`forward`; sets ``grads``.

        ``dW = x^T dy`` and ``db`` the column sums of ``dy`` (over every token);
        returns ``dx = dy W^T``, shape (..., d_in).
        """
        x = self._saved_for_backward()["x"]
        w = self.params["w"]
        d_w, d_b = _affine_grads(x, d_y)  # (d_in, d_out), (d_out,)
        self.grads = {"w": d_w, "b": d_b}
        return d_y @ w.T  # (..., d_out) @ (d_out, d_in) -> (..., d_in)


class Embedding(Layer):
    r"""A learned vector for each token id: row ``t`` of the table for token ``t``.

    Parameters
    ----------
    vocab_size, d_model : int
    rng : numpy.random.Generator, optional
        Source of the initial table, entries drawn from :math:`\mathcal N(0, 1)` (the scale of
        the positional encoding's entries); default seeded with 0.
    dtype : floating dtype, default float64

    Attributes
    ----------
    params : dict
        ``table`` (vocab_size, d_model).

    Notes
    -----
    The lookup ``table[tokens]`` is the product of one-hot rows with the table, so its
    gradient adds each token's output gradient into that token's row (``np.add.at``).
    """

    def __init__(self, vocab_size, d_model, *, rng=None, dtype=np.float64):
        super().__init__()
        vocab_size = positive_int(vocab_size, "vocab_size")
        d_model = positive_int(d_model, "d_model")
        dtype, rng = floating_dtype(dtype), generator(rng)
        self.params = {"table": rng.standard_normal((vocab_size, d_model)).astype(dtype)}

    def forward(self, tokens):
        """Integer ids of any shape ``(...)`` -> vectors ``(..., d_model)``."""
        tokens = token_ids(tokens, self.params["table"].shape[0], min_ndim=0,
                           allow_empty=True)
        self._save(tokens=tokens)
        return self.params["table"][tokens]  # (..., d_model)

    def backward(self, d_y):
        """Sets ``grads["table"]``; returns None (token ids have no gradient)."""
        tokens = self._saved_for_backward()["tokens"]
        table = self.params["table"]
        d_table = np.zeros_like(table)
        np.add.at(d_table, tokens.reshape(-1), d_y.reshape(-1, table.shape[1]))
        self.grads = {"table": d_table}
