"""The one set of argument checks, used by every constructor and every forward.

Every public function turns its array arguments into NumPy arrays here and rejects what it cannot
handle with a ``TypeError`` (wrong kind of thing: a float where a size goes, an integer dtype
where weights go) or a ``ValueError`` (right kind, wrong value: a size of 0, a width that does not
match, NaN), with a message that names the argument and its value or shape. Nothing downstream
has to guard against NaN, complex numbers or object arrays again.
"""

from __future__ import annotations

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


def non_negative_float(value, name: str) -> float:
    """``value`` as a float if it is a finite real number >= 0."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    number = float(value)
    if not (np.isfinite(number) and number >= 0):
        raise ValueError(f"{name} must be finite and non-negative, got {value!r}")
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
