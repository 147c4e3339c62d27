"""Train the book's toy model in NumPy: ``python -m scratchformer.train [--task reverse]``.

A toy task gives every position of a sequence of digits a label that depends on other
positions: ``reverse`` (label ``i`` is token ``n - 1 - i``) or ``sort`` (label ``i`` is the
``i``-th smallest token). The model cannot solve either without attention. Training sequences are
drawn fresh at every step, never from the held-out validation and test sets; training stops when
the validation accuracy reaches a target or after ``max_steps``, and everything is deterministic
for a given seed. The last line printed is ``accuracy=<float> seconds=<float>``: the token accuracy
on the held-out test sequences and the training time.

The book's chapter "Training a Transformer in NumPy" (``book/training.md``) runs it.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time

import numpy as np

from .model import EncoderModel, cross_entropy
from .optim import Adam, clip_grad_norm, grad_norm, warmup_cosine

__all__ = ["TASKS", "TrainConfig", "TrainResult", "make_targets", "sample_sequences",
           "accuracy", "train_step", "train", "main"]

TASKS = ("reverse", "sort")


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Everything that defines a training run (the defaults train the book's model)."""

    task: str = "reverse"
    length: int = 10  # n, tokens per sequence
    vocab_size: int = 10  # digits 0..9
    d_model: int = 64
    n_heads: int = 4
    d_ff: int = 128
    n_layers: int = 2
    norm: str = "post"
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
    seed: int = 0
    dtype: str = "float32"

    def __post_init__(self):
        if self.task not in TASKS:
            raise ValueError(f"task must be one of {TASKS}, got {self.task!r}")
        if self.vocab_size < 2 or self.length < 2:
            raise ValueError("need vocab_size >= 2 and length >= 2")
        if self.vocab_size**self.length >= 2**62:
            raise ValueError("vocab_size**length must stay below 2**62 (sequences are "
                             "numbered to keep the held-out sets out of training)")
        if self.n_valid + self.n_test > self.vocab_size**self.length // 2:
            raise ValueError("the held-out sets would take up half of all sequences")
        if self.max_steps < 1 or self.eval_every < 1 or self.batch_size < 1:
            raise ValueError("max_steps, eval_every and batch_size must be positive")
        if not 0 <= self.warmup_steps < self.max_steps:
            raise ValueError(f"need 0 <= warmup_steps < max_steps, got {self.warmup_steps} "
                             f"and {self.max_steps}")


@dataclasses.dataclass
class TrainResult:
    """What :func:`train` returns.

    Attributes
    ----------
    model : EncoderModel
        The trained model.
    history : dict of str to ndarray
        Per step: ``loss``, ``lr``, ``grad_norm`` (before clipping). Per evaluation:
        ``eval_step`` (steps done) and ``valid_accuracy``.
    test_accuracy, test_sequence_accuracy : float
        Fraction of held-out test tokens (and whole sequences) labelled right.
    steps : int
        Optimiser steps taken.
    seconds : float
        Wall-clock time of the training loop (evaluations included).
    """

    model: EncoderModel
    history: dict
    test_accuracy: float
    test_sequence_accuracy: float
    steps: int
    seconds: float


def make_targets(task, tokens):
    """The labels of ``tokens`` (shape (..., n)) for ``task``: same shape."""
    if task == "reverse":
        return tokens[..., ::-1].copy()
    if task == "sort":
        return np.sort(tokens, axis=-1)
    raise ValueError(f"task must be one of {TASKS}, got {task!r}")


def _numbers(tokens, vocab_size):
    """Each sequence as one integer (its digits in base ``vocab_size``)."""
    powers = vocab_size ** np.arange(tokens.shape[-1], dtype=np.int64)
    return tokens.astype(np.int64) @ powers


def sample_sequences(rng, count, length, vocab_size, exclude=None):
    """``count`` uniformly random sequences, shape (count, length), none of them in ``exclude``.

    ``exclude`` is a sorted int64 array of sequence numbers (see ``_numbers``); sequences
    that fall in it are drawn again.
    """
    tokens = rng.integers(0, vocab_size, size=(count, length))
    if exclude is None or exclude.size == 0:
        return tokens
    while True:
        clash = np.isin(_numbers(tokens, vocab_size), exclude)
        if not clash.any():
            return tokens
        tokens[clash] = rng.integers(0, vocab_size, size=(int(clash.sum()), length))


def _distinct_sequences(rng, count, length, vocab_size, exclude=None):
    """``count`` distinct random sequences outside ``exclude``."""
    chosen = np.empty((0, length), dtype=np.int64)
    while len(chosen) < count:
        more = sample_sequences(rng, count - len(chosen), length, vocab_size, exclude)
        chosen = np.concatenate([chosen, more])
        _, first = np.unique(_numbers(chosen, vocab_size), return_index=True)
        chosen = chosen[np.sort(first)]
    return chosen


