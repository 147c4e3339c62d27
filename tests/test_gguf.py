"""The GGUF reader, against llama.cpp's own Python package ``gguf`` (the reference): SmolLM2-135M's
file key by key and tensor by tensor, bit for bit; files written by ``gguf.GGUFWriter`` with
every value type and tensor type; the quantisers' worst-case errors the module docstring states;
and a clear error for each way a file can be broken."""

from __future__ import annotations

import importlib.metadata
import math
import struct

import gguf
import numpy as np
import pytest
from gguf import GGMLQuantizationType as QT
from gguf import GGUFValueType as VT

from conftest import smollm2_file
from scratchformer import gguf as sg

# ---- the real file: SmolLM2-135M-Instruct, Q4_1 ---------------------------------------------

@pytest.fixture(scope="module")
def real_path():
    return smollm2_file()


@pytest.fixture(scope="module")
def ours(real_path):
    return sg.read_gguf(real_path)


@pytest.fixture(scope="module")
def reference(real_path):
    return gguf.GGUFReader(real_path)


def test_a_missing_wheel_fails_and_says_how_to_install_it(monkeypatch):
    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", missing)
    with pytest.raises(pytest.fail.Exception, match=r"make setup"):
        smollm2_file()


def test_header_alignment_and_data_section(ours, reference, real_path):
    assert ours.path == real_path
    assert ours.version == reference.fields["GGUF.version"].contents() == 3
    assert len(ours.tensors) == reference.fields["GGUF.tensor_count"].contents() == 272
    assert len(ours.metadata) == reference.fields["GGUF.kv_count"].contents() == 33
    assert ours.alignment == reference.alignment == 32
    assert ours.data_offset == reference.data_offset
    assert "token_embd.weight" in ours and "no.such.tensor" not in ours
    assert repr(ours).endswith("version 3, 33 metadata keys, 272 tensors>")


def expected_python_type(field):
    if field.types[0] == VT.ARRAY:
        return list if field.types[-1] == VT.STRING else np.ndarray
    return {VT.STRING: str, VT.BOOL: bool, VT.FLOAT32: float, VT.FLOAT64: float}.get(
        field.types[0], int)


def test_every_metadata_key_and_value_equals_the_reference(ours, reference):
    keys = [key for key in reference.fields if not key.startswith("GGUF.")]
    assert list(ours.metadata) == keys
    for key in keys:
        field, value = reference.fields[key], ours.metadata[key]
        assert type(value) is expected_python_type(field), key
        if isinstance(value, np.ndarray):
            assert value.ndim == 1
            assert value.dtype == field.parts[field.data[0]].dtype, key
            assert value.tolist() == field.contents(), key
        else:
            assert value == field.contents(), key
    assert len(ours.metadata["tokenizer.ggml.tokens"]) == 49152
    assert len(ours.metadata["tokenizer.ggml.merges"]) == 48900
    assert ours.metadata["tokenizer.ggml.token_type"].dtype == np.int32
    assert ours.metadata["tokenizer.ggml.add_bos_token"] is False
    assert ours.metadata["llama.rope.freq_base"] == 100000.0


def test_every_tensor_info_equals_the_reference(ours, reference):
    assert list(ours.tensors) == [t.name for t in reference.tensors]
    for t in reference.tensors:
        info = ours.tensors[t.name]
        assert info == sg.TensorInfo(t.name, tuple(reversed(t.shape.tolist())),
                                     t.tensor_type.name, t.data_offset, t.n_bytes)
        assert info.offset % ours.alignment == 0
    types = [info.type_name for info in ours.tensors.values()]
    assert {name: types.count(name) for name in set(types)} == {"Q4_1": 210, "F32": 61,
                                                                "Q8_0": 1}
    assert ours.tensors["token_embd.weight"].shape == (49152, 576)
    assert ours.tensors["token_embd.weight"].type_name == "Q8_0"


def same_bits(a, b):
    return a.dtype == b.dtype == np.float32 and a.shape == b.shape and np.array_equal(
        a.view(np.uint32), b.view(np.uint32))


def test_every_tensor_dequantises_to_the_references_bits(ours, reference):
    for t in reference.tensors:
        info = ours.tensors[t.name]
        expected = gguf.quants.dequantize(t.data, t.tensor_type).reshape(info.shape)
        assert same_bits(ours.tensor(t.name), expected), t.name


