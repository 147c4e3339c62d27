"""Scaled dot-product attention and its masks.

The book's chapter "Scaled dot-product attention" (``book/scaled_dot_product_attention.md``)
builds this module step by step: scores, scaling, masking, softmax, the weighted sum of values.
"""

from __future__ import annotations

import math

import numpy as np

from . import functional
from ._validation import (
    as_float_array,
    checked_by,
    positive_int,
    require_finite,
    require_min_ndim,
)
from .functional import softmax_inplace

__all__ = ["scaled_dot_product_attention", "attention_backward", "causal_mask",
           "attention_kernel", "check_attention_inputs"]


def scaled_dot_product_attention(q, k, v, mask=None):
    r"""Attention of every query to every key: ``softmax(q @ k.T / sqrt(d_k) + mask) @ v``.

    Parameters
    ----------
    q : array_like, shape (..., n_q, d_k)
        Queries, one row a token.
    k : array_like, shape (..., n_k, d_k)
        Keys.
    v : array_like, shape (..., n_k, d_v)
        Values, one row per key.
    mask : array_like of bool or float, optional
        Must broadcast to the scores' shape ``(..., n_q, n_k)``.
        Boolean: True where query ``i`` may attend to key ``j`` (the convention of PyTorch's
        ``scaled_dot_product_attention``; ``nn.MultiheadAttention`` uses the opposite).
        Floating: added to the scaled scores; ``0`` allows, ``-inf`` blocks.

    Returns
    -------
    out : ndarray, shape (..., n_q, d_v)
        Each row a weighted average of the rows of ``v``.
    weights : ndarray, shape (..., n_q, n_k)
        The attention weights; each row sums to 1, except for fully masked rows (see Notes).

    Raises
    ------
    TypeError
        For complex, object or other non-real inputs, or an integer mask (ambiguous: use bool).
    ValueError
        For inputs with fewer than 2 axes, NaN or infinite entries, mismatched ``d_k`` between
        ``q`` and ``k`` or ``n_k`` between ``k`` and ``v``, leading axes that do not broadcast,
        a mask that does not broadcast to ``(..., n_q, n_k)`` or holds NaN or ``+inf``, and
        scores that overflow the dtype.

    Notes
    -----
    .. math:: &\operatorname{Attention}(Q, K, V) \\
              &\qquad = \operatorname{softmax}\!\left(\frac{Q K^\top}{\sqrt{d_k}} + M\right) V

    The leading axes of ``q``, ``k``, ``v`` (and the mask) broadcast. The dtype of the result is
    the common floating dtype of ``q``, ``k``, ``v`` (float32 stays float32; integers become
    float64).

    A query whose every key is masked has no distribution to take an average over. Here its
    row of ``weights`` is all zeros and its output row is zero: defined, and never NaN.
    (A large finite negative mask value, such as ``-1e9``, is not "blocked": a row of them gives
    uniform weights, as in the reference implementations.)

    Derived in the chapter
    :doc:`Scaled dot-product attention </book/scaled_dot_product_attention>`.
    """
    q, k, v, mask = check_attention_inputs(q, k, v, mask)
    return attention_kernel(q, k, v, mask)


def check_attention_inputs(q, k, v, mask):
    """Validate the arguments of an attention function; return them ready for a kernel.

    ``q``, ``k``, ``v`` come back as floating arrays of their common dtype, ``mask`` as None, a
    boolean array or a float array of that dtype, checked to broadcast to ``(..., n_q, n_k)``.
    Raises the errors documented in :func:`scaled_dot_product_attention`.
    """
    q, k, v = (as_float_array(a, name) for a, name in ((q, "q"), (k, "k"), (v, "v")))
    for arr, name, shape_doc in ((q, "q", "(..., n_q, d_k)"), (k, "k", "(..., n_k, d_k)"),
                                 (v, "v", "(..., n_k, d_v)")):
        require_min_ndim(arr, 2, name, shape_doc)
        require_finite(arr, name)
    *_, n_q, d_k = q.shape
    n_k = k.shape[-2]
    if d_k == 0 or n_k == 0:
        raise ValueError(f"attention needs at least one key and d_k >= 1: q has shape "
                         f"{q.shape}, k has shape {k.shape}")
    if k.shape[-1] != d_k:
        raise ValueError(
            f"q and k must share their last axis d_k: q has shape {q.shape}, k has shape {k.shape}"
        )
    if v.shape[-2] != n_k:
        raise ValueError(
            f"k and v must have the same number of keys n_k (axis -2): "
            f"k has shape {k.shape}, v has shape {v.shape}"
        )
    try:
        batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except ValueError:
        raise ValueError(
            f"the leading (batch) axes of q {q.shape}, k {k.shape} and v {v.shape} "
            "do not broadcast"
        ) from None
    dtype = np.result_type(q, k, v)
    q, k, v = (a.astype(dtype, copy=False) for a in (q, k, v))
    scores_shape = (*batch, n_q, n_k)
    mask = _as_mask(mask, scores_shape, dtype)
    return q, k, v, mask


