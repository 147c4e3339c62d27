"""Attention in memory linear in the sequence length: key tiles, online softmax.

The book's chapter "Where attention breaks" (``book/failure_cases.md``) proves
that the result is exactly softmax attention; the idea is the one behind
FlashAttention.
"""

from __future__ import annotations

import math

import numpy as np

from ._validation import positive_int
from .attention import _check_no_underflow, check_attention_inputs
from .functional import check_no_overflow

__all__ = ["tiled_attention"]


def tiled_attention(q, k, v, mask=None, *, block_q=256, block_k=1024):
    r"""Scaled dot-product attention that never stores the ``(n_q, n_k)`` weights.

    Parameters
    ----------
    q, k, v, mask
        As for :func:`scratchformer.scaled_dot_product_attention`: the same
        shapes, dtypes, mask semantics (fully masked rows give zeros) and errors.
    block_q, block_k : int
        Queries and keys per tile. The working memory is about
        ``block_q * block_k`` scores per batch element, whatever the length.

    Returns
    -------
    out : ndarray, shape (..., n_q, d_v)
        ``scaled_dot_product_attention(q, k, v, mask)[0]``, up to rounding.

    Notes
    -----
    For each tile of queries, the keys are visited tile by tile while three
    running quantities are kept per query: the largest score so far :math:`m`,
    the sum of :math:`e^{s - m}` so far :math:`\ell`, and the sum of
    :math:`e^{s - m} v` so far :math:`a`. When a tile raises the maximum from
    :math:`m` to :math:`m'`, the old sums are rescaled by :math:`e^{m - m'}`;
    at the end, :math:`o = a / \ell`. Proved equal to softmax attention in the
    chapter :doc:`Where attention breaks </book/failure_cases>`.
    """
    block_q = positive_int(block_q, "block_q")
    block_k = positive_int(block_k, "block_k")
    q, k, v, mask = check_attention_inputs(q, k, v, mask)
    n_q, n_k, d_v = q.shape[-2], k.shape[-2], v.shape[-1]
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    if mask is not None:  # a broadcast view: slicing it copies nothing
        mask = np.broadcast_to(mask, (*batch, n_q, n_k))
    scale = 1.0 / math.sqrt(q.shape[-1])
    out = np.empty((*batch, n_q, d_v), dtype=q.dtype)
    for start in range(0, n_q, block_q):
        rows = slice(start, start + block_q)
        tile_mask = None if mask is None else mask[..., rows, :]
        q_tile = np.broadcast_to(q[..., rows, :] * scale,
                                 (*batch, *q[..., rows, :].shape[-2:]))
        out[..., rows, :] = _attend_tile(q_tile, k, v, tile_mask, block_k)
    return out


def _attend_tile(q, k, v, mask, block_k):
    """Attention of a tile of (already scaled) queries, over key tiles.

    ``q``: (..., bq, d_k) with the full batch shape; ``k``, ``v``: all keys
    and values; ``mask``: None or the rows of this tile, (..., bq, n_k).
    """
    *batch, bq, _ = q.shape
    m = np.full((*batch, bq, 1), -np.inf, dtype=q.dtype)  # running max
    total = np.zeros((*batch, bq, 1), dtype=q.dtype)  # running sum, l
    acc = np.zeros((*batch, bq, v.shape[-1]), dtype=q.dtype)  # running a
    for start in range(0, k.shape[-2], block_k):
        cols = slice(start, start + block_k)
        # Overflow (+inf or NaN scores) is reported below.
        with np.errstate(over="ignore", invalid="ignore"):
            # (..., bq, d_k) @ (..., d_k, bk) -> (..., bq, bk)
            s = q @ np.swapaxes(k[..., cols, :], -1, -2)
            if mask is not None and mask.dtype == np.bool_:
                np.copyto(s, -np.inf, where=~mask[..., cols])
            elif mask is not None:
                s += mask[..., cols]
        m_new = np.maximum(m, s.max(axis=-1, keepdims=True))
        check_no_overflow(m_new)
        # A row that has seen only -inf keeps m = -inf; shift it by 0.
        shift = np.where(np.isneginf(m_new), 0.0, m_new)
        s -= shift
        np.exp(s, out=s)  # e^(s - m'), every entry <= 1
        rescale = np.exp(m - shift)  # e^(m - m'); 0 while nothing was seen
        total *= rescale
        total += s.sum(axis=-1, keepdims=True)
        acc *= rescale
        acc += s @ v[..., cols, :]  # (..., bq, bk) @ (..., bk, d_v)
        m = m_new
    empty = total == 0  # (..., bq, 1): every key of the row was masked
    _check_no_underflow(empty, mask)
    total[empty] = 1.0  # their acc is 0: the output row is 0
    return acc / total