def test_raw_is_a_read_only_view_of_the_file(ours, reference):
    for t in (reference.tensors[0], reference.tensors[1]):
        raw = ours.raw(t.name)
        assert raw.dtype == np.uint8 and raw.shape == (t.n_bytes,)
        assert not raw.flags.writeable and not raw.flags.owndata
        assert np.array_equal(raw, t.data.view(np.uint8).ravel())
    assert ours.tensor("blk.0.attn_norm.weight").flags.writeable  # a copy of its own
    with pytest.raises(KeyError, match=r"no tensor 'no\.such\.tensor'"):
        ours.tensor("no.such.tensor")


def test_the_type_table_is_ggmls():
    assert {name: (block, size) for name, block, size in sg.GGML_TYPES.values()} == {
        qtype.name: sizes for qtype, sizes in gguf.GGML_QUANT_SIZES.items()}
    assert {i: name for i, (name, _, _) in sg.GGML_TYPES.items()} == {
        qtype.value: qtype.name for qtype in gguf.GGML_QUANT_SIZES}


# ---- files written by gguf.GGUFWriter ---------------------------------------------------------

def write(path, kvs=(), tensors=(), alignment=None):
    """Write a GGUF file; return the offset at which its metadata ends."""
    writer = gguf.GGUFWriter(path, "test")
    if alignment is not None:
        writer.add_custom_alignment(alignment)
    for key, value, vtype, *sub_type in kvs:
        writer.add_key_value(key, value, vtype, *sub_type)
    for name, array, raw_dtype in tensors:
        writer.add_tensor(name, array, raw_dtype=raw_dtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    metadata_end = writer.fout[0].tell()
    writer.write_tensors_to_file()
    writer.close()
    return metadata_end


f32 = float(np.float32(0.1))
# (key, value written, its type, [element type]), value read
VALUES = [
    (("u8", 255, VT.UINT8), 255),
    (("i8", -128, VT.INT8), -128),
    (("u16", 65535, VT.UINT16), 65535),
    (("i16", -32768, VT.INT16), -32768),
    (("u32", 2**32 - 1, VT.UINT32), 2**32 - 1),
    (("i32", -2**31, VT.INT32), -2**31),
    (("f32", 0.1, VT.FLOAT32), f32),
    (("true", True, VT.BOOL), True),
    (("false", False, VT.BOOL), False),
    (("empty", "", VT.STRING), ""),
    (("unicode", "naïve ☃ 𝄞, a NUL \0 inside", VT.STRING), "naïve ☃ 𝄞, a NUL \0 inside"),
    (("u64", 2**64 - 1, VT.UINT64), 2**64 - 1),
    (("i64", -2**63, VT.INT64), -2**63),
    (("f64", math.pi, VT.FLOAT64), math.pi),
    (("f64.inf", -math.inf, VT.FLOAT64), -math.inf),
    (("a.u8", [0, 255], VT.ARRAY, VT.UINT8), np.array([0, 255], np.uint8)),
    (("a.i8", [-128, 127], VT.ARRAY, VT.INT8), np.array([-128, 127], np.int8)),
    (("a.u16", [0, 65535], VT.ARRAY, VT.UINT16), np.array([0, 65535], np.uint16)),
    (("a.i16", [-32768, 7], VT.ARRAY, VT.INT16), np.array([-32768, 7], np.int16)),
    (("a.u32", [2**32 - 1], VT.ARRAY, VT.UINT32), np.array([2**32 - 1], np.uint32)),
    (("a.i32", [-2**31, 1, 2], VT.ARRAY), np.array([-2**31, 1, 2], np.int32)),
    (("a.f32", [0.5, -1.25, 0.1], VT.ARRAY), np.array([0.5, -1.25, 0.1], np.float32)),
    (("a.bool", [True, False, True], VT.ARRAY), np.array([True, False, True])),
    (("a.u64", [2**64 - 1, 0], VT.ARRAY, VT.UINT64), np.array([2**64 - 1, 0], np.uint64)),
    (("a.i64", [-2**63, 2**63 - 1], VT.ARRAY, VT.INT64), np.array([-2**63, 2**63 - 1])),
    (("a.f64", [math.pi, -0.0], VT.ARRAY, VT.FLOAT64), np.array([math.pi, -0.0])),
    (("a.str", ["", "a", "héllo", "☃"], VT.ARRAY), ["", "a", "héllo", "☃"]),
    (("a.a.i32", [[1, 2], [3]], VT.ARRAY),
     [np.array([1, 2], np.int32), np.array([3], np.int32)]),
    (("a.a.str", [["a", "b"], ["c"]], VT.ARRAY), [["a", "b"], ["c"]]),
    (("a.a.a.f32", [[[1.5]], [[2.5, 3.5]]], VT.ARRAY),
     [[np.array([1.5], np.float32)], [np.array([2.5, 3.5], np.float32)]]),
]


def assert_same(value, expected, key):
    assert type(value) is type(expected), key
    if isinstance(expected, np.ndarray):
        assert value.dtype == expected.dtype and value.shape == expected.shape, key
        assert np.array_equal(value.view(np.uint8), expected.view(np.uint8)), key  # -0.0 too
    elif isinstance(expected, list):
        assert len(value) == len(expected), key
        for v, e in zip(value, expected):
            assert_same(v, e, key)
    else:
        assert value == expected, key


def flat(value):
    """What the reference's ``contents()`` gives for an array: its elements, flattened."""
    if isinstance(value, list):
        return [x for v in value for x in flat(v)]
    if isinstance(value, np.ndarray):
        return value.tolist()
    return [value]


def test_every_value_type_reads_back_as_written(tmp_path):
    path = tmp_path / "values.gguf"
    write(path, [kv for kv, _ in VALUES])
    ours, reference = sg.read_gguf(path), gguf.GGUFReader(path)
    assert list(ours.metadata) == ["general.architecture"] + [kv[0] for kv, _ in VALUES]
    assert ours.metadata["general.architecture"] == "test"
    for (key, *_), expected in VALUES:
        assert_same(ours.metadata[key], expected, key)
        contents = reference.fields[key].contents()
        assert (flat(ours.metadata[key]) if isinstance(contents, list)
                else ours.metadata[key]) == contents, key
    assert ours.tensors == {} and ours.version == 3


def string(text):
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def kv_bytes(key, vtype, payload):
    return string(key) + struct.pack("<I", vtype) + payload


def gguf_bytes(*kvs, version=3):
    """A GGUF file without tensors, its metadata given as bytes."""
    return struct.pack("<4sIQQ", b"GGUF", version, 0, len(kvs)) + b"".join(kvs)


def test_empty_arrays_which_the_writer_refuses(tmp_path):
    path = tmp_path / "empty.gguf"
    path.write_bytes(gguf_bytes(kv_bytes("u8", 9, struct.pack("<IQ", 0, 0)),
                                kv_bytes("f64", 9, struct.pack("<IQ", 12, 0)),
                                kv_bytes("str", 9, struct.pack("<IQ", 8, 0)),
                                kv_bytes("arr", 9, struct.pack("<IQ", 9, 0)),
                                kv_bytes("arr.of.empty", 9, struct.pack("<IQIQ", 9, 1, 4, 0))))
    metadata = sg.read_gguf(path).metadata
    assert_same(metadata["u8"], np.array([], np.uint8), "u8")
    assert_same(metadata["f64"], np.array([], np.float64), "f64")
    assert metadata["str"] == [] and metadata["arr"] == []
    assert_same(metadata["arr.of.empty"], [np.array([], np.uint32)], "arr.of.empty")


def test_version_2_reads_the_same(tmp_path):
    path = tmp_path / "v3.gguf"
    write(path, [kv for kv, _ in VALUES[:12]],
          [("x", np.arange(64, dtype=np.float32).reshape(2, 32), None)])
    data = bytearray(path.read_bytes())
    data[4:8] = struct.pack("<I", 2)
    (tmp_path / "v2.gguf").write_bytes(data)
    v2, v3 = sg.read_gguf(tmp_path / "v2.gguf"), sg.read_gguf(path)
    assert (v2.version, v3.version) == (2, 3)
    assert v2.metadata == v3.metadata and v2.tensors == v3.tensors
    assert same_bits(v2.tensor("x"), np.arange(64, dtype=np.float32).reshape(2, 32))


SHAPES = [(64,), (3, 96), (2, 3, 64), (2, 1, 2, 32)]
TYPES = [QT.F32, QT.F16, QT.BF16, QT.Q8_0, QT.Q4_1, QT.Q4_0]


def weights(shape, qtype, rng):
    """Normal weights with a block of zeros (d = 0); the float types get inf, nan, -0.0, a
    float32 subnormal and values beyond float16's range too."""
    x = rng.standard_normal(shape).astype(np.float32) * np.float32(0.02)
    x.reshape(-1)[:32] = 0.0
    if qtype in (QT.F32, QT.F16, QT.BF16):
        x.reshape(-1)[32:40] = [np.inf, -np.inf, np.nan, -0.0, 1e-40, 3e38, 7e4, 1e-8]
    return x


def tensors_of_every_type(rng):
    return {f"{qtype.name}.{len(shape)}d": (weights(shape, qtype, rng), qtype)
            for qtype in TYPES for shape in SHAPES}


@pytest.mark.parametrize("alignment", [None, 1, 8, 64, 4096])
def test_tensors_of_every_type_read_back_as_the_reference_reads_them(tmp_path, alignment):
    rng = np.random.default_rng(0)
    tensors = tensors_of_every_type(rng)
    path = tmp_path / "tensors.gguf"
    with np.errstate(over="ignore", invalid="ignore"):  # quantising inf and nan, on purpose
        stored = {name: gguf.quants.quantize(x, qtype) for name, (x, qtype) in tensors.items()}
    write(path, [("some.key", "before the tensor infos", VT.STRING)],
          [(name, stored[name], None if qtype in (QT.F32, QT.F16) else qtype)
           for name, (_, qtype) in tensors.items()], alignment=alignment)
    ours, reference = sg.read_gguf(path), gguf.GGUFReader(path)
    assert ours.alignment == (alignment or 32) == reference.alignment
    assert ours.data_offset == reference.data_offset
    assert ours.data_offset % ours.alignment == 0
    for t in reference.tensors:
        x, qtype = tensors[t.name]
        info = ours.tensors[t.name]
        assert (info.shape, info.type_name, info.offset, info.nbytes) == (
            x.shape, qtype.name, t.data_offset, t.n_bytes)
        assert info.offset % ours.alignment == 0
        w = ours.tensor(t.name)
        assert same_bits(w, gguf.quants.dequantize(t.data, t.tensor_type).reshape(x.shape))
        assert np.array_equal(ours.raw(t.name), stored[t.name].view(np.uint8).ravel())
        if qtype == QT.F32:
            assert same_bits(w, x)
        elif qtype == QT.F16:
            with np.errstate(over="ignore"):
                assert same_bits(w, x.astype(np.float16).astype(np.float32))
        else:
            finite = np.isfinite(x) & (np.abs(x) < 1)
            assert np.allclose(w[finite], x[finite], rtol=0.01, atol=0.01)
            assert np.all(w.reshape(-1)[:32] == 0)


def test_a_type_that_is_not_decoded_is_still_read_and_its_error_names_it(tmp_path):
    path = tmp_path / "q5.gguf"
    q5 = gguf.quants.quantize(np.ones((2, 32), np.float32), QT.Q5_0)
    write(path, tensors=[("q5", q5, QT.Q5_0)])
    file = sg.read_gguf(path)
    assert file.tensors["q5"].type_name == "Q5_0" and file.tensors["q5"].shape == (2, 32)
    assert np.array_equal(file.raw("q5"), q5.ravel())
    with pytest.raises(ValueError, match=r"tensor 'q5' is of type Q5_0.*supported types: "
                                         r"F32, F16, BF16, Q8_0, Q4_1, Q4_0"):
        file.tensor("q5")


# ---- the formats, by hand, and the worst-case errors -----------------------------------------

def test_the_formats_by_hand():
    d, m = (np.array([v], np.float16).view(np.uint8) for v in (0.5, -3.0))
    qs = np.array([j | (15 - j) << 4 for j in range(16)], np.uint8)  # low j, high 15 - j
    nibbles = np.r_[np.arange(16), np.arange(15, -1, -1)]
    assert np.array_equal(sg.dequantize_q4_1(np.r_[d, m, qs]), [0.5 * nibbles - 3.0])
    assert np.array_equal(sg.dequantize_q4_0(np.r_[d, qs]), [0.5 * (nibbles - 8)])
    q = np.arange(-16, 16, dtype=np.int8)
    assert np.array_equal(sg.dequantize_q8_0(np.r_[d, q.view(np.uint8)]), [0.5 * q])
    two = np.r_[d, q.view(np.uint8), m, q[::-1].view(np.uint8)]  # two blocks
    assert np.array_equal(sg.dequantize(two, "Q8_0", (64,)),
                          np.r_[0.5 * q, -3.0 * q[::-1]].astype(np.float32))
    bf16 = np.array([1.5, -2.0, np.inf], np.float32).view(np.uint32) >> 16
    assert np.array_equal(sg.dequantize(bf16.astype("<u2").view(np.uint8), "BF16", (3,)),
                          [1.5, -2.0, np.inf])


def f16_error(x):
    """The largest float16 rounding error of a number that rounded to ``x``."""
    return np.maximum(np.abs(x) * 2.0**-11, 2.0**-25)


def blocks_of_weights(rng, n=4096):
    """Blocks of normal and of heavy-tailed weights, of scales from 1e-6 to 10 (float16's
    subnormals among them), some with a large common offset."""
    scale = 10.0 ** rng.uniform(-6, 1, (n, 1))
    x = np.where(rng.random((n, 1)) < 0.5, rng.standard_normal((n, 32)),
                 rng.standard_t(2, (n, 32)).clip(-50, 50))
    offset = np.where(rng.random((n, 1)) < 0.2, rng.uniform(-200, 200, (n, 1)), 0.0)
    return (x * scale + offset * scale).astype(np.float32)


def test_q8_0_errs_by_at_most_half_a_step_plus_float16_rounding():
    x = blocks_of_weights(np.random.default_rng(1))
    blocks = gguf.quants.quantize(x, QT.Q8_0)
    d = blocks[:, :2].view(np.float16).astype(np.float64)
    error = np.abs(sg.dequantize_q8_0(blocks) - x.astype(np.float64))
    bound = d / 2 + 127.5 * f16_error(d) + 2.0**-20 * np.abs(x)
    assert np.all(error <= bound)
    normal = d[:, 0] >= 2.0**-14  # a float16 scale with all its 11 bits
    relative = error[normal] / d[normal]
    assert 0.49 < np.max(relative) <= 0.5 + 127.5 * 2.0**-11  # nearly d/2: the bound is tight


def test_q4_1_errs_by_at_most_half_a_step_plus_float16_rounding():
    x = blocks_of_weights(np.random.default_rng(2))
    blocks = gguf.quants.quantize(x, QT.Q4_1)
    d = blocks[:, 0:2].view(np.float16).astype(np.float64)
    m = blocks[:, 2:4].view(np.float16).astype(np.float64)
    error = np.abs(sg.dequantize_q4_1(blocks) - x.astype(np.float64))
    bound = d / 2 + 15.5 * f16_error(d) + f16_error(m) + 2.0**-20 * (np.abs(x) + np.abs(m))
    assert np.all(error <= bound)
    normal = d[:, 0] >= 2.0**-14
    relative = error[normal] / d[normal]
    centred = (np.abs(m) < 10 * d)[normal, 0]  # where rounding m to float16 costs little
    assert 0.49 < np.max(relative[centred]) <= 0.5 + 25 * 2.0**-11
    # with a large offset, rounding m to float16 adds to the half step the 4 bits cost
    assert np.max(relative[~centred]) > 0.6


def test_q4_0_errs_by_half_a_step_but_a_whole_step_opposite_its_largest_weight():
    x = blocks_of_weights(np.random.default_rng(3))
    blocks = gguf.quants.quantize(x, QT.Q4_0)
    d_hat = np.abs(blocks[:, :2].view(np.float16).astype(np.float64))
    largest = np.take_along_axis(x, np.abs(x).argmax(axis=1, keepdims=True), axis=1)
    d = largest.astype(np.float64) / -8  # levels d * (-8 .. 7): no level at +8d = -largest
    error = np.abs(sg.dequantize_q4_0(blocks) - x.astype(np.float64))
    slack = 2.0**-20 * np.abs(x)
    assert np.all(error <= d_hat + 8.5 * f16_error(d_hat) + slack)
    near_opposite = x / np.where(d == 0, 1, d) > 7.5
    half = d_hat / 2 + 8.5 * f16_error(d_hat) + slack
    assert np.all((error <= half) | near_opposite)
    one = np.zeros(32, np.float32)
    one[:2] = [1.0, -1.0]  # d = -1/8: 1 is the level -8d; -1 is 8d, which rounds to 7d
    w = sg.dequantize_q4_0(gguf.quants.quantize(one[None], QT.Q4_0))[0]
    assert w[0] == 1.0 and w[1] == -0.875


# ---- broken files ---------------------------------------------------------------------------

@pytest.fixture
def sample(tmp_path):
    """A small file with strings, arrays and nested arrays, and two quantised tensors; with the
    offsets at which its header, metadata and tensor infos end."""
    path = tmp_path / "sample.gguf"
    rng = np.random.default_rng(4)
    metadata_end = write(
        path,
        [("name", "sample", VT.STRING), ("count", 7, VT.UINT32),
         ("words", ["one", "two", "three"], VT.ARRAY), ("ids", [1, 2, 3], VT.ARRAY),
         ("nested", [["a"], ["b", "c"]], VT.ARRAY)],
        [("w.q8", gguf.quants.quantize(rng.standard_normal((2, 64), np.float32), QT.Q8_0),
          QT.Q8_0),
         ("w.q4", gguf.quants.quantize(rng.standard_normal((3, 32), np.float32), QT.Q4_1),
          QT.Q4_1)])
    last = gguf.GGUFReader(path).tensors[-1].field
    infos_end = last.offset + sum(int(part.nbytes) for part in last.parts)
    return path, path.read_bytes(), metadata_end, infos_end


def broken(tmp_path, data):
    path = tmp_path / "broken.gguf"
    path.write_bytes(bytes(data))
    return path


def read_fails(path, match):
    with pytest.raises(ValueError, match=match) as raised:
        sg.read_gguf(path)
    assert str(path) in str(raised.value)


def info_at(data, name):
    """The offset of tensor ``name``'s number of dimensions in its tensor info."""
    key = string(name)
    return data.rindex(key) + len(key)


def test_a_file_cut_anywhere_says_it_is_truncated_and_where(tmp_path, sample):
    path, data, metadata_end, infos_end = sample
    whole = sg.read_gguf(path)
    end = max(info.offset + info.nbytes for info in whole.tensors.values())
    assert 0 < len(data) - end < whole.alignment  # the writer pads the last tensor too
    assert sg.read_gguf(broken(tmp_path, data[:end])).tensors == whole.tensors
    assert len(data) < 1500
    for cut in range(end):
        section = ("the header" if cut < 24 else "metadata" if cut < metadata_end
                   else "tensor infos" if cut < infos_end else "the data of tensor")
        read_fails(broken(tmp_path, data[:cut]), rf"truncated GGUF file: {section}")


def test_not_a_gguf_file(tmp_path):
    read_fails(broken(tmp_path, b"PK\x03\x04" + bytes(40)), r"not a GGUF file: it starts "
                                                           r"with b'PK\\x03\\x04'")
    read_fails(broken(tmp_path, b"GGML"), r"not a GGUF file")
    read_fails(broken(tmp_path, b""), r"truncated GGUF file: the header needs 24 bytes, but "
                                     r"the file has 0")
    with pytest.raises(FileNotFoundError, match=r"nowhere\.gguf"):
        sg.read_gguf(tmp_path / "nowhere.gguf")


@pytest.mark.parametrize("version", [0, 1, 4, 2**31])
def test_an_unsupported_version(tmp_path, version):
    read_fails(broken(tmp_path, gguf_bytes(version=version)),
               rf"unsupported GGUF version {version}: versions 2 and 3 are supported")


def test_a_big_endian_file(tmp_path):
    data = bytearray(gguf_bytes())
    data[4:8] = struct.pack(">I", 3)
    read_fails(broken(tmp_path, data), r"big-endian GGUF file \(version 3\)")


def test_an_unknown_value_type(tmp_path):
    read_fails(broken(tmp_path, gguf_bytes(kv_bytes("odd", 13, b""))),
               r"metadata: the value of 'odd' has unknown value type 13")
    read_fails(broken(tmp_path, gguf_bytes(kv_bytes("odd", 9, struct.pack("<IQ", 99, 1)))),
               r"'odd' is an array of unknown value type 99")
    nested = kv_bytes("odd", 9, struct.pack("<IQIQ", 9, 1, 20, 0))
    read_fails(broken(tmp_path, gguf_bytes(nested)), r"'odd'\[0\] is an array of unknown "
                                                    r"value type 20")


def test_bad_strings_and_keys(tmp_path):
    read_fails(broken(tmp_path, gguf_bytes(kv_bytes("s", 8, struct.pack("<Q", 2) + b"\xff!"))),
               r"the value of 's' is not valid UTF-8 \(invalid start byte at byte \d+\)")
    words = kv_bytes("s", 9, struct.pack("<IQ", 8, 2) + string("ok") + struct.pack("<Q", 1)
                     + b"\x80")
    read_fails(broken(tmp_path, gguf_bytes(words)), r"'s'\[1\] is not valid UTF-8")
    twice = kv_bytes("k", 4, struct.pack("<I", 1))
    read_fails(broken(tmp_path, gguf_bytes(twice, twice)), r"duplicate metadata key 'k'")
    endless = kv_bytes("s", 8, struct.pack("<Q", 2**63) + b"abc")
    read_fails(broken(tmp_path, gguf_bytes(endless)), r"truncated GGUF file: metadata: the "
                                                     r"value of 's' needs bytes")


def test_bad_alignments(tmp_path):
    read_fails(broken(tmp_path, gguf_bytes(kv_bytes("general.alignment", 4,
                                                    struct.pack("<I", 48)))),
               r"general\.alignment must be a power of two, got 48")
    read_fails(broken(tmp_path, gguf_bytes(kv_bytes("general.alignment", 4,
                                                    struct.pack("<I", 0)))),
               r"general\.alignment must be a power of two, got 0")
    read_fails(broken(tmp_path, gguf_bytes(kv_bytes("general.alignment", 5,
                                                    struct.pack("<i", 32)))),
               r"general\.alignment must be a uint32, not int32")


def test_bad_tensor_infos(tmp_path, sample):
    _, data, _, _ = sample
    at = info_at(data, "w.q8")  # n_dims = 2, ne0 = 64, ne1 = 2, type, offset

    def patched(offset, fmt, value):
        copy = bytearray(data)
        struct.pack_into(fmt, copy, offset, value)
        return broken(tmp_path, copy)

    read_fails(patched(at + 4, "<Q", 65), r"tensor 'w\.q8': a Q8_0 tensor's rows are blocks of "
                                          r"32 weights, but its shape \(2, 65\) has rows of "
                                          r"65, not a multiple of the block size 32")
    read_fails(patched(at, "<I", 5), r"tensor 'w\.q8' has 5 dimensions, GGUF allows at most 4")
    read_fails(patched(at + 20, "<I", 4), r"tensor 'w\.q8' has unknown ggml type 4")
    read_fails(patched(at + 24, "<Q", 16), r"tensor 'w\.q8' is at offset 16 of the data "
                                           r"section, not a multiple of the alignment 32")
    read_fails(patched(at + 24, "<Q", 2**40), r"truncated GGUF file: the data of tensor "
                                              r"'w\.q8' \(Q8_0, shape \(2, 64\)\) needs bytes")
    twin = bytearray(data)
    at = data.rindex(b"w.q4")
    twin[at:at + 4] = b"w.q8"
    read_fails(broken(tmp_path, twin), r"duplicate tensor name 'w\.q8'")


def test_dequantize_checks_its_arguments():
    block = np.zeros(34, np.uint8)
    assert np.array_equal(sg.dequantize(block, "Q8_0", (32,)), np.zeros(32, np.float32))
    with pytest.raises(ValueError, match=r"a Q8_0 tensor of shape \(32,\) takes 34 bytes, "
                                         r"got 33"):
        sg.dequantize(block[:33], "Q8_0", (32,))
    with pytest.raises(ValueError, match=r"rows of 33, not a multiple of the block size 32"):
        sg.dequantize(block, "Q8_0", (33,))
    with pytest.raises(ValueError, match=r"cannot dequantise type 'Q6_K': supported types are "
                                         r"F32, F16, BF16, Q8_0, Q4_1, Q4_0"):
        sg.dequantize(block, "Q6_K", (256,))
    with pytest.raises(ValueError, match=r"Q4_1 blocks are 20 bytes each, but 34 bytes"):
        sg.dequantize_q4_1(block)
    with pytest.raises(TypeError, match=r"Q8_0 data must be bytes \(uint8\), got float32"):
        sg.dequantize_q8_0(np.zeros(34, np.float32))
