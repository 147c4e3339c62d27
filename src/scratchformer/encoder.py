"""The Transformer encoder block: attention and feed-forward, each with a residual and a norm.

The book's chapter "The Transformer block" (``book/transformer_block.md``) derives it, in the
post-LN form of the original paper and the pre-LN form used by most models since.
"""

from __future__ import annotations

import operator

import numpy as np

from ._validation import as_float_array, require_finite, require_min_ndim
from .layers import FeedForward, LayerNorm, _generator
from .module import Layer
from .multihead import MultiHeadAttention

__all__ = ["EncoderBlock"]

NORMS = ("post", "pre")


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
    rng : numpy.random.Generator, optional
        Source of the initial weights; default seeded with 0.
    dtype : floating dtype, default float64

    Attributes
    ----------
    attention : MultiHeadAttention
    ffn : FeedForward
    norm1, norm2 : LayerNorm
        ``norm1`` belongs to the attention sub-layer, ``norm2`` to the feed-forward one.

    Notes
    -----
    Post-LN (Vaswani et al., 2017), normalising after each residual addition:

    .. math:: y = \operatorname{LN}_1(x + \operatorname{MHA}(x)), \qquad
              z = \operatorname{LN}_2(y + \operatorname{FFN}(y)).

    Pre-LN, normalising the input of each sub-layer and leaving the residual path untouched:

    .. math:: y = x + \operatorname{MHA}(\operatorname{LN}_1(x)), \qquad
              z = y + \operatorname{FFN}(\operatorname{LN}_2(y)).

    These are PyTorch's ``TransformerEncoderLayer`` with ``norm_first=False`` and ``True``.
    Derived in the chapter
    :doc:`The Transformer block </book/transformer_block>`.
    """

    def __init__(self, d_model, n_heads, d_ff, *, norm="post", eps=1e-5, rng=None,
                 dtype=np.float64):
        if norm not in NORMS:
            raise ValueError(f'norm must be "post" or "pre", got {norm!r}')
        d_ff = operator.index(d_ff)
        rng = _generator(rng)
        self.norm = norm
        self.attention = MultiHeadAttention(d_model, n_heads, rng=rng, dtype=dtype)
        self.ffn = FeedForward(d_model, d_ff, rng=rng, dtype=dtype)
        self.norm1 = LayerNorm(d_model, eps=eps, dtype=dtype)
        self.norm2 = LayerNorm(d_model, eps=eps, dtype=dtype)

    @property
    def d_model(self):
        return self.attention.d_model

    @property
    def num_parameters(self):
        """The number of scalar parameters, ``4 d^2 + 4 d`` (attention) ``+ 2 d d_ff + d_ff + d``
        (feed-forward) ``+ 4 d`` (two norms)."""
        return super().num_parameters

    def children(self):
        """The four sub-layers, by attribute name."""
        return {"attention": self.attention, "ffn": self.ffn,
                "norm1": self.norm1, "norm2": self.norm2}

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
        y : ndarray, shape (..., n, d_model)
        weights : ndarray, shape (..., h, n, n)
            The attention weights of every head.
        """
        x = as_float_array(x, "x")
        require_min_ndim(x, 2, "x", "(..., n, d_model)")
        require_finite(x, "x")
        if self.norm == "post":
            attended, weights = self.attention.forward(x, mask=mask)
            y = self.norm1.forward(x + attended)  # residual, then norm
            z = self.norm2.forward(y + self.ffn.forward(y))
        else:
            attended, weights = self.attention.forward(self.norm1.forward(x),
                                                       mask=mask)
            y = x + attended  # the residual path is never normalised
            z = y + self.ffn.forward(self.norm2.forward(y))
        return z, weights

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
        if self.norm == "post":
            d_w = self.norm2.backward(d_z)  # into y + FFN(y)
            d_y = d_w + self.ffn.backward(d_w)  # the residual and the FFN path
            d_u = self.norm1.backward(d_y)  # into x + MHA(x)
            return d_u + self.attention.backward(d_u)
        d_y = d_z + self.norm2.backward(self.ffn.backward(d_z))
        return d_y + self.norm1.backward(self.attention.backward(d_y))

    @classmethod
    def from_torch(cls, layer):
        """Copy a ``torch.nn.TransformerEncoderLayer`` exactly.

        The layer must use the ReLU activation; ``norm_first`` gives ``norm``. Dropout is not
        carried over: the block computes the layer's evaluation-mode function.
        """
        import torch

        if not isinstance(layer, torch.nn.TransformerEncoderLayer):
            raise TypeError("expected torch.nn.TransformerEncoderLayer, got "
                            f"{type(layer).__name__}")
        if layer.activation_relu_or_gelu != 1:
            raise ValueError("only the ReLU activation is supported")
        if layer.linear1.bias is None or layer.norm1.bias is None:
            raise ValueError("only layers with biases (bias=True) are supported")
        if layer.norm1.eps != layer.norm2.eps:
            raise ValueError("the two layer norms must share eps")

        def array(tensor):
            return tensor.detach().cpu().numpy().copy()

        block = cls.__new__(cls)
        block.norm = "pre" if layer.norm_first else "post"
        block.attention = MultiHeadAttention.from_torch(layer.self_attn)
        block.ffn = FeedForward.__new__(FeedForward)
        block.ffn.params = {"w_1": array(layer.linear1.weight).T.copy(),
                            "b_1": array(layer.linear1.bias),
                            "w_2": array(layer.linear2.weight).T.copy(),
                            "b_2": array(layer.linear2.bias)}
        for name in ("norm1", "norm2"):
            torch_norm = getattr(layer, name)
            norm = LayerNorm.__new__(LayerNorm)
            norm.eps = float(torch_norm.eps)
            norm.params = {"gamma": array(torch_norm.weight), "beta": array(torch_norm.bias)}
            setattr(block, name, norm)
        return block

    def to_torch(self):
        """A ``torch.nn.TransformerEncoderLayer`` (batch-first, dropout 0, eval mode) with
        these exact weights."""
        import torch

        def tensor(array):
            return torch.from_numpy(np.ascontiguousarray(array))

        p = self.ffn.params
        layer = torch.nn.TransformerEncoderLayer(
            self.d_model, self.attention.n_heads, p["w_1"].shape[1], dropout=0.0,
            activation="relu", layer_norm_eps=self.norm1.eps, batch_first=True,
            norm_first=self.norm == "pre", dtype=tensor(p["w_1"]).dtype)
        attention = self.attention.to_torch()
        with torch.no_grad():
            layer.self_attn.load_state_dict(attention.state_dict())
            layer.linear1.weight.copy_(tensor(p["w_1"].T))
            layer.linear1.bias.copy_(tensor(p["b_1"]))
            layer.linear2.weight.copy_(tensor(p["w_2"].T))
            layer.linear2.bias.copy_(tensor(p["b_2"]))
            for name in ("norm1", "norm2"):
                norm = getattr(self, name)
                getattr(layer, name).weight.copy_(tensor(norm.params["gamma"]))
                getattr(layer, name).bias.copy_(tensor(norm.params["beta"]))
        return layer.eval()
