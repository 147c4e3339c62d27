r"""Read GGUF, llama.cpp's model file: its metadata, its tensors, and their quantised weights.

A GGUF file (versions 2 and 3 read here; both little-endian, laid out the same) is, in order:

- a **header** of 24 bytes: the magic ``b"GGUF"``, the version (uint32), the number of tensors
  and the number of metadata key/value pairs (uint64 each);
- the **metadata**: per pair, a key (a string: uint64 byte length, then UTF-8, no terminator),
  a value type (uint32) and the value. The 13 value types are uint8 (0), int8 (1), uint16 (2),
  int16 (3), uint32 (4), int32 (5), float32 (6), bool (7, one byte), string (8), array (9),
  uint64 (10), int64 (11) and float64 (12). An array is an element type (uint32), a length
  (uint64) and the elements, without a type tag each; an element may itself be an array;
- the **tensor infos**: per tensor, a name (string), the number of dimensions ``n`` (uint32, at
  most 4), ``n`` sizes (uint64), the ggml type (uint32) and the offset of its data (uint64),
  from the start of the data section, a multiple of the alignment;
- padding to the **alignment** (the uint32 ``general.alignment``, 32 when absent), then the
  **data section**, each tensor's data aligned the same way.

GGUF lists a tensor's sizes fastest-varying first: ``ne0``, the first, is the contiguous axis.
A tensor with sizes ``[576, 49152]`` is therefore a NumPy array of shape ``(49152, 576)``
(C order), and :class:`TensorInfo` gives shapes in NumPy's order.

Quantised types cut each row (which must be a multiple of 32 long) into blocks of 32 weights
stored together with their scale, a float16 ``d``. Weight ``j`` of a block, ``j = 0..31``:

- **Q8_0**, 34 bytes: ``d``, then 32 int8 ``q``; :math:`w_j = d\,q_j`.
- **Q4_1**, 20 bytes: ``d``, a float16 offset ``m``, then 16 bytes ``qs``; the low nibbles hold
  weights 0 to 15 and the high nibbles weights 16 to 31 (not interleaved):
  :math:`w_j = d\,(qs_j \mathbin{\&} 15) + m` and :math:`w_{j+16} = d\,(qs_j \gg 4) + m` for
  ``j = 0..15``.
- **Q4_0**, 18 bytes: ``d``, then ``qs`` as in Q4_1; :math:`w_j = d\,(q_j - 8)` with the same
  nibble order.

F32, F16 and BF16 tensors are stored as they are. :func:`dequantize` computes as llama.cpp's
reference reader does (``gguf.quants``): ``d`` and ``m`` are widened to float32 and all the
arithmetic is float32. That arithmetic is exact up to the final addition of ``m``: a float16 has
11 significant bits, a 4- or 8-bit integer at most 8, so :math:`d\,q` fits in float32's 24 bits.
Any order of float32 operations (with or without a fused multiply-add) gives the same bits;
float16 arithmetic would not.

Notes
-----
**Worst-case rounding error per block.** llama.cpp's quantisers (and ``gguf.quants.quantize``)
choose, for a block of weights :math:`x_0, \dots, x_{31}`:

- Q8_0: :math:`d = \max_j |x_j| / 127` and :math:`q_j = \operatorname{round}(x_j / d)`, one of
  the 255 levels :math:`-127 \dots 127`, so :math:`|x_j - d\,q_j| \le d/2`;
- Q4_1: :math:`m = \min_j x_j` and :math:`d = (\max_j x_j - m)/15`, 16 levels
  :math:`m, m + d, \dots, m + 15d` spanning the block exactly, so
  :math:`|x_j - (d\,q_j + m)| \le d/2`;
- Q4_0: :math:`d = -x_k / 8` where :math:`x_k` is the weight of largest magnitude, levels
  :math:`d \cdot (-8 \dots 7)`. The level :math:`-8d = x_k` is exact, but :math:`+8d` does not
  exist: the error is at most :math:`|d|/2` except for weights within :math:`|d|/2` of
  :math:`-x_k`, where it reaches :math:`|d|` (at :math:`x_j = -x_k`).

What the file stores is :math:`\hat d`, :math:`\hat m`: ``d`` and ``m`` rounded to float16,
which moves each level by up to :math:`|q_j|\,|d - \hat d| + |m - \hat m|`. A float16
rounding error is at most :math:`\delta(\hat d) = \max(2^{-11} |\hat d|, 2^{-25})` (the second
for float16's subnormals, below :math:`2^{-14}`). In terms of the stored scale, then,

.. math::
    \begin{aligned}
    \text{Q8\_0:}\quad |x_j - \hat w_j| &\le \hat d/2 + 127.5\,\delta(\hat d)
        \approx 0.562\,\hat d, \\
    \text{Q4\_1:}\quad |x_j - \hat w_j| &\le \hat d/2 + 15.5\,\delta(\hat d) + \delta(\hat m),
    \end{aligned}

up to float32 rounding (relative :math:`2^{-24}`) in the quantiser's :math:`x_j / d` and in the
final addition. ``tests/test_gguf.py`` checks these bounds on random weights quantised by
``gguf.quants.quantize``.

Everything here is NumPy and the standard library; the ``gguf`` package is used only by the
tests, as the reference. The file is mapped read-only (:class:`numpy.memmap`): reading it
parses the header, metadata and tensor infos, and a tensor's bytes are read when it is asked
for.
"""

