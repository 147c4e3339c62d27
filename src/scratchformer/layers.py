"""The position-wise parts of a Transformer: layer normalisation and RMS norm, the feed-forward
net and SwiGLU, and the linear layers and token embedding around the blocks.

The book's chapter "The Transformer block" (``book/transformer_block.md``) derives the first
two; "Backpropagation through attention" (``book/backpropagation.md``) their backward passes.
"""

from __future__ import annotations

import math

import numpy as np

from ._validation import (
    as_float_array,
    checked_by,
    choice,
    features,
    floating_dtype,
    generator,
    non_negative_float,
    output_gradient,
    positive_int,
    require_finite,
    token_ids,
)
from .module import Layer

__all__ = ["layer_norm", "layer_norm_backward", "LayerNorm", "rms_norm", "rms_norm_backward",
           "RMSNorm", "FeedForward", "ACTIVATIONS", "SwiGLU", "silu", "gelu", "Linear",
           "Embedding"]

#: The activations of :class:`FeedForward`: ReLU (the original Transformer) or GELU in its
#: tanh approximation (GPT-2's, :func:`gelu`).
ACTIVATIONS = ("relu", "gelu")


def layer_norm(x, gamma, beta, eps=1e-5):
    r"""Normalise each token to mean 0 and variance 1, then scale and shift.

    Parameters
    ----------
    x : array_like, shape (..., d_model)
    gamma, beta : array_like, shape (d_model,)
        Learned scale and shift.
    eps : float, default 1e-5
        Added to the variance, so that a constant token does not divide
        by zero.

    Returns
    -------
    y : ndarray, shape (..., d_model)

    Notes
    -----
    .. math::
        \begin{gathered}
        y = \gamma \odot \frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}} + \beta, \\
        \mu = \frac{1}{d}\sum_j x_j,
        \quad \sigma^2 = \frac{1}{d}\sum_j (x_j - \mu)^2
        \end{gathered}

    over the feature axis of each token separately (the biased variance, as
    in PyTorch).
    Derived in the chapter
    :doc:`The Transformer block </book/transformer_block>`.
    """
    x, gamma, beta = _norm_inputs(x, eps, gamma=gamma, beta=beta)
    y, _, _ = _normalise(_layer_norm, x, eps, gamma, beta)
    return y


def _norm_inputs(x, eps, **params):
    """The checked ``x`` (a feature axis, finite) and per-feature ``params`` of a norm."""
    x = as_float_array(x, "x")
    if x.ndim < 1:
        raise ValueError("x must have a feature axis")
    d_model = x.shape[-1]
    checked = []
    for name, p in params.items():
        p = as_float_array(p, name)
        if p.shape != (d_model,):
            raise ValueError(f"{name} must have shape ({d_model},) to match "
                             f"x of shape {x.shape}, got {p.shape}")
        require_finite(p, name)
        checked.append(p)
    non_negative_float(eps, "eps")
    require_finite(x, "x")
    return x, *checked


def _normalise(norm, x, eps, *params):
    """``norm(x, *params, eps)`` (:func:`_layer_norm` or :func:`_rms_norm`) of checked inputs,
    refusing what would come out NaN or zero instead of normalised.

    A float16 ``x`` is normalised in float32 and the results rounded back (as :func:`rope`
    does): its squares overflow float16 from 256 on, and an infinite variance would make every
    token ``beta``. A variance that overflows anyway, or ``eps = 0`` with a constant token,
    is an error.
    """
    half = x.dtype == np.float16
    if half:
        x = x.astype(np.float32)
    if eps == 0:  # a constant token divides by zero: refused below, without a warning
        with np.errstate(divide="ignore", invalid="ignore"):
            y, x_hat, inv = norm(x, *params, eps)
    else:
        y, x_hat, inv = norm(x, *params, eps)
    if eps == 0 and not np.isfinite(inv).all():
        raise ValueError("a token with no spread (constant, or zero for RMS norm) cannot be "
                         "normalised with eps=0: give eps > 0")
    if not inv.all():  # 1 / sqrt(inf): the variance overflowed the dtype
        raise ValueError(f"the variance of a token overflowed {inv.dtype}: x of absolute "
                         f"value up to {np.abs(x).max():g} is too large to normalise")
    if half:
        y = y.astype(np.result_type(np.float16, *params))
        x_hat, inv = x_hat.astype(np.float16), inv.astype(np.float16)
    return y, x_hat, inv


