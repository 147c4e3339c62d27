"""The pieces a Llama-style model adds to the book's decoder-only model: RMS norm, SwiGLU,
grouped-query attention (and its smaller cache), RoPE's base and a tied head. Each against
finite differences and against PyTorch written from its own operations, in float64."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import example, given
from hypothesis import strategies as st

import scratchformer as sf
from conftest import examples
from scratchformer.pytorch import TorchDecoderModel
from test_backward import assert_gradients_match, assert_tiny_gradients_match
from test_rotary import meta_rope_torch

LLAMA = {"normalization": "rms", "feed_forward": "swiglu", "tie_embeddings": True,
         "bias": False, "rope_base": 100_000.0}

groups = st.fixed_dictionaries({
    "n_kv_heads": st.sampled_from([1, 2, 4]),  # of 4 query heads: MQA, GQA, MHA
    "batch": st.sampled_from([(), (2,)]),
    "n": st.integers(1, 5),
    "seed": st.integers(0, 2**16),
})


def _t(a):
    return torch.from_numpy(np.asarray(a, dtype=np.float64).copy())


@examples(10)
@given(groups, st.booleans())
def test_norm_ffn_and_grouped_attention_against_finite_differences(s, rotary):
    rng = np.random.default_rng(s["seed"])
    d_model, d_ff = 16, 12
    x = rng.standard_normal((*s["batch"], s["n"], d_model))
    layers = [
        (sf.RMSNorm(d_model, eps=1e-5), ()),
        (sf.SwiGLU(d_model, d_ff, rng=rng), ()),
        (sf.CausalSelfAttention(d_model, 4, n_kv_heads=s["n_kv_heads"], rotary=rotary,
                                rope_base=500.0, bias=False, rng=rng), ()),
        (sf.DecoderOnlyBlock(d_model, 4, d_ff, rotary=True, n_kv_heads=s["n_kv_heads"],
                             normalization="rms", feed_forward="swiglu", rope_base=500.0,
                             bias=False, rng=rng), ()),
    ]
    # With biases but no rotation, the key bias shifts every score of a query equally.
    attention = sf.CausalSelfAttention(d_model, 4, n_kv_heads=s["n_kv_heads"], rng=rng)
    layers.append((attention, ("b_k",)))
    for layer, zero in layers:
        sf.randomize_parameters(layer, rng)
        pairs = sf.gradient_pairs(layer, x, rng)
        assert_tiny_gradients_match(pairs, zero)
        assert_gradients_match(pairs, zero)


@examples(5)
@given(groups)
@example({"n_kv_heads": 2, "batch": (), "n": 4, "seed": 3350})  # w_q's small gradient
def test_a_llama_style_model_against_finite_differences(s):
    """RMS norm, SwiGLU, grouped keys and values, RoPE base 1e5, the head tied to the
    embedding (whose gradient then collects both uses of the table), no biases."""
    rng = np.random.default_rng(s["seed"])
    model = sf.DecoderModel(vocab_size=6, d_model=16, n_heads=4, d_ff=12, n_layers=2,
                            n_kv_heads=s["n_kv_heads"], max_positions=8, rng=rng, **LLAMA)
    assert model.head is None and "head.w" not in dict(
        (name, None) for name, *_ in model.named_parameters())
    sf.randomize_parameters(model, rng)
    tokens = rng.integers(0, 6, (*s["batch"], s["n"]))
    pairs = sf.gradient_pairs(model, tokens, rng)
    # the tied table: rows no token reads still get the head's gradient
    assert np.abs(pairs["embedding.table"][0]).min() > 0
    assert_tiny_gradients_match(pairs)
    assert_gradients_match(pairs)


def test_rms_norm_is_torch_rms_norm_and_layer_norm_of_a_centred_token():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 5, 8)) * 4
    gamma = rng.standard_normal(8)
    reference = torch.nn.RMSNorm(8, eps=1e-5, dtype=torch.float64)
    with torch.no_grad():
        reference.weight.copy_(_t(gamma))
    expected = reference(_t(x)).detach().numpy()
    np.testing.assert_allclose(sf.rms_norm(x, gamma, 1e-5), expected, rtol=1e-13, atol=1e-13)
    # For a token of mean zero, RMS norm is layer norm with beta = 0: the mean is what it drops.
    centred = x - x.mean(axis=-1, keepdims=True)
    np.testing.assert_allclose(sf.rms_norm(centred, gamma), sf.layer_norm(
        centred, gamma, np.zeros(8)), rtol=1e-12, atol=1e-12)
    # and it is invariant to rescaling the token, as layer norm is (eps = 0)
    np.testing.assert_allclose(sf.rms_norm(3.0 * x, gamma, 0.0), sf.rms_norm(x, gamma, 0.0),
                               rtol=1e-12, atol=1e-12)


def test_rms_norm_gradients_are_torch_autograd():
    rng = np.random.default_rng(1)
    layer = sf.RMSNorm(8)
    layer.params["gamma"] = rng.standard_normal(8)
    x, d_y = rng.standard_normal((4, 8)), rng.standard_normal((4, 8))
    layer.forward(x)
    d_x = layer.backward(d_y)
    tx, tg = _t(x).requires_grad_(), _t(layer.params["gamma"]).requires_grad_()
    F.rms_norm(tx, (8,), tg, 1e-5).backward(_t(d_y))
    np.testing.assert_allclose(d_x, tx.grad.numpy(), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(layer.grads["gamma"], tg.grad.numpy(), rtol=1e-12, atol=1e-13)


def test_swiglu_is_the_gated_network_in_torch_and_silu_never_overflows():
    rng = np.random.default_rng(2)
    layer = sf.SwiGLU(8, 20, rng=rng)
    p = {k: _t(v).requires_grad_() for k, v in layer.params.items()}
    x, d_y = rng.standard_normal((2, 3, 8)) * 3, rng.standard_normal((2, 3, 8))
    y = layer.forward(x)
    d_x = layer.backward(d_y)
    tx = _t(x).requires_grad_()
    ty = (F.silu(tx @ p["w_gate"]) * (tx @ p["w_up"])) @ p["w_down"]
    ty.backward(_t(d_y))
    np.testing.assert_allclose(y, ty.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(d_x, tx.grad.numpy(), rtol=1e-11, atol=1e-12)
    for name in layer.params:
        np.testing.assert_allclose(layer.grads[name], p[name].grad.numpy(), rtol=1e-11,
                                   atol=1e-12, err_msg=name)
    extreme = np.array([-1e4, -800.0, -50.0, 0.0, 50.0, 800.0, 1e4])
    with np.errstate(over="raise", invalid="raise", divide="raise"):  # underflow is expected
        out = sf.silu(extreme)
    np.testing.assert_allclose(out, F.silu(_t(extreme)).numpy(), rtol=1e-15, atol=0)


def test_one_key_value_head_per_query_head_is_multi_head_attention_exactly():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 6, 16))
    mha = sf.CausalSelfAttention(16, 4, rotary=True, rng=np.random.default_rng(5))
    gqa = sf.CausalSelfAttention(16, 4, rotary=True, n_kv_heads=4,
                                 rng=np.random.default_rng(5))
    y = gqa.forward(x)
    assert np.array_equal(y, mha.forward(x))
    d_y = rng.standard_normal(y.shape)
    assert np.array_equal(gqa.backward(d_y), mha.backward(d_y))
    assert all(np.array_equal(gqa.grads[k], mha.grads[k]) for k in mha.grads)


@pytest.mark.parametrize("n_kv_heads", [1, 2])
def test_grouped_attention_is_multi_head_attention_with_keys_and_values_repeated(n_kv_heads):
    """Query head i reads key/value head i // group: the multi-head layer whose W_K and W_V
    repeat each key/value head's columns for its group computes the same outputs, and the
    grouped layer's gradient for a shared column is the sum of the repeated ones."""
    rng = np.random.default_rng(4)
    h, d_k, group = 4, 4, 4 // n_kv_heads
    gqa = sf.CausalSelfAttention(16, h, rotary=True, n_kv_heads=n_kv_heads, rope_base=50.0,
                                 rng=rng)
    sf.randomize_parameters(gqa, rng)
    mha = sf.CausalSelfAttention(16, h, rotary=True, rope_base=50.0, rng=rng)
    columns = np.concatenate([np.arange(j * d_k, (j + 1) * d_k)
                              for j in np.repeat(np.arange(n_kv_heads), group)])
    for name, value in gqa.params.items():
        mha.params[name] = value[..., columns] if name[2] in "kv" else value.copy()
    x = rng.standard_normal((2, 5, 16))
    y = gqa.forward(x)
    np.testing.assert_allclose(y, mha.forward(x), rtol=1e-12, atol=1e-12)
    d_y = rng.standard_normal(y.shape)
    np.testing.assert_allclose(gqa.backward(d_y), mha.backward(d_y), rtol=1e-11, atol=1e-12)
    for name in gqa.params:
        expected = mha.grads[name]
        if name[2] in "kv":  # sum the group's copies of each column
            summed = np.zeros_like(gqa.grads[name])
            np.add.at(summed.T, columns, expected.T)
            expected = summed
        np.testing.assert_allclose(gqa.grads[name], expected, rtol=1e-11, atol=1e-12,
                                   err_msg=name)


