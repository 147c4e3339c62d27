r"""Half precision, emulated in NumPy: float16 and bfloat16, gradients that underflow, and the
loss scaling that brings them back.

NumPy has float16 but no bfloat16, and its float16 matrix products run without BLAS. So the
book emulates: values are float32 arrays that hold only what the narrow format can hold, rounded
by :func:`to_float16` (NumPy's IEEE conversion: to nearest, ties to even, subnormals kept,
overflow to inf) or :func:`to_bfloat16` (float32 with its low 16 bits rounded away, to nearest
even).

A training step with float16 gradients (:func:`train_step`, which
:func:`scratchformer.train.train` runs when a ``TrainConfig`` asks for other formats than
float32) keeps in float16 what mixed-precision training keeps there: the loss's gradient with
respect to the logits (times the loss scale), the gradient between blocks, and every
parameter's gradient. The forward pass, the arithmetic inside a layer's backward pass, the
weights and Adam's moments stay float32 (mixed precision's master weights). :class:`LossScaler`
is dynamic loss scaling: multiply the loss by ``S`` before the backward pass and the gradients
by ``1/S`` after; on an inf or NaN skip the step and halve ``S``; after ``interval`` good steps
double it. Weights stored in bfloat16 (``TrainConfig(weights="bfloat16")``) are rounded back
after every update, and an update smaller than half the weight's step is lost. The chapter
:doc:`Half precision </book/half_precision>` tells the story.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math

import numpy as np

from ._threads import blas_threads
from ._validation import choice, positive_float, positive_int
from .optim import clip_grad_norm, grad_norm, gradients

__all__ = ["FORMATS", "NumberFormat", "to_float16", "to_bfloat16", "round_to", "LossScaler",
           "half_gradients", "train_step"]


@dataclasses.dataclass(frozen=True)
class NumberFormat:
    """A binary floating-point format: 1 sign bit, ``exponent_bits``, ``fraction_bits``.

    Every derived field follows from the two widths (IEEE 754's rules: the largest exponent
    is kept for inf and NaN, the smallest for zero and the subnormals).
    """

    name: str
    exponent_bits: int
    fraction_bits: int

    @property
    def bits(self):
        return 1 + self.exponent_bits + self.fraction_bits

    @property
    def bias(self):
        return 2 ** (self.exponent_bits - 1) - 1

    @property
    def max(self):
        """The largest finite number (the top exponent below inf's, every fraction bit 1)."""
        return (2 - 2.0 ** -self.fraction_bits) * 2.0 ** self.bias

    @property
    def smallest_normal(self):
        return 2.0 ** (1 - self.bias)

    @property
    def smallest_subnormal(self):
        return 2.0 ** (1 - self.bias - self.fraction_bits)

    @property
    def epsilon(self):
        """The step from 1 to the next number (the format's relative step)."""
        return 2.0 ** -self.fraction_bits


#: The three formats of the chapter, from their widths alone.
FORMATS = {"float32": NumberFormat("float32", 8, 23),
           "float16": NumberFormat("float16", 5, 10),
           "bfloat16": NumberFormat("bfloat16", 8, 7)}


def _float32(x, name="x"):
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.floating):
        raise TypeError(f"{name} must be floating, got dtype {x.dtype}")
    return np.ascontiguousarray(x, dtype=np.float32)


def to_float16(x):
    """``x`` rounded to float16 and back: float32 values that float16 holds (inf where it
    overflows, 0 where it underflows, NaN kept)."""
    with np.errstate(over="ignore"):
        return _float32(x).astype(np.float16).astype(np.float32)


def to_bfloat16(x):
    """``x`` rounded to bfloat16 and back: float32 whose low 16 bits are rounded away, to
    nearest, ties to even; overflow gives inf, NaN stays NaN (quiet).

    bfloat16 is float32's top half: the same sign and 8 exponent bits, 7 fraction bits. Adding
    ``0x7FFF`` plus the lowest kept bit to the 32 bits and clearing the low 16 rounds to
    nearest even: below half the last kept bit's weight the carry stops, above it the kept part
    goes up by one, and at exactly half it goes up only if that would make the last bit even.
    A carry out of the fraction raises the exponent (up to inf), as it should.
    """
    x = _float32(x)
    bits = x.view(np.uint32)
    lowest_kept = (bits >> np.uint32(16)) & np.uint32(1)
    nan = np.isnan(x)
    # NaN's bits could carry into the sign, or round to inf: set them apart first
    rounded = np.where(nan, np.uint32(0), bits) + np.uint32(0x7FFF) + lowest_kept
    rounded &= np.uint32(0xFFFF0000)
    out = rounded.view(np.float32)
    if nan.any():
        out = np.where(nan, np.float32(np.nan), out)
    return out


