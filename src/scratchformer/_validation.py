"""The one set of argument checks, used by every constructor and every forward.

Every public function turns its array arguments into NumPy arrays here and rejects what it cannot
handle with a ``TypeError`` (wrong kind of thing: a float where a size goes, an integer dtype
where weights go) or a ``ValueError`` (right kind, wrong value: a size of 0, a width that does not
match, NaN), with a message that names the argument and its value or shape. Nothing downstream
has to guard against NaN, complex numbers or object arrays again.
"""

from __future__ import annotations

import functools
import inspect
import math
import operator

import numpy as np


def positive_int(value, name: str) -> int:
    """``value`` as an ``int`` if it is a positive integer.

    ``TypeError`` for anything that is not an integer (a float such as ``4.0``, a bool, a
    string); ``ValueError`` for 0 and negative integers.
    """
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a positive integer, got the bool {value!r}")
    try:
        number = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be a positive integer, got {value!r} of type "
                        f"{type(value).__name__}") from None
    if number < 1:
        raise ValueError(f"{name} must be a positive integer, got {number}")
    return number


def non_negative_int(value, name: str) -> int:
    """``value`` as an ``int`` if it is an integer >= 0 (same errors as :func:`positive_int`)."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a non-negative integer, got the bool {value!r}")
    try:
        number = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be a non-negative integer, got {value!r} of type "
                        f"{type(value).__name__}") from None
    if number < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {number}")
    return number


def floating_dtype(dtype, name: str = "dtype") -> np.dtype:
    """``dtype`` as a NumPy dtype if it is a real floating type (float16, float32, float64)."""
    try:
        result = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{name} must be a floating dtype, got {dtype!r}") from None
    if not np.issubdtype(result, np.floating):
        raise TypeError(f"{name} must be a floating dtype such as float32 or float64, got "
                        f"{result}: weights of another dtype would be rounded to nothing")
    return result


def generator(rng, name: str = "rng") -> np.random.Generator:
    """``rng``, or a generator seeded with 0 when it is None (every layer is reproducible)."""
    if rng is None:
        return np.random.default_rng(0)
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"{name} must be a numpy.random.Generator, got {type(rng).__name__}")
    return rng


def real_number(value, name: str) -> float:
    """``value`` as a float if it is a real number (not a bool, a string or an array)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    return float(value)


def non_negative_float(value, name: str) -> float:
    """``value`` as a float if it is a finite real number >= 0."""
    number = real_number(value, name)
    if not (np.isfinite(number) and number >= 0):
        raise ValueError(f"{name} must be finite and non-negative, got {value!r}")
    return number


def positive_float(value, name: str) -> float:
    """``value`` as a float if it is a finite real number > 0."""
    number = real_number(value, name)
    if not (np.isfinite(number) and number > 0):
        raise ValueError(f"{name} must be finite and positive, got {value!r}")
    return number


def fraction(value, name: str, *, zero: bool = True) -> float:
    """``value`` as a float if it lies in [0, 1] (in (0, 1] when ``zero`` is False)."""
    number = real_number(value, name)
    if not (0 <= number <= 1 and (zero or number > 0)):
        interval = "[0, 1]" if zero else "(0, 1]"
        raise ValueError(f"{name} must lie in {interval}, got {value!r}")
    return number