def test_grouped_attention_against_torch_sdpa_with_enable_gqa():
    rng = np.random.default_rng(6)
    layer = sf.CausalSelfAttention(16, 4, rotary=True, n_kv_heads=2, rope_base=1e5,
                                   bias=False, rng=rng)
    x = rng.standard_normal((2, 7, 16))
    p = {k: _t(v) for k, v in layer.params.items()}
    tx = _t(x)

    def heads(a, n):  # (b, t, n * 4) -> (b, n, t, 4)
        return a.view(2, 7, n, 4).transpose(1, 2)

    positions = np.arange(7)
    q = meta_rope_torch(heads(tx @ p["w_q"], 4), positions, base=1e5)
    k = meta_rope_torch(heads(tx @ p["w_k"], 2), positions, base=1e5)
    v = heads(tx @ p["w_v"], 2)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    expected = (out.transpose(1, 2).reshape(2, 7, 16) @ p["w_o"]).numpy()
    np.testing.assert_allclose(layer.forward(x), expected, rtol=1e-12, atol=1e-12)


def test_the_cache_of_grouped_attention_is_smaller_by_the_group_size():
    kw = {"vocab_size": 11, "d_model": 36, "n_heads": 9, "d_ff": 24, "n_layers": 3,
          "max_positions": 16}
    sizes = {}
    for n_kv in (9, 3, 1):
        model = sf.DecoderModel(n_kv_heads=n_kv, **kw)
        cache = model.new_cache()
        with model.inference():
            model.forward(np.zeros((2, 4), dtype=int), cache=cache)
        sizes[n_kv] = cache.bytes_per_position
        # keys and values: 2 arrays x n_layers x batch x h_kv x d_k float64 entries
        assert sizes[n_kv] == 2 * 3 * 2 * n_kv * 4 * 8
        assert cache.keys[0].shape == (2, n_kv, 16, 4)
    assert sizes[9] == 3 * sizes[3] == 9 * sizes[1]


