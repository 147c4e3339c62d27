"""A training step of the book's model in NumPy against the same model in PyTorch (CPU).

Usage: ``python benchmarks/training_step.py [--steps 20] [--repeats 7] [--batch-size 64]``

Same shapes, same batch, same float32 weights, same optimiser settings (forward, cross-entropy,
backward, gradient clipping, AdamW); medians of interleaved rounds in one run. Targets:
NumPy / PyTorch <= 1.0 at batch 64 and <= 1.5 at batch 256.
"""

from __future__ import annotations

import argparse
import dataclasses
import os

import torch

from scratchformer.book.benchmarks import training_step_speed
from scratchformer.tasks import LabellingTask
from scratchformer.train import BOOK_MODEL, TrainConfig


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="steps per timed round")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--batch-size", type=int, nargs="+", default=[64, 256])
    args = parser.parse_args()
    print(f"{os.cpu_count()} CPU cores, torch {torch.__version__} with "
          f"{torch.get_num_threads()} threads; medians of {args.repeats} interleaved rounds "
          f"of {args.steps} steps")
    print(f"{'model':>34} | {'batch':>5} | {'numpy ms':>9} | {'torch ms':>9} | numpy/torch")
    for batch_size in args.batch_size:
        config = dataclasses.replace(TrainConfig(), batch_size=batch_size)
        task = LabellingTask()
        r = training_step_speed(config, task, steps=args.steps, repeats=args.repeats)
        m = BOOK_MODEL
        shape = (f"L={m['n_layers']} d={m['d_model']} h={m['n_heads']} "
                 f"d_ff={m['d_ff']} n={task.length}")
        print(f"{shape:>34} | {batch_size:>5} | {1e3 * r['numpy']:>9.2f} | "
              f"{1e3 * r['torch']:>9.2f} | {r['ratio']:.2f}x  "
              f"(target <= {1.0 if batch_size <= 64 else 1.5}x)")


if __name__ == "__main__":
    main()