def _layer_norm(x, gamma, beta, eps):
    """Layer norm of checked inputs: ``y``, ``x_hat`` and ``inv_std``.

    The last two are what :func:`layer_norm_backward` needs.
    """
    mean = x.mean(axis=-1, keepdims=True)  # (..., 1)
    centred = x - mean  # (..., d_model)
    variance = np.einsum("...i,...i->...", centred, centred)[..., None]
    variance /= x.shape[-1]  # (..., 1), the biased variance
    inv_std = 1.0 / np.sqrt(variance + eps)  # (..., 1)
    # (..., d_model), into centred's memory: centred is not needed again
    x_hat = np.multiply(centred, inv_std, out=centred)
    return x_hat * gamma + beta, x_hat, inv_std


def _norm_backward_inputs(d_y, x_hat, inv, gamma, inv_name="inv_std"):
    """The arguments of :func:`layer_norm_backward` or :func:`rms_norm_backward` checked:
    float arrays, finite, ``d_y`` of ``x_hat``'s shape (..., d_model), ``inv`` (..., 1) and
    ``gamma`` (d_model,)."""
    arrays = [as_float_array(a, name) for a, name in
              ((d_y, "d_y"), (x_hat, "x_hat"), (inv, inv_name), (gamma, "gamma"))]
    d_y, x_hat, inv, gamma = arrays
    if x_hat.ndim < 1:
        raise ValueError(f"x_hat must have a feature axis, shape (..., d_model), got shape "
                         f"{x_hat.shape}")
    if d_y.shape != x_hat.shape:
        raise ValueError(f"d_y must have the shape of x_hat {x_hat.shape}, got {d_y.shape}")
    if inv.shape != (*x_hat.shape[:-1], 1):
        raise ValueError(f"{inv_name} must have shape {(*x_hat.shape[:-1], 1)} (one per token "
                         f"of x_hat {x_hat.shape}), got {inv.shape}")
    if gamma.shape != x_hat.shape[-1:]:
        raise ValueError(f"gamma must have shape {x_hat.shape[-1:]} to match x_hat of shape "
                         f"{x_hat.shape}, got {gamma.shape}")
    for a, name in zip(arrays, ("d_y", "x_hat", inv_name, "gamma")):
        require_finite(a, name)
    return arrays


@checked_by(_norm_backward_inputs)
def layer_norm_backward(d_y, x_hat, inv_std, gamma):
    r"""Gradients of :func:`layer_norm` for ``x``, ``gamma`` and ``beta``.

    Parameters
    ----------
    d_y : ndarray, shape (..., d_model)
        Gradient of the loss with respect to the output.
    x_hat : ndarray, shape (..., d_model)
        The normalised input of the forward pass,
        :math:`\hat x = (x - \mu)/\sqrt{\sigma^2 + \epsilon}`.
    inv_std : ndarray, shape (..., 1)
        :math:`1/\sqrt{\sigma^2 + \epsilon}` of each token.
    gamma : ndarray, shape (d_model,)

    Returns
    -------
    d_x : ndarray, shape (..., d_model)
    d_gamma, d_beta : ndarray, shape (d_model,)
        Summed over every token.

    Notes
    -----
    With :math:`g = \gamma \odot dy` and means over the features of one token,

    .. math:: dx = \frac{g - \operatorname{mean}(g)
              - \hat x\,\operatorname{mean}(g \odot \hat x)}
              {\sqrt{\sigma^2+\epsilon}}.

    The two subtracted terms remove the components along :math:`\mathbf 1` and
    :math:`\hat x`, the directions that normalisation makes invisible (exactly
    for :math:`\epsilon = 0`, nearly when :math:`\sigma^2 \gg \epsilon`).
    Derived in the chapter
    :doc:`Backpropagation through attention </book/backpropagation>`.
    """
    d_model = x_hat.shape[-1]
    flat_dy = d_y.reshape(-1, d_model)  # (tokens, d_model)
    flat_x_hat = x_hat.reshape(-1, d_model)
    d_gamma = np.einsum("ti,ti->i", flat_dy, flat_x_hat)  # (d_model,)
    d_beta = flat_dy.sum(axis=0)  # (d_model,)
    g = d_y * gamma  # (..., d_model)
    g_mean = g.mean(axis=-1, keepdims=True)  # (..., 1)
    projection = np.einsum("...i,...i->...", g, x_hat)[..., None] / d_model
    d_x = (g - g_mean - x_hat * projection) * inv_std
    return d_x, d_gamma, d_beta


