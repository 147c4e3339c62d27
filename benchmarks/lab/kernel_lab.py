"""Kernel lab: faster plain-NumPy attention kernels, checked and timed against PyTorch.

Run with the project's venv::

    .venv/bin/python benchmarks/lab/kernel_lab.py            # checks + timings, ~1-2 minutes
    .venv/bin/python benchmarks/lab/kernel_lab.py --quick    # fewer repeats
    .venv/bin/python benchmarks/lab/kernel_lab.py --check    # correctness checks only

It (1) checks the two candidate kernels below against ``scratchformer.attention.attention_kernel``
(values within 1e-5, masks, fully masked rows, dtypes, broadcasting, errors, no warnings), then
(2) times a complete multi-head self-attention forward (d_model=512, 8 heads, float32, batch 1)
for n = 512, 2048, 4096: the NumPy forward with the reference kernel and with each candidate,
``torch.nn.MultiheadAttention`` (``need_weights=False``, and ``need_weights=True`` with per-head
weights, the like-for-like baseline of the with-weights kernel) and
``torch.nn.functional.scaled_dot_product_attention`` with the same projections. All are run
round-robin; the table shows medians and ratios.

The candidates are plain NumPy: no threads of their own (on a 2-core machine, Python threads
did not beat OpenBLAS's own threading; see the report / ablations.py).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
import warnings

import numpy as np

# --------------------------------------------------------------------------------------------
# The candidate kernels
# --------------------------------------------------------------------------------------------

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


def attention_output(q, k, v, mask=None, *, block_q=None):
    """``softmax(q @ k^T / sqrt(d_k) [+ mask]) @ v`` without keeping the weights.

    Same contract as :func:`scratchformer.attention.attention_kernel` (checked inputs, one float
    dtype, broadcasting leading axes, boolean or float mask, fully masked rows give zeros) but
    returns only ``out`` of shape ``(..., n_q, d_v)``: the analogue of ``need_weights=False``.
    """
    return _blocked_attention(q, k, v, mask, need_weights=False, block_q=block_q)[0]


def attention_with_weights(q, k, v, mask=None, *, block_q=None):
    """As :func:`attention_output`, also returning the weights ``(..., n_q, n_k)``."""
    return _blocked_attention(q, k, v, mask, need_weights=True, block_q=block_q)


def _blocked_attention(q, k, v, mask, need_weights, block_q=None):
    """Attention one (head, block of queries) at a time, in preallocated buffers.

    Per block of ``r`` queries of one head::

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
        mask = np.broadcast_to(mask, (*batch, n_q, n_k))

    if block_q is None:
        block_q = _BLOCK_ELEMS // max(n_k, 1)
    bq = max(1, min(block_q, n_q))
    out = np.empty((*batch, n_q, d_v), dtype)
    weights = np.empty((*batch, n_q, n_k), dtype) if need_weights else None
    s_buf = np.empty((bq, n_k), dtype)  # scores of one block
    p_buf = None if need_weights else np.empty((bq, n_k), dtype)  # their exp (else: weights)
    m_buf = np.empty((bq, 1), dtype)  # row maxima
    o_buf = np.empty((bq, d_v + 1), dtype)  # unnormalised outputs | row sums
    not_buf = np.empty((bq, n_k), np.bool_) if bool_mask else None

    for h in np.ndindex(*batch):
        k_t = k_scaled[h].T  # (d_k, n_k): a transposed view, BLAS reads it as it is
        for i0 in range(0, n_q, bq):
            i1 = min(i0 + bq, n_q)
            r = i1 - i0
            s = s_buf[:r]  # (r, n_k)
            with np.errstate(over="ignore"):  # overflow shows up as +-inf, handled below
                np.matmul(q[h][i0:i1], k_t, out=s)
            # exp into a second buffer (measured ~4% faster than in place); with weights
            # requested, straight into the weights array.
            p = weights[h][i0:i1] if need_weights else p_buf[:r]  # (r, n_k)
            m_blk = None if mask is None else mask[h][i0:i1]  # (r, n_k) view
            if skip_max_ok and bound[h][i0:i1].max() <= _EXP_SAFE:
                np.exp(s, out=p)
                if bool_mask:
                    np.multiply(p, m_blk, out=p)  # blocked pairs get weight exactly 0
            else:
                if bool_mask:
                    np.copyto(s, -np.inf, where=np.logical_not(m_blk, out=not_buf[:r]))
                elif m_blk is not None:
                    s += m_blk  # float mask: 0 allows, -inf blocks
                m = np.max(s, axis=-1, keepdims=True, out=m_buf[:r])  # (r, 1)
                _check_row_max(m, m_blk)
                np.maximum(m, finfo.min, out=m)  # all -inf row: subtract a finite number
                s -= m  # every entry <= 0: exp cannot overflow
                np.exp(s, out=p)
            o = o_buf[:r]  # (r, d_v + 1)
            np.matmul(p, v_ones[h], out=o)
            total = o[:, d_v:]  # (r, 1) row sums: >= e^-30 (or >= 1), or 0 in fully masked rows
            np.maximum(total, finfo.tiny, out=total)  # ... whose zeros then stay zeros
            np.divide(o[:, :d_v], total, out=out[h][i0:i1])
            if need_weights:
                np.divide(p, total, out=p)
    return out, weights


