"""The quantisers of ``scratchformer.quantize``, against llama.cpp's own Python package ``gguf``
(the reference): the same bytes for every format on random blocks of every kind and on
SmolLM2-135M's own weights, which re-quantise to the file's bytes; the k-bit levels; the bound
on a weight's error; and a clear error for each input that cannot be quantised."""

from __future__ import annotations

import gguf
import numpy as np
import pytest
from gguf import GGMLQuantizationType as QT

from conftest import smollm2_file
from scratchformer import pretrained
from scratchformer import quantize as q
from scratchformer.gguf import read_gguf


def awkward_blocks(rng, n=4000):
    """Blocks of every kind a quantiser meets: normal, heavy-tailed, tiny (float16
    subnormal scales), large, offset, constant, all zero, a single spike, exact halves."""
    scale = 10.0 ** rng.uniform(-7, 3, (n, 1))
    x = np.where(rng.random((n, 1)) < 0.5, rng.standard_normal((n, 32)),
                 rng.standard_t(2, (n, 32)).clip(-50, 50))
    x = x * scale + np.where(rng.random((n, 1)) < 0.2, rng.uniform(-20, 20, (n, 1)), 0) * scale
    x[0] = 0.0
    x[1] = 0.75
    x[2] = 0.0
    x[2, 7] = -3.0
    x[3] = np.arange(32) / 2.0 - 8  # many values exactly between two levels
    x[4] = -x[3]
    x[5] = np.float32(0.49999997) * np.linspace(-1, 1, 32)  # just under a half of a step
    return x.astype(np.float32)


