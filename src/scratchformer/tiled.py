"""Attention in memory linear in the sequence length: tiles of keys and an online softmax.

The book's chapter "Where attention breaks" (``book/failure_cases.md``) proves that the
result is exactly softmax attention; the idea is the one behind FlashAttention.
"""

from __future__ import annotations

import math
import operator

import numpy as np

from .attention import _check_no_underflow, check_attention_inputs

__all__ = ["tiled_attention"]


def tiled_attention(q, k, v, mask=None, *, block_q=256, block_k=1024):
    r"""Scaled dot-product attention without ever storing the ``(n_q, n_k)`` weights.

    Parameters
    ----------
    q, k, v, mask
        As for :func:`scratchformer.scaled_dot_product_attention`: same shapes, dtypes, mask
        semantics (fully masked rows give zeros) and errors.
    block_q, block_k : int
        Queries and keys per tile. Working memory is about ``block_q * block_k`` scores per
        batch element, whatever the sequence length.

    Returns
    -------
    out : ndarray, shape (..., n_q, d_v)
        Equal to ``scaled_dot_product_attention(q, k, v, mask)[0]`` up to rounding.

    Notes
    -----
    For each tile of queries, the keys are visited tile by tile while three running
    quantities are kept per query: the largest score so far :math:`m`, the sum of
    :math:`e^{s - m}` so far :math:`\ell`, and the sum of :math:`e^{s - m} v` so far
    :math:`a`. When a new tile raises the maximum from :math:`m` to :math:`m'`, the old sums
    are rescaled by :math:`e^{m - m'}`; at the end, :math:`o = a / \ell`. Proved equal to
    softmax attention in the chapter "Where attention breaks".
    """
    block_q, block_k = operator.index(block_q), operator.index(block_k)
    if block_q < 1 or block_k < 1:
        raise ValueError(f"block sizes must be positive, got {block_q}, {block_k}")
    q, k, v, mask = check_attention_inputs(q, k, v, mask)
    *_, n_q, d_k = q.shape
    n_k, d_v = v.shape[-2:]
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    if mask is not None:  # a view: slicing it per tile copies nothing
        mask = np.broadcast_to(mask, (*batch, n_q, n_k))
    scale = 1.0 / math.sqrt(d_k)
    out = np.empty((*batch, n_q, d_v), dtype=q.dtype)

    for q0 in range(0, n_q, block_q):
        rows = slice(q0, q0 + block_q)
        q_tile = q[..., rows, :] * scale  # (..., bq, d_k)
        bq = q_tile.shape[-2]
        running_max = np.full((*batch, bq, 1), -np.inf, dtype=q.dtype)  # m
        running_sum = np.zeros((*batch, bq, 1), dtype=q.dtype)  # l
        acc = np.zeros((*batch, bq, d_v), dtype=q.dtype)  # a
        for k0 in range(0, n_k, block_k):
            cols = slice(k0, k0 + block_k)
            with np.errstate(over="ignore"):  # overflow is reported below
                # (..., bq, d_k) @ (..., d_k, bk) -> (..., bq, bk)
                scores = q_tile @ np.swapaxes(k[..., cols, :], -1, -2)
                if scores.shape[:-2] != batch:
                    scores = np.broadcast_to(scores, (*batch, *scores.shape[-2:])).copy()
                if mask is not None and mask.dtype == np.bool_:
                    np.copyto(scores, -np.inf, where=~mask[..., rows, cols])
                elif mask is not None:
                    scores += mask[..., rows, cols]
            tile_max = scores.max(axis=-1, keepdims=True)  # (..., bq, 1)
            if np.isposinf(tile_max).any():
                raise ValueError(f"scores contain +inf: they overflowed {q.dtype} "
                                 "(scale the inputs down or compute in float64)")
            new_max = np.maximum(running_max, tile_max)
            # Rows with nothing seen yet keep -inf; shift them by 0 (exp(-inf) = 0).
            shift = np.where(np.isneginf(new_max), 0.0, new_max)
            scores -= shift
            np.exp(scores, out=scores)  # e^(s - m'), each <= 1
            rescale = np.exp(running_max - shift)  # e^(m - m'), 0 for an empty past
            running_sum *= rescale
            running_sum += scores.sum(axis=-1, keepdims=True)
            acc *= rescale
            acc += scores @ v[..., cols, :]  # (..., bq, bk) @ (..., bk, d_v)
            running_max = new_max
        empty = running_sum == 0  # (..., bq, 1): every key of the row masked
        _check_no_underflow(empty, None if mask is None else mask[..., rows, :])
        running_sum[empty] = 1.0
        out[..., rows, :] = acc / running_sum
    return out