def rms_norm(x, gamma, eps=1e-5):
    r"""Scale each token to root-mean-square 1, then by ``gamma``: layer norm without the mean.

    Parameters
    ----------
    x : array_like, shape (..., d_model)
    gamma : array_like, shape (d_model,)
        Learned scale (there is no shift).
    eps : float, default 1e-5
        Added to the mean square, so that a zero token does not divide by zero.

    Returns
    -------
    y : ndarray, shape (..., d_model)

    Notes
    -----
    .. math::
        y = \gamma \odot \frac{x}{\sqrt{\tfrac1d \sum_j x_j^2 + \epsilon}}

    (Zhang and Sennrich, 2019). It is :func:`layer_norm` for a token of mean zero with
    ``beta = 0``: it keeps the rescaling invariance, :math:`y(cx) = y(x)` for
    :math:`c > 0` (when :math:`\epsilon = 0`), and drops the re-centring, one reduction
    and one subtraction fewer per token. PyTorch's ``nn.RMSNorm``; Llama's ``LlamaRMSNorm``.
    """
    x, gamma = _norm_inputs(x, eps, gamma=gamma)
    return _normalise(_rms_norm, x, eps, gamma)[0]


def _rms_norm(x, gamma, eps):
    """RMS norm of checked inputs: ``y``, ``x_hat = x / rms`` and ``1 / rms``."""
    mean_square = np.einsum("...i,...i->...", x, x)[..., None]
    mean_square /= x.shape[-1]  # (..., 1)
    inv_rms = 1.0 / np.sqrt(mean_square + eps)  # (..., 1)
    x_hat = x * inv_rms  # (..., d_model)
    return x_hat * gamma, x_hat, inv_rms


def _rms_norm_backward_inputs(d_y, x_hat, inv_rms, gamma):
    """The arguments of :func:`rms_norm_backward` checked, as :func:`layer_norm_backward`'s."""
    return _norm_backward_inputs(d_y, x_hat, inv_rms, gamma, "inv_rms")


@checked_by(_rms_norm_backward_inputs)
def rms_norm_backward(d_y, x_hat, inv_rms, gamma):
    r"""Gradients of :func:`rms_norm` for ``x`` and ``gamma``.

    Notes
    -----
    With :math:`g = \gamma \odot dy` and :math:`\hat x = x / \mathrm{rms}(x)`,

    .. math:: dx = \frac{g - \hat x\,\operatorname{mean}(g \odot \hat x)}
              {\mathrm{rms}(x)}, \qquad d\gamma = \textstyle\sum_t dy \odot \hat x :

    layer norm's gradient without the term that removed the mean, since no mean was removed.
    """
    d_model = x_hat.shape[-1]
    d_gamma = np.einsum("ti,ti->i", d_y.reshape(-1, d_model), x_hat.reshape(-1, d_model))
    g = d_y * gamma  # (..., d_model)
    projection = np.einsum("...i,...i->...", g, x_hat)[..., None] / d_model
    return (g - x_hat * projection) * inv_rms, d_gamma


def _affine_grads(x, d_y):
    """Gradients of ``y = x @ W + b`` for ``W`` and ``b``, summed over every token.

    ``x`` (..., d_in) and ``d_y`` (..., d_out) give ``x^T dy`` of shape (d_in, d_out) and the
    column sums of ``dy``, shape (d_out,).
    """
    flat_dy = d_y.reshape(-1, d_y.shape[-1])  # (tokens, d_out)
    return x.reshape(-1, x.shape[-1]).T @ flat_dy, flat_dy.sum(axis=0)


