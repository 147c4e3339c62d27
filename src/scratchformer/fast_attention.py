"""Fast attention kernels for the layers: the same function as ``attention_kernel``, quicker.

``scratchformer.attention.attention_kernel`` computes attention the way the chapter "Scaled
dot-product attention" explains it, one step at a time over whole ``(n_q, n_k)`` arrays. The
layers (``MultiHeadAttention``) call these kernels instead, which compute the same function
(checked in ``tests/test_fast_attention.py``) in blocks of queries that stay in the processor's
cache, with further savings, each measured (appendix "Speed"):

- the row sums come out of the second matrix product, ``p @ [v | 1]``, instead of a separate
  pass over the block;
- the small output is normalised instead of the large block of weights (when the weights are
  not wanted, they are never normalised or stored);
- when a Cauchy-Schwarz bound shows that no score of a block exceeds 30 in absolute value, the
  row maximum is neither computed nor subtracted: ``e^s`` can then neither overflow nor become
  denormal, and the softmax does not change (the shift cancels);
- on that path the keys are taken in blocks too (``_KEY_BLOCK``), and the scores exponentiated
  in place, so that a block stays in the core's cache from one product to the next;
- the (sequence, head) pairs are shared among threads, one per core, with BLAS on one thread
  while they run (``scratchformer._threads``): NumPy's elementwise passes, on one core each,
  then run on every core.

The backward pass, ``fast_attention_backward``, goes head by head for the same reason: each
head's gradients stay in the cache, and it computes the very floats of
``scratchformer.attention.attention_backward`` (measured as part of the language model's
training step, ``benchmarks/text_step.py``).
"""

from __future__ import annotations

import math

import numpy as np

from ._threads import parallel_map, shares
from .attention import _check_no_underflow, _check_same_leading_axes
from .functional import check_no_overflow

__all__ = ["fast_attention", "fast_attention_backward", "fast_attention_output"]

# If every score of a block lies in [-_EXP_SAFE, _EXP_SAFE], exp(score) can be taken as it is,
# without subtracting the row maximum: e^30 ~ 1e13 cannot overflow (float32 reaches 3e38) and
# e^-30 ~ 1e-13 is far from float32's smallest normal number (1e-38), so each row sum is a
# normal, accurately computed number and no denormals (which slow exp and the GEMM down by
# 10-100x) are produced. Softmax is unchanged by the shift, so the result is the same.
_EXP_SAFE = 30.0

# Scores per query block: block_q * n_k = 2**21 floats (8 MB in float32; block_q = 512 for
# n_k = 4096). Smaller blocks fit the 2 MB L2 better but make the GEMMs less efficient; this
# size measured best for n_k = 2048..4096.
_BLOCK_ELEMS = 1 << 21

# Keys per block where the row maximum is not needed (see below): a block of scores of
# block_q * _KEY_BLOCK floats (1 MiB in float32 for block_q = 512) stays in the core's cache
# between the product that makes it, its exponential and the product that uses it; measured
# faster than whole rows of keys (appendix "Speed").
_KEY_BLOCK = 512

# From this many scores in all (heads x n_q x n_k), the heads are shared among threads, one
# per core; below it, starting the threads would cost more than it saves.
_PARALLEL_SCORES = 1 << 20


def fast_attention_output(q, k, v, mask=None, *, block_q=None):
    """``softmax(q @ k^T / sqrt(d_k) [+ mask]) @ v`` without keeping the weights.

    Same contract as :func:`scratchformer.attention.attention_kernel` (checked inputs, one float
    dtype, broadcasting leading axes, boolean or float mask, fully masked rows give zeros) but
    returns only ``out`` of shape ``(..., n_q, d_v)``: the analogue of ``need_weights=False``.
    """
    return _blocked_attention(q, k, v, mask, need_weights=False, block_q=block_q)[0]


def fast_attention(q, k, v, mask=None, *, block_q=None):
    """As :func:`fast_attention_output`, also returning the weights ``(..., n_q, n_k)``.

    The same result as :func:`scratchformer.attention.attention_kernel`, up to rounding.
    """
    return _blocked_attention(q, k, v, mask, need_weights=True, block_q=block_q)