from __future__ import annotations

import math
import os
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["read_gguf", "GGUFFile", "TensorInfo", "dequantize", "dequantize_q8_0",
           "dequantize_q4_1", "dequantize_q4_0"]

MAGIC = b"GGUF"
VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
MAX_DIMS = 4
_HEADER = struct.Struct("<4sIQQ")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_MAX_NESTING = 64  # arrays of arrays of ...: a bound that keeps a crafted file from recursing

# Metadata value types: id -> (name, struct format of a scalar, dtype of an array's elements).
_STRING, _ARRAY, _BOOL = 8, 9, 7
_SCALARS = {
    0: ("uint8", "<B", "<u1"), 1: ("int8", "<b", "<i1"),
    2: ("uint16", "<H", "<u2"), 3: ("int16", "<h", "<i2"),
    4: ("uint32", "<I", "<u4"), 5: ("int32", "<i", "<i4"),
    6: ("float32", "<f", "<f4"), 7: ("bool", "<B", "<u1"),
    10: ("uint64", "<Q", "<u8"), 11: ("int64", "<q", "<i8"),
    12: ("float64", "<d", "<f8"),
}
_SCALAR_STRUCTS = {t: struct.Struct(fmt) for t, (_, fmt, _) in _SCALARS.items()}
_ARRAY_DTYPES = {t: np.dtype(dt) for t, (_, _, dt) in _SCALARS.items()}

# ggml tensor types: id -> (name, weights per block, bytes per block), as in ggml.h. All are
# known, so that any file parses; :func:`dequantize` decodes those in _DEQUANTIZERS.
GGML_TYPES = {
    0: ("F32", 1, 4), 1: ("F16", 1, 2), 2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20),
    6: ("Q5_0", 32, 22), 7: ("Q5_1", 32, 24), 8: ("Q8_0", 32, 34), 9: ("Q8_1", 32, 40),
    10: ("Q2_K", 256, 84), 11: ("Q3_K", 256, 110), 12: ("Q4_K", 256, 144),
    13: ("Q5_K", 256, 176), 14: ("Q6_K", 256, 210), 15: ("Q8_K", 256, 292),
    16: ("IQ2_XXS", 256, 66), 17: ("IQ2_XS", 256, 74), 18: ("IQ3_XXS", 256, 98),
    19: ("IQ1_S", 256, 50), 20: ("IQ4_NL", 32, 18), 21: ("IQ3_S", 256, 110),
    22: ("IQ2_S", 256, 82), 23: ("IQ4_XS", 256, 136), 24: ("I8", 1, 1), 25: ("I16", 1, 2),
    26: ("I32", 1, 4), 27: ("I64", 1, 8), 28: ("F64", 1, 8), 29: ("IQ1_M", 256, 56),
    30: ("BF16", 1, 2), 34: ("TQ1_0", 256, 54), 35: ("TQ2_0", 256, 66),
    39: ("MXFP4", 32, 17), 40: ("NVFP4", 64, 36), 41: ("Q1_0", 128, 18),
}
_SIZES = {name: (block, size) for name, block, size in GGML_TYPES.values()}


