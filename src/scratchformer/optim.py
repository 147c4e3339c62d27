"""Adam with decoupled weight decay, a warm-up learning-rate schedule and gradient clipping.

They act on any :class:`scratchformer.module.Layer` through its ``trainable_parameters()``
and the ``grads`` its ``backward`` filled. The book's chapters "Training a Transformer in NumPy"
(``book/training.md``) and "Warm-up: training post-LN and pre-LN" (``book/warmup.md``) use
them.
"""

from __future__ import annotations

import math

import numpy as np

from ._validation import (
    fraction,
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
    real_number,
)
from .module import Layer

__all__ = ["Adam", "warmup_cosine", "clip_grad_norm", "grad_norm", "gradients"]


def gradients(model):
    """``[(name, param, grad), ...]`` for every trained parameter of ``model``, in the order of
    its ``trainable_parameters()`` (frozen layers left out): what :func:`grad_norm`,
    :func:`clip_grad_norm` and :meth:`Adam.step` read. A caller that needs two of them in one
    step (the training loop) lists the gradients once and hands the list to each, instead of
    walking the model again.

    Raises ``RuntimeError`` if a gradient is missing or its shape is not its parameter's.
    """
    found = []
    for name, layer, key in model.trainable_parameters():
        grads = layer.grads
        if grads is None or key not in grads:
            raise RuntimeError(f"no gradient for {name}: run backward before the optimiser")
        param, grad = layer.params[key], grads[key]
        if grad.shape != param.shape:
            raise RuntimeError(f"the gradient for {name} has shape {grad.shape}, its "
                               f"parameter {param.shape}")
        found.append((name, param, grad))
    return found


def grad_norm(model, *, listed=None):
    """The Euclidean norm of all the model's gradients together, as a float.

    ``listed``: the model's :func:`gradients`, when the caller has them already."""
    listed = gradients(model) if listed is None else listed
    return math.sqrt(sum(float(np.vdot(g, g)) for _, _, g in listed))


def clip_grad_norm(model, max_norm, *, listed=None):
    """Scale every gradient by ``min(1, max_norm / norm)``; return the norm before clipping.

    The gradient's direction is kept and its length capped. Under plain gradient descent this
    caps the step; under :class:`Adam`, whose step hardly depends on the gradients' scale, it
    limits how much one batch with an unusually large gradient weighs in the running averages.
    Raises ``FloatingPointError`` if the norm is not finite, naming the first parameter whose
    gradient holds a NaN or inf (a diverged model should stop loudly, not train on NaN).
    ``listed``: the model's :func:`gradients`, when the caller has them already.
    """
    if not max_norm > 0:
        raise ValueError(f"max_norm must be positive, got {max_norm}")
    listed = gradients(model) if listed is None else listed
    norm = grad_norm(model, listed=listed)
    if not math.isfinite(norm):
        bad = next((name for name, _, grad in listed if not np.isfinite(grad).all()), None)
        where = (f"the gradient for {bad} is not finite (NaN or inf)" if bad is not None
                 else "the sum of squares overflowed")
        raise FloatingPointError(f"the gradient norm is {norm}: {where}; the model has "
                                 "diverged")
    if norm > max_norm:
        factor = max_norm / norm  # a Python float keeps float32 gradients float32
        for _, _, grad in listed:
            grad *= factor
    return norm


def warmup_cosine(step, *, peak, warmup, total, final=0.0):
    r"""Learning rate at ``step`` (counted from 0): linear warm-up, then
    cosine decay.

    Parameters
    ----------
    step : int
    peak : float
        The rate reached at the end of the warm-up.
    warmup : int
        Steps of linear growth from ``peak / warmup`` to ``peak``; 0 starts
        at ``peak``.
    total : int
        Step at which the decay reaches ``final * peak``; later steps stay
        there.
    final : float, default 0.0
        Fraction of ``peak`` left at the end.

    Notes
    -----
    .. math:: \begin{gathered}
              \eta_t = \eta \cdot \begin{cases} (t+1)/w, & t < w, \\
              f + (1-f)\, c_t, & w \le t < T,
              \end{cases} \\
              c_t = \tfrac12\bigl(1 + \cos \pi \tfrac{t-w}{T-w}\bigr)
              \end{gathered}
    """
    _check_schedule(step, peak, warmup, total, final)
    if warmup < 0 or total <= warmup:
        raise ValueError(f"need 0 <= warmup < total, got warmup={warmup}, "
                         f"total={total}")
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = min(1.0, (step - warmup) / (total - warmup))
    cosine = 0.5 * (1.0 + math.cos(math.pi * progress))
    return peak * (final + (1.0 - final) * cosine)


def _check_schedule(step, peak, warmup, total, final):
    """The arguments of :func:`warmup_cosine` (checked, not converted): whole numbers of
    steps, a finite positive peak, and a final fraction in [0, 1]."""
    non_negative_int(step, "step")
    positive_float(peak, "peak")
    non_negative_int(warmup, "warmup")
    positive_int(total, "total")
    fraction(final, "final")


