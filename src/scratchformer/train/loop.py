"""The training loop: a model, a task and the settings of the optimisation, nothing else.

:func:`train` takes any model (a :class:`~scratchformer.Layer`), a task
(:mod:`scratchformer.tasks`: the data, the held-out sets, the loss and the score) and a
:class:`TrainConfig` (the optimisation only), so every model of the book trains through the
same loop, and the loop knows none of them. Training examples are drawn fresh at every step,
never from the held-out validation and test sets; training stops when the validation accuracy
reaches a target, after ``max_steps``, or when a budget of process CPU-seconds is spent.
A seed gives two independent streams (:func:`seed_streams`): the loop draws the held-out sets
and every batch from the first; the recipes (:mod:`scratchformer.train.recipes`) draw a model's
initial weights from the second.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import sys
import time
import weakref

import numpy as np

from .. import precision
from .._threads import blas_threads, cores, parallel_map, shares
from .._validation import (
    fraction,
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
)
from ..dropout import Dropout, spawn_generator
from ..module import Layer
from ..optim import Adam, clip_grad_norm, grad_norm, gradients, warmup_cosine
from ..tasks import Split, Task

# The CPU-seconds a budget counts: the process's, except in a browser's Pyodide (the page's
# live cells), whose process_time() is always 0; there the one thread's wall clock counts.
_cpu_clock = time.perf_counter if sys.platform == "emscripten" else time.process_time

__all__ = ["TrainConfig", "TrainResult", "seed_streams", "train_step", "train"]


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
    # Keep a copy of every parameter at each evaluation (TrainResult.parameters_at), to read
    # the model as it was partway, e.g. to sample from it at each budget.
    keep_parameters: bool = False
    # Number formats (scratchformer.precision, chapter "Half precision"): the gradients kept
    # in float16 or bfloat16, dynamic loss scaling, the gradients computed as one of
    # micro_batches (their loss divided by that many), the weights stored in bfloat16.
    gradients: str = "float32"
    loss_scaling: bool = False
    micro_batches: int = 1
    weights: str = "float32"

    def __post_init__(self):
        for name in ("batch_size", "max_steps", "eval_every", "n_valid", "n_test"):
            positive_int(getattr(self, name), name)
        if self.cpu_seconds is not None and not (math.isfinite(self.cpu_seconds)
                                                 and self.cpu_seconds > 0):
            raise ValueError(f"cpu_seconds must be positive (and finite) or None, got "
                             f"{self.cpu_seconds}")
        non_negative_int(self.warmup_steps, "warmup_steps")
        if not 0 <= self.warmup_steps < self.max_steps:
            raise ValueError(f"need 0 <= warmup_steps < max_steps, got {self.warmup_steps} "
                             f"and {self.max_steps}")
        positive_float(self.peak_lr, "peak_lr")
        fraction(self.final_lr_fraction, "final_lr_fraction")
        non_negative_float(self.weight_decay, "weight_decay")
        if self.clip_norm is not None:
            positive_float(self.clip_norm, "clip_norm")
        if self.target_accuracy is not None:
            fraction(self.target_accuracy, "target_accuracy")
        non_negative_int(self.seed, "seed")
        precision.check_config(self)


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
        always). A run in other number formats than float32 adds, per step, the statistics of
        :func:`scratchformer.precision.train_step` (``grad_zero``, ``grad_subnormal``,
        ``skipped``, ``loss_scale``, and ``lost_updates`` with bfloat16 weights).
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
    parameters_at : dict of int to dict
        With ``TrainConfig.keep_parameters``: for each evaluation's ``eval_step``, a copy of
        every parameter then (``{name: array}``, as
        :meth:`~scratchformer.Layer.load_parameters` takes it); empty otherwise.
    """

    model: Layer
    history: dict
    test: dict
    steps: int
    seconds: float
    split: Split | None = None
    cpu_seconds: float = 0.0
    parameters_at: dict = dataclasses.field(default_factory=dict)

    @property
    def test_accuracy(self):
        """The task's headline score on the test set, ``test["accuracy"]``."""
        return self.test["accuracy"]


def seed_streams(seed):
    """The data and the initialisation generators of a seed: two independent streams."""
    return np.random.default_rng(seed).spawn(2)


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
    loss = _loss_and_backward(model, task, batch)  # forward, loss, backward
    listed = gradients(model)  # walked once: for the norm, clipping and update
    # The norm and the update with BLAS on one thread: after a call on
    # several, OpenBLAS's threads keep spinning for a while, waiting for more
    # work, on the cores that the next step's parts of the batch need
    # (benchmarks/text_step.py measures the cost). One thread also rounds the
    # norm alike at any thread count.
    with blas_threads(1):
        if clip_norm is None:
            norm = grad_norm(model, listed=listed)
        else:
            norm = clip_grad_norm(model, clip_norm, listed=listed)
        optimiser.step(lr, listed=listed)
    return loss, norm