class LayerNorm(Layer):
    """Layer normalisation with learned ``gamma`` (ones) and ``beta`` (zeros).

    Attributes
    ----------
    params : dict
        ``gamma`` and ``beta``, shape ``(d_model,)``.
    eps : float
    """

    def __init__(self, d_model, *, eps=1e-5, dtype=np.float64):
        super().__init__()
        d_model = positive_int(d_model, "d_model")
        dtype = floating_dtype(dtype)
        self.eps = non_negative_float(eps, "eps")
        self.params = {"gamma": np.ones(d_model, dtype=dtype),
                       "beta": np.zeros(d_model, dtype=dtype)}

    def forward(self, x):
        """``layer_norm(x, gamma, beta, eps)``; shape (..., d_model) in and out."""
        p = self.params
        x = features(x, p["gamma"].shape[0], "x")
        y, x_hat, inv_std = _normalise(_layer_norm, x, self.eps, p["gamma"], p["beta"])
        self._save(x_hat=x_hat, inv_std=inv_std)
        return y

    def backward(self, d_y):
        """Gradient with respect to the input of the last :meth:`forward`; sets ``grads``.

        Parameters
        ----------
        d_y : ndarray, shape (..., d_model)

        Returns
        -------
        d_x : ndarray, shape (..., d_model)
        """
        saved = self._saved_for_backward()
        d_y = output_gradient(d_y, saved["x_hat"].shape, "d_y")
        d_x, d_gamma, d_beta = layer_norm_backward.unchecked(
            d_y, saved["x_hat"], saved["inv_std"], self.params["gamma"])
        self.grads = None if self.frozen else {"gamma": d_gamma, "beta": d_beta}
        return d_x


class RMSNorm(Layer):
    """Root-mean-square normalisation with a learned scale (:func:`rms_norm`).

    Parameters
    ----------
    d_model : int
    eps : float, default 1e-5
    dtype : floating dtype, default float64

    Attributes
    ----------
    params : dict
        ``gamma``, shape ``(d_model,)``, initially ones.
    """

    def __init__(self, d_model, *, eps=1e-5, dtype=np.float64):
        super().__init__()
        d_model = positive_int(d_model, "d_model")
        self.eps = non_negative_float(eps, "eps")
        self.params = {"gamma": np.ones(d_model, dtype=floating_dtype(dtype))}

    def forward(self, x):
        """``rms_norm(x, gamma, eps)``; shape (..., d_model) in and out."""
        gamma = self.params["gamma"]
        x = features(x, gamma.shape[0], "x")
        y, x_hat, inv_rms = _normalise(_rms_norm, x, self.eps, gamma)
        self._save(x_hat=x_hat, inv_rms=inv_rms)
        return y

    def backward(self, d_y):
        """Gradient for the input of the last :meth:`forward` (:func:`rms_norm_backward`);
        sets ``grads``."""
        saved = self._saved_for_backward()
        d_y = output_gradient(d_y, saved["x_hat"].shape, "d_y")
        d_x, d_gamma = rms_norm_backward.unchecked(d_y, saved["x_hat"], saved["inv_rms"],
                                                   self.params["gamma"])
        self.grads = None if self.frozen else {"gamma": d_gamma}
        return d_x


