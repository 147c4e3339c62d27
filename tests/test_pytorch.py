"""scratchformer.pytorch: every conversion, both ways, for every layer with a PyTorch twin.

For each pair: ``from_torch(to_torch(layer))`` gives back the parameters bit for bit, the two
compute the same function (float64, 1e-12), and ``torch_gradients`` reads autograd's gradients
in the package's names, equal to the layer's own backward pass.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import scratchformer as sf
from conftest import layer_classes
from scratchformer.config import ConfiguredModel
from scratchformer.pytorch import (
    NO_COUNTERPART,
    TorchEncoderModel,
    from_torch,
    to_torch,
    torch_gradients,
)


def _layers():
    rng = np.random.default_rng(0)
    yield "LayerNorm", sf.LayerNorm(6, eps=1e-6), "x"
    yield "Linear", sf.Linear(6, 4, rng=rng), "x"
    yield "FeedForward", sf.FeedForward(6, 10, rng=rng), "x"
    yield "Embedding", sf.Embedding(9, 6, rng=rng), "tokens"
    yield "MultiHeadAttention", sf.MultiHeadAttention(6, 2, rng=rng), "x"
    yield "MultiHeadAttention-no-bias", sf.MultiHeadAttention(6, 3, bias=False, rng=rng), "x"
    for norm in ("post", "pre"):
        yield f"EncoderBlock-{norm}", sf.EncoderBlock(6, 3, 10, norm=norm, rng=rng), "x"
        yield f"EncoderModel-{norm}", sf.EncoderModel(
            vocab_size=9, n_classes=5, d_model=6, n_heads=2, d_ff=10, n_layers=2, norm=norm,
            rng=rng), "tokens"


LAYERS = list(_layers())


def _call(module, tensor):
    if isinstance(module, torch.nn.MultiheadAttention):
        return module(tensor, tensor, tensor, need_weights=False)[0]
    return module(tensor)


@pytest.mark.parametrize("name, layer, kind", LAYERS, ids=[row[0] for row in LAYERS])
def test_round_trip_function_and_gradients(name, layer, kind):
    rng = np.random.default_rng(1)
    sf.randomize_parameters(layer, rng)
    module = to_torch(layer)
    assert not module.training  # evaluation mode, dropout 0
    back = from_torch(module)
    assert type(back) is type(layer)
    mine = {n: o.params[k] for n, o, k in layer.named_parameters()}
    theirs = {n: o.params[k] for n, o, k in back.named_parameters()}
    assert mine.keys() == theirs.keys()
    assert all(np.array_equal(mine[n], theirs[n]) for n in mine)

    x = rng.integers(0, 9, (2, 5)) if kind == "tokens" else rng.standard_normal((2, 5, 6))
    y = layer.forward(x)
    g = rng.standard_normal(y.shape)
    layer.backward(g)
    x_t = torch.from_numpy(x) if kind == "tokens" else torch.tensor(x, requires_grad=True)
    y_t = _call(module.train(), x_t)
    np.testing.assert_allclose(y, y_t.detach().numpy(), rtol=0, atol=1e-12)
    (y_t * torch.from_numpy(g)).sum().backward()
    expected = torch_gradients(module)
    assert expected.keys() == mine.keys()
    for n, owner, key in layer.named_parameters():
        np.testing.assert_allclose(owner.grads[key], expected[n], rtol=0, atol=1e-10,
                                   err_msg=n)


def test_the_expected_class_is_checked_and_what_has_no_conversion_is_named():
    module = torch.nn.LayerNorm(4)
    assert isinstance(from_torch(module, sf.LayerNorm), sf.LayerNorm)
    with pytest.raises(TypeError, match="EncoderBlock is converted from torch.nn."
                                        "TransformerEncoderLayer, got LayerNorm"):
        from_torch(module, sf.EncoderBlock)
    with pytest.raises(TypeError, match="no conversion from Conv1d"):
        from_torch(torch.nn.Conv1d(2, 2, 1))
    with pytest.raises(TypeError, match=r"no PyTorch counterpart for Layer \(no parameters\)"):
        to_torch(sf.Layer())
    with pytest.raises(TypeError, match="converts the package's layers, got ndarray"):
        to_torch(np.ones(3))
    with pytest.raises(TypeError, match="no PyTorch module converts to SwiGLU: PyTorch has no"):
        from_torch(torch.nn.Linear(4, 8), sf.SwiGLU)


def test_conversions_refuse_what_they_cannot_represent():
    with pytest.raises(ValueError, match="with a bias"):
        from_torch(torch.nn.Linear(3, 2, bias=False))
    with pytest.raises(ValueError, match="last axis"):
        from_torch(torch.nn.LayerNorm((2, 3)))
    model = to_torch(sf.EncoderModel(vocab_size=5, n_classes=5, d_model=4, n_heads=1, d_ff=4,
                                     n_layers=1, norm="pre"))
    broken = TorchEncoderModel(model.embedding, list(model.blocks), None, model.head)
    with pytest.raises(ValueError, match="final norm exactly when"):
        from_torch(broken)


def test_a_model_whose_blocks_differ_is_refused():
    two = to_torch(sf.EncoderModel(vocab_size=5, n_classes=5, d_model=8, n_heads=2, d_ff=8,
                                   n_layers=2))
    four = to_torch(sf.EncoderBlock(8, 4, 8))  # the same shapes, other heads
    mixed = TorchEncoderModel(two.embedding, [two.blocks[0], four], None, two.head)
    with pytest.raises(ValueError, match="block 1 differs from block 0"):
        from_torch(mixed)


def test_modules_without_a_counterpart_get_the_list_of_what_converts():
    with pytest.raises(TypeError, match=r"no conversion from ReLU \(the exact type\); supported"):
        from_torch(torch.nn.ReLU())
    no_bias = torch.nn.Sequential(torch.nn.Linear(4, 8, bias=False), torch.nn.ReLU(),
                                  torch.nn.Linear(8, 4))
    with pytest.raises(ValueError, match="have biases"):
        from_torch(no_bias)


def test_cross_attention_on_the_long_path_against_autograd():
    """n_q * n_k above the short path's limit: the blocked kernel, then backward."""
    rng = np.random.default_rng(3)
    layer = sf.MultiHeadAttention(8, 2, rng=rng)
    sf.randomize_parameters(layer, rng)
    x, context = rng.standard_normal((2, 70, 8)), rng.standard_normal((2, 90, 8))
    mask = sf.causal_mask(70, 90)
    g = rng.standard_normal(x.shape)
    layer.forward(x, mask=mask, context=context)
    d_x, d_context = layer.backward(g)
    module = to_torch(layer)
    x_t = torch.tensor(x, requires_grad=True)
    c_t = torch.tensor(context, requires_grad=True)
    out, _ = module(x_t, c_t, c_t, attn_mask=torch.from_numpy(~mask), need_weights=False)
    (out * torch.from_numpy(g)).sum().backward()
    np.testing.assert_allclose(d_x, x_t.grad.numpy(), rtol=0, atol=1e-10)
    np.testing.assert_allclose(d_context, c_t.grad.numpy(), rtol=0, atol=1e-10)
    expected = torch_gradients(module)
    for name, owner, key in layer.named_parameters():
        np.testing.assert_allclose(owner.grads[key], expected[name], rtol=0, atol=1e-10)