def round_to(x, fmt):
    """``x`` rounded to ``fmt`` ("float32", "float16" or "bfloat16") and back to float32."""
    fmt = choice(fmt, tuple(FORMATS), "fmt")
    return {"float32": _float32, "float16": to_float16, "bfloat16": to_bfloat16}[fmt](x)


class LossScaler:
    """Dynamic loss scaling (the rule of PyTorch's ``GradScaler``).

    Parameters
    ----------
    scale : float, default 2**15
        The first scale.
    growth, backoff : float, default 2 and 0.5
        Multiply the scale by ``growth`` after ``interval`` finite steps in a row, by
        ``backoff`` after a step whose gradients hold an inf or NaN (that step is skipped).
    interval : int, default 100
    """

    def __init__(self, scale=2.0 ** 15, *, growth=2.0, backoff=0.5, interval=100):
        self.scale = positive_float(scale, "scale")
        self.growth = positive_float(growth, "growth")
        self.backoff = positive_float(backoff, "backoff")
        if not self.backoff < 1 < self.growth:
            raise ValueError(f"need backoff < 1 < growth, got {backoff} and {growth}")
        self.interval = positive_int(interval, "interval")
        self.good = 0
        self.skipped = 0

    def __repr__(self):
        return (f"LossScaler(scale={self.scale:g}, growth={self.growth:g}, "
                f"backoff={self.backoff:g}, interval={self.interval})")

    def update(self, finite):
        """After a step: ``finite`` says whether its gradients were finite."""
        if finite:
            self.good += 1
            if self.good == self.interval:
                self.scale *= self.growth
                self.good = 0
        else:
            self.scale *= self.backoff
            self.good = 0
            self.skipped += 1


@contextlib.contextmanager
def half_gradients(model, *, scale=1.0, fmt="float16", record=None):
    """Within it, ``model.backward`` keeps its gradients in ``fmt``.

    The logits' gradient is multiplied by ``scale`` and rounded to ``fmt``; each block's
    incoming and outgoing gradient is rounded to ``fmt``; after the pass every parameter's
    gradient is rounded to ``fmt`` (the caller divides by ``scale``). ``model`` is a
    :class:`~scratchformer.DecoderModel` (anything with ``backward`` and a list ``blocks``).
    ``record``, a dict, receives ``zero``, ``subnormal`` and ``overflow``: the shares of the
    logits' nonzero gradient entries that ``fmt`` flushes to zero, holds only as subnormals,
    and turns into inf.
    """
    fmt = choice(fmt, tuple(FORMATS), "fmt")
    scale = positive_float(scale, "scale")
    info = FORMATS[fmt]
    narrow = {"float32": _float32, "float16": to_float16, "bfloat16": to_bfloat16}[fmt]
    blocks = list(getattr(model, "blocks", ()))
    backward = model.backward

    def block_backward(block):
        inner = block.backward

        def run(d_out):
            return narrow(inner(narrow(d_out)))
        return run

    def model_backward(d_logits):
        scaled = np.asarray(d_logits, dtype=np.float32) * np.float32(scale)
        kept = narrow(scaled)
        if record is not None:
            nonzero = scaled != 0
            count = max(int(nonzero.sum()), 1)
            tiny = np.abs(kept) < info.smallest_normal
            record["zero"] = float((nonzero & (kept == 0)).sum() / count)
            record["subnormal"] = float((nonzero & tiny & (kept != 0)).sum() / count)
            record["overflow"] = float(np.isinf(kept).sum() / count)
        # an overflow is the loss scaler's to see (the step's finite check), not a warning's
        with np.errstate(over="ignore", invalid="ignore"):
            result = backward(kept)
            for _, layer, key in model.named_parameters():
                layer.grads[key] = narrow(layer.grads[key])
        return result

    for block in blocks:
        block.backward = block_backward(block)
    model.backward = model_backward
    try:
        yield model
    finally:
        for block in blocks:
            del block.backward  # the class's method again
        del model.backward


#: The loss scaler's first scale, and the finite steps after which it doubles: PyTorch's
#: ``GradScaler`` defaults.
INITIAL_SCALE = 2.0 ** 16
GROWTH_INTERVAL = 2000


