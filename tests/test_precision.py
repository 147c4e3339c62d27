"""Half precision, emulated: bfloat16 rounding against ``ml_dtypes`` (the reference), the formats'
ranges against NumPy's and ``ml_dtypes``' own tables, the loss scaler's rule, the gradients kept
in float16 and put back, and training in other formats through the book's loop."""

from __future__ import annotations

import dataclasses

import ml_dtypes
import numpy as np
import pytest

from scratchformer import DecoderModel
from scratchformer import precision as hp
from scratchformer import train as tr
from scratchformer._threads import blas_threads
from scratchformer.optim import Adam
from scratchformer.train import TrainConfig, train


def test_bfloat16_rounds_as_ml_dtypes_on_every_kind_of_float32():
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 2**32, 2_000_000, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    specials = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.finfo(np.float32).max,
                         -np.finfo(np.float32).max, np.finfo(np.float32).tiny, 1e-45, 3e38,
                         1.0 + 2.0**-8, 1.0 + 3 * 2.0**-8, 1.0 + 2.0**-8 + 2.0**-20,
                         1.0 + 2.0**-9, 1.0 + 3 * 2.0**-9], np.float32)
    x = np.concatenate([x, specials])
    ours = hp.to_bfloat16(x)
    with np.errstate(over="ignore", invalid="ignore"):
        reference = x.astype(ml_dtypes.bfloat16).astype(np.float32)
    nan = np.isnan(x)
    assert np.isnan(ours[nan]).all()
    np.testing.assert_array_equal(ours[~nan].view(np.uint32), reference[~nan].view(np.uint32))


def test_bfloat16_ties_go_to_even():
    one_and_half = np.float32(1.0 + 2.0**-8)  # halfway between 1 and 1 + 2**-7
    assert hp.to_bfloat16(one_and_half) == 1.0
    three_halves = np.float32(1.0 + 3 * 2.0**-8)  # halfway between 1 + 2**-7 and 1 + 2**-6
    assert hp.to_bfloat16(three_halves) == np.float32(1.0 + 2.0**-6)


def test_float16_is_ieee():
    x = np.array([1e-8, 3e-8, 6e-8, 1e-5, 65504, 65520, 1e5, -1e5], np.float32)
    with np.errstate(over="ignore"):
        reference = x.astype(np.float16).astype(np.float32)
    np.testing.assert_array_equal(hp.to_float16(x), reference)
    assert hp.to_float16(np.float32(65520))[()] == np.inf  # past max + half a step


@pytest.mark.parametrize("name, reference", [("float32", np.finfo(np.float32)),
                                             ("float16", np.finfo(np.float16)),
                                             ("bfloat16", ml_dtypes.finfo(ml_dtypes.bfloat16))])
def test_the_formats_derived_from_their_widths_match_the_references(name, reference):
    fmt = hp.FORMATS[name]
    assert fmt.bits == reference.bits
    assert fmt.max == float(reference.max)
    assert fmt.smallest_normal == float(reference.smallest_normal)
    assert fmt.smallest_subnormal == float(reference.smallest_subnormal)
    assert fmt.epsilon == float(reference.eps)


def test_round_to_names_its_formats():
    with pytest.raises(ValueError, match="fmt"):
        hp.round_to(np.ones(3, np.float32), "float8")
    with pytest.raises(TypeError, match="floating"):
        hp.to_bfloat16(np.arange(3))


def test_the_loss_scaler_halves_on_overflow_and_doubles_after_its_interval():
    scaler = hp.LossScaler(1024.0, interval=3)
    for _ in range(2):
        scaler.update(True)
    assert scaler.scale == 1024.0
    scaler.update(True)
    assert scaler.scale == 2048.0
    scaler.update(True)
    scaler.update(False)
    assert scaler.scale == 1024.0 and scaler.skipped == 1 and scaler.good == 0
    for bad in ({"growth": 0.5}, {"backoff": 1.5}):
        with pytest.raises(ValueError, match="backoff < 1 < growth"):
            hp.LossScaler(**bad)
    with pytest.raises(ValueError, match="scale"):
        hp.LossScaler(0.0)


def small_model(seed=0):
    return DecoderModel(vocab_size=12, d_model=32, n_heads=2, d_ff=64, n_layers=2,
                        max_positions=16, rng=np.random.default_rng(seed), dtype=np.float32)


def test_half_gradients_round_what_it_says_and_put_the_methods_back():
    model = small_model()
    tokens = np.random.default_rng(1).integers(0, 12, (4, 16))
    d_logits = np.random.default_rng(2).standard_normal((4, 16, 12)).astype(np.float32)
    d_logits[0, 0, :4] = [1e-9, 3e-7, 1e-3, 0.0]  # flushed, subnormal, normal, zero
    record = {}
    model.forward(tokens)
    with hp.half_gradients(model, scale=1.0, fmt="float16", record=record):
        model.backward(d_logits)
    nonzero = np.count_nonzero(d_logits)
    assert record["zero"] == pytest.approx(np.sum((d_logits != 0) & (np.abs(d_logits) < 2.0**-25))
                                           / nonzero)
    assert record["subnormal"] > 0 and record["overflow"] == 0
    for _, layer, key in model.named_parameters():
        g = layer.grads[key]
        np.testing.assert_array_equal(g, hp.to_float16(g))  # every gradient float16's
    assert "backward" not in vars(model)
    assert all("backward" not in vars(block) for block in model.blocks)


