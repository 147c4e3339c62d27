"""Generation with and without the KV cache, and against PyTorch: seconds per token, in one run.

Usage: ``python benchmarks/generation_speed.py [--new-tokens 256] [--repeats 3]``

A decoder-only model (rotary positions, d_model=128, 4 heads, d_ff=512, 4 layers, float32)
continues a prompt of 16 tokens, batch 1, greedily. Cached generation reads the prompt once and
then one token per step; uncached generation re-reads the whole sequence at every step; the
PyTorch twin (``scratchformer.pytorch.TorchDecoderModel``: the same weights and
the same cache logic, in PyTorch's operations) generates with its cache. All three are timed
interleaved, and their tokens checked equal. Targets: 256 tokens with the cache at least 3x
faster than without, and NumPy with the cache at most 1.5x PyTorch's time.
"""

from __future__ import annotations

import argparse
import os
import statistics

import numpy as np
import torch

import scratchformer as sf
from scratchformer.book.timing import interleaved_times
from scratchformer.pytorch import TorchDecoderModel


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--prompt", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    model = sf.DecoderModel(vocab_size=64, d_model=128, n_heads=4, d_ff=512, n_layers=4,
                            max_positions=args.prompt + args.new_tokens, rng=rng,
                            dtype=np.float32)
    twin = TorchDecoderModel(model)
    prompt = rng.integers(0, 64, (1, args.prompt))
    outputs = {}

    def run(name, generate):
        def timed():
            outputs[name] = generate()
        return timed

    times = interleaved_times({
        "numpy, cached": run("numpy, cached",
                             lambda: model.generate(prompt, args.new_tokens)),
        "numpy, uncached": run("numpy, uncached",
                               lambda: model.generate(prompt, args.new_tokens,
                                                      use_cache=False)),
        "torch, cached": run("torch, cached",
                             lambda: twin.generate(prompt, args.new_tokens)[0]),
    }, repeats=args.repeats)
    reference = outputs["numpy, cached"]
    for name, tokens in outputs.items():
        if not np.array_equal(tokens, reference):
            raise SystemExit(f"{name} chose different tokens from numpy, cached")
    n = args.new_tokens
    medians = {name: statistics.median(t) for name, t in times.items()}
    print(f"generation of {n} tokens after a prompt of {args.prompt}, batch 1, float32, "
          f"{os.cpu_count()} CPU cores, torch {torch.__version__} with "
          f"{torch.get_num_threads()} threads; medians of {args.repeats} interleaved runs")
    for name, t in times.items():
        print(f"{name:16} {medians[name]:8.3f} s  {1e3 * medians[name] / n:8.2f} ms/token  "
              f"[{min(t):.3f}-{max(t):.3f} s]")
    print(f"ratio uncached / cached: "
          f"{medians['numpy, uncached'] / medians['numpy, cached']:.1f}x (target >= 3x)")
    print(f"ratio numpy / torch, cached: "
          f"{medians['numpy, cached'] / medians['torch, cached']:.2f}x (target <= 1.5x)")


if __name__ == "__main__":
    main()