def fast_attention_backward(d_out, q, k, v, weights):
    """The gradients of :func:`scratchformer.attention_backward`, one (sequence, head) at a time.

    Same contract (``d_out``, ``q``, ``k``, ``v`` and ``weights`` with the same leading axes;
    returns ``d_q, d_k, d_v``), for inputs of one float dtype. Each head's ``(n_q, n_k)``
    gradients stay in the core's cache from the product that makes them, through the passes
    of the softmax's backward, to the products that use them, where whole-array passes stream
    every head's through memory several times. The heads are shared among threads as in
    :func:`fast_attention`. The same floats as ``attention_backward``: the same products, of
    the same shapes, and the same sums over each row (tested).
    """
    _check_same_leading_axes(d_out, q, k, v, weights)
    dtype = np.result_type(d_out, q, k, v, weights)
    if any(a.dtype != dtype for a in (d_out, q, k, v, weights)):
        raise TypeError(f"fast_attention_backward needs one float dtype, got "
                        f"{[a.dtype.name for a in (d_out, q, k, v, weights)]}")
    n_q, n_k = weights.shape[-2:]
    scale = 1.0 / math.sqrt(q.shape[-1])  # a Python float keeps float32
    d_q, d_k, d_v = (np.empty(a.shape, dtype) for a in (q, k, v))

    def backward(heads):
        d_scores = np.empty((n_q, n_k), dtype)  # one head's, in the cache
        for h in heads:
            a = weights[h]  # (n_q, n_k)
            np.matmul(a.T, d_out[h], out=d_v[h])  # dV = A^T dO
            np.matmul(d_out[h], v[h].T, out=d_scores)  # dA = dO V^T, then in place:
            inner = np.einsum("...i,...i->...", d_scores, a)[..., None]  # (n_q, 1)
            d_scores -= inner
            d_scores *= a  # dS = A (dA - rowsum(dA A)), as softmax_backward
            d_scores *= scale
            np.matmul(d_scores, k[h], out=d_q[h])  # dQ = dS K / sqrt(d_k)
            np.matmul(d_scores.T, q[h], out=d_k[h])  # dK = dS^T Q / sqrt(d_k)

    heads = list(np.ndindex(*weights.shape[:-2]))
    dealt = shares(heads) if len(heads) * n_q * n_k >= _PARALLEL_SCORES else [heads]
    parallel_map(backward, dealt, len(dealt))
    return d_q, d_k, d_v