def attention_kernel(q, k, v, mask=None):
    """The arithmetic of :func:`scaled_dot_product_attention`.

    Inputs are already checked. ``q``, ``k``, ``v``: floating arrays of one
    dtype whose leading axes broadcast.
    ``mask``: None, boolean, or floating of that dtype, broadcastable to the
    scores ``(..., n_q, n_k)``. Layers built on attention validate their inputs
    once and call this.
    """
    n_q, d_k = q.shape[-2:]
    n_k = k.shape[-2]
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    # A Python float, so that float32 inputs stay float32:
    scale = 1.0 / math.sqrt(d_k)
    # Overflow shows up as +-inf scores, which the softmax reports.
    with np.errstate(over="ignore", invalid="ignore"):
        # (..., n_q, d_k) @ (..., d_k, n_k) -> (..., n_q, n_k)
        scores = (q * scale) @ np.swapaxes(k, -1, -2)
        if scores.shape != (*batch, n_q, n_k):  # v alone had more batch axes
            scores = np.broadcast_to(scores, (*batch, n_q, n_k)).copy()
        if mask is not None and mask.dtype == np.bool_:
            # Blocked pairs score -inf: their weight will be exactly 0.
            np.copyto(scores, -np.inf, where=np.logical_not(mask))
        elif mask is not None:
            scores += mask  # a float mask: 0 allows, -inf blocks

    # The softmax overwrites the scores, which are not needed afterwards.
    weights = scores
    # empty: (..., n_q, 1), True for queries that may attend to nothing
    empty = softmax_inplace(weights, axis=-1)
    _check_no_underflow(empty, mask)
    # (..., n_q, n_k) @ (..., n_k, d_v) -> (..., n_q, d_v)
    out = weights @ v
    return out, weights


def _attention_backward_inputs(d_out, q, k, v, weights):
    """The arguments of :func:`attention_backward` checked: float arrays, finite, of shapes
    that fit one another, with the same leading axes."""
    arrays = {name: as_float_array(a, name) for name, a in
              (("d_out", d_out), ("q", q), ("k", k), ("v", v), ("weights", weights))}
    for name, shape_doc in (("d_out", "(..., n_q, d_v)"), ("q", "(..., n_q, d_k)"),
                            ("k", "(..., n_k, d_k)"), ("v", "(..., n_k, d_v)"),
                            ("weights", "(..., n_q, n_k)")):
        require_min_ndim(arrays[name], 2, name, shape_doc)
    d_out, q, k, v, weights = arrays.values()
    _check_same_leading_axes(d_out, q, k, v, weights)
    (n_q, d_k), (n_k, d_v) = q.shape[-2:], v.shape[-2:]
    if k.shape[-2:] != (n_k, d_k):
        raise ValueError(f"k must have shape (..., n_k, d_k) = (..., {n_k}, {d_k}), the keys "
                         f"of v {v.shape} and the width of q {q.shape}, got {k.shape}")
    if weights.shape[-2:] != (n_q, n_k):
        raise ValueError(f"weights must have shape (..., n_q, n_k) = (..., {n_q}, {n_k}), "
                         f"got {weights.shape}")
    if d_out.shape[-2:] != (n_q, d_v):
        raise ValueError(f"d_out must have the output's shape (..., n_q, d_v) = "
                         f"(..., {n_q}, {d_v}), got {d_out.shape}")
    for name, a in arrays.items():
        require_finite(a, name)
    return d_out, q, k, v, weights


# Inside attention_backward, which is called with checked arrays, the softmax's gradient need
# not check them again.
softmax_backward = functional.softmax_backward.unchecked


