"""DecoderBlock: its backward pass checked two ways, its conversion to and from PyTorch.

1. Central finite differences in float64 on Hypothesis-chosen shapes, masks included: every
   gradient (``x``, ``memory`` and each parameter) within 1e-6 relative error.
2. PyTorch's ``nn.TransformerDecoderLayer`` on the same weights (train mode, dropout 0):
   outputs to 1e-12, gradients to 1e-10, with causal and padding masks (PyTorch's True means
   blocked, so the masks are inverted on the way).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st

import scratchformer as sf
from conftest import examples
from scratchformer.pytorch import from_torch, to_torch, torch_gradients
from test_backward import assert_gradients_match, assert_tiny_gradients_match

decoder_shapes = st.fixed_dictionaries({
    "batch": st.integers(1, 2),
    "n_t": st.integers(1, 4),
    "n_s": st.integers(1, 4),
    "n_heads": st.integers(2, 3),
    "d_k": st.integers(2, 3),
    "d_ff": st.integers(1, 5),
    "norm": st.sampled_from(["post", "pre"]),
    "masks": st.sampled_from(["none", "causal", "causal and padding"]),
    "seed": st.integers(0, 2**16),
})


def _masks(kind, batch, n_t, n_s, rng):
    """(mask, memory_mask): True = may attend."""
    if kind == "none":
        return None, None
    causal = sf.causal_mask(n_t)
    if kind == "causal":
        return causal, None
    # padding: each target keeps its first token (as BOS), each source at least one key
    target_keep = np.arange(n_t) < rng.integers(1, n_t + 1, (batch, 1))  # (batch, n_t)
    source_keep = np.arange(n_s) < rng.integers(1, n_s + 1, (batch, 1))
    return causal & target_keep[:, None, None, :], source_keep[:, None, None, :]


@examples(15)
@given(decoder_shapes)
def test_decoder_block_against_finite_differences(s):
    rng = np.random.default_rng(s["seed"])
    d_model = s["n_heads"] * s["d_k"]
    block = sf.DecoderBlock(d_model, s["n_heads"], s["d_ff"], norm=s["norm"], rng=rng)
    sf.randomize_parameters(block, rng)
    x = rng.standard_normal((s["batch"], s["n_t"], d_model))
    memory = rng.standard_normal((s["batch"], s["n_s"], d_model))
    mask, memory_mask = _masks(s["masks"], s["batch"], s["n_t"], s["n_s"], rng)
    block.forward(x, memory, mask=mask, memory_mask=memory_mask)
    assume(float(np.abs(block.ffn._saved["x"] @ block.ffn.params["w_1"]
                        + block.ffn.params["b_1"]).min()) > 1e-3)  # no ReLU kink
    pairs = sf.gradient_pairs(block, x, rng, memory=memory, mask=mask,
                              memory_mask=memory_mask)
    assert set(pairs) == {"x", "memory", *(n for n, _, _ in block.named_parameters())}
    assert pairs["memory"][0].shape == memory.shape
    # a nearly saturated softmax leaves gradients below the noise of finite differences
    size = np.linalg.norm(pairs["memory"][1])
    assume(size > 1e-3)
    # the key biases shift all of a query's scores alike: their gradients are exactly zero
    zero = ("self_attention.b_k", "cross_attention.b_k")
    assert_tiny_gradients_match(pairs, zero)
    assert_gradients_match(pairs, zero)


def test_memory_broadcast_over_the_batch_gets_its_gradient_summed():
    rng = np.random.default_rng(0)
    block = sf.DecoderBlock(4, 2, 6, rng=rng)
    sf.randomize_parameters(block, rng)
    x, memory = rng.standard_normal((3, 2, 4)), rng.standard_normal((1, 5, 4))
    pairs = sf.gradient_pairs(block, x, rng, memory=memory)
    assert pairs["memory"][0].shape == (1, 5, 4)
    assert_gradients_match(pairs, zero=("self_attention.b_k", "cross_attention.b_k"))


def _torch_masks(mask, memory_mask):
    """The book's may-attend masks as PyTorch's arguments (True = blocked)."""
    kwargs = {}
    if mask is not None:
        causal = mask[0, 0] if mask.ndim == 4 else mask
        kwargs["tgt_mask"] = torch.from_numpy(~sf.causal_mask(causal.shape[-1]))
        if mask.ndim == 4:  # padding: the keys of the last query row that are not padding
            kwargs["tgt_key_padding_mask"] = torch.from_numpy(~mask[:, 0, -1, :])
    if memory_mask is not None:
        kwargs["memory_key_padding_mask"] = torch.from_numpy(~memory_mask[:, 0, 0, :])
    return kwargs


@pytest.mark.parametrize("norm", ["post", "pre"])
@pytest.mark.parametrize("masks", ["none", "causal", "causal and padding"])
def test_decoder_block_against_torch_autograd(norm, masks):
    rng = np.random.default_rng(21)
    block = sf.DecoderBlock(12, 3, 20, norm=norm, rng=rng)
    sf.randomize_parameters(block, rng)
    x, memory = rng.standard_normal((3, 6, 12)), rng.standard_normal((3, 5, 12))
    mask, memory_mask = _masks(masks, 3, 6, 5, rng)
    if masks == "causal and padding":  # pads that PyTorch sees as padding, not as the future
        mask = sf.causal_mask(6) & (np.arange(6) < np.array([6, 4, 1])[:, None])[:, None, None]
        memory_mask = (np.arange(5) < np.array([5, 2, 1])[:, None])[:, None, None, :]
    y = block.forward(x, memory, mask=mask, memory_mask=memory_mask)
    g = rng.standard_normal(y.shape)
    d_x, d_memory = block.backward(g)
    assert np.isfinite(y).all()

    layer = to_torch(block).train()  # dropout 0; train mode takes autograd's path
    x_t = torch.tensor(x, requires_grad=True)
    m_t = torch.tensor(memory, requires_grad=True)
    y_t = layer(x_t, m_t, **_torch_masks(mask, memory_mask))
    np.testing.assert_allclose(y, y_t.detach().numpy(), rtol=0, atol=1e-12)
    (y_t * torch.from_numpy(g)).sum().backward()
    expected = torch_gradients(layer)
    for name, owner, key in block.named_parameters():
        np.testing.assert_allclose(owner.grads[key], expected[name], rtol=0, atol=1e-10,
                                   err_msg=name)
    np.testing.assert_allclose(d_x, x_t.grad.numpy(), rtol=0, atol=1e-10)
    np.testing.assert_allclose(d_memory, m_t.grad.numpy(), rtol=0, atol=1e-10)


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_round_trip_through_torch_is_exact(norm):
    rng = np.random.default_rng(22)
    block = sf.DecoderBlock(6, 2, 10, norm=norm, eps=1e-6, rng=rng)
    sf.randomize_parameters(block, rng)
    module = to_torch(block)
    assert isinstance(module, torch.nn.TransformerDecoderLayer) and not module.training
    assert module.norm_first == (norm == "pre") and module.norm1.eps == 1e-6
    back = from_torch(module, sf.DecoderBlock)
    assert back.norm == norm
    for (name, owner, key), (other, twin, twin_key) in zip(block.named_parameters(),
                                                           back.named_parameters()):
        assert name == other
        np.testing.assert_array_equal(owner.params[key], twin.params[twin_key])


def test_from_torch_takes_pytorchs_own_layer_and_refuses_what_it_cannot_represent():
    torch.manual_seed(0)
    module = torch.nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0, batch_first=True,
                                              dtype=torch.float64).train()
    block = from_torch(module)
    assert isinstance(block, sf.DecoderBlock) and block.norm == "post"
    rng = np.random.default_rng(23)
    x, memory = rng.standard_normal((2, 3, 8)), rng.standard_normal((2, 4, 8))
    expected = module(torch.from_numpy(x), torch.from_numpy(memory)).detach().numpy()
    np.testing.assert_allclose(block.forward(x, memory), expected, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="only the ReLU activation"):
        from_torch(torch.nn.TransformerDecoderLayer(8, 2, 16, activation="gelu"))
    with pytest.raises(TypeError, match="DecoderBlock is converted from "
                                        "torch.nn.TransformerDecoderLayer"):
        from_torch(torch.nn.TransformerEncoderLayer(8, 2, 16), sf.DecoderBlock)


def test_backward_returns_the_input_and_the_memory_gradient():
    rng = np.random.default_rng(24)
    block = sf.DecoderBlock(4, 2, 8, rng=rng)
    x, memory = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 5, 4))
    block.forward(x, memory)
    d_x, d_memory = block.backward(np.ones((2, 3, 4)))
    assert d_x.shape == x.shape and d_memory.shape == memory.shape
    with pytest.raises(RuntimeError, match="needs a forward pass first"):
        block.backward(np.ones((2, 3, 4)))