def plain(config):
    """Whether a :class:`~scratchformer.train.TrainConfig` trains in float32 throughout."""
    return (config.gradients == "float32" and config.weights == "float32"
            and config.micro_batches == 1)


def check_config(config):
    """The number-format fields of a ``TrainConfig``, checked (it calls this)."""
    choice(config.gradients, tuple(FORMATS), "gradients")
    choice(config.weights, ("float32", "bfloat16"), "weights")
    positive_int(config.micro_batches, "micro_batches")
    if not isinstance(config.loss_scaling, bool):
        raise TypeError(f"loss_scaling must be True or False, got {config.loss_scaling!r}")
    if config.loss_scaling and config.gradients == "float32":
        raise ValueError("loss_scaling scales gradients kept in float16 or bfloat16; with "
                         "gradients='float32' there is nothing for it to do")


def prepare(model, config):
    """Before the first step: the weights rounded to bfloat16 if they are stored so, and the
    run's :class:`LossScaler` (None without loss scaling)."""
    if config.weights == "bfloat16":
        for _, layer, key in model.named_parameters():
            layer.params[key][...] = to_bfloat16(layer.params[key])
    return LossScaler(INITIAL_SCALE, interval=GROWTH_INTERVAL) if config.loss_scaling else None


def train_step(model, optimiser, task, batch, lr, config, scaler=None):
    """One training step in the number formats of ``config`` (a ``TrainConfig``).

    The gradients are computed in ``config.gradients`` (:func:`half_gradients`) at the
    scaler's scale divided by ``config.micro_batches``: as one micro-batch of a batch of
    ``micro_batches`` whose loss a training loop that accumulates gradients divides by their
    number. They are divided by that scale in float32, so the step is the batch's own; only
    the size of the numbers the narrow format must hold changes (with float32 gradients and a
    power of two, nothing but what float32 itself holds only as subnormals). A step whose
    gradients hold an inf or NaN changes no weight and lowers the scaler's scale; without a
    scaler it raises ``FloatingPointError``, naming the parameter. With
    ``config.weights == "bfloat16"`` every updated weight is rounded back to bfloat16.

    Returns
    -------
    loss : float
    grad_norm : float
        Before clipping; inf for a skipped step.
    stats : dict of str to float
        ``grad_zero`` and ``grad_subnormal`` (the shares of the logits' nonzero gradient
        entries that the format flushes to zero or holds only as subnormals), ``skipped``
        (1.0 for a skipped step), ``loss_scale`` (the scale this step used), and with
        bfloat16 weights ``lost_updates``: the share of the weights the update changed that
        rounding put back where they were.
    """
    scale = (scaler.scale if scaler is not None else 1.0) / config.micro_batches
    record = {}
    with half_gradients(model, scale=scale, fmt=config.gradients, record=record):
        loss = task.loss_and_backward(model, batch)
    listed = gradients(model)
    stats = {"grad_zero": record["zero"], "grad_subnormal": record["subnormal"],
             "skipped": 0.0, "loss_scale": scale * config.micro_batches}
    bad = next((name for name, _, grad in listed if not np.isfinite(grad).all()), None)
    if scaler is not None:
        scaler.update(bad is None)
    if bad is not None:
        if scaler is None:
            raise FloatingPointError(
                f"the gradient of {bad} holds inf or NaN in {config.gradients} at "
                f"scale {scale:g}, with no loss scaler to skip the step; no weight changed")
        stats["skipped"] = 1.0
        if config.weights == "bfloat16":
            stats["lost_updates"] = 0.0
        return loss, math.inf, stats
    if scale != 1.0:
        for _, _, grad in listed:
            grad /= np.float32(scale)
    with blas_threads(1):
        norm = (grad_norm(model, listed=listed) if config.clip_norm is None
                else clip_grad_norm(model, config.clip_norm, listed=listed))
        before = ([param.copy() for _, param, _ in _params(model)]
                  if config.weights == "bfloat16" else None)
        optimiser.step(lr, listed=listed)
    if before is not None:
        moved = lost = 0
        for old, (_, param, _) in zip(before, _params(model)):
            changed = param != old
            param[...] = to_bfloat16(param)
            moved += int(changed.sum())
            lost += int((changed & (param == old)).sum())
        stats["lost_updates"] = lost / moved if moved else 0.0
    return loss, norm, stats


def _params(model):
    return [(name, layer.params[key], key) for name, layer, key in model.named_parameters()]