def _loss_and_backward(model, task, batch, workers=None):
    """``task.loss_and_backward(model, batch)``, on every core BLAS may use.

    NumPy runs its elementwise work on one core, and only the matrix products on several. So
    where BLAS may use more than one thread and the task cuts the batch into weighted parts
    (:meth:`~scratchformer.tasks.Task.parts`), each part runs forward and backward in a thread
    of its own (:func:`~scratchformer._threads.parallel_map`, BLAS on one thread each), on the
    model or on a replica of it that shares its parameters (:func:`_replicas`); the model's
    gradients become the weighted sums of the parts'. The loss and gradients are those of the
    whole batch up to rounding; with BLAS on one thread (the book's training runs) the batch
    is taken whole, as it was. ``workers`` (default: as many threads as BLAS would use, at most
    the cores) sets the number of parts.
    """
    if workers is None:
        workers = len(shares(range(cores())))
    parts = task.parts(batch, workers) if workers > 1 else None
    if not parts or len(parts) < 2:
        return task.loss_and_backward(model, batch)
    models = [model, *_replicas(model, len(parts) - 1)]
    losses = parallel_map(lambda i: task.loss_and_backward(models[i], parts[i][0]),
                          range(len(parts)), len(parts))
    weights = [weight for _, weight in parts]
    for layers in zip(*(m._tree() for m in models)):
        main = layers[0][1]
        if main.params and not main.frozen:
            main.grads = {key: _weighted_sum([layer.grads[key] for _, layer in layers],
                                             weights) for key in main.params}
    return float(sum(w * loss for w, loss in zip(weights, losses)))


def _weighted_sum(arrays, weights):
    total = arrays[0] * weights[0]  # a Python float keeps the arrays' dtype
    for array, weight in zip(arrays[1:], weights[1:]):
        total += array * weight
    return total


_REPLICAS = weakref.WeakKeyDictionary()


def _replicas(model, count):
    """``count`` copies of ``model``'s layers that share its parameters: each replica layer
    holds the model layer's own ``params`` dict (an update or a reassignment of a parameter
    reaches both), and keeps its own gradients and what it saves for backward. Made once per
    model and kept while the model lives; made again if the model's layers changed."""
    made = _REPLICAS.get(model, [])
    layout = [(path, type(layer)) for path, layer in model._tree()]
    if len(made) < count or any([(path, type(layer)) for path, layer in replica._tree()]
                                != layout for replica in made):
        memo = {}
        for _, layer in model._tree():
            memo[id(layer.params)] = layer.params  # shared, not copied
            memo[id(layer.grads)] = None
            memo[id(layer._saved)] = None
        made = [copy.deepcopy(model, dict(memo)) for _ in range(count)]
        _REPLICAS[model] = made
    for replica in made[:count]:  # the model's current dicts, should any have been replaced
        for (_, layer), (_, twin) in zip(model._tree(), replica._tree()):
            twin.params, twin._inference = layer.params, layer._inference
            if isinstance(layer, Dropout):  # masks of their own, not copies of the model's
                twin.rng = spawn_generator(layer.rng)
    return made[:count]


def train(model, task, config=TrainConfig(), *, log=None):
    """Train ``model`` on ``task`` in place (see the module's docstring).

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
    data_rng = seed_streams(c.seed)[0]
    split = task.split(data_rng, c.n_valid, c.n_test)
    optimiser = Adam(model, weight_decay=c.weight_decay)
    history = {"loss": [], "lr": [], "grad_norm": [], "cpu_seconds": [], "eval_step": []}
    parameters_at = {}
    plain = precision.plain(c)
    scaler = None if plain else precision.prepare(model, c)
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
        begun = _cpu_clock()
        try:  # a NaN or inf stops the run before any parameter is updated (Adam.step)
            if plain:
                loss, norm = train_step(model, optimiser, task, batch, lr, c.clip_norm)
            else:
                loss, norm, stats = precision.train_step(model, optimiser, task, batch, lr, c,
                                                         scaler)
        except (ValueError, FloatingPointError) as error:
            raise type(error)(f"training stopped at step {step + 1}: {error}") from error
        if not plain:
            for name, value in stats.items():
                history.setdefault(name, []).append(value)
        spent += _cpu_clock() - begun
        steps = step + 1
        history["loss"].append(loss)
        history["lr"].append(lr)
        history["grad_norm"].append(norm)
        history["cpu_seconds"].append(spent)
        out_of_budget = c.cpu_seconds is not None and spent >= c.cpu_seconds
        if steps % c.eval_every == 0 or steps == c.max_steps or out_of_budget:
            scores = task.evaluate(model, split.valid)
            history["eval_step"].append(steps)
            if c.keep_parameters:
                parameters_at[steps] = {name: layer.params[key].copy()
                                        for name, layer, key in model.named_parameters()}
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
                       split=split, cpu_seconds=spent, parameters_at=parameters_at)


def _budget_lr(step, spent, spent_at_warmup, c):
    """The rate of a budgeted run: warm-up over steps, then the cosine decay over the share
    of the budget left after the warm-up that has been spent."""
    if step < c.warmup_steps:
        return c.peak_lr * (step + 1) / c.warmup_steps
    left = c.cpu_seconds - spent_at_warmup
    progress = 1.0 if left <= 0 else min(1.0, (spent - spent_at_warmup) / left)
    cosine = 0.5 * (1.0 + math.cos(math.pi * progress))
    return c.peak_lr * (c.final_lr_fraction + (1.0 - c.final_lr_fraction) * cosine)
