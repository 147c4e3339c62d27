"""Multi-head attention: h attention functions side by side, in one pass.

The book's chapter "Multi-head attention" (``book/multi_head_attention.md``)
derives this layer.
"""

from __future__ import annotations

import math
import operator

import numpy as np

from ._validation import as_float_array, require_finite, require_min_ndim
from .attention import _as_mask, attention_backward, attention_kernel
from .fast_attention import fast_attention, fast_attention_output
from .layers import _affine_grads
from .module import Layer

__all__ = ["MultiHeadAttention", "split_heads", "merge_heads"]

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
    n_heads = operator.index(n_heads)
    *batch, n, d_model = x.shape
    if n_heads < 1 or d_model % n_heads:
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
    *batch, h, n, d_k = x.shape
    x = np.swapaxes(x, -3, -2)  # (..., n, h, d_k)
    return x.reshape(*batch, n, h * d_k)  # (..., n, d_model)


class MultiHeadAttention(Layer):
    r"""Multi-head scaled dot-product attention, in the ``x @ W`` convention.

    Parameters
    ----------
    d_model : int
        Width of the tokens, divisible by ``n_heads``.
    n_heads : int
        Number of heads ``h``; each works in ``d_k = d_model // h`` dimensions.
    bias : bool, default True
        Whether the four projections have biases.
    rng : numpy.random.Generator, optional
        Source of the initial weights (Glorot-uniform, biases zero). Default: a generator
        seeded with 0, so that a layer made without one is still reproducible.
    dtype : floating dtype, default float64
        Dtype of the parameters.

    Attributes
    ----------
    params : dict of str to ndarray
        ``w_q``, ``w_k``, ``w_v``, ``w_o`` of shape ``(d_model, d_model)`` and, with
        ``bias=True``, ``b_q``, ``b_k``, ``b_v``, ``b_o`` of shape ``(d_model,)``. Plain arrays:
        read and write them directly.

    Notes
    -----
    .. math::
        \operatorname{head}_i = \operatorname{Attention}(X W_Q^{(i)} + b_Q^{(i)},\;
        C W_K^{(i)} + b_K^{(i)},\; C W_V^{(i)} + b_V^{(i)}), \qquad
        \operatorname{MHA}(X, C) = [\operatorname{head}_1, \dots, \operatorname{head}_h]\,
        W_O + b_O

    where :math:`C = X` for self-attention and :math:`W^{(i)}` is the ``i``-th block of
    ``d_k`` columns of ``W``. PyTorch's ``nn.MultiheadAttention`` stores the transposes:
    ``in_proj_weight`` is ``[W_Q^T; W_K^T; W_V^T]`` stacked, of shape ``(3 d_model, d_model)``,
    and ``out_proj.weight`` is ``W_O^T``; :meth:`from_torch` and :meth:`to_torch` convert.
    Derived in the chapter
    :doc:`Multi-head attention </book/multi_head_attention>`.
    """

    def __init__(self, d_model, n_heads, *, bias=True, rng=None, dtype=np.float64):
        try:
            d_model, n_heads = operator.index(d_model), operator.index(n_heads)
        except TypeError:
            raise TypeError(f"d_model and n_heads must be integers, got {d_model!r} and "
                            f"{n_heads!r}") from None
        if d_model < 1 or n_heads < 1:
            raise ValueError(f"d_model and n_heads must be positive, got {d_model}, {n_heads}")
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}: "
                             f"each head needs d_model / n_heads features")
        dtype = np.dtype(dtype)
        if not np.issubdtype(dtype, np.floating):
            raise TypeError(f"dtype must be floating, got {dtype}")
        if rng is None:
            rng = np.random.default_rng(0)
        elif not isinstance(rng, np.random.Generator):
            raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
        self.d_model, self.n_heads, self.bias = d_model, n_heads, bool(bias)
        limit = math.sqrt(6.0 / (d_model + d_model))  # Glorot uniform for a square matrix
        self.params = {name: rng.uniform(-limit, limit, (d_model, d_model)).astype(dtype)
                       for name in ("w_q", "w_k", "w_v", "w_o")}
        if self.bias:
            self.params.update({name: np.zeros(d_model, dtype=dtype)
                                for name in ("b_q", "b_k", "b_v", "b_o")})

    @property
    def d_k(self):
        """Width of one head's queries, keys and values."""
        return self.d_model // self.n_heads

    @property
    def num_parameters(self):
        """The number of scalar parameters, ``4 d_model^2`` (+ ``4 d_model`` with biases)."""
        return super().num_parameters

    def __repr__(self):
        dtype = self.params["w_q"].dtype
        return (f"MultiHeadAttention(d_model={self.d_model}, n_heads={self.n_heads}, "
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
        weights : ndarray, shape (..., h, n_q, n_k)
            Every head's attention weights.
        """
        x = as_float_array(x, "x")
        q, k, v, mask = self._split_inputs(x, mask, context)
        # heads: (..., h, n_q, d_k), weights: (..., h, n_q, n_k)
        heads, weights = self._attend(q, k, v, mask)
        merged = merge_heads(heads)  # (..., n_q, d_model)
        # What backward() needs (chapter "Backpropagation through attention"):
        self._keep(x=x, q=q, k=k, v=v, weights=weights, merged=merged,
                   self_attention=context is None)
        return self._project_output(merged), weights

    def backward(self, d_out):
        r"""Gradient for ``x`` of the last :meth:`forward`; sets ``grads``.

        Self-attention only: ``x`` is the source of the queries, keys and
        values alike, so its gradient collects all three paths. (After a
        cross-attention forward this raises ``ValueError``; the book trains
        encoder-only models.)

        Parameters
        ----------
        d_out : ndarray, shape (..., n, d_model)

        Returns
        -------
        d_x : ndarray, shape (..., n, d_model)

        Notes
        -----
        .. math:: dX = dQ\,W_Q^\top + dK\,W_K^\top + dV\,W_V^\top, \qquad
                  dW_Q = X^\top dQ, \ \dots, \qquad dW_O = H^\top dO

        where :math:`H` is the heads' output side by side and
        :math:`dQ, dK, dV` come from :func:`scratchformer.attention_backward`,
        head by head.
        """
        cache = self._take()
        if not cache["self_attention"]:
            raise ValueError("MultiHeadAttention.backward supports "
                             "self-attention only; the last forward was "
                             "given a context")
        p, x = self.params, cache["x"]
        grads = {}  # d_w and d_b: (d_model, d_model) and (d_model,)
        grads["w_o"], grads["b_o"] = _affine_grads(cache["merged"], d_out)
        # (..., n, d_model) @ (d_model, d_model) -> (..., n, d_model)
        d_merged = d_out @ p["w_o"].T
        d_heads = split_heads(d_merged, self.n_heads)  # (..., h, n, d_k)
        # (..., h, n, d_k) each:
        d_q, d_k, d_v = attention_backward(
            d_heads, cache["q"], cache["k"], cache["v"], cache["weights"])
        d_x = np.zeros_like(x, dtype=d_out.dtype)
        for which, d_proj in (("q", d_q), ("k", d_k), ("v", d_v)):
            d_proj = merge_heads(d_proj)  # (..., n, d_model)
            grads[f"w_{which}"], grads[f"b_{which}"] = _affine_grads(x, d_proj)
            d_x += d_proj @ p[f"w_{which}"].T  # (..., n, d_model)
        # the parameters' names and order (no biases without bias=True)
        self.grads = {name: grads[name] for name in p}
        return d_x

    def output(self, x, mask=None, context=None):
        """Like :meth:`forward`, but return the output only.

        The weights are never stored whole, which saves memory and time for
        long sequences (the analogue of PyTorch's ``need_weights=False``).

        Returns
        -------
        out : ndarray, shape (..., n_q, d_model)
        """
        q, k, v, mask = self._split_inputs(x, mask, context)
        heads = fast_attention_output(q, k, v, mask)  # (..., h, n_q, d_k)
        return self._merge_output(heads)

    @staticmethod
    def _attend(q, k, v, mask):
        """Attention with weights, by the kernel that suits the sequence length."""
        if q.shape[-2] * k.shape[-2] <= _SHORT:
            return attention_kernel(q, k, v, mask)  # every head in one pass
        return fast_attention(q, k, v, mask)  # head by head, in blocks

    def _split_inputs(self, x, mask, context):
        """Check, project and split into heads: (..., h, n, d_k) each."""
        x, context, mask = self._check(x, mask, context)
        q = self._project(x, "q")  # (..., n_q, d_model)
        k = self._project(context, "k")  # (..., n_k, d_model)
        v = self._project(context, "v")  # (..., n_k, d_model)
        q, k, v = (split_heads(a, self.n_heads) for a in (q, k, v))
        return q, k, v, mask

    def _merge_output(self, heads):
        """Merge the heads and apply the output projection."""
        return self._project_output(merge_heads(heads))

    def _project_output(self, merged):
        # (..., n_q, d_model) @ (d_model, d_model) -> (..., n_q, d_model)
        out = merged @ self.params["w_o"]
        if self.bias:
            out += self.params["b_o"]
        return out

    def _project(self, x, which):
        # (..., n, d_model) @ (d_model, d_model) -> (..., n, d_model)
        y = x @ self.params[f"w_{which}"]
        if self.bias:
            y += self.params[f"b_{which}"]
        return y

    def _check(self, x, mask, context):
        x = as_float_array(x, "x")
        context = x if context is None else as_float_array(context, "context")
        for arr, name, shape_doc in ((x, "x", "(..., n_q, d_model)"),
                                     (context, "context", "(..., n_k, d_model)")):
            require_min_ndim(arr, 2, name, shape_doc)
            if arr.shape[-1] != self.d_model:
                raise ValueError(f"{name} must have d_model={self.d_model} features on its last "
                                 f"axis, got shape {arr.shape}")
            require_finite(arr, name)
        try:
            batch = np.broadcast_shapes(x.shape[:-2], context.shape[:-2])
        except ValueError:
            raise ValueError(f"the leading (batch) axes of x {x.shape} and context "
                             f"{context.shape} do not broadcast") from None
        dtype = np.result_type(x, context, self.params["w_q"])
        scores_shape = (*batch, self.n_heads, x.shape[-2], context.shape[-2])
        return x, context, _as_mask(mask, scores_shape, dtype)

    @classmethod
    def from_torch(cls, module):
        """Copy the weights of a ``torch.nn.MultiheadAttention``, exactly.

        Supported: ``kdim == vdim == embed_dim``, no ``add_bias_kv``, no
        ``add_zero_attn``. Dropout is not carried over: the layer computes the
        module's evaluation-mode function. ``batch_first`` does not affect the
        weights (this layer is always batch-first).
        """
        import torch

        if not isinstance(module, torch.nn.MultiheadAttention):
            raise TypeError("expected torch.nn.MultiheadAttention, got "
                            f"{type(module).__name__}")
        if not module._qkv_same_embed_dim:
            raise ValueError("only kdim == vdim == embed_dim is supported")
        if module.bias_k is not None or module.add_zero_attn:
            raise ValueError("add_bias_kv and add_zero_attn are not supported")
        def array(tensor):
            return tensor.detach().cpu().numpy().copy()

        layer = cls.__new__(cls)
        layer.d_model, layer.n_heads = module.embed_dim, module.num_heads
        layer.bias = module.in_proj_bias is not None
        # PyTorch packs [W_Q^T; W_K^T; W_V^T]: (3 d_model, d_model)
        w_q, w_k, w_v = np.split(array(module.in_proj_weight), 3, axis=0)
        layer.params = {"w_q": w_q.T.copy(), "w_k": w_k.T.copy(),
                        "w_v": w_v.T.copy(),
                        "w_o": array(module.out_proj.weight).T.copy()}
        if layer.bias:
            b_q, b_k, b_v = np.split(array(module.in_proj_bias), 3)
            layer.params |= {"b_q": b_q, "b_k": b_k, "b_v": b_v,
                             "b_o": array(module.out_proj.bias)}
        return layer

    def to_torch(self):
        """A ``torch.nn.MultiheadAttention`` with these exact weights.

        The module is batch-first and in evaluation mode.
        """
        import torch

        def tensor(array):
            return torch.from_numpy(np.ascontiguousarray(array))

        p = self.params
        module = torch.nn.MultiheadAttention(
            self.d_model, self.n_heads, bias=self.bias, batch_first=True,
            dtype=tensor(p["w_q"]).dtype)
        with torch.no_grad():
            # (3 d_model, d_model): [W_Q^T; W_K^T; W_V^T]
            in_proj = np.concatenate([p["w_q"].T, p["w_k"].T, p["w_v"].T])
            module.in_proj_weight.copy_(tensor(in_proj))
            module.out_proj.weight.copy_(tensor(p["w_o"].T))
            if self.bias:
                in_bias = np.concatenate([p["b_q"], p["b_k"], p["b_v"]])
                module.in_proj_bias.copy_(tensor(in_bias))
                module.out_proj.bias.copy_(tensor(p["b_o"]))
        return module.eval()
