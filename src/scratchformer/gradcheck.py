"""Checking hand-written gradients against central finite differences.

The book's chapter "Backpropagation through attention" (``book/backpropagation.md``) checks every
layer with these functions; so do the package's tests.
"""

from __future__ import annotations

import numpy as np

__all__ = ["numerical_gradient", "relative_error", "gradient_pairs", "randomize_parameters",
           "torch_gradients"]


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


def _first(output):
    """The main output of a layer's forward (layers with weights return ``(y, weights)``)."""
    return output[0] if isinstance(output, tuple) else output


def gradient_pairs(layer, x, rng, eps=1e-5):
    r"""Hand-written and finite-difference gradients of a layer, side by side.

    For the input and every parameter. The scalar differentiated is
    :math:`L = \langle \text{forward}(x), g\rangle` with a random :math:`g`,
    which makes ``g`` the gradient fed to ``backward``: every output entry is
    checked, with its own weight.

    Parameters
    ----------
    layer : Layer
        Parameters in float64.
    x : ndarray
        The input: float64 (its gradient is checked as ``"x"``), or integer
        token ids (not differentiated).
    rng : numpy.random.Generator
        Draws ``g``.
    eps : float, default 1e-5

    Returns
    -------
    pairs : dict of str to (ndarray, ndarray)
        ``(analytic, numeric)`` by name: ``"x"`` and the names of
        ``Layer.named_parameters()``.
    """
    g = rng.standard_normal(_first(layer.forward(x)).shape)
    d_x = layer.backward(g)
    analytic = {} if d_x is None else {"x": d_x}
    for name, owner, key in layer.named_parameters():
        analytic[name] = owner.grads[key].copy()

    def loss():
        return float(np.vdot(_first(layer.forward(x)), g))

    numeric = {}
    if d_x is not None:
        numeric["x"] = numerical_gradient(loss, x, eps)
    for name, owner, key in layer.named_parameters():
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
    for _, owner, key in layer.named_parameters():
        owner.params[key][...] = rng.normal(0.0, scale, owner.params[key].shape)
        if key == "gamma":
            owner.params[key] += 1.0


def torch_gradients(module, from_torch):
    """PyTorch's gradients of ``module``, in the package's names and layouts.

    Parameters
    ----------
    module : torch.nn.Module
        After ``backward()``: every parameter has a ``.grad``.
    from_torch : callable
        The matching ``from_torch`` (e.g. ``EncoderBlock.from_torch``). It is applied to a copy
        of ``module`` whose values are its gradients, so the conversion of the weights (splits,
        transposes) is the one converting the gradients.

    Returns
    -------
    dict of str to ndarray
        Keyed like ``named_parameters()`` of the converted layer.
    """
    import copy

    import torch

    twin = copy.deepcopy(module)
    with torch.no_grad():
        for (name, p), q in zip(module.named_parameters(), twin.parameters()):
            if p.grad is None:
                raise ValueError(f"{name} has no gradient: call backward() first")
            q.copy_(p.grad)
    converted = from_torch(twin)
    return {name: owner.params[key] for name, owner, key in converted.named_parameters()}