def _check_row_max(m, m_blk):
    """The reference kernel's errors: +inf scores, and -inf rows that the mask leaves open."""
    if np.isposinf(m).any():
        raise ValueError(f"scores contain +inf: they overflowed {m.dtype} "
                         "(scale the inputs down or compute in float64)")
    empty = np.isneginf(m)  # (r, 1)
    if not empty.any():
        return
    if m_blk is None:
        allowed = np.ones_like(empty)
    elif m_blk.dtype == np.bool_:
        allowed = m_blk.any(axis=-1, keepdims=True)
    else:
        allowed = ~np.isneginf(m_blk).all(axis=-1, keepdims=True)
    if (empty & allowed).any():
        raise ValueError("attention scores overflowed to -inf in a row the mask leaves open "
                         "(scale the inputs down or compute in float64)")


# --------------------------------------------------------------------------------------------
# Correctness checks against the reference kernel
# --------------------------------------------------------------------------------------------

def run_checks():
    from scratchformer.attention import attention_kernel, causal_mask

    rng = np.random.default_rng(123)
    n_cases = 0

    def compare(q, k, v, mask=None, block_q=None, atol=1e-5, label=""):
        nonlocal n_cases
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # any RuntimeWarning is a failure
            ref_out, ref_w = attention_kernel(q, k, v, mask)
            out = attention_output(q, k, v, mask, block_q=block_q)
            out2, w = attention_with_weights(q, k, v, mask, block_q=block_q)
        for name, got, want in (("out", out, ref_out), ("out(w)", out2, ref_out),
                                ("weights", w, ref_w)):
            assert got.shape == want.shape, (label, name, got.shape, want.shape)
            assert got.dtype == want.dtype, (label, name, got.dtype, want.dtype)
            assert np.isfinite(got).all(), (label, name)
            err = float(np.max(np.abs(got - want), initial=0.0))
            assert err <= atol, f"{label} {name}: max abs err {err:.3g} > {atol}"
        if mask is not None:  # blocked pairs: weight exactly 0 (not just tiny)
            blocked = (~mask if mask.dtype == np.bool_ else np.isneginf(mask))
            assert not np.any(np.broadcast_to(blocked, w.shape) & (w != 0)), label
        n_cases += 1

    def qkv(batch_q, batch_k, n_q, n_k, d_k, d_v, dtype=np.float32, sd=1.0):
        return (rng.standard_normal((*batch_q, n_q, d_k)).astype(dtype) * sd,
                rng.standard_normal((*batch_k, n_k, d_k)).astype(dtype) * sd,
                rng.standard_normal((*batch_k, n_k, d_v)).astype(dtype) * sd)

    # No mask; skip-max path (small scores) and max-subtracting path (sd=4: bound > 30).
    for sd in (0.5, 4.0):
        for dtype in (np.float32, np.float64):
            q, k, v = qkv((2, 3), (2, 3), 37, 53, 16, 8, dtype, sd)
            compare(q, k, v, label=f"plain sd={sd} {dtype.__name__}")
            compare(q, k, v, block_q=5, label=f"plain blocks sd={sd} {dtype.__name__}")
    # Scores far beyond exp's float32 range (|score| up to ~200): must take the max path.
    q, k, v = qkv((2,), (2,), 30, 30, 16, 16, np.float32, 6.0)
    compare(q, k, v, label="huge scores")
    # Scores of 29 (within the skip-max bound) and values of 1e25: exp(29) * 30 * 1e25 would
    # overflow float32 in p @ v, so these must take the max path too.
    q = np.zeros((2, 30, 16), np.float32)
    q[..., 0] = math.sqrt(29.0 * 4.0)  # scale = 1/4: every score = 29
    v = rng.standard_normal((2, 30, 16)).astype(np.float32) * np.float32(1e25)
    compare(q, q, v, atol=1e19, label="huge values")
    # float16 (the public function keeps it): always the max path; float16 tolerance.
    q, k, v = qkv((2,), (2,), 30, 30, 16, 16, np.float16)
    compare(q, k, v, atol=2e-3, label="float16")
    # The benchmark layout: strided views out of one qkv array (1, 8, n, 64).
    x = rng.standard_normal((1, 300, 3, 8, 64), dtype=np.float32).transpose(2, 0, 3, 1, 4)
    compare(x[0], x[1], x[2], label="strided head views")
    compare(x[0], x[1], x[2], block_q=64, label="strided head views, blocks")
    # Broadcasting leading axes: keys/values shared by heads; queries shared by a batch.
    q, _, _ = qkv((4, 2), (), 20, 20, 8, 8)
    _, k, v = qkv((), (4, 1), 20, 31, 8, 5)
    compare(q, k, v, label="broadcast k/v over heads")
    q, k, v = qkv((1,), (3,), 12, 12, 8, 8)
    compare(q, k, v, label="broadcast q over batch")
    # Masks: causal; random boolean; padding (broadcast over heads and queries); fully masked rows.
    for sd in (0.5, 4.0):
        q, k, v = qkv((2, 4), (2, 4), 33, 33, 16, 16, sd=sd)
        compare(q, k, v, causal_mask(33), label=f"causal sd={sd}")
        compare(q, k, v, causal_mask(33), block_q=7, label=f"causal blocks sd={sd}")
        rmask = rng.random((2, 4, 33, 33)) < 0.3
        rmask[0, 0, 3] = False  # a fully masked row
        rmask[1, 2, :, 5] = False
        compare(q, k, v, rmask, label=f"random bool sd={sd}")
        pad = np.ones((2, 1, 1, 33), bool)
        pad[1, ..., 20:] = False
        compare(q, k, v, pad, label=f"padding sd={sd}")
        none = np.zeros((33, 33), bool)
        compare(q, k, v, none, label=f"all masked sd={sd}")
        # Float masks: -inf blocks (with a fully blocked row), a row of -1e9 (uniform
        # weights, not blocked), and positive biases.
        fmask = np.where(causal_mask(33), 0.0, -np.inf).astype(np.float32)
        fmask[4] = -np.inf
        fmask[5] = -1e9
        fmask[6, :10] = 25.0
        compare(q, k, v, fmask, label=f"float mask sd={sd}")
    # n_q != n_k, d_v != d_k, a single query, a single key, no queries.
    compare(*qkv((3,), (3,), 1, 40, 8, 3), label="one query")
    compare(*qkv((3,), (3,), 9, 1, 8, 3), label="one key")
    q, k, v = qkv((3,), (3,), 0, 7, 8, 3)
    assert attention_output(q, k, v).shape == (3, 0, 3)
    assert attention_with_weights(q, k, v)[1].shape == (3, 0, 7)
    # Errors as in the reference: scores that overflow to +inf; -inf in a row the mask leaves
    # open (both only possible with enormous inputs).
    q = np.full((1, 2, 4), 3e19, np.float32)
    for fn in (attention_kernel, attention_output, attention_with_weights):
        try:
            with np.errstate(all="raise"):
                fn(q, q, q)
        except ValueError as err:
            assert "+inf" in str(err), err
        else:
            raise AssertionError(f"{fn.__name__}: no error for overflowing scores")
        try:
            fn(q, -q, q)
        except ValueError as err:
            assert "-inf" in str(err), err
        else:
            raise AssertionError(f"{fn.__name__}: no error for scores overflowing to -inf")
    print(f"checks: {n_cases} comparisons against attention_kernel passed "
          "(max abs err <= 1e-5, same shapes/dtypes, no warnings, blocked weights exactly 0; "
          "overflow errors as in the reference)")


