r"""Dropout: during training, zero each entry with probability ``p`` and scale the rest.

Inverted dropout (Srivastava et al., 2014): a training forward draws a mask
:math:`m_i \in \{0, 1/(1-p)\}`, keeping each entry with probability :math:`1 - p`, and returns
:math:`y = m \odot x`, so :math:`\mathbb{E}[y] = x` and evaluation needs no rescaling. The
backward pass multiplies by the same saved mask. The original Transformer (Vaswani et al.,
2017, section 5.4) drops each sub-layer's output before the residual addition and the sums of
the embeddings and positional encodings, at ``p = 0.1``; the blocks and the encoder–decoder
model take it as ``dropout``.

Training and evaluation are told apart by the mode the package already has: a forward that
saves for backward is a training forward and drops; inside ``layer.inference()`` (evaluation,
decoding, generation: :class:`~scratchformer.Layer`) dropout is the identity.
The mask comes from the layer's own ``numpy.random.Generator``, so a run is reproducible by
seed; ``p = 0`` is the identity in every mode and draws nothing.
"""

from __future__ import annotations

import numpy as np

from ._validation import as_float_array, generator, output_gradient, require_finite
from .module import Layer

__all__ = ["Dropout"]


def dropout_rate(p, name: str = "dropout") -> float:
    """``p`` as a float if it is a real number in ``[0, 1)`` (``p = 1`` would drop everything
    and scale by ``1/0``)."""
    if isinstance(p, (bool, np.bool_)) or not isinstance(p, (int, float, np.number)):
        raise TypeError(f"{name} must be a real number in [0, 1), got {p!r}")
    rate = float(p)
    if not (np.isfinite(rate) and 0.0 <= rate < 1.0):
        raise ValueError(f"{name} must lie in [0, 1), got {p!r}")
    return rate


def spawn_generator(rng):
    """An independent child of ``rng`` for dropout masks, drawing nothing from ``rng`` itself
    (``Generator.spawn``), so weights drawn from ``rng`` are the same with dropout or without.
    A generator made without a seed sequence cannot spawn; one seed is drawn from it then."""
    try:
        return rng.spawn(1)[0]
    except TypeError:
        return np.random.default_rng(int(rng.integers(2**63)))


class Dropout(Layer):
    r"""Inverted dropout of rate ``p``, with no parameters.

    Parameters
    ----------
    p : float, default 0
        The probability of zeroing an entry, in ``[0, 1)``.
    rng : numpy.random.Generator, optional
        Source of the masks; default seeded with 0.

    Notes
    -----
    In a training forward (outside ``inference()``) with ``p > 0``,

    .. math:: y = m \odot x, \qquad m_i = \frac{b_i}{1 - p}, \quad
              b_i \sim \operatorname{Bernoulli}(1 - p) \text{ independently},

    and ``backward(dy)`` returns :math:`m \odot dy`. The mask is saved as ``mask``
    (``None`` when nothing was dropped). PyTorch's ``nn.Dropout(p)`` computes the same
    function with its own random numbers.
    """

    def __init__(self, p=0.0, *, rng=None):
        super().__init__()
        self.p = dropout_rate(p, "p")
        self.rng = generator(rng)
        self.mask = None

    def __repr__(self):
        return f"Dropout(p={self.p})"

    def forward(self, x):
        """``x`` with each entry zeroed with probability ``p`` and the rest scaled by
        ``1/(1-p)`` in training; ``x`` itself (the same array) for ``p = 0`` or inside
        ``inference()``."""
        x = as_float_array(x, "x")
        require_finite(x, "x")
        self.mask = None
        if self.p == 0.0 or not self.saves_for_backward:
            self._save(mask=None, shape=x.shape)
            return x
        keep = self.rng.random(x.shape) >= self.p  # each kept with probability 1 - p
        self.mask = keep * x.dtype.type(1.0 / (1.0 - self.p))  # x's dtype
        self._save(mask=self.mask, shape=x.shape)
        return x * self.mask

    def backward(self, dy):
        """``dy`` times the mask of the last forward (``dy`` itself when nothing was
        dropped)."""
        saved = self._saved_for_backward()
        mask = saved["mask"]
        self.grads = {}
        dy = output_gradient(dy, saved["shape"], "dy")
        return dy if mask is None else dy * mask


class _Dropped:
    """A sub-layer followed by its dropout: forward drops the sub-layer's output, backward
    passes the gradient back through the mask first. Not a layer of the tree (the block lists
    the sub-layer and the dropout as its children)."""

    def __init__(self, layer, dropout):
        self.layer, self.dropout = layer, dropout

    def forward(self, *args, **kwargs):
        return self.dropout.forward(self.layer.forward(*args, **kwargs))

    def backward(self, dy):
        return self.layer.backward(self.dropout.backward(dy))


def with_dropout(layer, dropout):
    """``layer`` itself when ``dropout`` is None, else ``layer`` followed by ``dropout``."""
    return layer if dropout is None else _Dropped(layer, dropout)
