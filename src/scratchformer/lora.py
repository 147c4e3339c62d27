r"""LoRA: fine-tuning a frozen model through low-rank adapters (Hu et al., 2021).

A projection :math:`W` (``x @ W``, shape ``(d_in, d_out)``) is kept frozen, and a product of
two thin matrices is learned beside it:

.. math:: y = x W + \frac{\alpha}{r}\, (x A) B, \qquad A \in \mathbb R^{d_\text{in}\times r},
          \; B \in \mathbb R^{r \times d_\text{out}},

with ``B = 0`` at the start, so that the adapted model is the base model, bit for bit, until
the first update. Only :math:`r (d_\text{in} + d_\text{out})` numbers are trained per
projection instead of :math:`d_\text{in} d_\text{out}`. The scale :math:`\alpha / r` keeps the
size of the first updates when ``r`` changes: an optimiser that moves each entry of ``B`` by
about the learning rate (Adam does) changes :math:`(xA)B` by a sum of ``r`` such terms, which
the division by ``r`` takes back (the bug of applying :math:`\alpha` alone, an update ``r``
times larger at rank ``r``, is tested in ``tests/test_lora.py``).

:class:`LoRA` is the adapter as a layer; :func:`add_lora` freezes a model and attaches
adapters to the chosen projections of its attention layers (``"q"``, ``"k"``, ``"v"``,
``"o"``); :func:`merge_lora` adds each adapter's :math:`\frac{\alpha}{r} A B` into its
projection and removes it.
"""

from __future__ import annotations

import math

import numpy as np

from ._validation import (
    features,
    floating_dtype,
    generator,
    output_gradient,
    positive_float,
    positive_int,
)
from .module import Layer

__all__ = ["LoRA", "add_lora", "merge_lora", "lora_adapters", "PROJECTIONS"]

#: The projections of an attention layer that may carry an adapter.
PROJECTIONS = ("q", "k", "v", "o")


class LoRA(Layer):
    r"""A low-rank adapter :math:`\frac{\alpha}{r} (x A) B` beside a frozen ``(d_in, d_out)``
    projection.

    Parameters
    ----------
    d_in, d_out : int
        The projection's shape in the ``x @ W`` layout.
    rank : int
        ``r``, from 1 to ``min(d_in, d_out)`` (a larger rank adds nothing a full update
        could not, at more cost).
    alpha : float
        The scale's numerator, positive and finite; the adapter's output is multiplied by
        ``alpha / rank``.
    rng : numpy.random.Generator, optional
        Source of ``A``'s initial entries, uniform on :math:`\pm 1/\sqrt{d_\text{in}}` (the
        Kaiming-uniform initialisation of PEFT's ``lora_A``); ``B`` starts at zero.
    dtype : floating dtype, default float64

    Attributes
    ----------
    params : dict
        ``a`` ``(d_in, rank)`` and ``b`` ``(rank, d_out)``.
    scale : float
        ``alpha / rank``.
    """

    def __init__(self, d_in, d_out, rank, alpha, *, rng=None, dtype=np.float64):
        super().__init__()
        d_in, d_out = positive_int(d_in, "d_in"), positive_int(d_out, "d_out")
        rank = positive_int(rank, "rank")
        if rank > min(d_in, d_out):
            raise ValueError(f"rank={rank} is larger than the projection allows "
                             f"(min(d_in, d_out) = {min(d_in, d_out)} for a ({d_in}, {d_out}) "
                             "matrix): a full update is cheaper")
        alpha = positive_float(alpha, "alpha")
        dtype, rng = floating_dtype(dtype), generator(rng)
        self.rank, self.alpha = rank, alpha
        self.scale = self.alpha / rank
        bound = 1.0 / math.sqrt(d_in)
        self.params = {"a": rng.uniform(-bound, bound, (d_in, rank)).astype(dtype),
                       "b": np.zeros((rank, d_out), dtype=dtype)}

    def __repr__(self):
        d_in, d_out = self.params["a"].shape[0], self.params["b"].shape[1]
        return f"LoRA({d_in}, {d_out}, rank={self.rank}, alpha={self.alpha:g})"

    def forward(self, x):
        """``(alpha / rank) (x @ A) @ B``: (..., d_in) -> (..., d_out)."""
        a, b = self.params["a"], self.params["b"]
        x = features(x, a.shape[0], "x")
        h = x @ a  # (..., d_in) @ (d_in, r) -> (..., r)
        self._save(x=x, h=h)
        y = h @ b  # (..., r) @ (r, d_out) -> (..., d_out)
        y *= self.scale  # a Python float keeps float32
        return y

    def backward(self, d_y):
        r"""Gradient for the input of the last :meth:`forward`; sets ``grads``.

        With :math:`h = xA` and :math:`s = \alpha / r`: :math:`dB = s\,h^\top dy`,
        :math:`dh = s\,dy\,B^\top`, :math:`dA = x^\top dh` and :math:`dx = dh\,A^\top`, sums
        over every token. ``d_y`` may have more leading axes than the input had (an input
        broadcast against another, as in cross-attention); the returned gradient has
        ``d_y``'s leading axes then, for the caller to sum.
        """
        saved = self._saved_for_backward()
        a, b = self.params["a"], self.params["b"]
        x, h = saved["x"], saved["h"]
        if d_y.shape[:-1] != x.shape[:-1]:  # broadcast inputs: every copy contributes
            lead = np.broadcast_shapes(d_y.shape[:-1], x.shape[:-1])
            x = np.broadcast_to(x, (*lead, x.shape[-1]))
            h = np.broadcast_to(h, (*lead, h.shape[-1]))
        d_y = output_gradient(d_y, (*x.shape[:-1], b.shape[1]), "d_y")
        d_h = d_y @ b.T  # (..., d_out) @ (d_out, r) -> (..., r)
        d_h *= self.scale
        if self.frozen:
            self.grads = None
        else:
            flat_h, flat_x = h.reshape(-1, h.shape[-1]), x.reshape(-1, x.shape[-1])
            d_b = flat_h.T @ d_y.reshape(-1, d_y.shape[-1])  # (r, d_out)
            d_b *= self.scale
            self.grads = {"a": flat_x.T @ d_h.reshape(-1, d_h.shape[-1]),  # (d_in, r)
                          "b": d_b}
        return d_h @ a.T  # (..., r) @ (r, d_in) -> (..., d_in)

    def delta(self):
        r"""The update the adapter adds to its projection, :math:`\frac{\alpha}{r} A B`,
        shape ``(d_in, d_out)``."""
        delta = self.params["a"] @ self.params["b"]
        delta *= self.scale
        return delta


