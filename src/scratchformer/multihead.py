"""Multi-head attention: h attention functions side by side, in one pass.

The book's chapter "Multi-head attention" (``book/multi_head_attention.md``)
derives this layer.
"""

from __future__ import annotations

import math

import numpy as np

from ._validation import (
    features,
    floating_dtype,
    generator,
    output_gradient,
    positive_int,
    require_min_ndim,
)
from .attention import _as_mask, attention_backward, attention_kernel
from .fast_attention import fast_attention, fast_attention_backward, fast_attention_output
from .layers import _affine_grads
from .module import Layer

__all__ = ["AttentionHeads", "MultiHeadAttention", "split_heads", "merge_heads"]

PARAMETER_NAMES = ("w_q", "w_k", "w_v", "w_o", "b_q", "b_k", "b_v", "b_o")

# Up to this many scores per head (n_q * n_k), forward() attends with every head and sequence
# of the batch in a single pass of whole-array operations; beyond it, head by head with the
# blocked kernel, which keeps each block in cache. Short sequences in large batches (training)
# gain from the first, long sequences from the second; both compute the same function.
_SHORT = 64 * 64


def split_heads(x, n_heads):
    """Cut the features into ``n_heads`` slices, heads before tokens.

    Parameters
    ----------
    x : ndarray, shape (..., n, d_model)
    n_heads : int
        Must divide ``d_model``.

    Returns
    -------
    ndarray, shape (..., n_heads, n, d_model // n_heads)
        Head ``i`` sees the features ``i*d_k .. (i+1)*d_k - 1``. A view of
        ``x`` (no copy) when ``x`` is contiguous in its last axis.
    """
    n_heads = positive_int(n_heads, "n_heads")
    x = np.asarray(x)
    require_min_ndim(x, 2, "x", "(..., n, d_model)")
    *batch, n, d_model = x.shape
    if d_model % n_heads:
        raise ValueError(f"d_model={d_model} is not divisible by "
                         f"n_heads={n_heads}, a positive integer")
    d_k = d_model // n_heads
    x = x.reshape(*batch, n, n_heads, d_k)  # (..., n, h, d_k)
    return np.swapaxes(x, -3, -2)  # (..., h, n, d_k)


def merge_heads(x):
    """Inverse of :func:`split_heads`: the heads' features side by side again.

    Parameters
    ----------
    x : ndarray, shape (..., h, n, d_k)

    Returns
    -------
    ndarray, shape (..., n, h * d_k)
        A copy, in general: the heads' features are laid side by side again.
    """
    x = np.asarray(x)
    require_min_ndim(x, 3, "x", "(..., h, n, d_k)")
    *batch, h, n, d_k = x.shape
    x = np.swapaxes(x, -3, -2)  # (..., n, h, d_k)
    return x.reshape(*batch, n, h * d_k)  # (..., n, d_model)