@dataclass(frozen=True)
class TensorInfo:
    """Where one tensor is and what it is.

    Attributes
    ----------
    name : str
    shape : tuple of int
        In NumPy's (C) order: GGUF's sizes reversed, the contiguous axis last.
    type_name : str
        The ggml type, such as ``"F32"``, ``"Q8_0"`` or ``"Q4_1"``.
    offset : int
        The absolute byte offset of the tensor's data in the file.
    nbytes : int
        The size of the data in bytes.
    """

    name: str
    shape: tuple[int, ...]
    type_name: str
    offset: int
    nbytes: int


def read_gguf(path):
    """Parse a GGUF file's header, metadata and tensor infos, and map its data.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    GGUFFile

    Raises
    ------
    OSError
        The file cannot be opened.
    ValueError
        It is not a GGUF file, is of another version (or big-endian), is truncated, or is
        malformed; the message names the path and the problem.
    """
    return GGUFFile(path)


class GGUFFile:
    """A parsed GGUF file; its tensors' data stay in the file until asked for.

    Made by :func:`read_gguf`.

    Attributes
    ----------
    path : pathlib.Path
    version : int
        2 or 3.
    metadata : dict
        Key to value, in file order. Scalars are Python ``int``, ``float``, ``bool`` or
        ``str``; an array of strings is a ``list`` of ``str``, an array of numbers or bools a
        1-D ndarray of their dtype, and an array of arrays a ``list`` of such values.
    tensors : dict of str to TensorInfo
        In file order.
    alignment : int
        Of the data section and of each tensor's data (``general.alignment``, default 32).
    data_offset : int
        The absolute byte offset of the data section.
    """

    def __init__(self, path):
        self.path = Path(path)
        with open(self.path, "rb") as file:  # OSError (FileNotFoundError, ...) as it comes
            head = file.read(_HEADER.size)
            size = os.fstat(file.fileno()).st_size
        self.version, tensor_count, kv_count = self._check_header(head, size)
        self._map = np.memmap(self.path, dtype=np.uint8, mode="r")
        parser = _Parser(self.path, memoryview(self._map), size, _HEADER.size)

        self.metadata = {}
        alignment_type = None
        for i in range(kv_count):
            key = parser.string(f"metadata: the key of pair {i} (of {kv_count})")
            if key in self.metadata:
                raise ValueError(f"{self.path}: duplicate metadata key {key!r} (pair {i})")
            where = f"metadata: the value of {key!r}"
            vtype = parser.u32(f"{where} (its type)")
            self.metadata[key] = parser.value(vtype, where)
            if key == "general.alignment":
                alignment_type = vtype

        self.alignment = self._alignment(alignment_type)
        infos = [self._tensor_info(parser, i, tensor_count) for i in range(tensor_count)]
        self.data_offset = -(-parser.pos // self.alignment) * self.alignment
        self.tensors = {}
        for name, dims, type_id, offset in infos:
            if name in self.tensors:
                raise ValueError(f"{self.path}: duplicate tensor name {name!r}")
            self.tensors[name] = self._locate(name, dims, type_id, offset, size)

    def _check_header(self, head, size):
        if head[:4] != MAGIC[:len(head)]:
            raise ValueError(f"{self.path}: not a GGUF file: it starts with {head[:4]!r}, a "
                             f"GGUF file with {MAGIC!r}")
        if len(head) < _HEADER.size:
            raise ValueError(f"{self.path}: truncated GGUF file: the header needs "
                             f"{_HEADER.size} bytes, but the file has {size}")
        _, version, tensor_count, kv_count = _HEADER.unpack(head)
        if version not in VERSIONS:
            swapped = int.from_bytes(version.to_bytes(4, "little"), "big")
            if swapped in VERSIONS:
                raise ValueError(f"{self.path}: a big-endian GGUF file (version {swapped}): "
                                 f"only little-endian files are supported")
            raise ValueError(f"{self.path}: unsupported GGUF version {version}: versions "
                             f"{' and '.join(map(str, VERSIONS))} are supported")
        return version, tensor_count, kv_count

    def _alignment(self, vtype):
        if vtype is None:
            return DEFAULT_ALIGNMENT
        alignment = self.metadata["general.alignment"]
        if vtype != 4:
            kind = _SCALARS[vtype][0] if vtype in _SCALARS else ("string", "array")[vtype - 8]
            raise ValueError(f"{self.path}: general.alignment must be a uint32, not {kind}")
        if alignment <= 0 or alignment & (alignment - 1):
            raise ValueError(f"{self.path}: general.alignment must be a power of two, got "
                             f"{alignment}")
        return alignment

    def _tensor_info(self, parser, i, count):
        name = parser.string(f"tensor infos: the name of tensor {i} (of {count})")
        where = f"tensor infos: tensor {name!r}"
        n_dims = parser.u32(f"{where} (its number of dimensions)")
        if n_dims > MAX_DIMS:
            raise ValueError(f"{self.path}: tensor {name!r} has {n_dims} dimensions, GGUF "
                             f"allows at most {MAX_DIMS}")
        dims = [parser.u64(f"{where} (its size {j})") for j in range(n_dims)]
        type_id = parser.u32(f"{where} (its type)")
        offset = parser.u64(f"{where} (its offset)")
        return name, dims, type_id, offset

    def _locate(self, name, dims, type_id, offset, size):
        """The :class:`TensorInfo` of a tensor, once its type, size and place are checked."""
        if type_id not in GGML_TYPES:
            raise ValueError(f"{self.path}: tensor {name!r} has unknown ggml type {type_id}")
        type_name, block, type_size = GGML_TYPES[type_id]
        shape = tuple(reversed(dims))
        nbytes = _nbytes(shape, type_name, f"{self.path}: tensor {name!r}")
        if offset % self.alignment:
            raise ValueError(f"{self.path}: tensor {name!r} is at offset {offset} of the data "
                             f"section, not a multiple of the alignment {self.alignment}")
        start = self.data_offset + offset
        if start + nbytes > size:
            raise ValueError(f"{self.path}: truncated GGUF file: the data of tensor {name!r} "
                             f"({type_name}, shape {shape}) needs bytes {start} to "
                             f"{start + nbytes}, but the file has {size}")
        return TensorInfo(name, shape, type_name, start, nbytes)

    def _info(self, name):
        try:
            return self.tensors[name]
        except KeyError:
            raise KeyError(f"{self.path} has no tensor {name!r}") from None

    def raw(self, name):
        """The bytes of tensor ``name``: a read-only uint8 view of the mapped file, no copy."""
        info = self._info(name)
        return self._map[info.offset:info.offset + info.nbytes].view(np.ndarray)

    def tensor(self, name):
        """Tensor ``name``, dequantised: a new float32 array of shape ``tensors[name].shape``.

        Raises
        ------
        KeyError
            No tensor has that name.
        ValueError
            The tensor's type is not one :func:`dequantize` decodes (its bytes are still
            available from :meth:`raw`).
        """
        info = self._info(name)
        if info.type_name not in _DEQUANTIZERS:
            raise ValueError(f"{self.path}: tensor {name!r} is of type {info.type_name}, which "
                             f"cannot be dequantised here (supported types: "
                             f"{', '.join(_DEQUANTIZERS)}); raw() gives its bytes")
        return dequantize(self.raw(name), info.type_name, info.shape)

    def __contains__(self, name):
        """Whether the file has a tensor called ``name``."""
        return name in self.tensors

    def __repr__(self):
        return (f"<GGUFFile {str(self.path)!r}: version {self.version}, "
                f"{len(self.metadata)} metadata keys, {len(self.tensors)} tensors>")


class _Parser:
    """Reads values from the mapped bytes at an advancing position, checking each for the end
    of the file."""

    def __init__(self, path, buffer, size, pos):
        self.path, self.buffer, self.size, self.pos = path, buffer, size, pos

    def _truncated(self, what, start, n):
        raise ValueError(f"{self.path}: truncated GGUF file: {what} needs bytes {start} to "
                         f"{start + n}, but the file has {self.size}")

    def take(self, n, what):
        """The position of the next ``n`` bytes, which are then passed."""
        start = self.pos
        if start + n > self.size:
            self._truncated(what, start, n)
        self.pos = start + n
        return start

    def u32(self, what):
        return _U32.unpack_from(self.buffer, self.take(4, what))[0]

    def u64(self, what):
        return _U64.unpack_from(self.buffer, self.take(8, what))[0]

    def string(self, what):
        n = self.u64(f"{what} (its length)")
        start = self.take(n, what)
        return self._decode(start, n, what)

    def _decode(self, start, n, what):
        try:
            return str(self.buffer[start:start + n], "utf-8")
        except UnicodeDecodeError as error:
            raise ValueError(f"{self.path}: {what} is not valid UTF-8 ({error.reason} at byte "
                             f"{start + error.start})") from None

    def value(self, vtype, what, depth=0):
        if vtype in _SCALAR_STRUCTS:
            scalar = _SCALAR_STRUCTS[vtype]
            value = scalar.unpack_from(self.buffer, self.take(scalar.size, what))[0]
            return value != 0 if vtype == _BOOL else value
        if vtype == _STRING:
            return self.string(what)
        if vtype == _ARRAY:
            return self.array(what, depth)
        raise ValueError(f"{self.path}: {what} has unknown value type {vtype} (known: 0 to 12, "
                         f"uint8 to float64)")

    def array(self, what, depth):
        if depth >= _MAX_NESTING:
            raise ValueError(f"{self.path}: {what} nests arrays more than {_MAX_NESTING} deep")
        etype = self.u32(f"{what} (its element type)")
        count = self.u64(f"{what} (its length)")
        if etype in _ARRAY_DTYPES:
            dtype = _ARRAY_DTYPES[etype]
            start = self.take(count * dtype.itemsize, f"{what} ({count} elements)")
            array = np.frombuffer(self.buffer, dtype, count, start)
            return array != 0 if etype == _BOOL else array.astype(dtype.newbyteorder("="))
        if etype == _STRING:
            return self._strings(count, what)
        if etype == _ARRAY:
            return [self.array(f"{what}[{i}]", depth + 1) for i in range(count)]
        raise ValueError(f"{self.path}: {what} is an array of unknown value type {etype} "
                         f"(known: 0 to 12, uint8 to float64)")

    def _strings(self, count, what):
        """``count`` strings, in one loop: the tokenizer's vocabulary is ~10^5 of them."""
        buffer, size, pos = self.buffer, self.size, self.pos
        unpack, strings = _U64.unpack_from, []
        for i in range(count):
            if pos + 8 > size:
                self._truncated(f"{what}[{i}] (its length)", pos, 8)
            (n,) = unpack(buffer, pos)
            pos += 8
            if pos + n > size:
                self._truncated(f"{what}[{i}]", pos, n)
            try:
                strings.append(str(buffer[pos:pos + n], "utf-8"))
            except UnicodeDecodeError:
                self._decode(pos, n, f"{what}[{i}]")
            pos += n
        self.pos = pos
        return strings


def _nbytes(shape, type_name, what):
    """The bytes a tensor of ``shape`` and type takes; its rows must be whole blocks."""
    block, type_size = _SIZES[type_name]
    if block > 1 and (not shape or shape[-1] % block):
        row = shape[-1] if shape else "(none: a scalar)"
        raise ValueError(f"{what}: a {type_name} tensor's rows are blocks of {block} weights, "
                         f"but its shape {shape} has rows of {row}, not a multiple of the "
                         f"block size {block}")
    return math.prod(shape) // block * type_size


def _blocks(blocks, type_size, type_name):
    blocks = np.asarray(blocks)
    if blocks.dtype != np.uint8:
        raise TypeError(f"{type_name} data must be bytes (uint8), got {blocks.dtype}")
    if blocks.size % type_size:
        raise ValueError(f"{type_name} blocks are {type_size} bytes each, but {blocks.size} "
                         f"bytes are not a whole number of blocks")
    return np.ascontiguousarray(blocks).reshape(-1, type_size)


def _nibbles(qs, out):
    """Unpack each byte's nibbles into ``out`` (float32, shape ``(n, 32)``): low nibbles are
    weights 0 to 15, high nibbles 16 to 31."""
    np.bitwise_and(qs, np.uint8(0x0F), out=out[:, :16], casting="unsafe")
    np.right_shift(qs, np.uint8(4), out=out[:, 16:], casting="unsafe")


def dequantize_q8_0(blocks):
    r"""Decode Q8_0 blocks: :math:`w_j = d\,q_j`.

    Parameters
    ----------
    blocks : ndarray of uint8, shape (n_blocks, 34), or any shape of ``34 * n_blocks`` bytes
        Each a float16 scale ``d`` and 32 int8 ``q``.

    Returns
    -------
    ndarray of float32, shape (n_blocks, 32)
    """
    blocks = _blocks(blocks, 34, "Q8_0")
    d = blocks[:, :2].view("<f2").astype(np.float32)
    out = blocks[:, 2:].view(np.int8).astype(np.float32)
    out *= d
    return out


def dequantize_q4_1(blocks):
    r"""Decode Q4_1 blocks: :math:`w_j = d\,q_j + m`.

    Parameters
    ----------
    blocks : ndarray of uint8, shape (n_blocks, 20), or any shape of ``20 * n_blocks`` bytes
        Each a float16 scale ``d``, a float16 offset ``m`` and 16 bytes of 4-bit ``q``: weight
        ``j < 16`` in the low nibble of byte ``j``, weight ``j + 16`` in its high nibble.

    Returns
    -------
    ndarray of float32, shape (n_blocks, 32)
    """
    blocks = _blocks(blocks, 20, "Q4_1")
    dm = blocks[:, :4].view("<f2").astype(np.float32)
    out = np.empty((len(blocks), 32), np.float32)
    _nibbles(blocks[:, 4:], out)
    out *= dm[:, :1]
    out += dm[:, 1:]
    return out


def dequantize_q4_0(blocks):
    r"""Decode Q4_0 blocks: :math:`w_j = d\,(q_j - 8)`.

    Parameters
    ----------
    blocks : ndarray of uint8, shape (n_blocks, 18), or any shape of ``18 * n_blocks`` bytes
        Each a float16 scale ``d`` and 16 bytes of 4-bit ``q``, in Q4_1's nibble order.

    Returns
    -------
    ndarray of float32, shape (n_blocks, 32)
    """
    blocks = _blocks(blocks, 18, "Q4_0")
    d = blocks[:, :2].view("<f2").astype(np.float32)
    out = np.empty((len(blocks), 32), np.float32)
    _nibbles(blocks[:, 2:], out)
    out -= np.float32(8)
    out *= d
    return out


def _f32(data):
    return _blocks(data, 4, "F32").view("<f4").astype(np.float32)


def _f16(data):
    return _blocks(data, 2, "F16").view("<f2").astype(np.float32)


def _bf16(data):
    # bfloat16 is float32's top half: shift the 16 bits back into place.
    return (_blocks(data, 2, "BF16").view("<u2").astype(np.uint32) << 16).view(np.float32)


_DEQUANTIZERS = {"F32": _f32, "F16": _f16, "BF16": _bf16, "Q8_0": dequantize_q8_0,
                 "Q4_1": dequantize_q4_1, "Q4_0": dequantize_q4_0}


def dequantize(data, type_name, shape):
    """Decode a tensor's bytes into float32 weights.

    Parameters
    ----------
    data : ndarray of uint8
        The tensor's bytes, as :meth:`GGUFFile.raw` gives them.
    type_name : str
        One of ``"F32"``, ``"F16"``, ``"BF16"``, ``"Q8_0"``, ``"Q4_1"``, ``"Q4_0"``.
    shape : tuple of int
        In NumPy's order (the contiguous axis last); for the quantised types its last size is a
        multiple of 32.

    Returns
    -------
    ndarray of float32, shape ``shape``
        A new array, the same bits as ``gguf.quants.dequantize`` gives.

    Raises
    ------
    ValueError
        An unsupported type, rows that are not whole blocks, or a size of ``data`` that does
        not match ``shape``.
    """
    if type_name not in _DEQUANTIZERS:
        raise ValueError(f"cannot dequantise type {type_name!r}: supported types are "
                         f"{', '.join(_DEQUANTIZERS)}")
    shape = tuple(int(n) for n in shape)
    data = np.asarray(data)
    expected = _nbytes(shape, type_name, f"dequantize({type_name})")
    if data.size != expected:
        raise ValueError(f"a {type_name} tensor of shape {shape} takes {expected} bytes, got "
                         f"{data.size}")
    return _DEQUANTIZERS[type_name](data).reshape(shape)