class FeedForward(Layer):
    r"""The position-wise feed-forward network :math:`f(x W_1 + b_1) W_2 + b_2`, with
    :math:`f` ReLU, :math:`\max(0, \cdot)`, or GELU (:func:`gelu`).

    Parameters
    ----------
    d_model, d_ff : int
        Width of the tokens and of the hidden layer.
    bias : bool, default True
        Whether there are ``b_1`` and ``b_2``.
    activation : {"relu", "gelu"}, default "relu"
        :math:`f`: ReLU (the original Transformer's), or GELU in its tanh approximation
        (GPT-2's ``gelu_new``; not the exact :math:`a\,\Phi(a)`), whose formula
        :func:`gelu` gives.
    rng : numpy.random.Generator, optional
        Source of the initial weights (Glorot-uniform, biases zero); default seeded with 0.
    dtype : floating dtype, default float64

    Attributes
    ----------
    params : dict
        ``w_1`` (d_model, d_ff), ``b_1`` (d_ff,), ``w_2`` (d_ff, d_model), ``b_2`` (d_model,)
        (no biases without ``bias``).
    activation : str
    """

    def __init__(self, d_model, d_ff, *, bias=True, activation="relu", rng=None,
                 dtype=np.float64):
        super().__init__()
        d_model, d_ff = positive_int(d_model, "d_model"), positive_int(d_ff, "d_ff")
        self.activation = choice(activation, ACTIVATIONS, "activation")
        dtype, rng = floating_dtype(dtype), generator(rng)
        limit = math.sqrt(6.0 / (d_model + d_ff))
        self.params = {
            "w_1": rng.uniform(-limit, limit, (d_model, d_ff)).astype(dtype),
            "b_1": np.zeros(d_ff, dtype=dtype),
            "w_2": rng.uniform(-limit, limit, (d_ff, d_model)).astype(dtype),
            "b_2": np.zeros(d_model, dtype=dtype),
        }
        if not bias:
            del self.params["b_1"], self.params["b_2"]

    def forward(self, x):
        """Apply the network to each token: (..., d_model) -> same shape."""
        p = self.params
        x = features(x, p["w_1"].shape[0], "x")
        # (..., d_model) @ (d_model, d_ff) -> (..., d_ff)
        hidden = x @ p["w_1"]
        if "b_1" in p:
            hidden += p["b_1"]
        if self.activation == "gelu":
            pre = hidden
            hidden = _gelu(pre)
            self._save(x=x, pre=pre, hidden=hidden)
        else:
            np.maximum(hidden, 0.0, out=hidden)  # ReLU
            self._save(x=x, hidden=hidden)
        # (..., d_ff) @ (d_ff, d_model) -> (..., d_model)
        y = hidden @ p["w_2"]
        if "b_2" in p:
            y += p["b_2"]
        return y

    def backward(self, d_y):
        r"""Gradient with respect to the input of the last :meth:`forward`; sets ``grads``.

        Parameters
        ----------
        d_y : ndarray, shape (..., d_model)

        Returns
        -------
        d_x : ndarray, shape (..., d_model)

        Notes
        -----
        With :math:`a = xW_1 + b_1` and :math:`h = f(a)`: :math:`dW_2 = h^\top dy`,
        :math:`dh = dy\,W_2^\top \odot f'(a)`, :math:`dW_1 = x^\top dh`,
        :math:`dx = dh\,W_1^\top`, biases the column sums; sums run over every token.
        For ReLU :math:`f'(a) = [a > 0]` (read from :math:`h > 0`); for GELU it is the exact
        derivative of the tanh form (:func:`gelu`).
        """
        p, saved = self.params, self._saved_for_backward()
        x, hidden = saved["x"], saved["hidden"]
        d_y = output_gradient(d_y, x.shape, "d_y")  # the output has the input's shape
        d_hidden = d_y @ p["w_2"].T  # (..., d_model) @ (d_model, d_ff) -> (..., d_ff)
        if self.activation == "gelu":
            d_hidden *= _gelu_slope(saved["pre"])
        else:
            d_hidden *= hidden > 0  # ReLU passes the gradient where it passed the input
        d_w_1, d_b_1 = _affine_grads(x, d_hidden)  # (d_model, d_ff), (d_ff,)
        d_w_2, d_b_2 = _affine_grads(hidden, d_y)  # (d_ff, d_model), (d_model,)
        grads = {"w_1": d_w_1, "b_1": d_b_1, "w_2": d_w_2, "b_2": d_b_2}
        self.grads = {name: grads[name] for name in p}
        return d_hidden @ p["w_1"].T  # (..., d_ff) @ (d_ff, d_model) -> (..., d_model)


