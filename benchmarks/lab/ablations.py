"""Ablations behind kernel_lab.py: which tricks help the plain-NumPy attention kernel.

    .venv/bin/python benchmarks/lab/ablations.py            # default environment, + a re-run of
                                                            # the threaded variants with
                                                            # OPENBLAS_NUM_THREADS=1 (subprocess)
    .venv/bin/python benchmarks/lab/ablations.py --sizes 4096 --rounds 5

Times the attention kernel alone (q, k, v: strided (1, 8, n, 64) float32 views, no mask), all
variants interleaved round-robin, medians. ``variant()`` below is a configurable copy of the
kernel in kernel_lab.py (output-only unless need_weights=True), unmasked inputs only.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kernel_lab import _EXP_SAFE, timed, warm_pages  # noqa: E402

_pool = ThreadPoolExecutor(max_workers=2)


def variant(q, k, v, *, need_weights=False, block_q=512, skip_max=True, exp_out=True,
            row_sums="ones", k_contig=False, threads="none", recip=False, w_scratch=False,
            heads_outer=True):
    """threads: "none"; "split" (2 threads share each block's elementwise work, GEMMs in the
    caller); "items" (2 threads each take whole (head, block) items); "pipeline" (a helper
    thread does exp of block i while the caller runs the GEMMs of blocks i-1 and i+1)."""
    dtype = np.result_type(q, k, v)
    *_, n_q, d_k = q.shape
    n_k, d_v = v.shape[-2:]
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    scale = 1.0 / math.sqrt(d_k)
    fi = np.finfo(dtype)
    k_scaled = np.multiply(k, scale, out=np.empty(k.shape, dtype))
    k_t_contig = np.ascontiguousarray(np.swapaxes(k_scaled, -1, -2)) if k_contig else None
    v_ones = np.empty((*v.shape[:-1], d_v + 1), dtype)
    v_ones[..., :d_v] = v
    v_ones[..., d_v] = 1.0
    k_max = np.sqrt(np.max(np.vecdot(k_scaled, k_scaled), axis=-1, initial=0.0))
    bound = np.sqrt(np.vecdot(q, q)) * k_max[..., None]
    bq = max(1, min(block_q, n_q))
    out = np.empty((*batch, n_q, d_v), dtype)
    weights = np.empty((*batch, n_q, n_k), dtype) if need_weights else None
    if heads_outer:
        items = [(h, i0, min(i0 + bq, n_q))
                 for h in np.ndindex(*batch) for i0 in range(0, n_q, bq)]
    else:
        items = [(h, i0, min(i0 + bq, n_q))
                 for i0 in range(0, n_q, bq) for h in np.ndindex(*batch)]

    def buffers():
        return (np.empty((bq, n_k), dtype), np.empty((bq, n_k), dtype),
                np.empty((bq, 1), dtype), np.empty((bq, d_v + 1), dtype))

    def elementwise(s, p, m, fast):
        if fast:
            np.exp(s, out=p)
        else:
            np.max(s, axis=-1, keepdims=True, out=m)
            np.maximum(m, fi.min, out=m)
            s -= m
            np.exp(s, out=p)

    def scores(h, i0, i1, s):
        k_t = k_t_contig[h] if k_contig else k_scaled[h].T
        np.matmul(q[h][i0:i1], k_t, out=s)

    def finish(h, i0, i1, p, o, split=False):
        if row_sums == "ones":
            np.matmul(p, v_ones[h], out=o)
        else:
            np.matmul(p, v[h], out=o[:, :d_v])
            np.sum(p, axis=-1, keepdims=True, out=o[:, d_v:])
        total = o[:, d_v:]
        np.maximum(total, fi.tiny, out=total)
        np.divide(o[:, :d_v], total, out=out[h][i0:i1])
        if need_weights:
            w = weights[h][i0:i1]  # == p, unless w_scratch
            if recip:
                np.reciprocal(total, out=total)
            op = np.multiply if recip else np.divide
            if split:
                half = len(p) // 2
                f = _pool.submit(op, p[half:], total[half:], out=w[half:])
                op(p[:half], total[:half], out=w[:half])
                f.result()
            else:
                op(p, total, out=w)

    def block(h, i0, i1, bufs, split=False):
        s_b, p_b, m_b, o_b = bufs
        r = i1 - i0
        s = s_b[:r]
        scores(h, i0, i1, s)
        p = weights[h][i0:i1] if need_weights and not w_scratch else (p_b[:r] if exp_out else s)
        fast = skip_max and bound[h][i0:i1].max() <= _EXP_SAFE
        if split and r > 1:
            half = r // 2
            f = _pool.submit(elementwise, s[half:], p[half:], m_b[half:r], fast)
            elementwise(s[:half], p[:half], m_b[:half], fast)
            f.result()
        else:
            elementwise(s, p, m_b[:r], fast)
        finish(h, i0, i1, p, o_b[:r], split)

    if threads in ("none", "split"):
        bufs = buffers()
        for it in items:
            block(*it, bufs, split=threads == "split")
    elif threads == "items":
        lock = threading.Lock()
        queue = iter(items)

        def worker():
            bufs = buffers()
            while True:
                with lock:
                    it = next(queue, None)
                if it is None:
                    return
                block(*it, bufs)

        for f in [_pool.submit(worker) for _ in range(2)]:
            f.result()
    elif threads == "pipeline":
        s_bufs, p_bufs = [buffers() for _ in range(2)], [None, None]
        o_b = np.empty((bq, d_v + 1), dtype)
        pending = None
        for j, (h, i0, i1) in enumerate(items):
            s_b, p_b, m_b, _ = s_bufs[j % 2]
            r = i1 - i0
            scores(h, i0, i1, s_b[:r])
            p = weights[h][i0:i1] if need_weights else p_b[:r]
            fast = skip_max and bound[h][i0:i1].max() <= _EXP_SAFE
            nxt = _pool.submit(elementwise, s_b[:r], p, m_b[:r], fast)
            p_bufs[j % 2] = p
            if pending is not None:
                pending.result()
                ph, pi0, pi1 = items[j - 1]
                finish(ph, pi0, pi1, p_bufs[(j - 1) % 2], o_b[:pi1 - pi0])
            pending = nxt
        pending.result()
        h, i0, i1 = items[-1]
        finish(h, i0, i1, p_bufs[(len(items) - 1) % 2], o_b[:i1 - i0])
    return (out, weights) if need_weights else out


VARIANTS = {
    # name: kwargs of variant()
    "blocked, max-subtract, exp in place": dict(skip_max=False, exp_out=False),
    "  + exp into a 2nd buffer": dict(skip_max=False),
    "  + skip max/subtract (FINAL)": dict(),
    "FINAL, row sums by np.sum": dict(row_sums="sum"),
    "FINAL, contiguous k^T copy": dict(k_contig=True),
    "FINAL, query blocks outer, heads inner": dict(heads_outer=False),
    "FINAL, block_q=128": dict(block_q=128),
    "FINAL, block_q=256": dict(block_q=256),
    "FINAL, block_q=1024": dict(block_q=1024),
    "FINAL, block_q=2048": dict(block_q=2048),
    "FINAL + threads: split elementwise": dict(threads="split"),
    "FINAL + threads: whole items": dict(threads="items"),
    "FINAL + threads: exp pipeline": dict(threads="pipeline"),
    "W: FINAL with weights (divide)": dict(need_weights=True),
    "W: with weights, x reciprocal": dict(need_weights=True, recip=True),
    "W: with weights, max-subtract": dict(need_weights=True, skip_max=False),
    "W: with weights + split threads": dict(need_weights=True, threads="split"),
    "W: exp to scratch, p/sum -> weights": dict(need_weights=True, w_scratch=True),
}
THREADED = ["  + skip max/subtract (FINAL)", "FINAL + threads: split elementwise",
            "FINAL + threads: whole items", "FINAL + threads: exp pipeline",
            "W: FINAL with weights (divide)", "W: with weights + split threads",
            "W: exp to scratch, p/sum -> weights"]


def main():
    from scratchformer.attention import attention_kernel

    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="*", default=[2048, 4096])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--no-subprocess", action="store_true")
    args = ap.parse_args()
    names = args.only or ["reference attention_kernel", *VARIANTS]
    print(f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', '(unset)')}")
    for n in args.sizes:
        rng = np.random.default_rng(0)
        x = rng.standard_normal((1, n, 3, 8, 64), dtype=np.float32).transpose(2, 0, 3, 1, 4)
        q, k, v = x * np.float32(0.7)  # strided (1, 8, n, 64) views, like the forward's
        ref_out, ref_w = attention_kernel(q, k, v)
        cands = {}
        for name in names:
            if name.startswith("reference"):
                cands[name] = lambda: attention_kernel(q, k, v)
                continue
            kw = VARIANTS[name]
            got = variant(q, k, v, **kw)
            if kw.get("need_weights"):
                assert np.abs(got[1] - ref_w).max() < 1e-5, name
                got = got[0]
            assert np.abs(got - ref_out).max() < 1e-5, name
            cands[name] = lambda kw=kw: variant(q, k, v, **kw)
        times = {name: [] for name in cands}
        for _ in range(args.rounds):
            for name, fn in cands.items():
                time.sleep(0.1)
                warm_pages(int(1.25 * 8 * n * n * 4))
                times[name].append(timed(fn)[0])
        base = float(np.median(times.get("  + skip max/subtract (FINAL)", [np.nan])))
        print(f"\nkernel only, n = {n}, 8 heads, d_k = 64, float32 ({args.rounds} rounds)")
        print(f"  {'variant':40s} {'median ms':>10s} {'min ms':>8s} {'/ FINAL':>8s}")
        for name, ts in times.items():
            med = float(np.median(ts))
            print(f"  {name:40s} {med * 1e3:10.1f} {min(ts) * 1e3:8.1f} {med / base:8.2f}")
    if not args.no_subprocess and "OPENBLAS_NUM_THREADS" not in os.environ:
        print("\n--- the threaded variants again, with single-threaded OpenBLAS ---", flush=True)
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
        subprocess.run([sys.executable, __file__, "--sizes", *map(str, args.sizes),
                        "--rounds", str(args.rounds), "--no-subprocess", "--only", *THREADED],
                       env=env, check=True)


if __name__ == "__main__":
    main()