def accuracy(model, tokens, targets, batch_size=500):
    """Token and whole-sequence accuracy of ``model`` on ``tokens``, as floats."""
    correct = []
    for start in range(0, len(tokens), batch_size):
        logits = model.forward(tokens[start:start + batch_size])
        correct.append(logits.argmax(axis=-1) == targets[start:start + batch_size])
    correct = np.concatenate(correct)  # (count, n) of bool
    return float(correct.mean()), float(correct.all(axis=-1).mean())


def train_step(model, optimiser, tokens, targets, lr, clip_norm=None):
    """One step of training: forward, loss, backward, clipping, update.

    Parameters
    ----------
    model : EncoderModel
    optimiser : Adam
    tokens, targets : ndarray of int, shape (batch, n)
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
    loss, d_logits = cross_entropy(model.forward(tokens), targets)
    model.backward(d_logits)
    if clip_norm is None:
        norm = grad_norm(model)
    else:
        norm = clip_grad_norm(model, clip_norm)
    optimiser.step(lr)
    return loss, norm


def train(config=TrainConfig(), *, log=None):
    """Train an :class:`EncoderModel` on ``config.task``; see the module docstring.

    Parameters
    ----------
    config : TrainConfig
    log : callable, optional
        Called with a line of text at every evaluation.

    Returns
    -------
    TrainResult
    """
    rng = np.random.default_rng(config.seed)
    data_rng, init_rng = rng.spawn(2)
    c = config
    test = _distinct_sequences(data_rng, c.n_test, c.length, c.vocab_size)
    held_out = np.sort(_numbers(test, c.vocab_size))
    valid = _distinct_sequences(data_rng, c.n_valid, c.length, c.vocab_size, held_out)
    held_out = np.sort(np.concatenate([held_out, _numbers(valid, c.vocab_size)]))
    test_targets = make_targets(c.task, test)
    valid_targets = make_targets(c.task, valid)

    model = EncoderModel(c.vocab_size, c.vocab_size, c.d_model, c.n_heads, c.d_ff,
                         c.n_layers, norm=c.norm, rng=init_rng, dtype=np.dtype(c.dtype))
    optimiser = Adam(model, weight_decay=c.weight_decay)
    history = {"loss": [], "lr": [], "grad_norm": [], "eval_step": [], "valid_accuracy": []}
    start = time.perf_counter()
    steps = 0
    for step in range(c.max_steps):
        tokens = sample_sequences(data_rng, c.batch_size, c.length, c.vocab_size, held_out)
        lr = warmup_cosine(step, peak=c.peak_lr, warmup=c.warmup_steps, total=c.max_steps,
                           final=c.final_lr_fraction)
        loss, norm = train_step(model, optimiser, tokens, make_targets(c.task, tokens), lr,
                                c.clip_norm)
        steps = step + 1
        history["loss"].append(loss)
        history["lr"].append(lr)
        history["grad_norm"].append(norm)
        if steps % c.eval_every == 0 or steps == c.max_steps:
            valid_acc, _ = accuracy(model, valid, valid_targets)
            history["eval_step"].append(steps)
            history["valid_accuracy"].append(valid_acc)
            if log is not None:
                log(f"step={steps} loss={loss:.4f} valid_accuracy={valid_acc:.4f} "
                    f"seconds={time.perf_counter() - start:.1f}")
            if c.target_accuracy is not None and valid_acc >= c.target_accuracy:
                break
    seconds = time.perf_counter() - start
    test_acc, test_seq_acc = accuracy(model, test, test_targets)
    return TrainResult(model=model, history={k: np.asarray(v) for k, v in history.items()},
                       test_accuracy=test_acc, test_sequence_accuracy=test_seq_acc,
                       steps=steps, seconds=seconds)


def main(argv=None):
    """Command line: train, print progress, end with ``accuracy=<float> seconds=<float>``."""
    defaults = TrainConfig()
    parser = argparse.ArgumentParser(prog="python -m scratchformer.train",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--task", choices=TASKS, default=defaults.task)
    parser.add_argument("--norm", choices=("post", "pre"), default=defaults.norm)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--max-steps", type=int, default=defaults.max_steps)
    parser.add_argument("--warmup-steps", type=int, default=None,
                        help=f"default {defaults.warmup_steps}, or max-steps / 10 if smaller")
    parser.add_argument("--quiet", action="store_true", help="print the final line only")
    args = parser.parse_args(argv)
    warmup = args.warmup_steps
    if warmup is None:
        warmup = min(defaults.warmup_steps, args.max_steps // 10)
    config = dataclasses.replace(defaults, task=args.task, norm=args.norm, seed=args.seed,
                                 max_steps=args.max_steps, warmup_steps=warmup)
    result = train(config, log=None if args.quiet else print)
    print(f"steps={result.steps} test_sequence_accuracy={result.test_sequence_accuracy:.4f}")
    print(f"accuracy={result.test_accuracy:.4f} seconds={result.seconds:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