def test_the_methods_come_back_after_an_error_too():
    model = small_model()
    with pytest.raises(RuntimeError), hp.half_gradients(model):
        raise RuntimeError("inside")
    assert "backward" not in vars(model)


def small_config(**formats):
    return TrainConfig(batch_size=16, max_steps=6, warmup_steps=2, eval_every=6, n_valid=16,
                       n_test=16, target_accuracy=None, **formats)


def adder(seed=0):
    task = tr.make_task("add")
    return task, tr.adder_model(task, d_model=32, n_heads=2, d_ff=64, n_layers=2, seed=seed)


def trained(config, seed=0):
    task, model = adder(seed)
    return train(model, task, config)


def parameters(result):
    return {name: layer.params[key].copy()
            for name, layer, key in result.model.named_parameters()}


def test_micro_batches_with_float32_gradients_change_the_step_by_rounding_at_most():
    with blas_threads(1):  # the whole batch at once, as the book's runs take it
        plain = trained(small_config())
        split = trained(small_config(micro_batches=4))
    # a power of two scales exactly, but for what float32 holds only as a subnormal
    np.testing.assert_allclose(split.history["loss"], plain.history["loss"], rtol=1e-5)
    after, before = parameters(split), parameters(plain)
    for name, value in before.items():
        np.testing.assert_allclose(after[name], value, rtol=1e-4, atol=1e-6, err_msg=name)


def test_float16_gradients_record_their_losses_and_scaling_removes_them():
    unscaled = trained(small_config(gradients="float16", micro_batches=1024))
    scaled = trained(small_config(gradients="float16", micro_batches=1024,
                                  loss_scaling=True))
    lost = unscaled.history["grad_zero"] + unscaled.history["grad_subnormal"]
    assert np.mean(lost) > 0.5
    assert np.mean(scaled.history["grad_zero"] + scaled.history["grad_subnormal"]) < 0.01
    assert set(scaled.history) >= {"grad_zero", "grad_subnormal", "skipped", "loss_scale"}
    assert len(scaled.history["loss_scale"]) == scaled.steps


def test_an_overflow_skips_the_step_and_halves_the_scale():
    task, model = adder()
    config = small_config(gradients="float16", loss_scaling=True)
    scaler = hp.LossScaler(2.0**40)  # every gradient overflows float16
    before = {name: layer.params[key].copy() for name, layer, key in model.named_parameters()}
    batch = task.sample(np.random.default_rng(0), 8, np.zeros(0, np.int64))
    loss, norm, stats = hp.train_step(model, Adam(model), task, batch, 1e-3, config, scaler)
    assert stats["skipped"] == 1.0 and norm == np.inf and scaler.scale == 2.0**39
    for name, layer, key in model.named_parameters():
        np.testing.assert_array_equal(layer.params[key], before[name])


def test_an_overflow_without_a_scaler_names_the_parameter():
    task, model = adder()
    model.head.params["w"] *= 1e6  # the gradients below the head pass float16's 65504
    config = small_config(gradients="float16")
    batch = task.sample(np.random.default_rng(0), 8, np.zeros(0, np.int64))
    with pytest.raises(FloatingPointError, match="the gradient of .* holds inf or NaN"):
        hp.train_step(model, Adam(model), task, batch, 1e-3, config)


def test_bfloat16_weights_stay_bfloat16_and_count_their_lost_updates():
    result = trained(small_config(weights="bfloat16"))
    for name, layer, key in result.model.named_parameters():
        w = layer.params[key]
        np.testing.assert_array_equal(w, hp.to_bfloat16(w), err_msg=name)
    lost = result.history["lost_updates"]
    assert len(lost) == result.steps and np.all((0 <= lost) & (lost <= 1))


def test_the_config_refuses_what_makes_no_sense():
    with pytest.raises(ValueError, match="nothing for it to do"):
        TrainConfig(loss_scaling=True)
    with pytest.raises(ValueError, match="gradients"):
        TrainConfig(gradients="float8")
    with pytest.raises(ValueError, match="weights"):
        TrainConfig(weights="float16")
    with pytest.raises(ValueError, match="micro_batches"):
        TrainConfig(micro_batches=0)
    assert dataclasses.replace(TrainConfig(), gradients="bfloat16").gradients == "bfloat16"


def test_the_command_line_trains_in_other_formats_and_refuses_nonsense(capsys):
    from scratchformer.train.cli import main

    assert main(["--task", "reverse", "--max-steps", "4", "--gradients", "float16",
                 "--micro-batches", "8", "--loss-scaling", "--weights", "bfloat16",
                 "--quiet"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("accuracy=")
    with pytest.raises(SystemExit):
        main(["--loss-scaling"])
    assert "nothing for it to do" in capsys.readouterr().err