def _attention_layers(model):
    from .multihead import AttentionHeads

    found = [(path.rstrip("."), layer) for path, layer in model._tree()
             if isinstance(layer, AttentionHeads)]
    if not found:
        raise ValueError(f"{type(model).__name__} has no attention layer to adapt")
    return found


def add_lora(model, *, rank=8, alpha=16.0, targets=("q", "v"), rng=None):
    """Freeze ``model`` and attach a :class:`LoRA` adapter to the chosen projections of each
    of its attention layers; returns the model.

    After the call only the adapters are trained (``model.trainable_parameters()``); the
    model's outputs are unchanged, bit for bit, until their ``B`` moves.

    Parameters
    ----------
    model : Layer
        A model with attention layers (:class:`~scratchformer.MultiHeadAttention`,
        :class:`~scratchformer.CausalSelfAttention`), none of which has adapters yet.
    rank : int, default 8
    alpha : float, default 16.0
        Each adapter's output is multiplied by alpha over the rank.
    targets : tuple of str
        The projections to adapt, among ``"q"``, ``"k"``, ``"v"`` and ``"o"``; default
        ``W_Q`` and ``W_V``, Hu et al.'s choice for GPT-3.
    rng : numpy.random.Generator, optional
        Source of every adapter's ``A``; default seeded with 0.
    """
    if isinstance(targets, str):
        targets = (targets,)
    targets = tuple(targets)
    unknown = [t for t in targets if t not in PROJECTIONS]
    if unknown or not targets or len(set(targets)) != len(targets):
        raise ValueError(f"targets must be distinct projections among {PROJECTIONS}, got "
                         f"{targets!r}")
    layers = _attention_layers(model)
    adapted = [path for path, layer in layers if layer.adapters]
    if adapted:
        raise ValueError(f"{adapted[0]} already has adapters: merge them (merge_lora) first")
    rng = generator(rng)
    model.freeze()
    for _, layer in layers:
        dtype = layer.params["w_q"].dtype
        for which in targets:
            d_in, d_out = layer.params[f"w_{which}"].shape
            layer.adapters[which] = LoRA(d_in, d_out, rank, alpha, rng=rng, dtype=dtype)
    return model


def lora_adapters(model):
    """``{path: adapter}`` for every adapter of ``model``, e.g.
    ``"blocks.0.attention.lora_q"``."""
    return {f"{path}.lora_{which}": adapter for path, layer in _attention_layers(model)
            for which, adapter in layer.adapters.items()}


def merge_lora(model):
    r"""Add each adapter's :math:`\frac{\alpha}{r} A B` into its projection, remove the
    adapters and unfreeze the model; returns the model, which computes what the adapted
    model computed, up to rounding, with no adapter's cost."""
    layers = _attention_layers(model)
    if not any(layer.adapters for _, layer in layers):
        raise ValueError("the model has no adapters to merge")
    for _, layer in layers:
        for which, adapter in layer.adapters.items():
            weight = layer.params[f"w_{which}"]
            weight += adapter.delta().astype(weight.dtype, copy=False)
        layer.adapters.clear()
    model.freeze(False)
    return model
