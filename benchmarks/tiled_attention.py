"""Tiled attention (online softmax) against untiled attention: time and working memory.

Usage: ``python benchmarks/tiled_attention.py [--n 4096 8192 16384] [--repeats 3]``

For float32, h=8 heads, d_k=64, batch 1, prints per sequence length n the median seconds of
``tiled_attention``, of the untiled ``scaled_dot_product_attention`` (which stores the whole
``(h, n, n)`` weights: 8 GiB at n=16384) and of the layers' query-blocked kernel, timed
interleaved in one run, their ratios, and the peak memory each allocates beyond its output
(tracemalloc). Targets (issue "Position, the Transformer block, and where attention breaks"):
tiled at n=16384 within 64 MiB of working memory, and tiled / untiled <= 1.1.
"""

from __future__ import annotations

import argparse
import os

from scratchformer.book.benchmarks import tiled_attention_speed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[4096, 8192, 16384])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--untiled-max-n", type=int, default=16384,
                        help="skip the untiled version above this length")
    args = parser.parse_args()
    rows = tiled_attention_speed(args.n, repeats=args.repeats, untiled_max_n=args.untiled_max_n)
    print(f"attention, float32, h=8, d_k=64, batch 1, {os.cpu_count()} CPU cores; "
          f"medians of {args.repeats} interleaved runs; memory = peak beyond the output")
    header = ["n", "tiled", "untiled", "blocked", "tiled/untiled", "blocked/untiled",
              "tiled mem", "untiled mem", "blocked mem"]
    print(" | ".join(f"{h:>15}" for h in header))
    for row in rows:
        def seconds(name):
            return f"{row[name]:>13.3f} s" if name in row else f"{'-':>15}"

        def ratio(name):
            return f"{row[name]:>14.2f}x" if name in row else f"{'-':>15}"

        def mib(name):
            key = f"{name} MiB"
            return f"{row[key]:>11.1f} MiB" if key in row else f"{'-':>15}"

        print(" | ".join([f"{row['n']:>15d}", seconds("tiled"), seconds("untiled"),
                          seconds("blocked"), ratio("tiled / untiled"),
                          ratio("blocked / untiled"), mib("tiled"), mib("untiled"),
                          mib("blocked")]))


if __name__ == "__main__":
    main()