def _blocked_attention(q, k, v, mask, need_weights, block_q=None):
    """Attention one (head, block of queries) at a time, in preallocated buffers, the heads
    shared among threads.

    Per block of ``r`` queries of one head (on the path without the maximum, the keys in blocks
    whose shares of ``p @ [v | 1]`` add up)::

        s = q_blk @ (k * scale)^T                 # (r, n_k)   GEMM
        p = exp(s)            (or exp(s - max))   # (r, n_k)   the only full elementwise pass
        [p @ v | p @ 1] = p @ [v | 1]             # (r, d_v+1) GEMM: outputs *and* row sums
        out_blk = (p @ v) / rowsum                # (r, d_v)   normalise the small output...
        weights_blk = p / rowsum                  # ...and the weights only when asked for
    """
    dtype = np.result_type(q, k, v)
    *_, n_q, d_k = q.shape
    n_k, d_v = v.shape[-2:]
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    scale = 1.0 / math.sqrt(d_k)  # a Python float: float32 stays float32
    finfo = np.finfo(dtype)

    # Per-head operands, for all heads at once (O(n d) work, negligible next to O(n^2 d)).
    k_scaled = np.multiply(k, scale, out=np.empty(k.shape, dtype))  # (..., n_k, d_k), C order
    v_ones = np.empty((*v.shape[:-1], d_v + 1), dtype)  # (..., n_k, d_v + 1)
    v_ones[..., :d_v] = v
    v_ones[..., d_v] = 1.0  # its column of ones makes the PV GEMM also return the row sums
    bool_mask = mask is not None and mask.dtype == np.bool_

    # Cauchy-Schwarz: |score_ij| <= |q_i| * max_j |k_j * scale|. Where this bound is <= _EXP_SAFE
    # the row max need not be computed nor subtracted. Not for float masks (they may add large
    # values), float16 (too small a range), or values so large (> ~1e20 in float32) that
    # p @ v with p up to e^30 could overflow: those take the max-subtracting path.
    skip_max_ok = (mask is None or bool_mask) and finfo.maxexp >= 128
    if skip_max_ok and v_ones.size:
        v_abs_max = max(float(np.max(v_ones)), -float(np.min(v_ones)))  # (the 1s do no harm)
        skip_max_ok = v_abs_max * max(n_k, 1) * math.exp(_EXP_SAFE) < float(finfo.max) / 16
    if skip_max_ok:
        with np.errstate(over="ignore", invalid="ignore"):  # inf/nan: the max-subtracting path
            k_max = np.sqrt(np.max(np.vecdot(k_scaled, k_scaled), axis=-1, initial=0.0))
            bound = np.sqrt(np.vecdot(q, q)) * k_max[..., None]  # (..., n_q)
        bound = np.broadcast_to(bound, (*batch, n_q))

    q = np.broadcast_to(q, (*batch, n_q, d_k))
    k_scaled = np.broadcast_to(k_scaled, (*batch, n_k, d_k))
    v_ones = np.broadcast_to(v_ones, (*batch, n_k, d_v + 1))
    if mask is not None:
        if skip_max_ok and bool_mask:
            # The path without the maximum multiplies by the mask: by 1.0 and 0.0 of the
            # dtype, the same products as by True and False, in half the time.
            keep = np.broadcast_to(mask.astype(dtype), (*batch, n_q, n_k))
        mask = np.broadcast_to(mask, (*batch, n_q, n_k))

    if block_q is None:
        block_q = _BLOCK_ELEMS // max(n_k, 1)
    bq = max(1, min(block_q, n_q))
    out = np.empty((*batch, n_q, d_v), dtype)
    weights = np.empty((*batch, n_q, n_k), dtype) if need_weights else None

    bk = max(1, min(_KEY_BLOCK, n_k))
    # Per (head, block of queries): whether the bound allows skipping the maximum, for every
    # block at once.
    if skip_max_ok and n_q:
        safe = np.maximum.reduceat(bound, np.arange(0, n_q, bq), axis=-1) <= _EXP_SAFE

    def attend(heads):
        """Every block of the given (sequence, head) pairs, in buffers of its own."""
        s_flat = np.empty(bq * n_k, dtype)  # scores of one block, exponentiated in place
        m_buf = np.empty((bq, 1), dtype)  # row maxima
        o_buf = np.empty((bq, d_v + 1), dtype)  # unnormalised outputs | row sums
        part = np.empty((bq, d_v + 1), dtype)  # one block of keys' share of them
        not_buf = np.empty((bq, n_k), np.bool_) if bool_mask else None
        for h in heads:
            k_t = k_scaled[h].T  # (d_k, n_k): a transposed view, BLAS reads it as it is
            for i0 in range(0, n_q, bq):
                i1 = min(i0 + bq, n_q)
                r = i1 - i0
                o = o_buf[:r]  # (r, d_v + 1)
                skipped = skip_max_ok and safe[h][i0 // bq]
                if skipped:
                    # No maximum to find: each block of keys is done on its own, in a block
                    # of scores small enough to stay in the core's cache; o sums their shares
                    # (finite: |o| <= max|v| n_k e^30, checked with skip_max_ok).
                    for j0 in range(0, n_k, bk):
                        j1 = min(j0 + bk, n_k)
                        if need_weights:
                            p = weights[h][i0:i1, j0:j1]  # (r, c): exp straight into them
                        else:
                            p = s_flat[:r * (j1 - j0)].reshape(r, j1 - j0)
                        np.matmul(q[h][i0:i1], k_t[:, j0:j1], out=p)
                        np.exp(p, out=p)
                        if bool_mask:  # blocked pairs get weight exactly 0
                            np.multiply(p, keep[h][i0:i1, j0:j1], out=p)
                        np.matmul(p, v_ones[h][j0:j1], out=o if j0 == 0 else part[:r])
                        if j0:
                            o += part[:r]
                    p = weights[h][i0:i1] if need_weights else None
                else:
                    m_blk = None if mask is None else mask[h][i0:i1]  # (r, n_k) view
                    p = weights[h][i0:i1] if need_weights else s_flat[:r * n_k].reshape(r, n_k)
                    # overflow shows up as +-inf, handled below
                    with np.errstate(over="ignore", invalid="ignore"):
                        np.matmul(q[h][i0:i1], k_t, out=p)
                    if bool_mask:
                        np.copyto(p, -np.inf, where=np.logical_not(m_blk, out=not_buf[:r]))
                    elif m_blk is not None:
                        p += m_blk  # float mask: 0 allows, -inf blocks
                    m = np.max(p, axis=-1, keepdims=True, out=m_buf[:r])  # (r, 1)
                    check_no_overflow(m)
                    _check_no_underflow(np.isneginf(m), m_blk)
                    np.maximum(m, finfo.min, out=m)  # all -inf row: subtract a finite number
                    p -= m  # every entry <= 0: exp cannot overflow
                    np.exp(p, out=p)
                    with np.errstate(over="ignore", invalid="ignore"):
                        np.matmul(p, v_ones[h], out=o)
                total = o[:, d_v:]  # (r, 1) row sums: >= e^-30 (or >= 1), or 0 if all masked
                np.maximum(total, finfo.tiny, out=total)  # ... whose zeros then stay zeros
                if skipped or np.isfinite(o).all():  # finite without the maximum (above)
                    np.divide(o[:, :d_v], total, out=out[h][i0:i1])
                else:  # values near the dtype's limit (max-subtracting path only): normalise
                    total = p.sum(axis=-1, keepdims=True)  # the weights before summing
                    np.maximum(total, finfo.tiny, out=total)
                    np.matmul(p / total, v_ones[h][:, :d_v], out=out[h][i0:i1])
                if need_weights:
                    np.divide(p, total, out=p)

    heads = list(np.ndindex(*batch))
    # The heads are independent: each thread attends with its share, into its slices of
    # ``out`` and ``weights``, with BLAS on one thread (module ``_threads``).
    dealt = shares(heads) if len(heads) * n_q * n_k >= _PARALLEL_SCORES else [heads]
    parallel_map(attend, dealt, len(dealt))
    return out, weights
