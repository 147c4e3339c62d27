"""The Transformer encoder block: attention and feed-forward, each with a residual and a norm.

The book's chapter "The Transformer block" (``book/transformer_block.md``) derives it, in the
post-LN form of the original paper and the pre-LN form used by most models since.
"""

from __future__ import annotations

import numpy as np

from ._validation import (
    choice,
    features,
    floating_dtype,
    generator,
    non_negative_float,
    positive_int,
)
from .config import NORMS
from .dropout import Dropout, dropout_rate, spawn_generator, with_dropout
from .layers import FeedForward, LayerNorm
from .module import Layer
from .multihead import MultiHeadAttention

__all__ = ["EncoderBlock"]


class EncoderBlock(Layer):
    r"""A Transformer encoder block, post-LN (the original) or pre-LN.

    Parameters
    ----------
    d_model, n_heads, d_ff : int
        Token width, number of heads (dividing ``d_model``), feed-forward width.
    norm : {"post", "pre"}, default "post"
        Where the layer norms sit (see Notes).
    eps : float, default 1e-5
        Layer-norm epsilon.
    dropout : float, default 0
        Rate of the :class:`~scratchformer.Dropout` on each sub-layer's output, before it is
        added to the residual (Vaswani et al., 2017, section 5.4); 0 leaves the block as
        it is, with no dropout layer at all.
    rng : numpy.random.Generator, optional
        Source of the initial weights; default seeded with 0. With ``dropout > 0`` the masks
        come from a child of it (``rng.spawn``), which draws nothing from it: the weights are
        those of the block without dropout.
    dtype : floating dtype, default float64

    Attributes
    ----------
    attention : MultiHeadAttention
    ffn : FeedForward
    norm1, norm2 : LayerNorm
        ``norm1`` belongs to the attention sub-layer, ``norm2`` to the feed-forward one.
    dropout1 : Dropout or None
        On the attention's output; None for ``dropout=0``.
    dropout2 : Dropout or None
        On the feed-forward network's output; None for ``dropout=0``.

    Notes
    -----
    Post-LN (Vaswani et al., 2017), normalising after each residual addition:

    .. math:: y &= \operatorname{LN}_1(x + \operatorname{MHA}(x)), \\
              z &= \operatorname{LN}_2(y + \operatorname{FFN}(y)).

    Pre-LN, normalising the input of each sub-layer and leaving the residual path untouched:

    .. math:: y &= x + \operatorname{MHA}(\operatorname{LN}_1(x)), \\
              z &= y + \operatorname{FFN}(\operatorname{LN}_2(y)).

    With dropout :math:`D` (in training only), :math:`\operatorname{MHA}` and
    :math:`\operatorname{FFN}` above become :math:`D(\operatorname{MHA})` and
    :math:`D(\operatorname{FFN})`.

    These are PyTorch's ``TransformerEncoderLayer`` with ``norm_first=False`` and ``True``
    (in evaluation mode whatever its ``dropout``: in training PyTorch also drops the
    attention weights and the feed-forward network's hidden units, so
    :func:`scratchformer.pytorch.to_torch` refuses a block with ``dropout > 0``). Derived in
    the chapter :doc:`The Transformer block </book/transformer_block>`.
    """

    def __init__(self, d_model, n_heads, d_ff, *, norm="post", eps=1e-5, dropout=0.0,
                 rng=None, dtype=np.float64):
        super().__init__()
        self.norm = choice(norm, NORMS, "norm")
        d_ff = positive_int(d_ff, "d_ff")
        eps = non_negative_float(eps, "eps")
        self.dropout = dropout_rate(dropout)
        dtype, rng = floating_dtype(dtype), generator(rng)
        self.attention = MultiHeadAttention(d_model, n_heads, rng=rng, dtype=dtype)
        self.ffn = FeedForward(d_model, d_ff, rng=rng, dtype=dtype)
        self.norm1 = LayerNorm(d_model, eps=eps, dtype=dtype)
        self.norm2 = LayerNorm(d_model, eps=eps, dtype=dtype)
        self.dropout1 = self.dropout2 = None
        if self.dropout:
            masks = spawn_generator(rng)
            self.dropout1 = Dropout(self.dropout, rng=masks)
            self.dropout2 = Dropout(self.dropout, rng=masks)

    @property
    def d_model(self):
        return self.attention.d_model

    @property
    def num_parameters(self):
        """The number of scalar parameters, ``4 d^2 + 4 d`` (attention) ``+ 2 d d_ff + d_ff + d``
        (feed-forward) ``+ 4 d`` (two norms)."""
        return super().num_parameters

    def children(self):
        """The four sub-layers, by attribute name, and the two dropouts if there are."""
        layers = {"attention": self.attention, "ffn": self.ffn,
                  "norm1": self.norm1, "norm2": self.norm2}
        if self.dropout1 is not None:
            layers |= {"dropout1": self.dropout1, "dropout2": self.dropout2}
        return layers

    def forward(self, x, mask=None):
        """Apply the block to a batch of sequences.

        Parameters
        ----------
        x : array_like, shape (..., n, d_model)
        mask : array_like of bool or float, optional
            As for :meth:`MultiHeadAttention.forward`: broadcasts to
            ``(..., h, n, n)``.

        Returns
        -------
        z : ndarray, shape (..., n, d_model)
            The attention weights of every head are then
            ``block.attention.attention_weights``, shape ``(..., h, n, n)``.
        """
        x = features(x, self.d_model, "x", min_ndim=2)
        attention, ffn = self._sublayers()  # each with its dropout, if any
        if self.norm == "post":
            attended = attention.forward(x, mask=mask)
            y = self.norm1.forward(x + attended)  # residual, then norm
            z = self.norm2.forward(y + ffn.forward(y))
        else:
            attended = attention.forward(self.norm1.forward(x), mask=mask)
            y = x + attended  # the residual path is never normalised
            z = y + ffn.forward(self.norm2.forward(y))
        return z

    def backward(self, d_z):
        r"""Gradient for ``x`` of the last :meth:`forward`.

        Sets the ``grads`` of the four sub-layers.

        Parameters
        ----------
        d_z : ndarray, shape (..., n, d_model)

        Returns
        -------
        d_x : ndarray, shape (..., n, d_model)

        Notes
        -----
        A residual connection :math:`y = x + f(x)` passes the gradient on
        twice: :math:`dx = dy + J_f^\top dy`. Post-LN sends every gradient
        through both norms; pre-LN leaves an identity path from the output to
        every block's input. Derived in the chapter
        :doc:`Backpropagation through attention </book/backpropagation>`.
        """
        attention, ffn = self._sublayers()
        if self.norm == "post":
            d_w = self.norm2.backward(d_z)  # into y + FFN(y)
            d_y = d_w + ffn.backward(d_w)  # the residual and the FFN path
            d_u = self.norm1.backward(d_y)  # into x + MHA(x)
            return d_u + attention.backward(d_u)
        d_y = d_z + self.norm2.backward(ffn.backward(d_z))
        return d_y + self.norm1.backward(attention.backward(d_y))

    def _sublayers(self):
        """The attention and the feed-forward network, each followed by its dropout if the
        block has one (the layers themselves otherwise)."""
        return (with_dropout(self.attention, self.dropout1),
                with_dropout(self.ffn, self.dropout2))