# --------------------------------------------------------------------------------------------
# Timing: a multi-head self-attention forward, NumPy vs PyTorch
# --------------------------------------------------------------------------------------------

D_MODEL, HEADS = 512, 8


def _clock_ticks():
    """(CPU time used by all processes, CPU time used by this one), in clock ticks."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    busy = sum(fields[:3]) + sum(fields[5:8])  # user nice system, irq softirq steal
    t = os.times()
    return busy, (t.user + t.system) * os.sysconf("SC_CLK_TCK")


def wait_for_quiet(max_wait=90.0, busy_limit=0.08):
    """Wait (up to max_wait s) until other processes use < busy_limit of the machine for 1 s."""
    if not os.path.exists("/proc/stat"):
        return 0.0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < max_wait:
        busy0, own0 = _clock_ticks()
        time.sleep(1.0)
        busy1, own1 = _clock_ticks()
        ticks = os.sysconf("SC_CLK_TCK")
        if ((busy1 - busy0) - (own1 - own0)) / ticks / os.cpu_count() < busy_limit:
            break
    return time.perf_counter() - t0


def timed(fn, retries=3, foreign_limit=0.06):
    """Wall time of one call; repeated if other processes (or the hypervisor) took CPU meanwhile.

    Returns (seconds, fraction of the machine used by others during the sample).
    """
    can_watch = os.path.exists("/proc/stat")
    for attempt in range(retries + 1):
        if can_watch:
            busy0, own0 = _clock_ticks()
        t0 = time.perf_counter()
        fn()
        wall = time.perf_counter() - t0
        if not can_watch:
            return wall, 0.0
        busy1, own1 = _clock_ticks()
        ticks = os.sysconf("SC_CLK_TCK")
        foreign = max(0.0, (busy1 - busy0) - (own1 - own0)) / ticks / (wall * os.cpu_count())
        if wall < 0.1 or foreign <= foreign_limit:  # below 0.1 s the tick count is too coarse
            return wall, foreign
        time.sleep(1.0)
    return wall, foreign


def warm_pages(nbytes):
    """Touch and free ``nbytes`` of memory, so that the next big allocation gets warm pages.

    On this VM, memory freed a few seconds earlier seems to be handed back to the host; the
    first touch of a fresh 512 MB array (the weights at n = 4096) then costs 0.5-1.5 s
    instead of ~0.1 s, and whichever variant first allocates after a quiet spell pays it.
    Touching the pages just before every sample gives every variant the same (ordinary
    hardware) conditions.
    """
    if nbytes:
        np.ones(nbytes // 4, np.float32)


def build_forwards(n, seed=0):
    import torch
    import torch.nn.functional as F
    from scratchformer.attention import attention_kernel

    torch.manual_seed(seed)
    mha = torch.nn.MultiheadAttention(D_MODEL, HEADS, batch_first=True).eval()
    w_qkv = mha.in_proj_weight.detach().numpy().T.copy()  # (512, 1536)
    b_qkv = mha.in_proj_bias.detach().numpy().copy()
    w_o = mha.out_proj.weight.detach().numpy().T.copy()  # (512, 512)
    b_o = mha.out_proj.bias.detach().numpy().copy()
    d_k = D_MODEL // HEADS

    def numpy_forward(x, kernel):
        qkv = x @ w_qkv  # (1, n, 1536)
        qkv += b_qkv
        qkv = qkv.reshape(1, n, 3, HEADS, d_k).transpose(2, 0, 3, 1, 4)  # (3, 1, h, n, d_k) view
        heads = kernel(qkv[0], qkv[1], qkv[2])
        if isinstance(heads, tuple):
            heads = heads[0]
        merged = heads.transpose(0, 2, 1, 3).reshape(1, n, D_MODEL)  # (1, n, 512)
        out = merged @ w_o
        out += b_o
        return out

    def sdpa_forward(xt):
        qkv = F.linear(xt, mha.in_proj_weight, mha.in_proj_bias)
        qkv = qkv.view(1, n, 3, HEADS, d_k).permute(2, 0, 3, 1, 4)  # (3, 1, h, n, d_k)
        heads = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2])
        return F.linear(heads.transpose(1, 2).reshape(1, n, D_MODEL),
                        mha.out_proj.weight, mha.out_proj.bias)

    x = np.random.default_rng(seed + 1).standard_normal((1, n, D_MODEL), dtype=np.float32)
    xt = torch.from_numpy(x)

    def torch_call(fn):
        def run():
            with torch.no_grad():
                return fn()
        return run

    forwards = {
        "numpy + reference kernel": lambda: numpy_forward(x, attention_kernel),
        "numpy + attention_output": lambda: numpy_forward(x, attention_output),
        "numpy + attention_with_weights": lambda: numpy_forward(x, attention_with_weights),
        "torch MHA need_weights=False": torch_call(
            lambda: mha(xt, xt, xt, need_weights=False)[0]),
        "torch MHA need_weights=True*": torch_call(
            lambda: mha(xt, xt, xt, need_weights=True, average_attn_weights=False)[0]),
        "torch SDPA + projections": torch_call(lambda: sdpa_forward(xt)),
    }
    expected = forwards["torch MHA need_weights=False"]().numpy()
    for name, fn in forwards.items():
        got = fn()
        got = got.numpy() if hasattr(got, "numpy") else got
        err = float(np.max(np.abs(got - expected)))
        assert got.dtype == np.float32 and err < 1e-4, (n, name, got.dtype, err)
    return forwards


def run_timings(sizes, rounds):
    import torch

    print(f"\nnumpy {np.__version__}, torch {torch.__version__} (threads {torch.get_num_threads()}), "
          f"os.cpu_count() = {os.cpu_count()}, OPENBLAS_NUM_THREADS = "
          f"{os.environ.get('OPENBLAS_NUM_THREADS', '(unset)')}")
    print("forward: x (1, n, 512) -> in-proj -> 8 heads of attention -> out-proj, float32; "
          "medians of interleaved runs")
    rows = []
    for n in sizes:
        forwards = build_forwards(n)
        r = rounds.get(n, 5)
        times = {name: [] for name in forwards}
        foreign = []
        for fn in forwards.values():  # warm-up (first touch of big buffers, BLAS/OMP threads)
            fn()
        waited = 0.0
        for _ in range(r):
            if n >= 2048:
                waited += wait_for_quiet()
            for name, fn in forwards.items():
                time.sleep(0.15)  # let the other library's spinning worker threads go to sleep
                warm_pages(int(1.25 * HEADS * n * n * 4) if n >= 2048 else 0)
                wall, fo = timed(fn)
                times[name].append(wall)
                if wall >= 0.1:  # shorter samples: too few clock ticks to tell
                    foreign.append(fo)
        med = {name: float(np.median(ts)) for name, ts in times.items()}
        rows.append((n, med, r))
        mha, sdpa = med["torch MHA need_weights=False"], med["torch SDPA + projections"]
        load = f"{max(foreign):.0%}" if foreign else "n/a (samples < 0.1 s)"
        print(f"\nn = {n} ({r} rounds; worst CPU share taken by other processes during a "
              f"sample: {load}; waited {waited:.0f} s for a quiet machine)")
        print(f"  {'':32s} {'median ms':>10s} {'min-max ms':>17s} {'/ MHA':>7s} {'/ SDPA':>7s}")
        for name, t in med.items():
            lo, hi = min(times[name]), max(times[name])
            print(f"  {name:32s} {t * 1e3:10.1f} {f'{lo * 1e3:.0f}-{hi * 1e3:.0f}':>17s} "
                  f"{t / mha:7.2f} {t / sdpa:7.2f}")
    print("\n  * per-head weights (average_attn_weights=False): the like-for-like baseline of "
          "the with-weights path")
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="correctness checks only")
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    parser.add_argument("--sizes", type=int, nargs="*", default=[512, 2048, 4096])
    args = parser.parse_args()
    t0 = time.perf_counter()
    run_checks()
    if not args.check:
        rounds = {512: 7, 2048: 3, 4096: 3} if args.quick else {512: 21, 2048: 7, 4096: 5}
        run_timings(args.sizes, rounds)
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    sys.exit(main())