@pytest.mark.parametrize("name", list(q.FORMATS))
def test_the_bytes_are_llama_cpps(name):
    x = awkward_blocks(np.random.default_rng(0)).reshape(-1, 256)  # rows of 8 blocks
    ours = q.quantize(x, name)
    reference = gguf.quants.quantize(x, getattr(QT, name))
    assert ours.dtype == np.uint8 and ours.shape == (x.size // 32, q.FORMATS[name])
    np.testing.assert_array_equal(ours.reshape(-1), reference.reshape(-1))


@pytest.mark.parametrize("name", list(q.FORMATS))
def test_a_round_trip_is_the_references_dequantisation(name):
    x = awkward_blocks(np.random.default_rng(1))
    back = q.round_trip(x, name)
    reference = gguf.quants.dequantize(gguf.quants.quantize(x, getattr(QT, name)),
                                       getattr(QT, name))
    np.testing.assert_array_equal(back, reference.reshape(x.shape))
    assert back.dtype == np.float32


def test_smollm2s_weights_quantise_back_to_the_files_bytes():
    """The file was made by the reference rule: its weights are a fixed point of it."""
    model_file = read_gguf(smollm2_file())
    checked = 0
    for name, info in model_file.tensors.items():
        if info.type_name in q.FORMATS:
            ours = q.quantize(model_file.tensor(name), info.type_name)
            np.testing.assert_array_equal(ours.reshape(-1), model_file.raw(name),
                                          err_msg=name)
            checked += 1
    assert checked == 211  # 210 Q4_1 matrices and the Q8_0 embedding


def test_four_bit_levels_are_q4_1_and_fewer_levels_cost_more():
    x = awkward_blocks(np.random.default_rng(2))
    np.testing.assert_array_equal(q.quantize_bits(x, 4), q.round_trip(x, "Q4_1"))
    normal = np.abs(x).max(axis=1) > 1e-3
    errors = [np.abs(q.round_trip(x, f"{k}-bit") - x)[normal].mean() for k in range(2, 9)]
    assert all(a > b for a, b in zip(errors, errors[1:]))


@pytest.mark.parametrize("bits", [2, 3, 5, 8])
def test_k_bit_levels_err_by_at_most_half_a_step(bits):
    x = awkward_blocks(np.random.default_rng(3))
    x = x[(np.abs(x).max(axis=1) > 1e-3) & (np.abs(x).max(axis=1) < 1e3)]
    top = 2**bits - 1
    step = (x.max(axis=1, keepdims=True) - x.min(axis=1, keepdims=True)) / top
    error = np.abs(q.quantize_bits(x, bits).astype(np.float64) - x)
    # half a step, and what storing d and m in float16 moves a level: 2**-11 of each, relative,
    # or 2**-25 absolute for a scale that float16 holds as a subnormal
    slack = (2.0**-11 * (top * step + np.abs(x.min(axis=1, keepdims=True)))
             + 2.0**-25 * (top + 1) + 1e-6 * np.abs(x))
    assert np.all(error <= step / 2 + slack)
    normal = (step >= 2.0**-14)[:, 0]  # a scale with all its float16 bits
    assert np.max(error[normal] / (step[normal] / 2)) > 0.95  # half a step is nearly reached


def test_an_all_zero_or_constant_block_is_stored_exactly():
    zero = np.zeros((2, 32), np.float32)
    for name in q.FORMATS:
        np.testing.assert_array_equal(q.round_trip(zero, name), zero)
    constant = np.full((1, 32), 0.75, np.float32)  # a float16 number: its offset is exact
    np.testing.assert_array_equal(q.round_trip(constant, "Q4_1"), constant)
    np.testing.assert_array_equal(q.quantize_bits(constant, 2), constant)


def test_bits_per_weight():
    assert [q.bits_per_weight(s) for s in ("Q8_0", "Q4_0", "Q4_1", "2-bit", "3-bit")] == \
        [8.5, 4.5, 5.0, 3.0, 4.0]


def test_quantized_parameters_run_blocks_along_the_summed_axis():
    from scratchformer import DecoderModel

    model = DecoderModel(vocab_size=40, d_model=64, n_heads=2, d_ff=96, n_layers=1,
                         max_positions=8, rng=np.random.default_rng(0), dtype=np.float32)
    values = q.quantized_parameters(model, "Q4_0")
    params = {name: layer.params[key] for name, layer, key in model.named_parameters()}
    assert set(values) == set(params)
    for name, p in params.items():
        if p.ndim == 1:  # biases and norms' scales stay float32, as llama.cpp keeps them
            np.testing.assert_array_equal(values[name], p)
    w = params["blocks.0.ffn.w_1"]  # (d_model, d_ff): x @ w sums over d_model
    np.testing.assert_array_equal(values["blocks.0.ffn.w_1"], q.round_trip(w.T, "Q4_0").T)
    table = params["embedding.table"]  # (vocab, d_model): its rows are the blocks
    np.testing.assert_array_equal(values["embedding.table"], q.round_trip(table, "Q4_0"))
    for name, value in values.items():
        assert value.dtype == params[name].dtype and value.shape == params[name].shape
    model.load_parameters(values)  # what it is for


def test_from_gguf_refuses_a_transform_that_changes_a_shape():
    model_file = read_gguf(smollm2_file())
    with pytest.raises(ValueError, match="changed the shape of token_embd.weight"):
        pretrained.from_gguf(model_file, max_positions=16,
                             transform=lambda name, info, w: w[:, :32])


# ---- bad input --------------------------------------------------------------------------

def test_rows_that_are_not_whole_blocks_are_refused():
    with pytest.raises(ValueError, match="rows of 48, not a multiple of 32"):
        q.quantize(np.zeros((2, 48), np.float32), "Q8_0")
    with pytest.raises(ValueError, match="a scalar"):
        q.quantize_bits(np.float32(1.0), 3)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nan_and_inf_weights_are_refused_with_their_place(bad):
    x = np.ones((2, 32), np.float32)
    x[1, 5] = bad
    for name in q.FORMATS:
        with pytest.raises(ValueError, match=r"weight 37 \(block 1\) is"):
            q.quantize(x, name)
    with pytest.raises(ValueError, match="NaN and inf cannot be quantised"):
        q.quantize_bits(x, 3)


def test_a_scale_beyond_float16_is_refused():
    x = np.zeros((1, 32), np.float32)
    x[0, 0] = 1e8  # Q8_0's scale 1e8 / 127 is beyond float16's 65504
    with pytest.raises(ValueError, match="beyond float16's largest 65504"):
        q.quantize(x, "Q8_0")
    x[0, 0] = -1e5
    with pytest.raises(ValueError, match="offset"):
        q.quantize(x, "Q4_1")


def test_unknown_formats_and_bits_are_refused():
    x = np.zeros((1, 32), np.float32)
    with pytest.raises(ValueError, match="unknown format 'Q5_0'"):
        q.quantize(x, "Q5_0")
    for bits in (1, 9):
        with pytest.raises(ValueError, match="bits must be from 2 to 8"):
            q.quantize_bits(x, bits)
    with pytest.raises(TypeError, match="weights must be real numbers"):
        q.quantize(np.zeros((1, 32), complex), "Q8_0")
