"""Multi-head self-attention forward: scratchformer (NumPy) against PyTorch on the CPU.

Usage: ``python benchmarks/attention_speed.py [--n 512 2048 4096] [--repeats 5]``

Prints, for each sequence length n, the median seconds of the package's output-only forward
(``MultiHeadAttention.forward`` inside ``layer.inference()``), its forward with weights, PyTorch's
``nn.MultiheadAttention`` (``need_weights=False``) and ``F.scaled_dot_product_attention`` with
the same projections, all float32, d_model=512, h=8, batch 1, timed interleaved in one run; and
the ratios. Targets: at n=4096, numpy / torch MHA <= 1.0 and numpy / torch SDPA <= 1.5.
``benchmarks/roofline.py`` shows where the time goes.
"""

from __future__ import annotations

import argparse
import os

from scratchformer.book.benchmarks import attention_forward_speed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[512, 2048, 4096])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rows = attention_forward_speed(args.n, repeats=args.repeats)
    print(f"multi-head self-attention forward, float32, d_model=512, h=8, batch 1, "
          f"{os.cpu_count()} CPU cores; medians of {args.repeats} interleaved runs")
    columns = ["n", "numpy", "numpy+weights", "torch MHA", "torch SDPA",
               "numpy / torch MHA", "numpy / torch SDPA", "numpy+weights / torch MHA"]
    print(" | ".join(f"{c:>12}" for c in columns))
    for row in rows:
        cells = [f"{row['n']:>12d}"]
        cells += [f"{row[c] * 1e3:>9.1f} ms" for c in columns[1:5]]
        cells += [f"{row[c]:>11.2f}x" for c in columns[5:]]
        print(" | ".join(cells))


if __name__ == "__main__":
    main()