class AttentionHeads(Layer):
    """What :class:`MultiHeadAttention` and :class:`~scratchformer.CausalSelfAttention` share:
    the four projections, the split into heads, grouped keys and values, the attention of
    every head and the backward pass.

    A base class, built only through those two: each has its own ``forward`` (cross-attention
    and masks in one, the causal mask, RoPE and a KV cache in the other), and neither is the
    other's subtype. The parameters and their initialisation are those of
    :class:`MultiHeadAttention`.
    """

    def __init__(self, d_model, n_heads, *, bias=True, n_kv_heads=None, rng=None,
                 dtype=np.float64):
        super().__init__()
        d_model = positive_int(d_model, "d_model")
        n_heads = positive_int(n_heads, "n_heads")
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}: "
                             f"each head needs d_model / n_heads features")
        n_kv_heads = n_heads if n_kv_heads is None else positive_int(n_kv_heads, "n_kv_heads")
        if n_heads % n_kv_heads:
            raise ValueError(f"n_kv_heads={n_kv_heads} does not divide n_heads={n_heads}: "
                             "each key/value head serves a whole group of query heads")
        dtype, rng = floating_dtype(dtype), generator(rng)
        self.d_model, self.n_heads, self.bias = d_model, n_heads, bool(bias)
        self.n_kv_heads = n_kv_heads
        self.attention_weights = None
        # LoRA adapters (scratchformer.lora) beside the projections, by "q", "k", "v", "o"
        self.adapters = {}
        d_kv = n_kv_heads * (d_model // n_heads)
        widths = {"q": d_model, "k": d_kv, "v": d_kv, "o": d_model}
        self.params = {}
        for which in ("q", "k", "v", "o"):
            limit = math.sqrt(6.0 / (d_model + widths[which]))  # Glorot uniform
            shape = (d_model, widths[which])
            self.params[f"w_{which}"] = rng.uniform(-limit, limit, shape).astype(dtype)
        if self.bias:
            self.params.update({f"b_{which}": np.zeros(widths[which], dtype=dtype)
                                for which in ("q", "k", "v", "o")})

    @property
    def d_k(self):
        """Width of one head's queries, keys and values."""
        return self.d_model // self.n_heads

    @property
    def group_size(self):
        """Query heads per key/value head, ``n_heads // n_kv_heads`` (1 without grouping)."""
        return self.n_heads // self.n_kv_heads

    def children(self):
        """The LoRA adapters (:func:`scratchformer.add_lora`), if any, as ``lora_q``,
        ``lora_k``, ``lora_v`` and ``lora_o``."""
        return {f"lora_{which}": adapter for which, adapter in self.adapters.items()}

    @property
    def num_parameters(self):
        """The number of scalar parameters, ``4 d_model^2`` (+ ``4 d_model`` with biases)
        without grouping; ``2 d_model^2 + 2 d_model * n_kv_heads * d_k`` (+ biases) with."""
        return super().num_parameters

    def _multi_head(self, x, context, mask, *, cross):
        """Every head's attention from the checked ``x`` (..., n_q, d_model) to ``context``
        (..., n_k, d_model; ``x`` itself for self-attention) under ``mask`` (broadcast to the
        scores), projected out; saves what :meth:`backward` needs when it may be called."""
        # q: (..., h, n, d_k); k, v: (..., h_kv, n, d_k), h_kv = n_kv_heads
        q, k, v = self._split_inputs(x, context)
        # (..., h, n, d_k) each: every key/value head repeated for its group
        k, v = self._share_keys_values(k), self._share_keys_values(v)
        if not self.saves_for_backward:
            self.attention_weights = None
            heads = self._attend_output(q, k, v, mask)  # (..., h, n_q, d_k)
            return self._project_output(merge_heads(heads))
        # heads: (..., h, n_q, d_k), weights: (..., h, n_q, n_k)
        heads, weights = self._attend(q, k, v, mask)
        merged = merge_heads(heads)  # (..., n_q, d_model)
        self.attention_weights = weights
        # What backward() needs (chapter "Backpropagation through attention"):
        self._save(x=x, context=context, q=q, k=k, v=v, weights=weights,
                   merged=merged, cross=cross)
        return self._project_output(merged)

    def backward(self, d_out):
        r"""Gradients for the inputs of the last ``forward`` (of the subclass); sets ``grads``.

        Parameters
        ----------
        d_out : ndarray, shape (..., n_q, d_model)

        Returns
        -------
        d_x : ndarray, shape of ``x``
            After self-attention, where ``x`` is the source of the queries,
            keys and values alike, so its gradient collects all three paths.
        (d_x, d_context) : tuple of ndarray
            After cross-attention (a ``context`` was given): the queries'
            path into ``x``, the keys' and values' paths into ``context``.

        Notes
        -----
        .. math:: \begin{gathered}
                  dX = dQ\,W_Q^\top, \quad dC = dK\,W_K^\top + dV\,W_V^\top, \\
                  dW_Q = X^\top dQ, \ \dots, \quad dW_O = H^\top dO
                  \end{gathered}

        where :math:`C = X` for self-attention (the two sums add up), :math:`H`
        is the heads' output side by side and :math:`dQ, dK, dV` come from
        :func:`scratchformer.attention_backward`, head by head. Leading axes
        that the forward broadcast are summed back.
        """
        saved = self._saved_for_backward()
        p, x, context = self.params, saved["x"], saved["context"]
        weights, merged = saved["weights"], saved["merged"]
        d_out = output_gradient(d_out, merged.shape, "d_out")
        batch = weights.shape[:-3]  # the broadcast leading axes, not the heads
        frozen = self.frozen  # then the inputs' gradients only (scratchformer.module)
        grads = {}  # d_w and d_b: (d_model, d_model) and (d_model,)
        if not frozen:
            grads["w_o"], grads["b_o"] = _affine_grads(merged, d_out)
        # (..., n_q, d_model) @ (d_model, d_model) -> (..., n_q, d_model)
        d_merged = d_out @ p["w_o"].T
        if "o" in self.adapters:
            d_merged += self.adapters["o"].backward(d_out)
        d_heads = split_heads(d_merged, self.n_heads)  # (..., h, n_q, d_k)
        q, k, v = (np.broadcast_to(a, (*batch, *a.shape[-3:]))
                   for a in (saved["q"], saved["k"], saved["v"]))
        # (..., h, n, d_k) each:
        d_q, d_k, d_v = self._attend_backward(d_heads, q, k, v, weights)
        # a shared key or value collects the gradients of every head of its group
        # (..., h_kv, n, d_k) each, h_kv = n_kv_heads:
        d_k, d_v = self._group_sum(d_k), self._group_sum(d_v)
        # through what a subclass did to q and k (RoPE); nothing here
        d_q, d_k = self._queries_keys_backward(d_q, d_k)
        inputs = {"q": x, "k": context, "v": context}
        d_inputs = {}
        for which, d_proj in (("q", d_q), ("k", d_k), ("v", d_v)):
            d_proj = merge_heads(d_proj)  # (..., n, width of W)
            source = np.broadcast_to(inputs[which], (*d_proj.shape[:-1], self.d_model))
            if not frozen:
                d_w, d_b = _affine_grads(source, d_proj)  # (d, width), (width,)
                grads[f"w_{which}"], grads[f"b_{which}"] = d_w, d_b
            d_source = d_proj @ p[f"w_{which}"].T
            if which in self.adapters:
                d_source += self.adapters[which].backward(d_proj)
            # (..., n, d_model)
            d_inputs[which] = _sum_to(d_source, inputs[which].shape)
        # the parameters' names and order (no biases without bias=True)
        self.grads = None if frozen else {name: grads[name] for name in p}
        if not saved["cross"]:
            return d_inputs["q"] + d_inputs["k"] + d_inputs["v"]
        return d_inputs["q"], d_inputs["k"] + d_inputs["v"]

    @staticmethod
    def _attend_output(q, k, v, mask):
        """Attention's output only, by the kernel that suits the sequence length."""
        if q.shape[-2] * k.shape[-2] <= _SHORT:
            return attention_kernel(q, k, v, mask)[0]  # every head in one pass
        return fast_attention_output(q, k, v, mask)  # weights never stored whole

    @staticmethod
    def _attend(q, k, v, mask):
        """Attention with weights, by the kernel that suits the sequence length."""
        if q.shape[-2] * k.shape[-2] <= _SHORT:
            return attention_kernel(q, k, v, mask)  # every head in one pass
        return fast_attention(q, k, v, mask)  # head by head, in blocks

    @staticmethod
    def _attend_backward(d_out, q, k, v, weights):
        """Attention's gradients (:func:`~scratchformer.attention_backward`), by the kernel
        that suits the sequence length, as :meth:`_attend`."""
        one_dtype = len({a.dtype for a in (d_out, q, k, v, weights)}) == 1
        if q.shape[-2] * k.shape[-2] <= _SHORT or not one_dtype:
            # every head in one pass (unchecked: the arrays are the layer's own)
            return attention_backward.unchecked(d_out, q, k, v, weights)
        return fast_attention_backward(d_out, q, k, v, weights)  # head by head, in cache

    def _split_inputs(self, x, context):
        """Project and split into heads: queries (..., h, n, d_k), keys and
        values (..., n_kv_heads, n, d_k)."""
        if context is x and self.saves_for_backward:
            # self-attention in training: one product with [W_Q W_K W_V]
            # (the concatenation copies the weights, which a product of many
            # tokens repays)
            p, d = self.params, self.d_model
            d_kv = p["w_k"].shape[1]
            # (..., n, d) @ (d, d + 2 d_kv) -> (..., n, d + 2 d_kv)
            qkv = x @ np.concatenate([p["w_q"], p["w_k"], p["w_v"]], axis=1)
            if self.bias:
                qkv += np.concatenate([p["b_q"], p["b_k"], p["b_v"]])
            q, k, v = qkv[..., :d], qkv[..., d:d + d_kv], qkv[..., d + d_kv:]
            for which, projected in (("q", q), ("k", k), ("v", v)):
                if which in self.adapters:  # into qkv, through the view
                    projected += self.adapters[which].forward(x)
        else:
            q = self._project(x, "q")  # (..., n_q, d_model)
            k = self._project(context, "k")  # (..., n_k, d_kv)
            v = self._project(context, "v")  # (..., n_k, d_kv)
        return (split_heads(q, self.n_heads), split_heads(k, self.n_kv_heads),
                split_heads(v, self.n_kv_heads))

    def _share_keys_values(self, kv):
        """(..., n_kv_heads, n, d_k) -> (..., n_heads, n, d_k): each key/value
        head repeated for the query heads of its group (no copy without
        grouping)."""
        if self.n_kv_heads == self.n_heads:
            return kv
        return np.repeat(kv, self.group_size, axis=-3)

    def _group_sum(self, d_kv):
        """Backward of :meth:`_share_keys_values`: the sum over each group's
        heads."""
        if self.n_kv_heads == self.n_heads:
            return d_kv
        *batch, _, n, d_k = d_kv.shape  # (..., n_heads, n, d_k)
        h_kv, group = self.n_kv_heads, self.group_size
        grouped = d_kv.reshape(*batch, h_kv, group, n, d_k)
        return grouped.sum(axis=-3)  # (..., n_kv_heads, n, d_k)

    def _queries_keys_backward(self, d_q, d_k):
        """Hook: gradients through a map that a subclass's ``_split_inputs`` applies to the
        heads' queries and keys (RoPE, in :class:`scratchformer.CausalSelfAttention`); the
        identity here."""
        return d_q, d_k

    def _project_output(self, merged):
        # (..., n_q, d_model) @ (d_model, d_model) -> (..., n_q, d_model)
        out = merged @ self.params["w_o"]
        if self.bias:
            out += self.params["b_o"]
        if "o" in self.adapters:
            out += self.adapters["o"].forward(merged)
        return out

    def _project(self, x, which):
        # (..., n, d_model) @ (d_model, width) -> (..., n, width)
        y = x @ self.params[f"w_{which}"]
        if self.bias:
            y += self.params[f"b_{which}"]
        if which in self.adapters:
            y += self.adapters[which].forward(x)
        return y


class MultiHeadAttention(AttentionHeads):
    r"""Multi-head scaled dot-product attention, in the ``x @ W`` convention.

    Parameters
    ----------
    d_model : int
        Width of the tokens, divisible by ``n_heads``.
    n_heads : int
        Number of heads ``h``; each works in ``d_k = d_model // h`` dimensions.
    bias : bool, default True
        Whether the four projections have biases.
    n_kv_heads : int, optional
        Grouped-query attention (Ainslie et al., 2023): only ``n_kv_heads`` heads of keys and
        values, each shared by a group of ``n_heads / n_kv_heads`` consecutive query heads
        (query head ``i`` reads key/value head ``i // (n_heads / n_kv_heads)``, the layout
        of Llama and of ``transformers``' ``repeat_kv``). Must divide ``n_heads``. Default
        ``n_heads``: multi-head attention, every head its own keys and values; 1 is
        multi-query attention (Shazeer, 2019).
    rng : numpy.random.Generator, optional
        Source of the initial weights (Glorot-uniform, biases zero). Default: a generator
        seeded with 0, so that a layer made without one is still reproducible.
    dtype : floating dtype, default float64
        Dtype of the parameters.

    Attributes
    ----------
    params : dict of str to ndarray
        ``w_q``, ``w_o`` of shape ``(d_model, d_model)``, ``w_k``, ``w_v`` of shape
        ``(d_model, n_kv_heads * d_k)`` (square unless grouped) and, with ``bias=True``,
        ``b_q``, ``b_k``, ``b_v``, ``b_o`` of the matching widths. Plain arrays: read and
        write them directly.

    Notes
    -----
    .. math::
        \begin{gathered}
        \operatorname{head}_i = \operatorname{Attention}(Q_i, K_i, V_i), \\
        Q_i = X W_Q^{(i)} + b_Q^{(i)}, \quad K_i = C W_K^{(i)} + b_K^{(i)}, \\
        V_i = C W_V^{(i)} + b_V^{(i)}, \\
        \operatorname{MHA}(X, C) = [\operatorname{head}_1, \dots, \operatorname{head}_h]\,
        W_O + b_O
        \end{gathered}

    where :math:`C = X` for self-attention and :math:`W^{(i)}` is the ``i``-th block of
    ``d_k`` columns of ``W``. PyTorch's ``nn.MultiheadAttention`` stores the transposes:
    ``in_proj_weight`` is ``[W_Q^T; W_K^T; W_V^T]`` stacked, of shape ``(3 d_model, d_model)``,
    and ``out_proj.weight`` is ``W_O^T``; :func:`scratchformer.pytorch.to_torch` and
    :func:`~scratchformer.pytorch.from_torch` convert.
    Derived in the chapter
    :doc:`Multi-head attention </book/multi_head_attention>`.
    """

    def __repr__(self):
        dtype = self.params["w_q"].dtype
        kv = f", n_kv_heads={self.n_kv_heads}" if self.n_kv_heads != self.n_heads else ""
        return (f"MultiHeadAttention(d_model={self.d_model}, n_heads={self.n_heads}{kv}, "
                f"bias={self.bias}, dtype={dtype})")

    def forward(self, x, mask=None, context=None):
        """Attend from the tokens of ``x`` to those of ``context``.

        Parameters
        ----------
        x : array_like, shape (..., n_q, d_model)
            The tokens that ask (queries).
        mask : array_like of bool or float, optional
            Broadcasts to ``(..., h, n_q, n_k)``: ``(n_q, n_k)`` for every
            sequence and head, ``(batch, 1, 1, n_k)`` for padding. Boolean
            True = may attend; a float mask is added to the scores (``-inf``
            blocks). Semantics of
            :func:`scratchformer.scaled_dot_product_attention`, fully masked
            rows included.
        context : array_like, shape (..., n_k, d_model), optional
            The tokens attended to (keys and values), for cross-attention.
            Default: ``x`` (self-attention).

        Returns
        -------
        out : ndarray, shape (..., n_q, d_model)
            After the call, ``attention_weights`` holds every head's weights,
            shape ``(..., h, n_q, n_k)``; inside
            :meth:`~scratchformer.Layer.inference` they are
            not formed (None), which saves their memory and time for long
            sequences (PyTorch's ``need_weights=False``).
        """
        cross = context is not None
        x, context, mask = self._check(x, mask, context)
        return self._multi_head(x, context, mask, cross=cross)

    def _check(self, x, mask, context):
        x = features(x, self.d_model, "x", min_ndim=2,
                     shape_doc=f"(..., n_q, {self.d_model})")
        if context is not None:
            context = features(context, self.d_model, "context", min_ndim=2,
                               shape_doc=f"(..., n_k, {self.d_model})")
        else:
            context = x
        if x.shape[-2] == 0 or context.shape[-2] == 0:
            raise ValueError(f"attention needs at least one query and one key: x has shape "
                             f"{x.shape}, context {context.shape}")
        try:
            batch = np.broadcast_shapes(x.shape[:-2], context.shape[:-2])
        except ValueError:
            raise ValueError(f"the leading (batch) axes of x {x.shape} and context "
                             f"{context.shape} do not broadcast") from None
        dtype = np.result_type(x, context, self.params["w_q"])
        scores_shape = (*batch, self.n_heads, x.shape[-2], context.shape[-2])
        return x, context, _as_mask(mask, scores_shape, dtype)


def _sum_to(grad, shape):
    """Sum ``grad`` over the leading axes that broadcasting added to ``shape``."""
    if grad.shape == tuple(shape):
        return grad
    extra = grad.ndim - len(shape)
    grad = grad.sum(axis=tuple(range(extra)))
    ones = tuple(i for i, size in enumerate(shape) if size == 1 and grad.shape[i] != 1)
    return grad.sum(axis=ones, keepdims=True) if ones else grad