class Adam:
    r"""Adam with decoupled weight decay (AdamW), updating a layer's parameters in place.

    Parameters
    ----------
    model : Layer
        Every parameter of ``model.trainable_parameters()`` is trained: all of them unless
        some layers are frozen (:meth:`~scratchformer.Layer.freeze`) when it is made.
    betas : tuple of float, default (0.9, 0.98)
        Decay rates of the first and second moment estimates (those of the original
        Transformer).
    eps : float, default 1e-9
    weight_decay : float, default 0.0
        Decoupled decay, applied to matrices only (``ndim >= 2``: the projections and the
        embedding), never to biases or the layer norms' gains.

    Notes
    -----
    For each parameter :math:`\theta` with gradient :math:`g`, at step :math:`t = 1, 2, \dots`
    with learning rate :math:`\eta_t`:

    .. math::
        m &\leftarrow \beta_1 m + (1-\beta_1) g, \\
        v &\leftarrow \beta_2 v + (1-\beta_2) g^2, \\
        \theta &\leftarrow \theta - \eta_t\left(\frac{m/(1-\beta_1^t)}
        {\sqrt{v/(1-\beta_2^t)} + \epsilon} + \lambda\theta\right)

    (Kingma and Ba, 2015; Loshchilov and Hutter, 2019), as ``torch.optim.AdamW``. Used in the
    chapter :doc:`Training a Transformer in NumPy </book/training>`.
    """

    def __init__(self, model, *, betas=(0.9, 0.98), eps=1e-9, weight_decay=0.0):
        if not isinstance(model, Layer):
            raise TypeError(f"model must be a scratchformer Layer, got {type(model).__name__}")
        try:
            beta1, beta2 = betas
        except (TypeError, ValueError):
            raise TypeError(f"betas must be a pair (beta1, beta2), got {betas!r}") from None
        if not (0 <= real_number(beta1, "beta1") < 1 and 0 <= real_number(beta2, "beta2") < 1):
            raise ValueError(f"betas must lie in [0, 1), got {betas}")
        positive_float(eps, "eps")
        non_negative_float(weight_decay, "weight_decay")
        self.model = model
        self.betas, self.eps, self.weight_decay = (beta1, beta2), float(eps), float(weight_decay)
        self.steps = 0
        # The moments of every parameter of one dtype live side by side in one buffer, so
        # that each line of the update runs once over all of them rather than once per
        # parameter (a small model has about ninety arrays); ``state`` holds each
        # parameter's own views of the two buffers. Two more of each size hold a step's
        # gradients and its intermediate values, so a step allocates no arrays: memory
        # allocated afresh costs a page fault per page at its first write (on the language
        # model at two threads, the update took 12 ms with arrays of its own, 2.3 ms without).
        self._layout = [(name, layer.params[key].shape, layer.params[key].dtype)
                        for name, layer, key in model.trainable_parameters()]
        self._buffers, self.state = [], {}
        for dtype in dict.fromkeys(dtype for _, _, dtype in self._layout):
            members, offset = [], 0
            for index, (_, shape, of) in enumerate(self._layout):
                if of == dtype:
                    size = math.prod(shape)
                    members.append((index, offset, offset + size))
                    offset += size
            m, v = np.zeros(offset, dtype=dtype), np.zeros(offset, dtype=dtype)
            for index, start, stop in members:
                name, shape, _ = self._layout[index]
                self.state[name] = (m[start:stop].reshape(shape), v[start:stop].reshape(shape))
            scratch = (np.empty(offset, dtype=dtype), np.empty(offset, dtype=dtype))
            self._buffers.append((m, v, scratch, members))

    def step(self, lr, *, listed=None):
        """One update of every parameter, with learning rate ``lr``.

        ``listed``: the model's :func:`gradients`, when the caller has them already. Raises
        ``ValueError`` if the model's parameters are no longer those (names, shapes, dtypes)
        the optimiser was made for, if ``lr`` is not finite and >= 0, or if a gradient holds
        NaN or inf (naming its parameter; nothing is updated).
        """
        non_negative_float(lr, "lr")
        listed = gradients(self.model) if listed is None else listed
        if [(name, param.shape, param.dtype) for name, param, _ in listed] != self._layout:
            raise ValueError("the model's parameters (names, shapes or dtypes) changed since "
                             "the optimiser was made: make a new one")
        for name, _, grad in listed:  # NaN or inf would spread into every parameter
            if not np.isfinite(grad).all():
                raise ValueError(f"the gradient for {name} is not finite (NaN or inf): "
                                 "the model has diverged")
        beta1, beta2 = self.betas
        self.steps += 1
        # Bias corrections (Python floats, so that float32 stays float32).
        step_size = lr / (1.0 - beta1**self.steps)
        root_correction2 = math.sqrt(1.0 - beta2**self.steps)
        for m, v, (grad, work), members in self._buffers:  # one per dtype
            # every gradient of the dtype, side by side, as m and v hold them
            np.concatenate([listed[i][2].reshape(-1) for i, _, _ in members],
                           out=grad)
            m *= beta1
            m += np.multiply(grad, 1.0 - beta1, out=work)  # m: the mean of g
            v *= beta2
            work = np.square(grad, out=work)
            work *= 1.0 - beta2
            v += work  # v: the running mean of g^2
            denominator = np.sqrt(v, out=work)
            denominator /= root_correction2
            denominator += self.eps  # sqrt(v_hat) + eps
            update = np.divide(m, denominator, out=denominator)
            update *= step_size
            for index, start, stop in members:
                param = listed[index][1]
                if param.ndim >= 2 and self.weight_decay:
                    # decoupled: not part of the gradient
                    param *= 1.0 - lr * self.weight_decay
                param -= update[start:stop].reshape(param.shape)
