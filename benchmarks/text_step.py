"""A training step of the language model in NumPy against the same model in PyTorch (CPU).

Usage: ``python benchmarks/text_step.py [--steps 5] [--repeats 5] [--threads 2 1]``

The model of ``python -m scratchformer.train --task text`` (4 pre-LN rotary blocks of width
128, windows of 128 tokens, batch 32), with the character vocabulary (90) and the BPE one
(769); the PyTorch twin is ``scratchformer.pytorch.TorchDecoderModel`` with
autograd on, from the same float32 weights, on the same batch, with the same optimiser
settings; medians of interleaved rounds in one run, both libraries on the same number of
threads. Target: NumPy / PyTorch <= 1.0 on the machine's cores.
"""

from __future__ import annotations

import argparse
import os

import torch

from scratchformer.book.benchmarks import text_step_speed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5, help="steps per timed round")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, nargs="+", default=[os.cpu_count(), 1])
    args = parser.parse_args()
    print(f"{os.cpu_count()} CPU cores, torch {torch.__version__}; medians of "
          f"{args.repeats} interleaved rounds of {args.steps} steps")
    print(f"{'vocabulary':>10} | {'threads':>7} | {'numpy ms':>9} | {'torch ms':>9} | "
          "numpy/torch")
    for threads in args.threads:
        for vocab in (90, 769):
            r = text_step_speed(vocab, threads=threads, steps=args.steps,
                                repeats=args.repeats)
            print(f"{vocab:>10} | {threads:>7} | {1e3 * r['numpy']:>9.1f} | "
                  f"{1e3 * r['torch']:>9.1f} | {r['ratio']:.2f}x  (target <= 1.0x)")


if __name__ == "__main__":
    main()