def base_above_one(value, name: str) -> float:
    """``value`` as a float if it is a finite real number > 1 (the base of an exponential
    scale, RoPE's and the positional encoding's)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    number = float(value)
    if not (np.isfinite(number) and number > 1):
        raise ValueError(f"{name} must be finite and greater than 1, got {value!r}")
    return number


def choice(value, options, name: str):
    """``value`` if it is one of ``options``."""
    if value not in options:
        listed = " or ".join(repr(option) for option in options)
        raise ValueError(f"{name} must be {listed}, got {value!r}")
    return value


def as_float_array(x, name: str) -> np.ndarray:
    """Return ``x`` as a floating-point array, promoting integers to float64.

    Raises ``TypeError`` for complex, object, string and other non-real dtypes.
    """
    try:
        arr = np.asarray(x)
    except (ValueError, TypeError) as err:  # ragged nested lists, for example
        raise TypeError(f"{name} must be array-like with a numeric dtype: {err}") from err
    if np.issubdtype(arr.dtype, np.floating):
        return arr
    if np.issubdtype(arr.dtype, np.integer) or arr.dtype == np.bool_:
        return arr.astype(np.float64)
    raise TypeError(
        f"{name} must have a real floating or integer dtype, got dtype {arr.dtype}"
    )


def require_finite(arr: np.ndarray, name: str) -> None:
    """Raise ``ValueError`` if ``arr`` holds NaN or an infinity."""
    if not np.isfinite(arr).all():
        bad = int(np.size(arr) - np.count_nonzero(np.isfinite(arr)))
        raise ValueError(f"{name} must be finite, but {bad} of its entries are NaN or infinite")


def require_min_ndim(arr: np.ndarray, ndim: int, name: str, shape_doc: str) -> None:
    """Raise ``ValueError`` if ``arr`` has fewer than ``ndim`` axes."""
    if arr.ndim < ndim:
        raise ValueError(
            f"{name} must have at least {ndim} axes with shape {shape_doc}, "
            f"got shape {arr.shape}"
        )


def checked_by(check):
    """Decorate a function of checked arrays (a kernel, such as a backward pass the book shows)
    so that a call checks its arguments first: ``check(*args)`` returns them converted, or
    raises. The layers, which call the kernel every training step with arrays they made
    themselves, reach it unchecked as ``function.unchecked``: no scan of the arrays there.
    """
    def decorate(kernel):
        signature = inspect.signature(kernel)

        @functools.wraps(kernel)
        def checked(*args, **kwargs):
            bound = signature.bind(*args, **kwargs)
            return kernel(*check(*bound.args))

        checked.unchecked = kernel
        return checked
    return decorate


def output_gradient(d_out, shape, name: str) -> np.ndarray:
    """``d_out`` as an array if it has ``shape``, the shape of the output it is the gradient of.

    Every ``backward`` calls this first: one shape comparison (it runs every training step),
    so that a gradient of another shape is named here, not by a product deep inside NumPy.
    """
    if np.shape(d_out) != tuple(shape):
        raise ValueError(f"{name} must have the output's shape {tuple(shape)}, got "
                         f"{np.shape(d_out)}")
    return np.asarray(d_out)


def features(x, width: int, name: str, *, min_ndim: int = 1,
             shape_doc: str | None = None) -> np.ndarray:
    """``x`` as a finite floating array whose last axis has ``width`` entries.

    ``min_ndim`` axes at least (2 for a sequence of tokens); ``shape_doc`` names the expected
    shape in the message, ``(..., width)`` by default.
    """
    arr = as_float_array(x, name)
    if shape_doc is None:
        shape_doc = "(..., n, {w})" if min_ndim >= 2 else "(..., {w})"
        shape_doc = shape_doc.format(w=width)
    if arr.ndim < min_ndim or arr.shape[-1] != width:
        raise ValueError(f"{name} must have shape {shape_doc}, got shape {arr.shape}")
    require_finite(arr, name)
    return arr


def token_ids(tokens, vocab_size: int, name: str = "tokens", *, min_ndim: int = 1,
              allow_empty: bool = False) -> np.ndarray:
    """``tokens`` as an integer array whose entries lie in ``[0, vocab_size)``.

    ``TypeError`` for floats, bools and other non-integer dtypes (``2.0`` is not a token);
    ``ValueError`` for ids outside the vocabulary, too few axes, or (unless ``allow_empty``) a
    sequence of no tokens.
    """
    arr = np.asarray(tokens)
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"{name} must be integer token ids, got dtype {arr.dtype}")
    if arr.ndim < min_ndim:
        raise ValueError(f"{name} must have at least {min_ndim} axes, got shape {arr.shape}")
    if not allow_empty and arr.ndim >= 1 and arr.shape[-1] == 0:
        raise ValueError(f"{name} must hold at least one token per sequence, got shape "
                         f"{arr.shape}")
    if arr.size and (arr.min() < 0 or arr.max() >= vocab_size):
        raise ValueError(f"{name} must lie in [0, {vocab_size}) (the vocabulary), got values "
                         f"from {arr.min()} to {arr.max()}")
    return arr


def sampling_logits(logits, temperature, top_k, top_p, rng) -> np.ndarray:
    """``logits`` as a finite (batch, vocab_size) array, once the settings of
    :func:`scratchformer.next_token` are checked: ``temperature`` finite and >= 0 (0 is
    greedy), ``top_k`` None or a positive integer, ``top_p`` None or in (0, 1], ``rng`` a
    generator, and given when ``temperature > 0``. The values themselves are not converted:
    the sampler computes with them as given."""
    if non_negative_float(temperature, "temperature") > 0 and rng is None:
        raise ValueError("sampling (temperature > 0) draws from rng: pass a "
                         "numpy.random.Generator")
    if rng is not None:
        generator(rng)
    if top_k is not None:
        positive_int(top_k, "top_k")
    if top_p is not None:
        fraction(top_p, "top_p", zero=False)
    checked = as_float_array(logits, "logits")
    if checked.ndim != 2 or checked.shape[-1] == 0:
        raise ValueError(f"logits must have shape (batch, vocab_size), got shape "
                         f"{checked.shape}")
    require_finite(checked, "logits")
    if isinstance(logits, np.ndarray) and np.issubdtype(logits.dtype, np.integer):
        return logits  # integer logits are computed with as they are
    return checked


def class_ids(targets, logits_shape, name: str = "targets") -> np.ndarray:
    """``targets`` as an integer array of shape ``logits_shape[:-1]`` whose entries lie in
    ``[0, logits_shape[-1])``: the class of each row of logits."""
    arr = np.asarray(targets)
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"{name} must be integer class ids, got dtype {arr.dtype}")
    if len(logits_shape) < 1 or arr.shape != tuple(logits_shape[:-1]):
        raise ValueError(f"logits of shape {tuple(logits_shape)} need {name} of shape "
                         f"{tuple(logits_shape[:-1])}, got {arr.shape}")
    n_classes = logits_shape[-1]
    if arr.size and (arr.min() < 0 or arr.max() >= n_classes):
        raise ValueError(f"{name} must lie in [0, {n_classes}), got values from "
                         f"{arr.min()} to {arr.max()}")
    return arr


def finite_loss(loss: float, dtype) -> float:
    """``loss`` if it is finite; else the ``ValueError`` of a cross-entropy that overflowed
    ``dtype``, the logits' (a scalar check: the loss is computed every training step)."""
    if not math.isfinite(loss):
        largest = np.finfo(dtype).max
        raise ValueError(f"the cross-entropy overflowed {np.dtype(dtype)} (it came out {loss}): "
                         f"a logit lies more than {largest:g} below its row's maximum, or the "
                         f"loss exceeds {largest:g}; scale the logits down or compute the loss "
                         f"in a wider dtype")
    return loss


def excluded(exclude, n: int, what: str) -> np.ndarray:
    """``exclude`` (the numbers of the held-out items a sample must avoid) as an int64 array,
    refused when it covers all ``n`` items: a sample would then never end."""
    arr = np.asarray(exclude)
    if arr.size == 0:
        return arr.astype(np.int64)
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"exclude must hold integer {what} numbers, got dtype {arr.dtype}")
    arr = arr.astype(np.int64, copy=False)
    # cheap on the usual path: only an exclude as long as all the items can cover them
    if arr.size >= n and np.unique(arr[(arr >= 0) & (arr < n)]).size >= n:
        raise ValueError(f"exclude covers all {n} {what}s: there is none left to sample")
    return arr
