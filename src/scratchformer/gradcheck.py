"""Checking hand-written gradients against central finite differences.

The book's chapter "Backpropagation through attention" (``book/backpropagation.md``) checks every
layer with these functions; so do the package's tests.
"""

from __future__ import annotations

import numpy as np

from ._validation import non_negative_float, positive_float

__all__ = ["numerical_gradient", "relative_error", "gradient_pairs", "randomize_parameters"]


def numerical_gradient(f, x, eps=1e-5):
    r"""Central differences of a scalar function with respect to every entry of ``x``.

    Parameters
    ----------
    f : callable
        Takes no argument and returns a float that depends on the current contents of ``x``.
    x : ndarray of float64
        Perturbed in place, one entry at a time, and restored.
    eps : float, default 1e-5

    Returns
    -------
    grad : ndarray, shape of ``x``
        :math:`(f(x + \epsilon e_i) - f(x - \epsilon e_i)) / 2\epsilon` for each entry
        :math:`i`: error :math:`O(\epsilon^2)` from truncation plus
        :math:`O(u |f| / \epsilon)` from rounding (:math:`u \approx 10^{-16}`).
    """
    positive_float(eps, "eps")  # checked; the differences use eps as given
    if not isinstance(x, np.ndarray):
        raise TypeError(f"x must be a float64 ndarray (perturbed in place), got "
                        f"{type(x).__name__}")
    if x.dtype != np.float64:
        raise TypeError(f"finite differences need float64 (got {x.dtype}): in float32 the "
                        "rounding error swamps the difference")
    grad = np.empty_like(x)
    for index in np.ndindex(x.shape):
        original = x[index]
        x[index] = original + eps
        upper = f()
        x[index] = original - eps
        lower = f()
        x[index] = original
        grad[index] = (upper - lower) / (2 * eps)
    return grad


def relative_error(analytic, numeric):
    r""":math:`\lVert a - n \rVert / \max(\lVert a \rVert, \lVert n \rVert)` (Frobenius norms).

    Zero when both are zero. Near zero gradients (whose numeric value is rounding noise) need
    an absolute comparison instead: see :func:`gradient_pairs`.
    """
    analytic, numeric = np.asarray(analytic), np.asarray(numeric)
    if analytic.shape != numeric.shape:
        raise ValueError(f"shapes differ: {analytic.shape} and {numeric.shape}")
    scale = max(np.linalg.norm(analytic), np.linalg.norm(numeric))
    if scale == 0:
        return 0.0
    return float(np.linalg.norm(analytic - numeric) / scale)


def gradient_pairs(layer, x, rng, eps=1e-5, **inputs):
    r"""Hand-written and finite-difference gradients of a layer, side by side.

    For every array input and every parameter. The scalar differentiated is
    :math:`L = \langle \text{forward}(x, \dots), g\rangle` with a random
    :math:`g`, which makes ``g`` the gradient fed to ``backward``: every output
    entry is checked, with its own weight.

    Parameters
    ----------
    layer : Layer
        Parameters in float64.
    x : ndarray
        The first input: float64 (its gradient is checked as ``"x"``), or
        integer token ids (not differentiated).
    rng : numpy.random.Generator
        Draws ``g``.
    eps : float, default 1e-5
    **inputs
        Further keyword arguments of ``forward``. Float arrays among them (a
        ``context``, say) are differentiated in order after ``x``, as
        ``backward`` returns their gradients; masks (names ending in ``mask``)
        and anything else are passed as they are.

    Returns
    -------
    pairs : dict of str to (ndarray, ndarray)
        ``(analytic, numeric)`` by name: ``"x"``, the other inputs' names, and
        the names of ``Layer.trainable_parameters()`` (every parameter, unless some layers
        are frozen: :meth:`~scratchformer.Layer.freeze`).
    """

    def differentiable(name, value):  # float arrays; not masks, ids or None
        return (not name.endswith("mask") and isinstance(value, np.ndarray)
                and np.issubdtype(value.dtype, np.floating))

    arrays = {k: v for k, v in {"x": x, **inputs}.items()
              if differentiable(k, v)}
    g = rng.standard_normal(layer.forward(x, **inputs).shape)
    d_inputs = layer.backward(g)  # one gradient per array input, in order
    if len(arrays) == 1:
        d_inputs = (d_inputs,)
    analytic = dict(zip(arrays, d_inputs or (), strict=True))
    for name, owner, key in layer.trainable_parameters():
        analytic[name] = owner.grads[key].copy()

    def loss():
        return float(np.vdot(layer.forward(x, **inputs), g))

    numeric = {name: numerical_gradient(loss, array, eps)
               for name, array in arrays.items()}
    for name, owner, key in layer.trainable_parameters():
        numeric[name] = numerical_gradient(loss, owner.params[key], eps)
    return {name: (analytic[name], numeric[name]) for name in analytic}


def randomize_parameters(layer, rng, scale=0.5):
    """Overwrite every parameter with random values (gains around 1), in place.

    Fresh layers have zero biases and unit gains, whose gradients a wrong formula could still
    get right; random values make every term of every gradient matter.

    Parameters
    ----------
    layer : Layer
    rng : numpy.random.Generator
    scale : float, default 0.5
        Standard deviation of the normal draws (layer-norm ``gamma`` gets 1 added).
    """
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    non_negative_float(scale, "scale")  # checked; the draws use scale as given
    for _, owner, key in layer.named_parameters():
        owner.params[key][...] = rng.normal(0.0, scale, owner.params[key].shape)
        if key == "gamma":
            owner.params[key] += 1.0
