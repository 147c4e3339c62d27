"""Where multi-head attention's time goes, each phase against the machine's rates.

Usage: ``python benchmarks/roofline.py [--n 2048 4096] [--repeats 5]``

For each sequence length, measured in one run (interleaved rounds, medians): one core's
and all cores' float32 matrix-product rate, one head's phases on
one core (scores, exponentials, weighted sums, the whole kernel), the layer's projections, its
kernel on all heads and cores, and the whole layer against PyTorch's SDPA version; each with
the fraction of the machine's rate it attains (``scratchformer.book.benchmarks
.attention_roofline``; the appendix "Speed" shows the same table at build time).
"""

from __future__ import annotations

import argparse

from scratchformer.book.benchmarks import attention_roofline


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[2048, 4096])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    for n in args.n:
        r = attention_roofline(n, repeats=args.repeats)
        print(f"n={n}, d_model=512, h=8, float32, {r['cores']} cores, medians of "
              f"{args.repeats}: one core {r['core_gflops']:.0f} GFLOP/s, all cores "
              f"{r['gemm_gflops']:.0f} GFLOP/s, exp {r['exp_ns']:.2f} ns per element")
        for p in r["phases"]:
            unit = "G exp/s" if p["kind"] == "exp" else "GFLOP/s"
            fraction = "" if p["fraction"] is None else f"{p['fraction']:5.2f} of the rate"
            print(f"  {p['phase']:40} {1e3 * p['seconds']:8.1f} ms "
                  f"{p['rate']:8.1f} {unit:8} {fraction}")


if __name__ == "__main__":
    main()