@pytest.mark.parametrize("n_kv_heads", [1, 3])
def test_a_llama_style_model_against_its_pytorch_twin_cached_and_not(n_kv_heads):
    rng = np.random.default_rng(7)
    model = sf.DecoderModel(vocab_size=13, d_model=24, n_heads=3 * (n_kv_heads > 1) + 3,
                            d_ff=20, n_layers=2, n_kv_heads=n_kv_heads, max_positions=16,
                            rng=rng, **LLAMA)
    sf.randomize_parameters(model, rng)
    tokens = rng.integers(0, 13, (2, 5))
    twin = TorchDecoderModel(model)
    with model.inference():
        logits = model.forward(tokens)
    with torch.no_grad():
        expected = twin(torch.as_tensor(tokens)).numpy()
    np.testing.assert_allclose(logits, expected, rtol=1e-11, atol=1e-11)
    ours, our_logits = model.generate(tokens, 6, return_logits=True)
    theirs, their_logits = twin.generate(tokens, 6)
    assert np.array_equal(ours, theirs)
    np.testing.assert_allclose(our_logits, their_logits, rtol=1e-10, atol=1e-10)
    uncached, uncached_logits = model.generate(tokens, 6, use_cache=False, return_logits=True)
    assert np.array_equal(ours, uncached)
    np.testing.assert_allclose(our_logits, uncached_logits, rtol=1e-11, atol=1e-11)


def test_rope_base_sets_the_frequencies():
    np.testing.assert_allclose(sf.positional.frequencies(8, 100_000.0),
                               100_000.0 ** (-np.arange(0, 8, 2) / 8), rtol=1e-15)
    x = np.random.default_rng(8).standard_normal((5, 8))
    assert not np.allclose(sf.rope(x, np.arange(5)), sf.rope(x, np.arange(5), base=1e5))
    np.testing.assert_allclose(sf.rope(x, np.arange(5), base=1e5),
                               meta_rope_torch(_t(x), np.arange(5), base=1e5).numpy(),
                               rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("kwargs, message", [
    ({"n_kv_heads": 3}, "n_kv_heads=3 does not divide n_heads=4"),
    ({"n_kv_heads": 0}, "n_kv_heads"),
    ({"normalization": "batch"}, "normalization must be"),
    ({"feed_forward": "geglu"}, "feed_forward must be"),
    ({"rope_base": 1.0}, "rope_base must be finite and greater than 1"),
    ({"tie_embeddings": "yes"}, "tie_embeddings must be True or False"),
])
def test_bad_options_are_named(kwargs, message):
    with pytest.raises((ValueError, TypeError), match=message):
        sf.DecoderModel(vocab_size=5, d_model=8, n_heads=4, d_ff=8, n_layers=1, **kwargs)


def test_bad_rope_base_is_named():
    with pytest.raises(ValueError, match="base must be finite and greater than 1"):
        sf.rope(np.ones((2, 4)), np.arange(2), base=0.5)