def silu(x):
    r"""The sigmoid-weighted linear unit :math:`x\,\sigma(x)` (SiLU, or Swish with
    :math:`\beta = 1`), elementwise.

    The sigmoid is computed from :math:`e = e^{-|x|} \le 1`, as :math:`1/(1 + e)` for
    :math:`x \ge 0` and :math:`e/(1 + e)` below: it never overflows, and keeps its relative
    precision far into the negative tail (where :math:`1 - \sigma(-x)` would cancel).
    """
    x = as_float_array(x, "x")
    require_finite(x, "x")
    return x * _sigmoid(x)


def _sigmoid(x):
    e = np.exp(-np.abs(x))  # in (0, 1]
    denominator = e + 1.0
    return np.where(x >= 0, 1.0, e) / denominator


#: :math:`\sqrt{2/\pi}` and the cubic's coefficient of GELU's tanh approximation.
_GELU_SCALE, _GELU_CUBIC = math.sqrt(2.0 / math.pi), 0.044715
#: Beyond this magnitude the tanh approximation's gate is exactly 0 or 1 in float64 (and
#: float32): :math:`2u(30) \approx 1974`, and :math:`e^{-1974}` underflows to 0.
_GELU_FLAT = 30.0


def gelu(x):
    r"""The Gaussian error linear unit in its tanh approximation, elementwise: GPT-2's.

    .. math:: \begin{gathered}
              \operatorname{gelu}(x) = \tfrac12\, x \left(1 + \tanh u\right), \\
              u = \sqrt{2/\pi}\,\left(x + 0.044715\, x^3\right)
              \end{gathered}

    (Hendrycks and Gimpel, 2016): ``gelu_new`` of ``transformers``, which GPT-2 uses, and
    ``torch.nn.functional.gelu(x, approximate="tanh")``. It is *not* the exact GELU
    :math:`x\,\Phi(x)`, :math:`\tfrac12 x (1 + \operatorname{erf}(x/\sqrt2))` (PyTorch's default
    ``F.gelu``, ``transformers``' ``"gelu"``), which differs from it by up to about
    :math:`5 \times 10^{-4}` (near :math:`|x| \approx 2`): a model trained with one computes
    a measurably different function with the other.

    Computed as :math:`x\,\sigma(2u)`, since :math:`\tfrac12(1 + \tanh u) = \sigma(2u)`, with
    the stable sigmoid of :func:`silu` (no cancellation in :math:`1 + \tanh u` for
    :math:`x \ll 0`), and :math:`u` from :math:`x` clipped to :math:`\pm 30`, where the
    gate is already exactly 0 or 1 (so :math:`x^3` never overflows).
    """
    x = as_float_array(x, "x")
    require_finite(x, "x")
    return _gelu(x)


def _gelu_gate(x):
    """``sigmoid(2u)`` of :func:`gelu` and the clipped ``x`` it was computed from."""
    clipped = np.clip(x, -_GELU_FLAT, _GELU_FLAT)
    # x * x**2, not x**3: NumPy computes ** 3 by calling pow for every element, 200 times
    # slower on 2 million floats (** 2 has its own fast path)
    u = _GELU_SCALE * (clipped + _GELU_CUBIC * (clipped * np.square(clipped)))
    return _sigmoid(2.0 * u), clipped


def _gelu(x):
    return x * _gelu_gate(x)[0]


def _gelu_slope(x):
    r"""The derivative of :func:`gelu` at ``x``: with :math:`s = \sigma(2u)`,

    .. math:: \operatorname{gelu}'(x) = s + 2x\,s(1 - s)\,u'(x), \qquad
              u'(x) = \sqrt{2/\pi}\,(1 + 3 \cdot 0.044715\, x^2),

    the tanh form's :math:`\tfrac12(1 + \tanh u) + \tfrac12 x (1 - \tanh^2 u)\,u'` written
    with :math:`1 + \tanh u = 2s` and :math:`1 - \tanh^2 u = 4s(1 - s)`. Beyond the clip,
    :math:`s(1 - s)` is exactly 0 and the slope exactly 1 or 0.
    """
    s, clipped = _gelu_gate(x)
    du = _GELU_SCALE * (1.0 + 3.0 * _GELU_CUBIC * clipped**2)
    return s + 2.0 * clipped * s * (1.0 - s) * du


