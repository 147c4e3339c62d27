"""The PyTorch twin of the decoder-only model computes the package's function, cache and all."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import scratchformer as sf
from scratchformer.pytorch import TorchDecoderModel

VARIANTS = [(positions, norm) for positions in ("rotary", "sinusoidal")
            for norm in ("pre", "post")]


def model(positions, norm, dtype=np.float64, max_positions=64):
    return sf.DecoderModel(vocab_size=13, d_model=16, n_heads=2, d_ff=32, n_layers=2,
                           positions=positions, norm=norm, max_positions=max_positions,
                           rng=np.random.default_rng(3), dtype=dtype)


@pytest.mark.parametrize(("positions", "norm"), VARIANTS)
def test_generation_chooses_the_same_tokens_from_the_same_logits(positions, norm):
    m = model(positions, norm)
    prompt = np.random.default_rng(4).integers(0, 13, (3, 5))
    tokens, logits = m.generate(prompt, 30, return_logits=True)
    torch_tokens, torch_logits = TorchDecoderModel(m).generate(prompt, 30)
    np.testing.assert_array_equal(torch_tokens, tokens)
    np.testing.assert_allclose(torch_logits, logits, rtol=0, atol=1e-12)


@pytest.mark.parametrize(("positions", "norm"), VARIANTS)
def test_reading_in_pieces_after_a_cached_prefix_equals_reading_at_once(positions, norm):
    # pieces of several tokens after a prefix take the bottom-right causal mask
    m = model(positions, norm)
    twin = TorchDecoderModel(m)
    tokens = torch.from_numpy(np.random.default_rng(5).integers(0, 13, (2, 12)))
    with m.inference():
        expected = m.forward(tokens.numpy())
    with torch.no_grad():
        whole = twin(tokens).numpy()
        cache, pieces, start = twin.new_cache(2), [], 0
        for size in (5, 3, 1, 3):
            pieces.append(twin(tokens[:, start:start + size], cache, start).numpy())
            start += size
    np.testing.assert_allclose(whole, expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.concatenate(pieces, axis=1), expected, rtol=0, atol=1e-12)


def test_float32_twin_agrees_to_float32_rounding():
    m = model("rotary", "pre", dtype=np.float32)
    prompt = np.random.default_rng(6).integers(0, 13, (1, 8))
    _, logits = m.generate(prompt, 16, return_logits=True)
    _, torch_logits = TorchDecoderModel(m).generate(prompt, 16)
    assert torch_logits.dtype == np.float32
    np.testing.assert_allclose(torch_logits, logits, rtol=0, atol=1e-4)


def test_bad_input_is_refused_with_a_clear_error():
    with pytest.raises(TypeError, match="DecoderModel"):
        TorchDecoderModel(sf.MultiHeadAttention(8, 2))
    with pytest.raises(ValueError, match="max_positions"):
        TorchDecoderModel(model("rotary", "pre", max_positions=10)).generate(
            np.zeros((1, 4), np.int64), 7)


def test_the_language_model_s_loss_and_gradients_are_autograd_s():
    """The text task's loss and every hand-written gradient of the model, against PyTorch's
    autograd through the twin (float64): what the text benchmark times is the same step."""
    from scratchformer.language_model import TextTask

    rng = np.random.default_rng(5)
    stream = rng.integers(0, 13, 400)
    task = TextTask(stream, stream, vocab_size=13, context=9, characters=np.ones(13, np.int64))
    numpy_model = sf.DecoderModel(vocab_size=13, d_model=16, n_heads=2, d_ff=24, n_layers=2,
                                  max_positions=9, rng=np.random.default_rng(6))
    sf.randomize_parameters(numpy_model, np.random.default_rng(7))
    twin = TorchDecoderModel(numpy_model)
    for parameter in twin.parameters():
        parameter.requires_grad_(True)
    batch = task.sample(rng, 4)
    loss = task.loss_and_backward(numpy_model, batch)
    logits = twin(torch.from_numpy(batch[0][:, :-1].copy()))
    torch_loss = torch.nn.functional.cross_entropy(
        logits.reshape(-1, 13), torch.from_numpy(batch[0][:, 1:].reshape(-1).copy()))
    torch_loss.backward()
    assert loss == pytest.approx(torch_loss.item(), abs=1e-12)
    for name, layer, key in numpy_model.named_parameters():
        expected = twin.params[name.replace(".", "/")].grad.numpy()
        np.testing.assert_allclose(layer.grads[key], expected, rtol=1e-9, atol=1e-12,
                                   err_msg=name)