def test_float32_converts_to_float32():
    layer = sf.FeedForward(4, 8, dtype=np.float32)
    module = to_torch(layer)
    assert module[0].weight.dtype == torch.float32
    assert from_torch(module).params["w_1"].dtype == np.float32


# -- Every layer of the package: converted exactly, or refused with the reason ---------------

ABSTRACT = {ConfiguredModel, sf.AttentionHeads}  # base classes, built only through subclasses
SMALL = dict(d_model=8, n_heads=2, d_ff=16, n_layers=1)
#: One small instance of each Layer class, with options that stress the conversion.
INSTANCES = {
    sf.Linear: lambda: sf.Linear(4, 3),
    sf.Embedding: lambda: sf.Embedding(5, 4),
    sf.Dropout: lambda: sf.Dropout(0.25),
    sf.LayerNorm: lambda: sf.LayerNorm(4, eps=1e-6),
    sf.RMSNorm: lambda: sf.RMSNorm(4, eps=1e-6),
    sf.FeedForward: lambda: sf.FeedForward(4, 8),
    sf.SwiGLU: lambda: sf.SwiGLU(4, 8),
    sf.LoRA: lambda: sf.LoRA(4, 3, rank=2, alpha=4.0),
    sf.MultiHeadAttention: lambda: sf.MultiHeadAttention(8, 2),
    sf.CausalSelfAttention: lambda: sf.CausalSelfAttention(8, 2, rotary=True),
    sf.EncoderBlock: lambda: sf.EncoderBlock(8, 2, 16, norm="pre"),
    sf.DecoderBlock: lambda: sf.DecoderBlock(8, 2, 16),
    sf.DecoderOnlyBlock: lambda: sf.DecoderOnlyBlock(8, 2, 16),
    sf.EncoderModel: lambda: sf.EncoderModel(vocab_size=5, n_classes=3, **SMALL),
    sf.EncoderDecoderModel: lambda: sf.EncoderDecoderModel(vocab_size=5, target_vocab_size=6,
                                                           **SMALL),
    sf.DecoderModel: lambda: sf.DecoderModel(vocab_size=7, **SMALL, n_kv_heads=1,
                                             normalization="rms", feed_forward="swiglu",
                                             tie_embeddings=True),
}
#: Inputs for the layers whose PyTorch module takes one tensor: the outputs are compared too.
INPUTS = {
    sf.Linear: lambda rng: rng.standard_normal((2, 3, 4)),
    sf.LayerNorm: lambda rng: rng.standard_normal((2, 3, 4)),
    sf.RMSNorm: lambda rng: rng.standard_normal((2, 3, 4)),
    sf.FeedForward: lambda rng: rng.standard_normal((2, 3, 4)),
    sf.Embedding: lambda rng: rng.integers(0, 5, (2, 3)),
    sf.Dropout: lambda rng: rng.standard_normal((2, 3, 4)),
    sf.DecoderModel: lambda rng: rng.integers(0, 7, (2, 5)),
}


