"""The Transformer decoder block: masked self-attention, cross-attention and feed-forward.

Each of the three sub-layers has a residual connection and a layer norm, post-LN (the original
Transformer) or pre-LN, as in the encoder block (``encoder.py``). The decoder reads the
encoder's output (the *memory*) through cross-attention, so its backward pass returns two
gradients: one for its input and one for the memory.
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

__all__ = ["DecoderBlock"]


def _check_mask(mask, shape, name, shape_doc):
    """Refuse a mask that does not broadcast to the scores' ``shape``, naming it."""
    if mask is None:
        return None
    mask = np.asarray(mask)
    try:
        broadcast = np.broadcast_shapes(mask.shape, shape)
    except ValueError:
        broadcast = None
    if broadcast != shape:
        raise ValueError(f"{name} of shape {mask.shape} does not broadcast to "
                         f"{shape_doc} = {shape}")
    return mask


class DecoderBlock(Layer):
    r"""A Transformer decoder block, post-LN (the original) or pre-LN.

    Parameters
    ----------
    d_model, n_heads, d_ff : int
        Token width, number of heads (dividing ``d_model``), feed-forward width.
    norm : {"post", "pre"}, default "post"
        Where the layer norms sit (see Notes).
    eps : float, default 1e-5
        Layer-norm epsilon.
    dropout : float, default 0
        Rate of the :class:`~scratchformer.Dropout` on each of the three sub-layers' outputs,
        before the residual addition (Vaswani et al., 2017, section 5.4); 0 leaves the block
        as it is, with no dropout layer at all.
    rng : numpy.random.Generator, optional
        Source of the initial weights; default seeded with 0. With ``dropout > 0`` the masks
        come from a child of it (``rng.spawn``), which draws nothing from it.
    dtype : floating dtype, default float64

    Attributes
    ----------
    self_attention : MultiHeadAttention
        Masked self-attention over the target tokens.
    cross_attention : MultiHeadAttention
        Queries from the target, keys and values from the memory.
    ffn : FeedForward
    norm1 : LayerNorm
        The self-attention's norm.
    norm2 : LayerNorm
        The cross-attention's norm.
    norm3 : LayerNorm
        The feed-forward network's norm.
    dropout1 : Dropout or None
        On the self-attention's output; None for ``dropout=0``.
    dropout2 : Dropout or None
        On the cross-attention's output; None for ``dropout=0``.
    dropout3 : Dropout or None
        On the feed-forward network's output; None for ``dropout=0``.

    Notes
    -----
    Post-LN, normalising after each residual addition (:math:`M` is the memory):

    .. math:: y_1 &= \operatorname{LN}_1(x + \operatorname{SA}(x)), \\
              y_2 &= \operatorname{LN}_2(y_1 + \operatorname{CA}(y_1, M)), \\
              z &= \operatorname{LN}_3(y_2 + \operatorname{FFN}(y_2)).

    Pre-LN, normalising the input of each sub-layer (the memory is not normalised here):

    .. math:: y_1 &= x + \operatorname{SA}(\operatorname{LN}_1(x)), \\
              y_2 &= y_1 + \operatorname{CA}(\operatorname{LN}_2(y_1), M), \\
              z &= y_2 + \operatorname{FFN}(\operatorname{LN}_3(y_2)).

    With dropout (in training only), each sub-layer's output is dropped before it is added.

    These are PyTorch's ``TransformerDecoderLayer`` with ``norm_first=False`` and ``True``
    (in evaluation mode whatever its ``dropout``; ``self_attn``, ``multihead_attn``,
    ``linear1``/``linear2``, ``norm1`` to ``norm3``);
    :func:`scratchformer.pytorch.to_torch` and :func:`~scratchformer.pytorch.from_torch` convert
    (``to_torch`` refuses a block with ``dropout > 0``: in training PyTorch drops at more
    places).
    """

    def __init__(self, d_model, n_heads, d_ff, *, norm="post", eps=1e-5, dropout=0.0,
                 rng=None, dtype=np.float64):
        super().__init__()
        self.norm = choice(norm, NORMS, "norm")
        d_ff = positive_int(d_ff, "d_ff")
        eps = non_negative_float(eps, "eps")
        self.dropout = dropout_rate(dropout)
        dtype, rng = floating_dtype(dtype), generator(rng)
        self.self_attention = MultiHeadAttention(d_model, n_heads, rng=rng, dtype=dtype)
        self.cross_attention = MultiHeadAttention(d_model, n_heads, rng=rng, dtype=dtype)
        self.ffn = FeedForward(d_model, d_ff, rng=rng, dtype=dtype)
        self.norm1 = LayerNorm(d_model, eps=eps, dtype=dtype)
        self.norm2 = LayerNorm(d_model, eps=eps, dtype=dtype)
        self.norm3 = LayerNorm(d_model, eps=eps, dtype=dtype)
        self.dropout1 = self.dropout2 = self.dropout3 = None
        if self.dropout:
            masks = spawn_generator(rng)
            self.dropout1, self.dropout2, self.dropout3 = (
                Dropout(self.dropout, rng=masks) for _ in range(3))

    @property
    def d_model(self):
        return self.self_attention.d_model

    @property
    def n_heads(self):
        return self.self_attention.n_heads

    def __repr__(self):
        return (f"DecoderBlock(d_model={self.d_model}, n_heads={self.n_heads}, "
                f"d_ff={self.ffn.params['w_1'].shape[1]}, norm={self.norm!r}"
                + (f", dropout={self.dropout})" if self.dropout else ")"))

    def children(self):
        """The six sub-layers, by attribute name, and the three dropouts if there are."""
        layers = {"self_attention": self.self_attention,
                  "cross_attention": self.cross_attention, "ffn": self.ffn,
                  "norm1": self.norm1, "norm2": self.norm2, "norm3": self.norm3}
        if self.dropout1 is not None:
            layers |= {"dropout1": self.dropout1, "dropout2": self.dropout2,
                       "dropout3": self.dropout3}
        return layers

    def forward(self, x, memory, mask=None, memory_mask=None):
        """Apply the block to a batch of target sequences that read ``memory``.

        Parameters
        ----------
        x : array_like, shape (..., n_t, d_model)
            The target tokens.
        memory : array_like, shape (..., n_s, d_model)
            The encoder's output; its leading axes broadcast against those
            of ``x``.
        mask : array_like of bool or float, optional
            The self-attention mask, broadcasting to ``(..., h, n_t, n_t)``:
            True = may attend (usually the causal mask, combined with the
            target's padding).
        memory_mask : array_like of bool or float, optional
            The cross-attention mask, broadcasting to ``(..., h, n_t, n_s)``
            (usually the source's padding, ``(batch, 1, 1, n_s)``).

        Returns
        -------
        z : ndarray, shape (..., n_t, d_model)
        """
        d = self.d_model
        x = features(x, d, "x", min_ndim=2, shape_doc=f"(..., n_t, {d})")
        memory = features(memory, d, "memory", min_ndim=2,
                          shape_doc=f"(..., n_s, {d})")
        try:
            batch = np.broadcast_shapes(x.shape[:-2], memory.shape[:-2])
        except ValueError:
            message = (f"the leading (batch) axes of x {x.shape} and memory "
                       f"{memory.shape} do not broadcast")
            raise ValueError(message) from None
        n_t, n_s, h = x.shape[-2], memory.shape[-2], self.n_heads
        mask = _check_mask(mask, (*batch, h, n_t, n_t), "mask",
                           "(..., h, n_t, n_t)")
        memory_mask = _check_mask(memory_mask, (*batch, h, n_t, n_s),
                                  "memory_mask", "(..., h, n_t, n_s)")
        sa, ca, ffn = self._sublayers()  # each with its dropout, if any
        if self.norm == "post":
            y1 = self.norm1.forward(x + sa.forward(x, mask=mask))
            attended = ca.forward(y1, mask=memory_mask, context=memory)
            y2 = self.norm2.forward(y1 + attended)
            return self.norm3.forward(y2 + ffn.forward(y2))
        y1 = x + sa.forward(self.norm1.forward(x), mask=mask)
        y2 = y1 + ca.forward(self.norm2.forward(y1), mask=memory_mask,
                             context=memory)
        return y2 + ffn.forward(self.norm3.forward(y2))

    def backward(self, d_z):
        r"""Gradients for ``x`` and ``memory`` of the last :meth:`forward`.

        Sets the ``grads`` of the six sub-layers.

        Parameters
        ----------
        d_z : ndarray, shape (..., n_t, d_model)

        Returns
        -------
        d_x : ndarray, shape of ``x``
        d_memory : ndarray, shape of ``memory``
            Through the cross-attention's keys and values only. A decoder
            stack sums it over its blocks: they all read the same memory.

        Notes
        -----
        Each residual :math:`y = u + f(u)` passes :math:`dy` on twice,
        :math:`du = dy + J_f^\top dy`; the cross-attention's backward
        splits its gradient into the queries' path (into :math:`y_1`) and
        the keys' and values' path (into :math:`M`).
        """
        sa, ca, ffn = self._sublayers()
        if self.norm == "post":
            d_w3 = self.norm3.backward(d_z)  # into y2 + FFN(y2)
            d_y2 = d_w3 + ffn.backward(d_w3)
            d_w2 = self.norm2.backward(d_y2)  # into y1 + CA(y1, M)
            d_query, d_memory = ca.backward(d_w2)
            d_y1 = d_w2 + d_query
            d_w1 = self.norm1.backward(d_y1)  # into x + SA(x)
            d_x = d_w1 + sa.backward(d_w1)
            return d_x, d_memory
        d_y2 = d_z + self.norm3.backward(ffn.backward(d_z))
        d_query, d_memory = ca.backward(d_y2)
        d_y1 = d_y2 + self.norm2.backward(d_query)
        d_sa = sa.backward(d_y1)
        d_x = d_y1 + self.norm1.backward(d_sa)
        return d_x, d_memory

    def _sublayers(self):
        """The self-attention, the cross-attention and the feed-forward network, each
        followed by its dropout if the block has one (the layers themselves otherwise)."""
        return (with_dropout(self.self_attention, self.dropout1),
                with_dropout(self.cross_attention, self.dropout2),
                with_dropout(self.ffn, self.dropout3))