class SwiGLU(Layer):
    r"""The gated feed-forward network of Llama: :math:`(\operatorname{silu}(x W_g) \odot
    x W_u)\, W_d`.

    Parameters
    ----------
    d_model, d_ff : int
        Width of the tokens and of the hidden layer.
    rng : numpy.random.Generator, optional
        Source of the initial weights (Glorot-uniform); default seeded with 0.
    dtype : floating dtype, default float64

    Attributes
    ----------
    params : dict
        ``w_gate`` and ``w_up`` (d_model, d_ff), ``w_down`` (d_ff, d_model); no biases.

    Notes
    -----
    Shazeer (2020), "GLU variants improve Transformer": one branch :math:`x W_u` is
    multiplied, feature by feature, by a gate :math:`\operatorname{silu}(x W_g)` computed
    from the same token. Three matrices instead of two, so a model that keeps the parameter
    count takes :math:`d_\text{ff} \approx \tfrac83 d_\text{model}` instead of
    :math:`4 d_\text{model}` (SmolLM2-135M: 1536 for 576). Backward, with
    :math:`a = xW_g`, :math:`b = xW_u`, :math:`s = \sigma(a)`, :math:`h = a s \odot b`:

    .. math:: \begin{gathered}
              dh = dy\,W_d^\top, \quad db = dh \odot a s, \quad
              da = dh \odot b \odot s\,(1 + a(1 - s)), \\
              dW_d = h^\top dy, \quad dW_g = x^\top da, \quad dW_u = x^\top db, \quad
              dx = da\,W_g^\top + db\,W_u^\top
              \end{gathered}

    since :math:`\tfrac{d}{da}\, a\sigma(a) = \sigma(a) + a\sigma(a)(1 - \sigma(a))`.
    """

    def __init__(self, d_model, d_ff, *, rng=None, dtype=np.float64):
        super().__init__()
        d_model, d_ff = positive_int(d_model, "d_model"), positive_int(d_ff, "d_ff")
        dtype, rng = floating_dtype(dtype), generator(rng)
        limit = math.sqrt(6.0 / (d_model + d_ff))
        self.params = {name: rng.uniform(-limit, limit, shape).astype(dtype)
                       for name, shape in (("w_gate", (d_model, d_ff)),
                                           ("w_up", (d_model, d_ff)),
                                           ("w_down", (d_ff, d_model)))}

    def forward(self, x):
        """Apply the network to each token: (..., d_model) -> same shape."""
        p = self.params
        x = features(x, p["w_gate"].shape[0], "x")
        a = x @ p["w_gate"]  # (..., d_model) @ (d_model, d_ff) -> (..., d_ff)
        u = x @ p["w_up"]  # (..., d_ff)
        s = _sigmoid(a)
        gated = a * s  # silu(a)
        hidden = gated * u  # z
        self._save(x=x, a=a, u=u, s=s, gated=gated, hidden=hidden)
        return hidden @ p["w_down"]  # (..., d_ff) @ (d_ff, d_model) -> (..., d_model)

    def backward(self, d_y):
        """Gradient with respect to the input of the last :meth:`forward`; sets ``grads``."""
        p, saved = self.params, self._saved_for_backward()
        x, a, u, s = saved["x"], saved["a"], saved["u"], saved["s"]
        d_y = output_gradient(d_y, x.shape, "d_y")  # the output has the input's shape
        d_hidden = d_y @ p["w_down"].T  # dz, (..., d_ff)
        d_u = d_hidden * saved["gated"]
        d_a = d_hidden * u * s * (1.0 + a * (1.0 - s))
        if self.frozen:  # the input's gradient only (module docstring)
            self.grads = None
        else:
            flat_x = x.reshape(-1, x.shape[-1]).T  # (d_model, tokens)
            self.grads = {
                "w_gate": flat_x @ d_a.reshape(-1, d_a.shape[-1]),
                "w_up": flat_x @ d_u.reshape(-1, d_u.shape[-1]),
                "w_down": _affine_grads(saved["hidden"], d_y)[0],
            }
        return d_a @ p["w_gate"].T + d_u @ p["w_up"].T


