"""Tests for scratchformer.book.diagnostics: gradient norms per block, the residual stream's
scale."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from scratchformer import EncoderModel, Linear, cross_entropy, positional_encoding
from scratchformer.book.diagnostics import (
    BLOCK_WEIGHTS,
    block_gradient_norms,
    gradient_norms,
    stream_scales,
)
from scratchformer.pytorch import to_torch


def small_model(norm, n_layers=3, seed=0):
    return EncoderModel(vocab_size=7, n_classes=5, d_model=16, n_heads=4, d_ff=24,
                        n_layers=n_layers, norm=norm, rng=np.random.default_rng(seed))


def batch(seed=1, shape=(4, 6)):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 7, shape), rng.integers(0, 5, shape)


def test_gradient_norms_of_a_linear_layer():
    layer = Linear(3, 2, rng=np.random.default_rng(0))
    x = np.arange(12.0).reshape(4, 3)
    layer.forward(x)
    layer.backward(np.ones((4, 2)))
    norms = gradient_norms(layer)
    # d(sum of outputs)/dW = x^T 1: each column is the column sums of x; db = 4 per output.
    assert norms["w"] == pytest.approx(np.sqrt(2 * np.sum(x.sum(axis=0) ** 2)))
    assert norms["b"] == pytest.approx(np.sqrt(2 * 4.0**2))


def test_gradient_norms_need_a_backward_pass():
    with pytest.raises(RuntimeError, match="run backward"):
        gradient_norms(small_model("post"))
    with pytest.raises(TypeError, match="Layer"):
        gradient_norms(np.zeros(3))


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_block_norms_agree_with_torch_autograd(norm):
    model = small_model(norm)
    tokens, targets = batch()
    norms = block_gradient_norms(model, tokens, targets)
    assert norms.shape == (3, len(BLOCK_WEIGHTS))

    twin = to_torch(model)
    logits = twin(torch.from_numpy(tokens))
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 5),
                                             torch.from_numpy(targets).reshape(-1))
    loss.backward()
    torch_names = {"attention.w_o": "self_attn.out_proj.weight",
                   "ffn.w_1": "linear1.weight", "ffn.w_2": "linear2.weight"}
    expected = [[block.get_parameter(torch_names[name]).grad.norm().item()
                 for name in BLOCK_WEIGHTS] for block in twin.blocks]
    np.testing.assert_allclose(norms, expected, rtol=1e-10)


def test_block_norm_is_the_slope_along_the_gradient():
    """Independent of any backward pass: the loss grows at rate |g| along g / |g|."""
    model = small_model("post")
    tokens, targets = batch(seed=2)
    norms = block_gradient_norms(model, tokens, targets, names=["ffn.w_2"])
    w = model.blocks[1].ffn.params["w_2"]
    direction = model.blocks[1].ffn.grads["w_2"] / norms[1, 0]
    h = 1e-6

    def loss_at(t):
        original = w.copy()
        w[...] += t * direction
        value, _ = cross_entropy(model.forward(tokens), targets)
        w[...] = original
        return value

    slope = (loss_at(h) - loss_at(-h)) / (2 * h)
    assert slope == pytest.approx(norms[1, 0], rel=1e-6)


def test_block_norms_match_the_gradients_they_leave_behind():
    model = small_model("pre", n_layers=2)
    tokens, targets = batch(seed=3)
    norms = block_gradient_norms(model, tokens, targets, names=("norm1.gamma", "ffn.b_1"))
    by_name = gradient_norms(model)
    assert norms[1, 0] == by_name["blocks.1.norm1.gamma"]
    assert norms[0, 1] == by_name["blocks.0.ffn.b_1"]


def test_block_norms_reject_bad_input():
    model = small_model("post")
    tokens, targets = batch()
    with pytest.raises(ValueError, match="no block parameter named"):
        block_gradient_norms(model, tokens, targets, names=["ffn.w_3"])
    with pytest.raises(ValueError, match="at least one"):
        block_gradient_norms(model, tokens, targets, names=[])
    with pytest.raises(ValueError, match="shape of tokens"):
        block_gradient_norms(model, tokens, targets[:, :-1])
    with pytest.raises(TypeError, match="integer token ids"):
        block_gradient_norms(model, tokens.astype(float), targets)
    with pytest.raises(TypeError, match="EncoderModel"):
        block_gradient_norms(Linear(3, 2), tokens, targets)


def test_stream_scales_post_ln_blocks_leave_unit_scale():
    model = small_model("post", n_layers=4)
    tokens, _ = batch()
    scales = stream_scales(model, tokens)
    assert scales.shape == (5,)
    np.testing.assert_allclose(scales[1:], 1.0, rtol=1e-4)  # eps = 1e-5 shrinks it slightly


def test_stream_scales_pre_ln_starts_at_the_embeddings_and_grows():
    model = small_model("pre", n_layers=4)
    tokens, _ = batch()
    scales = stream_scales(model, tokens)
    x0 = model.embedding.params["table"][tokens] + positional_encoding(6, 16)
    assert scales[0] == pytest.approx(np.sqrt(x0.var(axis=-1).mean()))
    x = x0
    for block in model.blocks:
        x = block.forward(x)
    assert scales[-1] == pytest.approx(np.sqrt(x.var(axis=-1).mean()))
    assert scales[-1] > scales[0]  # the sub-layers' outputs add to the stream