def test_every_layer_class_is_covered():
    """A new Layer class fails here until it has an instance above (and so a conversion or a
    reason in NO_COUNTERPART, which the next test requires)."""
    assert layer_classes() - ABSTRACT == set(INSTANCES)


def _perturbed(layer, rng):
    """The layer with every parameter drawn anew: ones and zeros would hide a swapped copy."""
    for _, owner, key in layer.named_parameters():
        owner.params[key] = rng.standard_normal(owner.params[key].shape)
    return layer


@pytest.mark.parametrize("cls", sorted(INSTANCES, key=lambda c: c.__name__),
                         ids=lambda c: c.__name__)
def test_every_layer_round_trips_through_pytorch_or_is_refused(cls):
    rng = np.random.default_rng(0)
    layer = _perturbed(INSTANCES[cls](), rng)
    if cls in NO_COUNTERPART:
        with pytest.raises(TypeError, match=f"no PyTorch module computes a {cls.__name__}: "):
            to_torch(layer)
        return
    module = to_torch(layer)
    back = from_torch(module, cls)
    assert type(back) is cls
    ours = {name: owner.params[key] for name, owner, key in layer.named_parameters()}
    theirs = {name: owner.params[key] for name, owner, key in back.named_parameters()}
    assert ours.keys() == theirs.keys()
    for name in ours:
        np.testing.assert_array_equal(theirs[name], ours[name], err_msg=name)
    if cls in INPUTS:
        x = INPUTS[cls](rng)
        with torch.no_grad():
            expected = module(torch.from_numpy(x)).numpy()
        # the module is in evaluation mode: ours too (inference), where dropout is off
        with layer.inference():
            np.testing.assert_allclose(layer.forward(x), expected, rtol=0, atol=1e-12)
    if cls is sf.Dropout:
        assert module.p == back.p == layer.p


def test_a_subclass_is_never_converted_as_its_parent():
    """CausalSelfAttention is a MultiHeadAttention, but with RoPE it computes another function:
    converted as its parent, its output differed from nn.MultiheadAttention's by about 1."""
    with pytest.raises(TypeError, match="no rotary positions"):
        to_torch(sf.CausalSelfAttention(8, 2, rotary=True))

    class Scaled(torch.nn.Linear):
        def forward(self, x):
            return 2 * super().forward(x)

    with pytest.raises(TypeError, match="no conversion from Scaled"):
        from_torch(Scaled(3, 2))
