"""Training the byte-level BPE on the State of the Union addresses: CPU-seconds, in one run.

Usage: ``python benchmarks/bpe_training.py [--merges 512] [--slice 200000] [--naive-merges 20]``

The incremental trainer (``scratchformer.tokenizer.BPE.train``) learns ``--merges`` merges on
the addresses the book learns from (every tenth held out, typography normalised, as in the
tokenization chapter); the textbook loop (``train_naive``), which recounts the whole text for
every merge, learns ``--naive-merges`` on a slice, and both learn them on the slice too, where
their merges are checked equal. Time is process CPU time (one core; a loaded machine slows the
wall clock, not this). Target: 512 merges on the whole text in at most 10 CPU-seconds; the
ratio of the textbook loop's time per merge (scaled to the whole text) to the incremental one's
is printed beside it.
"""

from __future__ import annotations

import argparse
import time

from scratchformer import corpus
from scratchformer import tokenizer as tk

TARGET_SECONDS = 10.0


def cpu(run):
    start = time.process_time()
    result = run()
    return result, time.process_time() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--merges", type=int, default=512)
    parser.add_argument("--slice", type=int, default=200_000)
    parser.add_argument("--naive-merges", type=int, default=20)
    args = parser.parse_args()
    kept, _ = corpus.held_out_split(corpus.addresses())
    text = corpus.join([corpus.normalise(a.text) for a in kept])
    part = text[:args.slice]
    naive, naive_s = cpu(lambda: tk.train_naive(part, 256 + args.naive_merges + 1))
    fast, fast_slice_s = cpu(lambda: tk.BPE.train(part, 256 + args.naive_merges + 1))
    if naive.merges != fast.merges:
        raise SystemExit("the two trainers learned different merges")
    _, fast_s = cpu(lambda: tk.BPE.train(text, 256 + args.merges + 1))
    naive_whole = naive_s / args.naive_merges * len(text) / len(part) * args.merges
    verdict = "ok" if fast_s <= TARGET_SECONDS else "MISSED"
    print(f"slice of {len(part):,} characters, {args.naive_merges} merges: textbook "
          f"{naive_s:.2f} CPU-s, incremental {fast_slice_s:.2f} CPU-s (same merges)")
    print(f"whole text, {len(text):,} characters, {args.merges} merges: incremental "
          f"{fast_s:.2f} CPU-s (target <= {TARGET_SECONDS:.0f}) {verdict}; textbook, scaled "
          f"from the slice: about {naive_whole:.0f} CPU-s ({naive_whole / fast_s:.0f}x)")
    return 0 if verdict == "ok" else 1


if __name__ == "__main__":
    raise SystemExit(main())
