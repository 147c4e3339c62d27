r"""Weights in fewer bits: llama.cpp's block quantisers, written from scratch.

A quantised matrix is cut, along its rows, into blocks of 32 weights; each block keeps a float16
scale ``d`` (and for Q4_1 a float16 offset ``m``) and one small integer per weight:

- **Q8_0**: ``d = max|x| / 127``, ``q = round(x / d)`` in ``[-127, 127]``, ``w = d q``
  (34 bytes a block, 8.5 bits a weight);
- **Q4_0**: ``d = x* / -8`` with ``x*`` the weight of largest magnitude (its sign kept),
  ``q = min(15, trunc(x / d + 8.5))``, ``w = d (q - 8)`` (18 bytes, 4.5 bits);
- **Q4_1**: ``m = min x``, ``d = (max x - m) / 15``, ``q = min(15, trunc((x - m) / d + 0.5))``,
  ``w = d q + m`` (20 bytes, 5 bits);
- **k bits** (:func:`quantize_bits`): Q4_1's rule with ``2**k`` levels, for ``k`` from 2 to 8,
  to show what fewer levels cost (``k + 1`` bits a weight). No llama.cpp format stores it;
  ``k = 4`` is Q4_1.

The arithmetic is llama.cpp's reference quantiser's (``ggml-quants.c``): float32 throughout,
``1 / d`` multiplied rather than ``d`` divided, rounding half away from zero for Q8_0 and
truncation after adding a half for the 4-bit formats, the scales rounded to float16 (to nearest,
ties to even) only when stored. The bytes are llama.cpp's: the tests hold :func:`quantize` to the
``gguf`` package's quantiser byte for byte, and :mod:`scratchformer.gguf` reads them back. The
chapter :doc:`Fewer bits </book/fewer_bits>` derives what each format's rounding costs and
measures it on SmolLM2-135M and on the book's own language model.
"""

from __future__ import annotations

import numpy as np

from ._validation import positive_int
from .gguf import dequantize_q4_0, dequantize_q4_1, dequantize_q8_0

__all__ = ["BLOCK", "FORMATS", "quantize", "dequantize", "quantize_bits", "round_trip",
           "bits_per_weight", "quantized_parameters"]

#: Weights per block, in every format here.
BLOCK = 32
#: Bytes of one block of each of llama.cpp's formats that :func:`quantize` writes.
FORMATS = {"Q8_0": 34, "Q4_0": 18, "Q4_1": 20}
#: The largest finite float16: a scale or offset beyond it cannot be stored.
_F16_MAX = float(np.finfo(np.float16).max)


def _as_blocks(x, what):
    """``x`` as float32 blocks of 32, shape ``(n_blocks, 32)``; a clear error for what cannot
    be quantised."""
    x = np.asarray(x)
    if not (np.issubdtype(x.dtype, np.floating) or np.issubdtype(x.dtype, np.integer)):
        raise TypeError(f"{what}: weights must be real numbers, got dtype {x.dtype}")
    if x.ndim == 0 or x.shape[-1] % BLOCK:
        row = x.shape[-1] if x.ndim else "(none: a scalar)"
        raise ValueError(f"{what}: rows are cut into blocks of {BLOCK} weights, but the "
                         f"weights' shape {x.shape} has rows of {row}, not a multiple of "
                         f"{BLOCK}")
    x = np.ascontiguousarray(x, dtype=np.float32).reshape(-1, BLOCK)
    if not np.isfinite(x).all():
        bad = np.argwhere(~np.isfinite(x))[0]
        raise ValueError(f"{what}: weight {bad[0] * BLOCK + bad[1]} (block {bad[0]}) is "
                         f"{x[tuple(bad)]}: NaN and inf cannot be quantised")
    return x


def _inverse(d):
    """``1 / d``, and 0 where ``d`` is 0 (a block whose weights are all equal, or all zero
    for Q8_0 and Q4_0, is stored with every ``q = 0``, exactly)."""
    with np.errstate(divide="ignore"):
        return np.where(d == 0, np.float32(0), np.float32(1) / d).astype(np.float32)


def _float16(values, what, name):
    """Round scales or offsets to float16 as llama.cpp stores them; refuse what overflows."""
    if np.abs(values).max(initial=0) > _F16_MAX:
        raise ValueError(f"{what}: a block's {name} is {np.abs(values).max():.6g}, beyond "
                         f"float16's largest {_F16_MAX:g}: the format cannot store it")
    return values.astype(np.float16)


def _pack_nibbles(q):
    """32 four-bit integers a block into 16 bytes: weight ``j`` in the low nibble of byte
    ``j``, weight ``j + 16`` in its high nibble (llama.cpp's order)."""
    return q[:, :16] | (q[:, 16:] << np.uint8(4))


def _quantize_q8_0(x, what):
    d = np.abs(x).max(axis=1, keepdims=True) / np.float32(127)
    scaled = x * _inverse(d)
    # roundf: half away from zero (NumPy's round is half to even). Not floor(a + 0.5): for
    # a just below a half, a + 0.5 rounds up to the next integer in float32.
    a = np.abs(scaled)
    whole = np.floor(a)
    q = (np.sign(scaled) * (whole + np.floor(2 * (a - whole)))).astype(np.int8)
    return np.concatenate([_float16(d, what, "scale").view(np.uint8), q.view(np.uint8)], axis=1)


def _quantize_q4_0(x, what):
    # the weight of largest magnitude, sign kept (the first, if two tie)
    extreme = np.take_along_axis(x, np.abs(x).argmax(axis=1)[:, None], axis=1)
    d = extreme / np.float32(-8)
    q = np.trunc(x * _inverse(d) + np.float32(8.5))
    q = np.minimum(q, 15).astype(np.uint8)  # x = -d * 8 exactly lands on 16
    return np.concatenate([_float16(d, what, "scale").view(np.uint8), _pack_nibbles(q)], axis=1)


