"""Generation with and without the KV cache: seconds per token, and their ratio, in one run.

Usage: ``python benchmarks/generation_speed.py [--new-tokens 256] [--repeats 3]``

A decoder-only model (rotary positions, d_model=128, 4 heads, d_ff=512, 4 layers, float32)
continues a prompt of 16 tokens, batch 1, greedily. Cached generation reads the prompt once and
then one token per step; uncached generation re-reads the whole sequence at every step. Both
are timed interleaved, and their tokens checked equal. Target (issue "Part IV -- generating
token by token"): 256 tokens with the cache at least 3x faster than without.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

import scratchformer as sf


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
    prompt = rng.integers(0, 64, (1, args.prompt))
    times = {True: [], False: []}
    outputs = {}
    for _ in range(args.repeats):
        for use_cache in (True, False):
            start = time.perf_counter()
            outputs[use_cache] = model.generate(prompt, args.new_tokens, use_cache=use_cache)
            times[use_cache].append(time.perf_counter() - start)
    if not np.array_equal(outputs[True], outputs[False]):
        raise SystemExit("cached and uncached generation chose different tokens")
    cached, uncached = (float(np.median(times[c])) for c in (True, False))
    n = args.new_tokens
    print(f"generation of {n} tokens after a prompt of {args.prompt}, batch 1, float32, "
          f"{os.cpu_count()} CPU cores; medians of {args.repeats} interleaved runs")
    print(f"cached:   {cached:8.3f} s  {1e3 * cached / n:8.2f} ms/token")
    print(f"uncached: {uncached:8.3f} s  {1e3 * uncached / n:8.2f} ms/token")
    print(f"ratio uncached / cached: {uncached / cached:.1f}x (target >= 3x)")


if __name__ == "__main__":
    main()
