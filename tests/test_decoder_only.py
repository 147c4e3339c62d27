"""The decoder-only model's pieces: causality, finite differences on Hypothesis-chosen shapes,
and PyTorch autograd (float64, 1e-10) on twins built here: ``nn.TransformerEncoderLayer``
blocks under a causal mask for sinusoidal positions, and a functional PyTorch decoder with
Meta's RoPE for rotary ones."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st

import scratchformer as sf
from conftest import examples
from scratchformer.pytorch import to_torch, torch_gradients
from test_backward import (
    assert_gradients_match,
    assert_tiny_gradients_match,
    named_grads,
    relu_kink_gap,
)
from test_rotary import meta_rope_torch

shapes = st.fixed_dictionaries({
    "batch": st.lists(st.integers(1, 2), max_size=1),
    "n": st.integers(1, 4),
    "n_heads": st.integers(1, 2),
    "half_d_k": st.integers(1, 2),
    "d_ff": st.integers(2, 5),
    "rotary": st.booleans(),
    "norm": st.sampled_from(["pre", "post"]),
    "seed": st.integers(0, 2**16),
})


@examples(10)
@given(shapes)
def test_causal_attention_and_block_against_finite_differences(s):
    rng = np.random.default_rng(s["seed"])
    d_model = s["n_heads"] * 2 * s["half_d_k"]
    assume(d_model >= 4)  # see test_backward: layer norm over 2 features is nearly constant
    x = rng.standard_normal((*s["batch"], s["n"], d_model))
    attention = sf.CausalSelfAttention(d_model, s["n_heads"], rotary=s["rotary"], rng=rng)
    block = sf.DecoderOnlyBlock(d_model, s["n_heads"], s["d_ff"], norm=s["norm"],
                                rotary=s["rotary"], rng=rng)
    # The key bias shifts every score of a query equally, which the softmax ignores, unless
    # RoPE turns it differently at every position.
    b_k = () if s["rotary"] else ("b_k",)
    for layer, zero in ((attention, b_k), (block, tuple(f"attention.{z}" for z in b_k))):
        sf.randomize_parameters(layer, rng)
        assume(relu_kink_gap(layer, x) > 1e-3)
        pairs = sf.gradient_pairs(layer, x, rng)
        assert_tiny_gradients_match(pairs, zero)
        assert_gradients_match(pairs, zero)


@examples(5)
@given(shapes, st.sampled_from(["rotary", "sinusoidal"]))
def test_the_model_against_finite_differences(s, positions):
    rng = np.random.default_rng(s["seed"])
    model = sf.DecoderModel(vocab_size=5, d_model=4 * s["half_d_k"], n_heads=2,
                            d_ff=s["d_ff"], n_layers=2, positions=positions, norm=s["norm"],
                            max_positions=8, rng=rng)
    sf.randomize_parameters(model, rng)
    tokens = rng.integers(0, 5, (*s["batch"], s["n"]))
    assume(relu_kink_gap(model, tokens) > 1e-3)
    pairs = sf.gradient_pairs(model, tokens, rng)
    analytic, numeric = pairs.pop("embedding.table")
    unused = np.setdiff1d(np.arange(5), tokens)  # rows no token reads: no gradient
    assert not analytic[unused].any() and np.abs(numeric[unused]).max(initial=0) < 1e-7
    pairs["embedding.table"] = (np.delete(analytic, unused, 0), np.delete(numeric, unused, 0))
    zero = () if positions == "rotary" else tuple(f"blocks.{i}.attention.b_k" for i in range(2))
    assert_tiny_gradients_match(pairs, zero)  # a gradient within reach of rounding noise
    assert_gradients_match(pairs, zero)


@pytest.mark.parametrize("positions", ["rotary", "sinusoidal"])
def test_logits_at_a_position_never_depend_on_later_tokens(positions):
    rng = np.random.default_rng(0)
    model = sf.DecoderModel(vocab_size=7, d_model=8, n_heads=2, d_ff=16, n_layers=2,
                            positions=positions, rng=rng)
    tokens = rng.integers(0, 7, (3, 9))
    logits = model.forward(tokens)
    changed = tokens.copy()
    changed[:, 5] = (changed[:, 5] + 1) % 7
    other = model.forward(changed)
    np.testing.assert_array_equal(other[:, :5], logits[:, :5])
    assert np.abs(other[:, 5:] - logits[:, 5:]).min() > 0  # every later position sees it


def test_without_rotation_it_is_multi_head_attention_under_the_causal_mask():
    rng = np.random.default_rng(1)
    causal = sf.CausalSelfAttention(8, 2, rng=rng)
    plain = sf.MultiHeadAttention(8, 2)
    sf.randomize_parameters(causal, rng)
    plain.load_parameters(causal.params)
    x = rng.standard_normal((2, 6, 8))
    np.testing.assert_allclose(causal.forward(x), plain.forward(x, mask=sf.causal_mask(6)),
                               rtol=0, atol=1e-14)


def test_rotary_scores_seen_from_a_late_start_are_the_same():
    # RoPE's scores depend on offsets only: queries and keys rotated from position 1500 on
    # give the scores of those rotated from position 0.
    rng = np.random.default_rng(2)
    layer = sf.CausalSelfAttention(8, 2, rotary=True, rng=rng)
    sf.randomize_parameters(layer, rng)
    x = rng.standard_normal((1, 5, 8))
    q, k, _ = sf.MultiHeadAttention._split_inputs(layer, x, x)
    scores = [q_ @ np.swapaxes(k_, -1, -2)
              for q_, k_ in (layer._rotate(q, k, 0), layer._rotate(q, k, 1500))]
    np.testing.assert_allclose(scores[1], scores[0], rtol=0, atol=1e-10)
    plain = sf.CausalSelfAttention(8, 2)
    plain.load_parameters(layer.params)
    assert not np.allclose(plain.forward(x), layer.forward(x))  # the rotation matters


# ---- PyTorch twins ------------------------------------------------------------------------

def _torch_parameters(model):
    return {name: torch.tensor(owner.params[key], requires_grad=True)
            for name, owner, key in model.named_parameters()}


def _torch_rotary_decoder(p, tokens, model):
    """A functional PyTorch decoder with Meta's RoPE, from the package's parameter names."""
    c = model.config
    x = p["embedding.table"][tokens]
    n, h, d_k = tokens.shape[-1], c.n_heads, c.d_model // c.n_heads
    positions = torch.arange(n)
    allowed = torch.ones(n, n, dtype=torch.bool).tril()  # SDPA's boolean mask: True = attend

    def norm(y, name):
        return torch.nn.functional.layer_norm(y, (c.d_model,), p[f"{name}.gamma"],
                                              p[f"{name}.beta"], eps=c.eps)

    def heads(y):
        return y.reshape(*y.shape[:-1], h, d_k).transpose(-3, -2)

    for i in range(c.n_layers):
        b = f"blocks.{i}."
        y = norm(x, b + "norm1") if c.norm == "pre" else x
        q, k, v = (heads(y @ p[f"{b}attention.w_{w}"] + p[f"{b}attention.b_{w}"])
                   for w in "qkv")
        q, k = meta_rope_torch(q, positions), meta_rope_torch(k, positions)
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
        out = out.transpose(-3, -2).reshape(x.shape)
        attended = out @ p[f"{b}attention.w_o"] + p[f"{b}attention.b_o"]

        def ffn(z, b=b):
            hidden = torch.relu(z @ p[f"{b}ffn.w_1"] + p[f"{b}ffn.b_1"])
            return hidden @ p[f"{b}ffn.w_2"] + p[f"{b}ffn.b_2"]

        if c.norm == "pre":
            x = x + attended
            x = x + ffn(norm(x, b + "norm2"))
        else:
            x = norm(x + attended, b + "norm1")
            x = norm(x + ffn(x), b + "norm2")
    if c.norm == "pre":
        x = norm(x, "final_norm")
    return x @ p["head.w"] + p["head.b"]


def _torch_sinusoidal_decoder(model):
    """nn.TransformerEncoderLayer blocks (from EncoderBlocks of the same weights) and a causal
    mask in PyTorch's convention, True = blocked; returns a function of the tokens and the
    modules whose gradients to read."""
    c = model.config
    layers = []
    for block in model.blocks:
        twin = sf.EncoderBlock(c.d_model, c.n_heads, c.d_ff, norm=c.norm, eps=c.eps)
        twin.load_parameters({name: owner.params[key]
                              for name, owner, key in block.named_parameters()})
        layers.append(to_torch(twin).train())
    embedding = sf.Embedding(c.vocab_size, c.d_model)
    embedding.load_parameters(model.embedding.params)
    embedding = to_torch(embedding)
    head = sf.Linear(c.d_model, c.vocab_size)
    head.load_parameters(model.head.params)
    head = to_torch(head)
    final = None
    if model.final_norm is not None:
        final = sf.LayerNorm(c.d_model, eps=c.eps)
        final.load_parameters(model.final_norm.params)
        final = to_torch(final)

    def run(tokens):
        n = tokens.shape[-1]
        blocked = torch.ones(n, n, dtype=torch.bool).triu(1)  # top-left = bottom-right here
        x = embedding(tokens) + torch.from_numpy(sf.positional_encoding(n, c.d_model))
        for layer in layers:
            x = layer(x, src_mask=blocked)
        if final is not None:
            x = final(x)
        return head(x)

    modules = {"embedding": embedding, "head": head, "final_norm": final}
    modules |= {f"blocks.{i}": layer for i, layer in enumerate(layers)}
    return run, modules


@pytest.mark.parametrize("positions", ["rotary", "sinusoidal"])
@pytest.mark.parametrize("norm", ["pre", "post"])
def test_model_and_loss_against_torch_autograd(positions, norm):
    rng = np.random.default_rng(7)
    model = sf.DecoderModel(vocab_size=9, d_model=12, n_heads=3, d_ff=20, n_layers=2,
                            positions=positions, norm=norm, max_positions=16, rng=rng)
    sf.randomize_parameters(model, rng)
    tokens = rng.integers(0, 9, (3, 7))
    targets = rng.integers(0, 9, (3, 7))
    loss, d_logits = sf.cross_entropy(model.forward(tokens), targets)
    model.backward(d_logits)
    grads = named_grads(model)

    tokens_t, targets_t = torch.from_numpy(tokens), torch.from_numpy(targets).reshape(-1)
    if positions == "rotary":
        p = _torch_parameters(model)
        logits_t = _torch_rotary_decoder(p, tokens_t, model)
        expected = {name: tensor for name, tensor in p.items()}
    else:
        run, modules = _torch_sinusoidal_decoder(model)
        logits_t = run(tokens_t)
    loss_t = torch.nn.functional.cross_entropy(logits_t.reshape(-1, 9), targets_t)
    loss_t.backward()
    if positions == "rotary":
        expected = {name: tensor.grad.numpy() for name, tensor in expected.items()}
    else:
        expected = {}
        for prefix, module in modules.items():
            if module is not None:
                expected |= {f"{prefix}.{k}": v for k, v in torch_gradients(module).items()}
    assert loss == pytest.approx(loss_t.item(), rel=1e-12)
    assert grads.keys() == expected.keys()
    for name, grad in grads.items():
        np.testing.assert_allclose(grad, expected[name], rtol=0, atol=1e-10, err_msg=name)


def test_the_configuration_is_kept_frozen_and_rebuilds_the_model():
    import dataclasses

    model = sf.DecoderModel(vocab_size=10, d_model=16, n_heads=2, d_ff=32, n_layers=1)
    assert model.config.norm == "pre" and model.config.positions == "rotary"
    assert isinstance(model.config, sf.ModelConfig)
    twin = sf.DecoderModel(**dataclasses.asdict(model.config))
    assert twin.num_parameters == model.num_parameters
    assert model.final_norm is not None
    with pytest.raises(TypeError):
        sf.DecoderModel(10, 16, 2, 32, 1)  # dimensions are keyword-only