def _levels(x, bits, what):
    """Q4_1's rule with ``2**bits`` levels: the scale, the offset (both
    float32) and the integers."""
    top = 2 ** bits - 1
    low = x.min(axis=1, keepdims=True)
    d = (x.max(axis=1, keepdims=True) - low) / np.float32(top)
    q = np.trunc((x - low) * _inverse(d) + np.float32(0.5))
    return d, low, np.minimum(q, top).astype(np.uint8)


def _quantize_q4_1(x, what):
    d, low, q = _levels(x, 4, what)
    return np.concatenate([_float16(d, what, "scale").view(np.uint8),
                           _float16(low, what, "offset").view(np.uint8),
                           _pack_nibbles(q)], axis=1)


_QUANTIZERS = {"Q8_0": _quantize_q8_0, "Q4_0": _quantize_q4_0, "Q4_1": _quantize_q4_1}
_DEQUANTIZERS = {"Q8_0": dequantize_q8_0, "Q4_0": dequantize_q4_0, "Q4_1": dequantize_q4_1}


def _format(type_name):
    if type_name not in FORMATS:
        raise ValueError(f"unknown format {type_name!r}: the quantisers here write "
                         f"{', '.join(FORMATS)} (k-bit levels: quantize_bits)")
    return type_name


def quantize(x, type_name):
    """Quantise weights into llama.cpp's blocks.

    Parameters
    ----------
    x : array_like of real numbers
        Any shape whose last axis (a row) is a multiple of 32; rounded to float32 first, as
        llama.cpp quantises float32 weights.
    type_name : {"Q8_0", "Q4_0", "Q4_1"}

    Returns
    -------
    ndarray of uint8, shape ``(x.size // 32, FORMATS[type_name])``
        One row of bytes a block, in ``x``'s order: what a GGUF file stores.

    Raises
    ------
    ValueError
        An unknown format, rows that are not whole blocks, a NaN or inf weight, or a block
        whose scale or offset float16 cannot store.
    """
    type_name = _format(type_name)
    what = f"quantize({type_name})"
    return _QUANTIZERS[type_name](_as_blocks(x, what), what)


def dequantize(blocks, type_name, shape=None):
    """The weights that :func:`quantize`'s blocks stand for (float32), in ``shape`` if given
    (else one row of 32 a block); :func:`scratchformer.gguf.dequantize` for a file's tensors."""
    out = _DEQUANTIZERS[_format(type_name)](blocks)
    return out if shape is None else out.reshape(shape)


def quantize_bits(x, bits):
    """Round weights to ``2**bits`` levels a block by Q4_1's rule, and back.

    Each block of 32 keeps its minimum ``m`` and step ``d = (max - m) / (2**bits - 1)``, both
    in float16 (so ``bits + 1`` bits a weight), and each weight becomes ``d q + m`` with ``q``
    its nearest level. ``bits = 4`` gives the same weights as Q4_1.

    Parameters
    ----------
    x : array_like of real numbers, rows a multiple of 32
    bits : int, 2 to 8

    Returns
    -------
    ndarray of float32, the shape of ``x``
    """
    bits = positive_int(bits, "bits")
    if not 2 <= bits <= 8:
        raise ValueError(f"bits must be from 2 to 8 (levels that a byte holds, and at least "
                         f"four), got {bits}")
    shape = np.shape(x)
    what = f"quantize_bits({bits})"
    d, low, q = _levels(_as_blocks(x, what), bits, what)
    d = _float16(d, what, "scale").astype(np.float32)
    low = _float16(low, what, "offset").astype(np.float32)
    return (q.astype(np.float32) * d + low).reshape(shape)


def round_trip(x, scheme):
    """``x`` as it comes back from a scheme: ``"Q8_0"``, ``"Q4_0"``, ``"Q4_1"`` (llama.cpp's
    blocks) or ``"2-bit"`` to ``"8-bit"`` (:func:`quantize_bits`). Float32, ``x``'s shape."""
    if isinstance(scheme, str) and scheme.endswith("-bit") and scheme[:-4].isdigit():
        return quantize_bits(x, int(scheme[:-4]))
    return dequantize(quantize(x, scheme), scheme, np.shape(x))


def bits_per_weight(scheme):
    """Bits each weight costs in a scheme of :func:`round_trip`, its block's scale and
    offset included: 8.5 for Q8_0, 4.5 for Q4_0, 5 for Q4_1, ``k + 1`` for ``"k-bit"``."""
    if isinstance(scheme, str) and scheme.endswith("-bit") and scheme[:-4].isdigit():
        return int(scheme[:-4]) + 1.0
    return FORMATS[_format(scheme)] * 8 / BLOCK


def quantized_parameters(model, scheme):
    """Every parameter of ``model``, its matrices through :func:`round_trip`, for
    ``model.load_parameters``.

    Blocks run along the axis a product sums over, as a GGUF file stores them: down the
    columns of a weight ``w`` that multiplies as ``x @ w`` (the rows of the file's ``w.T``),
    along the rows of an embedding ``table``. Vectors (biases, norms' scales) are copied
    unchanged, as llama.cpp keeps them in float32.

    Returns
    -------
    dict of str to ndarray
        Named as ``model.named_parameters()`` names them, each in its parameter's dtype.
    """
    out = {}
    for name, layer, key in model.named_parameters():
        w = layer.params[key]
        if w.ndim != 2:
            out[name] = w.copy()
            continue
        rows = w if key == "table" else w.T
        back = round_trip(rows, scheme)
        out[name] = (back if key == "table" else back.T).astype(w.dtype)
    return out