class Linear(Layer):
    r"""An affine map of each token, :math:`y = x W + b`: the model's output head.

    Parameters
    ----------
    d_in, d_out : int
    bias : bool, default True
        Whether there is a ``b``.
    rng : numpy.random.Generator, optional
        Source of the initial weights (Glorot-uniform, bias zero); default seeded with 0.
    dtype : floating dtype, default float64

    Attributes
    ----------
    params : dict
        ``w`` (d_in, d_out) and, with ``bias``, ``b`` (d_out,).
    """

    def __init__(self, d_in, d_out, *, bias=True, rng=None, dtype=np.float64):
        super().__init__()
        d_in, d_out = positive_int(d_in, "d_in"), positive_int(d_out, "d_out")
        dtype, rng = floating_dtype(dtype), generator(rng)
        limit = math.sqrt(6.0 / (d_in + d_out))
        self.params = {"w": rng.uniform(-limit, limit, (d_in, d_out)).astype(dtype)}
        if bias:
            self.params["b"] = np.zeros(d_out, dtype=dtype)

    def forward(self, x):
        """(..., d_in) -> (..., d_out)."""
        w = self.params["w"]
        x = features(x, w.shape[0], "x")
        self._save(x=x)
        y = x @ w  # (..., d_in) @ (d_in, d_out) -> (..., d_out)
        if "b" in self.params:
            y += self.params["b"]
        return y

    def backward(self, d_y):
        """Gradient with respect to the input of the last :meth:`forward`; sets ``grads``.

        ``dW = x^T dy`` and ``db`` the column sums of ``dy`` (over every token);
        returns ``dx = dy W^T``, shape (..., d_in).
        """
        x = self._saved_for_backward()["x"]
        w = self.params["w"]
        d_y = output_gradient(d_y, (*x.shape[:-1], w.shape[1]), "d_y")
        if self.frozen:  # the input's gradient only (module docstring)
            self.grads = None
        else:
            d_w, d_b = _affine_grads(x, d_y)  # (d_in, d_out), (d_out,)
            self.grads = {"w": d_w, "b": d_b} if "b" in self.params else {"w": d_w}
        return d_y @ w.T  # (..., d_out) @ (d_out, d_in) -> (..., d_in)


class Embedding(Layer):
    r"""A learned vector for each token id: row ``t`` of the table for token ``t``.

    Parameters
    ----------
    vocab_size, d_model : int
    rng : numpy.random.Generator, optional
        Source of the initial table, entries drawn from :math:`\mathcal N(0, 1)` (the scale of
        the positional encoding's entries); default seeded with 0.
    dtype : floating dtype, default float64

    Attributes
    ----------
    params : dict
        ``table`` (vocab_size, d_model).

    Notes
    -----
    The lookup ``table[tokens]`` is the product of one-hot rows with the table, so its
    gradient adds each token's output gradient into that token's row (``np.add.at``).
    """

    def __init__(self, vocab_size, d_model, *, rng=None, dtype=np.float64):
        super().__init__()
        vocab_size = positive_int(vocab_size, "vocab_size")
        d_model = positive_int(d_model, "d_model")
        dtype, rng = floating_dtype(dtype), generator(rng)
        self.params = {"table": rng.standard_normal((vocab_size, d_model)).astype(dtype)}

    def forward(self, tokens):
        """Integer ids of any shape ``(...)`` -> vectors ``(..., d_model)``."""
        tokens = token_ids(tokens, self.params["table"].shape[0], min_ndim=0,
                           allow_empty=True)
        self._save(tokens=tokens)
        return self.params["table"][tokens]  # (..., d_model)

    def backward(self, d_y):
        """Sets ``grads["table"]``; returns None (token ids have no gradient)."""
        tokens = self._saved_for_backward()["tokens"]
        table = self.params["table"]
        d_y = output_gradient(d_y, (*tokens.shape, table.shape[1]), "d_y")
        if self.frozen:  # nothing to compute (module docstring)
            self.grads = None
            return None
        d_table = np.zeros_like(table)
        np.add.at(d_table, tokens.reshape(-1), d_y.reshape(-1, table.shape[1]))
        self.grads = {"table": d_table}
