"""Checks run at the public boundary of the package.

Every public function turns its array arguments into NumPy arrays here and rejects what it cannot
handle with a ``TypeError`` or ``ValueError`` that names the argument and the offending shape or
value. Nothing downstream has to guard against NaN, complex numbers or object arrays again.
"""

from __future__ import annotations

import numpy as np


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
