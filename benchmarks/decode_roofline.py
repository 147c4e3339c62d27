"""SmolLM2-135M's time a generated token against its roofline: the weights' bytes over the
memory's bandwidth, both measured in one run.

Usage: ``python benchmarks/decode_roofline.py [--new-tokens 32] [--repeats 5]``

Generating with the KV cache runs each new token through every matrix once (matrix-vector
products), so a token's time is bounded below by the bytes of the weights divided by the
bandwidth at which the machine reads memory (chapter "Fewer bits", ``book/fewer_bits.md``). The
script measures, interleaved in one run:

- the **bandwidth**: a float32 matrix-vector product over a matrix of about the model's size (the
  operation a token is made of), and a sum over the same bytes; the faster is the machine's rate;
- the **time a token** of ``DecoderModel.generate`` with its cache, batch 1, float32: the time
  of ``1 + new`` tokens after the prompt, less that of 1, over ``new``;
- the **matrices alone**: each of the model's matrices multiplied by a vector once, in turn,
  which is what of a token the roofline bounds; the rest of the token's time is the work
  between them;

and prints the prediction (bytes / bandwidth), the measured time, and their ratio. Target
(issue 53): the prediction within 25 % of the measured time. It also prints the bound for the
file's Q8_0 and Q4_1 bytes, which only a kernel that reads them without expanding them to
float32 could approach. Times depend on the machine's load; read the ratio, measured in one run.
"""

from __future__ import annotations

import argparse
import os
import statistics

import numpy as np

from scratchformer.book.timing import interleaved_times
from scratchformer.pretrained import smollm2

TARGET = 0.25


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    model, tokenizer = smollm2(max_positions=256)
    weights = sum(layer.params[key].nbytes for _, layer, key in model.named_parameters())
    n_weights = sum(layer.params[key].size for _, layer, key in model.named_parameters())
    prompt = np.array(tokenizer.encode("The state of the Union is"))[None, :]
    side = int(np.sqrt(weights / 4))
    matrix = np.random.default_rng(0).standard_normal((side, side), dtype=np.float32)
    vector = np.ones(side, np.float32)
    new = args.new_tokens
    # every matrix of the model once, as a token multiplies it: x @ W for the blocks'
    # projections, the tied embedding as the head (table @ x)
    matrices = [(key, layer.params[key]) for _, layer, key in model.named_parameters()
                if layer.params[key].ndim == 2]
    inputs = {n: np.ones(n, np.float32) for _, w in matrices for n in w.shape}

    def every_matrix_once():
        for key, w in matrices:
            if key == "table":  # the embedding, read whole as the tied head
                w @ inputs[w.shape[1]]
            else:
                inputs[w.shape[0]] @ w

    times = interleaved_times({
        "gemv": lambda: vector @ matrix,
        "sum": lambda: matrix.sum(),
        "matrices": every_matrix_once,
        "one token": lambda: model.generate(prompt, 1),
        "more tokens": lambda: model.generate(prompt, 1 + new),
    }, repeats=args.repeats)
    median = {name: statistics.median(t) for name, t in times.items()}
    bandwidth = matrix.nbytes / min(median["gemv"], median["sum"])
    per_token = (median["more tokens"] - median["one token"]) / new
    predicted = weights / bandwidth
    print(f"SmolLM2-135M, float32, batch 1, {os.cpu_count()} CPU cores, medians of "
          f"{args.repeats} interleaved rounds")
    print(f"bandwidth: {matrix.nbytes / median['gemv'] / 1e9:.1f} GB/s by a matrix-vector "
          f"product, {matrix.nbytes / median['sum'] / 1e9:.1f} GB/s by a sum "
          f"({matrix.nbytes / 1e6:.0f} MB)")
    print(f"weights: {weights / 1e6:.0f} MB read a token")
    print(f"predicted {predicted * 1e3:.1f} ms a token, measured {per_token * 1e3:.1f} ms "
          f"(after a prompt of {prompt.shape[1]} tokens, {new} tokens)")
    print(f"the model's {len(matrices)} matrices, each multiplied by a vector once: "
          f"{median['matrices'] * 1e3:.1f} ms ({median['matrices'] / predicted:.2f} of the "
          f"bound); the rest of a token (norms, RoPE, attention over the cache, the sampling "
          f"and Python's calls): {(per_token - median['matrices']) * 1e3:.1f} ms")
    ratio = per_token / predicted
    verdict = "within" if abs(ratio - 1) <= TARGET else "outside"
    print(f"measured / predicted: {ratio:.2f} ({verdict} the target of {TARGET:.0%})")
    for name, bits in (("Q8_0", 8.5), ("Q4_1", 5.0)):
        print(f"bound with {name} weights read as stored: "
              f"{n_weights * bits / 8 / bandwidth * 1e3:.1f} ms a token")


if __name__ == "__main__":
    main()
