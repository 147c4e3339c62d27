"""A vanilla recurrent network, kept to measure how the first token's influence fades.

The book's chapter "The wall of recurrence" (``book/recurrence.md``) uses it.
"""

from __future__ import annotations

import numpy as np

from .._validation import as_float_array, require_finite

__all__ = ["rnn_influence"]


def rnn_influence(w_hh, w_xh, inputs, h0=None):
    r"""Run an RNN and measure how much each state depends on the first.

    The recurrence is :math:`h_t = \tanh(h_{t-1} W_{hh} + x_t W_{xh})`; the
    result is the size of :math:`\partial h_t / \partial h_0` for every ``t``.

    Parameters
    ----------
    w_hh : array_like, shape (d_hidden, d_hidden)
        Recurrent weights (``x @ W`` convention).
    w_xh : array_like, shape (d_in, d_hidden)
        Input weights.
    inputs : array_like, shape (T, d_in)
        One token a row.
    h0 : array_like, shape (d_hidden,), optional
        Initial state; zeros by default.

    Returns
    -------
    influence : ndarray, shape (T,)
        Spectral norm of :math:`\partial h_t / \partial h_0`, ``t = 1..T``.
    step_norms : ndarray, shape (T,)
        Spectral norm of each one-step Jacobian
        :math:`\partial h_t / \partial h_{t-1}`;
        ``influence[t-1] <= prod(step_norms[:t])``.

    Notes
    -----
    With row vectors, :math:`\partial h_t / \partial h_{t-1} =
    \operatorname{diag}(1 - h_t^2)\, W_{hh}^\top` (entry ``(i, j)`` is
    :math:`\partial h_{t,i} / \partial h_{t-1,j}`), and the chain rule
    multiplies these Jacobians along the sequence. Derived in the chapter
    :doc:`The wall of recurrence </book/recurrence>`.
    """
    named = {"w_hh": w_hh, "w_xh": w_xh, "inputs": inputs}
    w_hh, w_xh, inputs = (as_float_array(a, n) for n, a in named.items())
    for arr, name in zip((w_hh, w_xh, inputs), named):
        if arr.ndim != 2:
            raise ValueError(f"{name} must be 2-D, got shape {arr.shape}")
        require_finite(arr, name)
    d_hidden = w_hh.shape[0]
    if w_hh.shape != (d_hidden, d_hidden):
        raise ValueError(f"w_hh must be square, got shape {w_hh.shape}")
    if w_xh.shape[1] != d_hidden or inputs.shape[1] != w_xh.shape[0]:
        raise ValueError(
            f"shapes do not chain: inputs {inputs.shape} @ w_xh {w_xh.shape} "
            f"must give (T, {d_hidden})")
    h = np.zeros(d_hidden) if h0 is None else as_float_array(h0, "h0")
    if h.shape != (d_hidden,):
        raise ValueError(f"h0 must have shape ({d_hidden},), got {h.shape}")
    require_finite(h, "h0")

    jacobian = np.eye(d_hidden)  # d h_0 / d h_0
    influence, step_norms = [], []
    for x in inputs:
        h = np.tanh(h @ w_hh + x @ w_xh)  # (d_hidden,)
        step = (1.0 - h**2)[:, None] * w_hh.T  # diag(1 - h_t^2) W_hh^T
        jacobian = step @ jacobian  # chain rule: d h_t / d h_0
        influence.append(np.linalg.norm(jacobian, 2))
        step_norms.append(np.linalg.norm(step, 2))
    return np.array(influence), np.array(step_norms)
