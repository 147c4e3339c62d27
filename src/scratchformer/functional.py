"""Elementwise and row-wise functions the layers are built from.

The book's chapter "Scaled dot-product attention" (``book/scaled_dot_product_attention.md``)
derives the numerically stable softmax implemented here.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.array_utils import normalize_axis_index

from ._validation import as_float_array, checked_by, require_finite

__all__ = ["softmax", "softmax_jacobian", "softmax_backward"]


def softmax(x, axis=-1):
    r"""Softmax along one axis, stable for logits of any magnitude.

    Parameters
    ----------
    x : array_like, shape (..., n, ...)
        Logits. Floating dtypes are kept (float32 in, float32 out); integers become float64.
        Entries may be ``-inf`` (weight exactly zero), but not NaN or ``+inf``, and every slice
        along ``axis`` needs at least one finite entry.
    axis : int, default -1
        The axis along which the weights sum to one.

    Returns
    -------
    weights : ndarray, same shape as ``x``
        Non-negative, summing to 1 along ``axis``.

    Raises
    ------
    TypeError
        For complex, object or other non-real input.
    ValueError
        For NaN or ``+inf`` entries, for a slice whose entries are all ``-inf`` (its softmax is
        undefined: ``0 / 0``), or for an empty axis.

    Notes
    -----
    .. math:: \operatorname{softmax}(x)_i = \frac{e^{x_i - m}}{\sum_j e^{x_j - m}},
              \quad m = \max_j x_j .

    Subtracting the row maximum :math:`m` changes nothing mathematically (the factor
    :math:`e^{-m}` cancels) but makes every exponent :math:`\le 0`, so ``exp`` cannot overflow
    and the denominator is at least 1. Derived in the chapter
    :doc:`Scaled dot-product attention </book/scaled_dot_product_attention>`.
    """
    x = as_float_array(x, "x")
    if x.ndim == 0:
        raise ValueError("softmax needs at least one axis, got a 0-d array")
    axis = normalize_axis_index(axis, x.ndim)
    if x.shape[axis] == 0:
        raise ValueError(f"softmax over an empty axis {axis} of shape {x.shape} is undefined")
    if np.isnan(x).any() or np.isposinf(x).any():
        raise ValueError("softmax input must not contain NaN or +inf")
    weights = x.copy()
    empty = softmax_inplace(weights, axis)
    if empty.any():
        raise ValueError(
            f"softmax of a slice whose entries are all -inf is undefined (0/0); "
            f"{int(empty.sum())} such slice(s) along axis {axis} of an array of shape {x.shape}"
        )
    return weights


def check_no_overflow(row_max):
    """Raise if a slice's maximum is +inf or NaN: its scores overflowed.

    NaN arises from overflow too (``inf - inf`` inside a dot product, or an
    overflowed score plus a ``-inf`` mask), and ``max`` propagates it.
    """
    if np.isposinf(row_max).any() or np.isnan(row_max).any():
        raise ValueError(
            f"scores overflowed {row_max.dtype} (+inf or NaN) "
            "(scale the inputs down or compute in float64)")


def softmax_inplace(scores: np.ndarray, axis: int = -1) -> np.ndarray:
    """Overwrite ``scores`` with its softmax along ``axis``.

    Returns a boolean array (``scores``' shape, ``axis`` of length 1), True
    for the slices that were all ``-inf`` (a query that may attend to
    nothing); those are set to zeros. ``scores`` must be floating, without
    NaN; ``+inf`` raises ``ValueError``. The kernel behind :func:`softmax` and
    the attention functions.
    """
    row_max = scores.max(axis=axis, keepdims=True)
    check_no_overflow(row_max)
    empty = np.isneginf(row_max)
    # An all -inf slice stays -inf below, and exp(-inf) = 0:
    row_max[empty] = 0.0
    scores -= row_max  # every entry is now <= 0, so exp cannot overflow
    np.exp(scores, out=scores)
    # The maximum contributes exp(0) = 1, so total >= 1 ...
    total = scores.sum(axis=axis, keepdims=True)
    total[empty] = 1.0  # ... except in empty slices, which stay all zero
    scores /= total
    return empty


def softmax_jacobian(weights):
    r"""Jacobian of the softmax, from its output: ``diag(a) - a a^T``.

    Parameters
    ----------
    weights : array_like, shape (..., n)
        Softmax outputs ``a`` (non-negative, summing to 1 along the last axis).

    Returns
    -------
    jacobian : ndarray, shape (..., n, n)
        ``jacobian[..., i, j]`` is
        :math:`\partial a_i / \partial x_j = a_i(\delta_{ij} - a_j)`.

    Notes
    -----
    :math:`J` is symmetric positive semi-definite, so its spectral norm is at
    most its trace, :math:`1 - \sum_i a_i^2 \le 1 - \max_i a_i^2`: the
    gradient through a saturated softmax vanishes. Derived in the chapter
    :doc:`Why divide by √dₖ </book/scaling>`.
    """
    a = as_float_array(weights, "weights")
    if a.ndim == 0:
        raise ValueError("weights must have at least one axis")
    if not np.isfinite(a).all() or (a < 0).any():
        raise ValueError("weights must be finite and non-negative "
                         "(outputs of a softmax)")
    jacobian = -a[..., :, None] * a[..., None, :]  # -a_i a_j: (..., n, n)
    diagonal = np.einsum("...ii->...i", jacobian)  # a writable view
    diagonal += a  # + a_i on the diagonal
    return jacobian


def _softmax_backward_inputs(weights, d_weights):
    """The arguments of :func:`softmax_backward`: float arrays of one shape, finite."""
    weights = as_float_array(weights, "weights")
    d_weights = as_float_array(d_weights, "d_weights")
    if weights.ndim < 1:
        raise ValueError("weights must have at least one axis")
    if d_weights.shape != weights.shape:
        raise ValueError(f"d_weights must have the shape of weights {weights.shape}, got "
                         f"{d_weights.shape}")
    require_finite(weights, "weights")
    require_finite(d_weights, "d_weights")
    return weights, d_weights


@checked_by(_softmax_backward_inputs)
def softmax_backward(weights, d_weights):
    r"""Gradient through a softmax, from its output: :math:`J^\top g`.

    Parameters
    ----------
    weights : ndarray, shape (..., n)
        The softmax's output :math:`a` along the last axis (rows of zeros,
        from fully masked attention rows, are allowed: their gradient is
        zero).
    d_weights : ndarray, shape (..., n)
        The gradient of the loss with respect to ``weights``.

    Returns
    -------
    d_scores : ndarray, shape (..., n)
        The gradient with respect to the softmax's input:
        :math:`a \odot (g - \langle g, a\rangle)`.

    Notes
    -----
    The Jacobian :math:`J = \operatorname{diag}(a) - a a^\top` is symmetric, so
    :math:`J^\top g = a \odot g - a\,(a^\top g)`: two passes over the row
    instead of the :math:`n \times n` matrix of :func:`softmax_jacobian`.
    Derived in the chapter
    :doc:`Backpropagation through attention </book/backpropagation>`.
    """
    # <g, a> per row: (..., 1)
    inner = np.einsum("...i,...i->...", d_weights, weights)[..., None]
    return weights * (d_weights - inner)
