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
import dataclasses
import sys
import time

import numpy as np

from ._validation import positive_int
from .addition import AdditionTask
from .decoder_only import DecoderModel
from .model import EncoderModel
from .module import Layer
from .optim import Adam, clip_grad_norm, grad_norm, warmup_cosine
from .seq2seq import EncoderDecoderModel
from .tasks import LABELLINGS, LabellingTask, Split, Task
from .translation import TranslationTask

__all__ = ["TASKS", "BOOK_MODEL", "ADDER_MODEL", "ADDER_TRAINING", "TRANSLATION_CONFIG",
           "TrainConfig", "TrainResult", "make_task", "book_model", "adder_model", "train_step",
           "train", "main"]

#: The tasks of the command line.
TASKS = (*LABELLINGS, "add", "translate")

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

    def __post_init__(self):
        for name in ("batch_size", "max_steps", "eval_every", "n_valid", "n_test"):
            positive_int(getattr(self, name), name)
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
        Per step: ``loss``, ``lr``, ``grad_norm`` (before clipping). Per evaluation:
        ``eval_step`` (steps done) and ``valid_accuracy``.
    test : dict of str to float
        The task's scores on the held-out test set (``accuracy`` and the task's others).
    steps : int
        Optimiser steps taken.
    seconds : float
        Wall-clock time of the training loop (evaluations included).
    split : Split or None
        The held-out validation and test sets the run drew (never trained on).
    """

    model: Layer
    history: dict
    test: dict
    steps: int
    seconds: float
    split: Split | None = None

    @property
    def test_accuracy(self):
        """The task's headline score on the test set, ``test["accuracy"]``."""
        return self.test["accuracy"]


def make_task(name, **options):
    """The task of the command line called ``name``: ``reverse``, ``sort``, ``add`` or
    ``translate``."""
    if name in LABELLINGS:
        return LabellingTask(kind=name, **options)
    if name == "add":
        return AdditionTask(**options)
    if name == "translate":
        return TranslationTask(**options)
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
    history = {"loss": [], "lr": [], "grad_norm": [], "eval_step": [], "valid_accuracy": []}
    start = time.perf_counter()
    steps = 0
    for step in range(c.max_steps):
        batch = task.sample(data_rng, c.batch_size, split.exclude)
        lr = warmup_cosine(step, peak=c.peak_lr, warmup=c.warmup_steps, total=c.max_steps,
                           final=c.final_lr_fraction)
        loss, norm = train_step(model, optimiser, task, batch, lr, c.clip_norm)
        steps = step + 1
        history["loss"].append(loss)
        history["lr"].append(lr)
        history["grad_norm"].append(norm)
        if steps % c.eval_every == 0 or steps == c.max_steps:
            valid_acc = task.evaluate(model, split.valid)["accuracy"]
            history["eval_step"].append(steps)
            history["valid_accuracy"].append(valid_acc)
            if log is not None:
                log(f"step={steps} loss={loss:.4f} valid_accuracy={valid_acc:.4f} "
                    f"seconds={time.perf_counter() - start:.1f}")
            if c.target_accuracy is not None and valid_acc >= c.target_accuracy:
                break
    seconds = time.perf_counter() - start
    return TrainResult(model=model, history={k: np.asarray(v) for k, v in history.items()},
                       test=task.evaluate(model, split.test), steps=steps, seconds=seconds,
                       split=split)


def main(argv=None):
    """Command line: train, print progress, end with ``accuracy=<float> seconds=<float>``."""
    defaults = TrainConfig()
    parser = argparse.ArgumentParser(prog="python -m scratchformer.train",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--task", choices=TASKS, default="reverse")
    parser.add_argument("--norm", choices=("post", "pre"), default=None,
                        help="default post (pre for the adder)")
    parser.add_argument("--positions", choices=("rotary", "sinusoidal"), default=None,
                        help=f"the adder's positions (default {ADDER_MODEL['positions']})")
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--max-steps", type=int, default=None,
                        help=f"default {defaults.max_steps} "
                             f"({ADDER_TRAINING['max_steps']} for the adder, "
                             f"{TRANSLATION_CONFIG.max_steps} for translation)")
    parser.add_argument("--warmup-steps", type=int, default=None,
                        help=f"default {defaults.warmup_steps}, or max-steps / 10 if smaller")
    parser.add_argument("--quiet", action="store_true", help="print the final line only")
    args = parser.parse_args(argv)
    task = make_task(args.task)
    adder = isinstance(task, AdditionTask)
    if adder:
        defaults = dataclasses.replace(defaults, **ADDER_TRAINING)
    elif isinstance(task, TranslationTask):
        defaults = TRANSLATION_CONFIG
    if not adder and args.positions is not None:
        parser.error("--positions applies to the adder (--task add) only")
    max_steps = defaults.max_steps if args.max_steps is None else args.max_steps
    warmup = args.warmup_steps
    if warmup is None:
        warmup = min(defaults.warmup_steps, max_steps // 10)
    config = dataclasses.replace(defaults, seed=args.seed, max_steps=max_steps,
                                 warmup_steps=warmup)
    if adder:
        dims = {} if args.positions is None else {"positions": args.positions}
        model = adder_model(task, norm=args.norm or "pre", seed=args.seed, **dims)
    else:
        model = book_model(task, norm=args.norm or "post", seed=args.seed)
    result = train(model, task, config, log=None if args.quiet else print)
    others = " ".join(f"test_{k}={v:.4f}" for k, v in result.test.items() if k != "accuracy")
    print(f"steps={result.steps} {others}")
    print(f"accuracy={result.test_accuracy:.4f} seconds={result.seconds:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
