"""Tests for scratchformer.encoder: the post-LN and pre-LN encoder blocks against PyTorch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from scratchformer import causal_mask
from scratchformer.encoder import EncoderBlock
from scratchformer.pytorch import from_torch, to_torch

TOL = {torch.float64: 1e-12, torch.float32: 2e-5}


def torch_layer(norm, dtype, seed=0, d_model=16, n_heads=4, d_ff=40):
    torch.manual_seed(seed)
    layer = torch.nn.TransformerEncoderLayer(d_model, n_heads, d_ff, dropout=0.0,
                                             activation="relu", batch_first=True,
                                             norm_first=norm == "pre", dtype=dtype).eval()
    with torch.no_grad():  # non-trivial norms and biases, so that the test sees them
        for parameter in (layer.norm1.weight, layer.norm2.weight):
            parameter.uniform_(0.5, 1.5)
        for parameter in (layer.norm1.bias, layer.norm2.bias, layer.self_attn.in_proj_bias,
                          layer.self_attn.out_proj.bias):
            parameter.normal_(0, 0.1)
    return layer


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("norm", ["post", "pre"])
@pytest.mark.parametrize("masked", [False, True])
def test_agrees_with_torch(norm, dtype, masked):
    layer = torch_layer(norm, dtype)
    block = from_torch(layer, EncoderBlock)
    assert block.norm == norm
    x = np.random.default_rng(1).standard_normal((3, 7, 16)).astype(
        torch.empty(0, dtype=dtype).numpy().dtype)
    mask = causal_mask(7) if masked else None
    y = block.forward(x, mask=mask)
    weights = block.attention.attention_weights
    assert y.shape == (3, 7, 16) and weights.shape == (3, 4, 7, 7) and y.dtype == x.dtype
    with torch.no_grad():
        expected = layer(torch.from_numpy(x),
                         src_mask=None if mask is None else torch.from_numpy(~mask))
    np.testing.assert_allclose(y, expected.numpy(), rtol=0, atol=TOL[dtype])


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_round_trip_is_exact(norm):
    layer = torch_layer(norm, torch.float64)
    back = to_torch(from_torch(layer, EncoderBlock))
    assert back.norm_first == (norm == "pre")
    for (name, a), (_, b) in zip(layer.state_dict().items(), back.state_dict().items()):
        assert torch.equal(a, b), name


def test_post_ln_outputs_are_normalised_per_token():
    block = EncoderBlock(16, 4, 32, norm="post", rng=np.random.default_rng(0))
    y = block.forward(np.random.default_rng(1).normal(3, 5, (2, 6, 16)))
    np.testing.assert_allclose(y.mean(-1), 0.0, atol=1e-12)
    np.testing.assert_allclose(y.var(-1), 1.0, rtol=1e-4)  # eps = 1e-5 shrinks it slightly


def test_parameter_count():
    d, h, d_ff = 512, 8, 2048
    block = EncoderBlock(d, h, d_ff)
    torch_count = sum(p.numel() for p in torch.nn.TransformerEncoderLayer(d, h, d_ff).parameters())
    assert block.num_parameters == 4 * d * d + 4 * d + 2 * d * d_ff + d_ff + d + 4 * d
    assert block.num_parameters == torch_count


def test_bad_arguments():
    with pytest.raises(ValueError, match="norm must be 'post' or 'pre', got 'middle'"):
        EncoderBlock(8, 2, 16, norm="middle")
    with pytest.raises(ValueError, match="not divisible"):
        EncoderBlock(10, 3, 16)
    with pytest.raises(ValueError, match=r"x must have shape \(\.\.\., n, 8\)"):
        EncoderBlock(8, 2, 16).forward(np.zeros(8))
    with pytest.raises(TypeError, match="EncoderBlock is converted from torch.nn."
                                        "TransformerEncoderLayer, got Linear"):
        from_torch(torch.nn.Linear(2, 2), EncoderBlock)
    gelu = torch.nn.TransformerEncoderLayer(8, 2, 16, activation="gelu")
    with pytest.raises(ValueError, match="ReLU"):
        from_torch(gelu, EncoderBlock)


def test_from_torch_rejects_a_layer_without_biases():
    with pytest.raises(ValueError, match="biases"):
        from_torch(torch.nn.TransformerEncoderLayer(8, 2, 16, bias=False), EncoderBlock)


def test_rng_must_be_a_generator():
    with pytest.raises(TypeError, match="Generator"):
        EncoderBlock(8, 2, 16, rng=42)