@checked_by(_attention_backward_inputs)
def attention_backward(d_out, q, k, v, weights):
    r"""Gradients of scaled dot-product attention: ``q``, ``k`` and ``v``.

    Parameters
    ----------
    d_out : ndarray, shape (..., n_q, d_v)
        Gradient of the loss with respect to the attention's output.
    q, k, v : ndarray, shapes (..., n_q, d_k), (..., n_k, d_k), (..., n_k, d_v)
        The inputs of the forward pass, with the same leading axes.
    weights : ndarray, shape (..., n_q, n_k)
        The attention weights the forward pass returned. The mask acts
        through them: a blocked pair has weight 0, so its score gets no
        gradient.

    Returns
    -------
    d_q, d_k, d_v : ndarray
        Shapes of ``q``, ``k`` and ``v``.

    Notes
    -----
    With :math:`S = QK^\top/\sqrt{d_k} + M`,
    :math:`A = \operatorname{softmax}(S)`, :math:`O = AV`:

    .. math::
        \begin{gathered}
        dV = A^\top dO, \qquad dA = dO\, V^\top, \\
        dS = A \odot \bigl(dA - \operatorname{rowsum}(dA \odot A)\bigr), \\
        dQ = \frac{dS\, K}{\sqrt{d_k}}, \qquad
        dK = \frac{dS^\top Q}{\sqrt{d_k}}.
        \end{gathered}

    Derived in the chapter
    :doc:`Backpropagation through attention </book/backpropagation>`.
    """
    _check_same_leading_axes(d_out, q, k, v, weights)
    scale = 1.0 / math.sqrt(q.shape[-1])  # a Python float keeps float32
    # (..., n_k, n_q) @ (..., n_q, d_v) -> (..., n_k, d_v)
    d_v = np.swapaxes(weights, -1, -2) @ d_out
    # (..., n_q, d_v) @ (..., d_v, n_k) -> (..., n_q, n_k)
    d_weights = d_out @ np.swapaxes(v, -1, -2)
    d_scores = softmax_backward(weights, d_weights)  # (..., n_q, n_k)
    d_scores *= scale
    d_q = d_scores @ k  # (..., n_q, n_k) @ (..., n_k, d_k) -> (..., n_q, d_k)
    # (..., n_k, n_q) @ (..., n_q, d_k) -> (..., n_k, d_k)
    d_k = np.swapaxes(d_scores, -1, -2) @ q
    return d_q, d_k, d_v


def _check_same_leading_axes(d_out, q, k, v, weights):
    """The backward passes' inputs must share their leading axes (the forward broadcast them)."""
    if not (q.shape[:-2] == k.shape[:-2] == v.shape[:-2] == d_out.shape[:-2]
            == weights.shape[:-2]):
        shapes = (q.shape, k.shape, v.shape, d_out.shape, weights.shape)
        raise ValueError(
            "q, k, v, d_out and weights need the same leading axes, got "
            f"shapes {shapes} (broadcast the inputs first)")


def causal_mask(n_q, n_k=None):
    """Boolean mask that lets each query attend to its own position and the earlier ones.

    Parameters
    ----------
    n_q : int
        Number of queries, at least 1.
    n_k : int, optional
        Number of keys, at least ``n_q``; default ``n_q``. The queries are the *last* ``n_q``
        positions of the ``n_k``: after a prefix of ``n_k - n_q`` keys already seen (a KV
        cache), query ``i`` sits at position ``n_k - n_q + i``.

    Returns
    -------
    mask : ndarray of bool, shape (n_q, n_k)
        True where key ``j <= n_k - n_q + i``: the square lower triangle for ``n_k = n_q``,
        aligned bottom-right otherwise (PyTorch's ``is_causal=True`` aligns it top-left, which
        is wrong for a cached prefix).
    """
    n_q = positive_int(n_q, "n_q")
    n_k = n_q if n_k is None else positive_int(n_k, "n_k")
    if n_k < n_q:
        raise ValueError(f"n_k={n_k} keys cannot follow n_q={n_q} queries: each query's own "
                         "position is among the keys, so n_k >= n_q")
    return np.tri(n_q, n_k, k=n_k - n_q, dtype=bool)


def _as_mask(mask, scores_shape, dtype):
    """Validate ``mask`` against the scores' shape; float masks are cast to ``dtype``."""
    if mask is None:
        return None
    mask = np.asarray(mask)
    if mask.dtype == np.bool_:
        pass
    elif np.issubdtype(mask.dtype, np.floating):
        with np.errstate(over="ignore"):  # -1e300 in float32 is -inf: still "blocked"
            mask = mask.astype(dtype, copy=False)
        if np.isnan(mask).any() or np.isposinf(mask).any():
            raise ValueError("a float mask is added to the scores: use 0 to allow, -inf to block; "
                             "NaN and +inf are not allowed")
    else:
        raise TypeError(
            f"mask must be boolean (True where a query may attend) or floating (added to the "
            f"scores, -inf blocks), got dtype {mask.dtype}"
        )
    try:
        broadcast = np.broadcast_shapes(mask.shape, scores_shape)
    except ValueError:
        broadcast = None
    if broadcast != scores_shape:
        raise ValueError(
            f"mask of shape {mask.shape} does not broadcast to the scores' shape "
            f"{scores_shape} = (..., n_q, n_k)"
        )
    return mask


def _check_no_underflow(empty, mask):
    """Raise if a row lost all its weight to -inf scores that the mask did not put there."""
    if not empty.any():
        return
    if mask is None:
        allowed = np.ones_like(empty)
    elif mask.dtype == np.bool_:
        allowed = mask.any(axis=-1, keepdims=True)
    else:
        allowed = ~np.isneginf(mask).all(axis=-1, keepdims=True)
    if (empty & allowed).any():
        raise ValueError("attention scores overflowed to -inf in a row the mask leaves open "
                         "(scale the inputs down or compute in float64)")
