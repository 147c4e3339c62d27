"""GPT-2's conventions in the decoder-only model (learned positions, GELU's tanh form), each
against finite differences and PyTorch, and the conversion of ``transformers``' GPT-2: the
same logits to 1e-12 in float64, the same cached generation, and a check that would catch
the exact (erf) GELU in place of the tanh one."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch
import torch.nn.functional as F

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything here is built offline

import transformers  # noqa: E402

import scratchformer as sf  # noqa: E402
from scratchformer.gpt2 import from_gpt2, gpt2_options  # noqa: E402
from scratchformer.layers import gelu  # noqa: E402
from scratchformer.pytorch import TorchDecoderModel  # noqa: E402
from test_backward import (  # noqa: E402
    assert_gradients_match,
    assert_tiny_gradients_match,
    relu_kink_gap,
)

#: Relative tolerance of the logits, max |ours - theirs| / max |theirs|, in float64.
TOLERANCE = 1e-12
SMALL = {"n_layer": 2, "n_embd": 32, "n_head": 4, "vocab_size": 50, "n_positions": 16,
         "bos_token_id": 0, "eos_token_id": 0}
GPT2_STYLE = {"positions": "learned", "feed_forward": "gelu", "tie_embeddings": True}


def _config(**overrides):
    return transformers.GPT2Config(**(SMALL | overrides))


def _reference(seed=0, **overrides):
    """A float64 ``GPT2LMHeadModel`` in evaluation mode, every weight drawn from ``seed``:
    matrices of scale ``1.5 / sqrt(fan_in)`` (pre-activations of order one, where GELU is
    curved), biases and norm shifts 0.2, norm scales ``1 +- 0.2``, embeddings 0.5."""
    model = transformers.GPT2LMHeadModel(_config(**overrides)).double().eval()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():  # the tied lm_head appears once, as wte
            noise = torch.randn(p.shape, generator=g, dtype=p.dtype)
            if name.endswith(("wte.weight", "wpe.weight")):
                p.copy_(0.5 * noise)
            elif "ln_" in name and name.endswith("weight"):
                p.copy_(1.0 + 0.2 * noise)
            elif p.ndim == 1:
                p.copy_(0.2 * noise)
            else:  # Conv1D weights, (in, out)
                p.copy_(1.5 * p.shape[0] ** -0.5 * noise)
    return model


def _relative(ours, theirs):
    return float(np.abs(ours - theirs).max() / np.abs(theirs).max())


def _their_logits(model, tokens):
    with torch.no_grad():
        return model(torch.as_tensor(tokens)).logits.numpy()


def _our_logits(model, tokens):
    with model.inference():
        return model.forward(tokens)


# ---- the conversion ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def reference():
    return _reference()


@pytest.fixture(scope="module")
def converted(reference):
    return from_gpt2(reference)


def test_the_converted_model_is_gpt2_s_configuration(converted):
    c = converted.config
    assert (c.vocab_size, c.d_model, c.n_heads, c.n_layers, c.d_ff) == (50, 32, 4, 2, 128)
    assert (c.positions, c.norm, c.normalization, c.feed_forward) == (
        "learned", "pre", "layer", "gelu")
    assert c.tie_embeddings and c.bias and c.max_positions == 16 and c.eps == 1e-5
    assert converted.head is None and converted.position_embedding is not None
    assert converted.blocks[0].ffn.activation == "gelu"


def test_logits_equal_transformers_to_1e_12(reference, converted):
    tokens = np.random.default_rng(1).integers(0, 50, (4, 16))  # every position of wpe
    theirs = _their_logits(reference, tokens)
    assert np.abs(theirs).max() > 1.0  # logits of order one, not a vanishing comparison
    assert _relative(_our_logits(converted, tokens), theirs) <= TOLERANCE
    short = tokens[:, :5]  # a shorter batch reads the first rows of the table only
    assert _relative(_our_logits(converted, short), _their_logits(reference, short)) <= TOLERANCE


def test_the_weights_are_gpt2_s_without_a_transpose(reference, converted):
    """Conv1D stores (in, out), the package's layout; c_attn's columns are [q | k | v]."""
    sd = {k: v.numpy() for k, v in reference.state_dict().items()}
    attention = converted.blocks[1].attention.params
    fused = sd["transformer.h.1.attn.c_attn.weight"]
    assert fused.shape == (32, 96)
    np.testing.assert_array_equal(attention["w_k"], fused[:, 32:64])
    np.testing.assert_array_equal(attention["b_v"], sd["transformer.h.1.attn.c_attn.bias"][64:])
    np.testing.assert_array_equal(converted.blocks[1].ffn.params["w_1"],
                                  sd["transformer.h.1.mlp.c_fc.weight"])
    np.testing.assert_array_equal(converted.position_embedding.params["table"],
                                  sd["transformer.wpe.weight"])


def test_cached_generation_is_transformers_step_by_step(reference, converted):
    """Greedy generation with our KV cache: the tokens of ``GPT2LMHeadModel.generate``, and at
    every step the logits of ``transformers`` run one token at a time with its
    ``past_key_values`` (float64), to 1e-12."""
    prompt = np.random.default_rng(2).integers(0, 50, (3, 4))
    steps = 12  # up to the 16 positions of the table
    tokens, logits = converted.generate(prompt, steps, return_logits=True)
    expected = reference.generate(torch.as_tensor(prompt), max_new_tokens=steps,
                                  do_sample=False, pad_token_id=0, eos_token_id=None)
    np.testing.assert_array_equal(tokens, expected.numpy())
    with torch.no_grad():  # transformers' cache, fed our tokens
        out = reference(torch.as_tensor(prompt), use_cache=True)
        theirs = [out.logits[:, -1].numpy()]
        for t in range(prompt.shape[1], prompt.shape[1] + steps - 1):
            out = reference(torch.as_tensor(tokens[:, t:t + 1]),
                            past_key_values=out.past_key_values, use_cache=True)
            theirs.append(out.logits[:, -1].numpy())
    assert _relative(logits, np.stack(theirs, axis=1)) <= TOLERANCE
    uncached, uncached_logits = converted.generate(prompt, steps, use_cache=False,
                                                   return_logits=True)
    np.testing.assert_array_equal(uncached, tokens)
    assert _relative(uncached_logits, logits) <= TOLERANCE


def test_a_state_dict_of_numpy_arrays_and_a_config_dict_convert_the_same(reference,
                                                                         converted):
    """``GPT2Model``'s names (no ``transformer.`` prefix, no ``lm_head``), arrays, a dict."""
    body = {k.removeprefix("transformer."): v.numpy().astype(np.float32)
            for k, v in reference.state_dict().items() if k != "lm_head.weight"}
    model = from_gpt2(body, reference.config.to_dict(), dtype=np.float32)
    assert model.dtype == np.float32
    tokens = np.arange(10)[None] % 50
    assert _relative(_our_logits(model, tokens), _our_logits(converted, tokens)) < 1e-5


# ---- the tanh GELU, not the erf one ----------------------------------------------------------

def test_gelu_is_the_tanh_approximation_and_not_the_erf_form():
    x = np.linspace(-12.0, 12.0, 4001)
    tanh_form = 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))
    np.testing.assert_allclose(gelu(x), tanh_form, rtol=0, atol=1e-15)
    np.testing.assert_allclose(gelu(x), F.gelu(torch.from_numpy(x), approximate="tanh"),
                               rtol=0, atol=1e-15)
    erf_form = F.gelu(torch.from_numpy(x)).numpy()
    assert 4e-4 < np.abs(gelu(x) - erf_form).max() < 5e-4  # near |x| = 2.7
    with np.errstate(over="raise", invalid="raise", divide="raise"):  # underflow is expected
        extreme = gelu(np.array([-1e300, -800.0, -30.0, 30.0, 800.0, 1e300]))
    np.testing.assert_array_equal(extreme, [0.0, 0.0, 0.0, 30.0, 800.0, 1e300])


def test_an_erf_gelu_is_caught_by_the_1e_12_comparison(reference, converted):
    """The same weights under the exact GELU (``activation_function="gelu"``) give logits
    that differ from the reference by orders of magnitude more than the tolerance, and the
    converter refuses that configuration."""
    erf_model = transformers.GPT2LMHeadModel(_config(activation_function="gelu"))
    erf_model = erf_model.double().eval()
    erf_model.load_state_dict(reference.state_dict())
    tokens = np.random.default_rng(3).integers(0, 50, (4, 16))
    theirs = _their_logits(reference, tokens)
    difference = _relative(_their_logits(erf_model, tokens), theirs)
    assert difference > 1e6 * TOLERANCE
    # and our model with an erf GELU swapped into its feed-forward networks, likewise
    swapped = from_gpt2(reference)
    for block in swapped.blocks:
        block.ffn.forward = _erf_feed_forward(block.ffn)
    assert _relative(_our_logits(swapped, tokens), theirs) > 1e6 * TOLERANCE
    assert _relative(_our_logits(converted, tokens), theirs) <= TOLERANCE
    with pytest.raises(ValueError, match="'gelu' is the exact x \\* Phi\\(x\\)"):
        from_gpt2(erf_model)


def _erf_feed_forward(ffn):
    def forward(x):
        p = ffn.params
        hidden = F.gelu(torch.from_numpy(x @ p["w_1"] + p["b_1"])).numpy()  # erf
        return hidden @ p["w_2"] + p["b_2"]
    return forward


# ---- finite differences and autograd -------------------------------------------------------

@pytest.mark.parametrize("batch", [(), (2,)])
@pytest.mark.parametrize("bias", [True, False])
def test_gelu_feed_forward_against_finite_differences(batch, bias):
    rng = np.random.default_rng(4)
    layer = sf.FeedForward(6, 10, bias=bias, activation="gelu", rng=rng)
    sf.randomize_parameters(layer, rng)
    x = 2.0 * rng.standard_normal((*batch, 5, 6))  # pre-activations across GELU's bend
    assert relu_kink_gap(layer, x) == np.inf  # no kink to step over
    pairs = sf.gradient_pairs(layer, x, rng)
    assert set(pairs) == {"x", *layer.params}
    assert_tiny_gradients_match(pairs)
    assert_gradients_match(pairs)


def test_gelu_feed_forward_gradients_are_torch_autograd():
    rng = np.random.default_rng(5)
    layer = sf.FeedForward(8, 12, activation="gelu", rng=rng)
    sf.randomize_parameters(layer, rng)
    x, d_y = 3.0 * rng.standard_normal((2, 4, 8)), rng.standard_normal((2, 4, 8))
    y = layer.forward(x)
    d_x = layer.backward(d_y)
    p = {k: torch.from_numpy(v.copy()).requires_grad_() for k, v in layer.params.items()}
    tx = torch.from_numpy(x.copy()).requires_grad_()
    ty = F.gelu(tx @ p["w_1"] + p["b_1"], approximate="tanh") @ p["w_2"] + p["b_2"]
    ty.backward(torch.from_numpy(d_y))
    np.testing.assert_allclose(y, ty.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(d_x, tx.grad.numpy(), rtol=1e-11, atol=1e-12)
    for name in layer.params:
        np.testing.assert_allclose(layer.grads[name], p[name].grad.numpy(), rtol=1e-11,
                                   atol=1e-12, err_msg=name)


@pytest.mark.parametrize("batch", [(), (2,)])
@pytest.mark.parametrize("norm", ["pre", "post"])
def test_a_gpt2_style_model_against_finite_differences(batch, norm):
    """Learned positions (their gradient summed over the batch), GELU and a tied head."""
    rng = np.random.default_rng(6)
    model = sf.DecoderModel(vocab_size=6, d_model=8, n_heads=2, d_ff=12, n_layers=2, norm=norm,
                            max_positions=7, rng=rng, **GPT2_STYLE)
    sf.randomize_parameters(model, rng)
    tokens = rng.integers(0, 6, (*batch, 5))
    assert relu_kink_gap(model, tokens) == np.inf
    pairs = sf.gradient_pairs(model, tokens, rng)
    analytic, numeric = pairs["position_embedding.table"]
    assert not analytic[5:].any() and np.abs(numeric[5:]).max() < 1e-8  # rows not read
    assert np.abs(analytic[:5]).min() > 0
    zero = tuple(f"blocks.{i}.attention.b_k" for i in range(2))  # shifts all scores equally
    assert_tiny_gradients_match(pairs, zero)
    assert_gradients_match(pairs, zero)


def test_reading_in_pieces_with_the_cache_uses_the_positions_rows():
    """After a cached prefix the new tokens add rows ``cache.position`` onwards of the table."""
    rng = np.random.default_rng(7)
    model = sf.DecoderModel(vocab_size=11, d_model=16, n_heads=4, d_ff=24, n_layers=2,
                            max_positions=12, rng=rng, **GPT2_STYLE)
    sf.randomize_parameters(model, rng)
    tokens = rng.integers(0, 11, (2, 12))
    whole = _our_logits(model, tokens)
    cache, pieces, start = model.new_cache(), [], 0
    with model.inference():
        for size in (5, 1, 4, 2):
            pieces.append(model.forward(tokens[:, start:start + size], cache=cache))
            start += size
    np.testing.assert_allclose(np.concatenate(pieces, axis=1), whole, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="max_positions=12"), model.inference():
        model.forward(tokens[:, :1], cache=cache)  # a 13th position has no row


# ---- the PyTorch twin ----------------------------------------------------------------------

@pytest.mark.parametrize("norm", ["pre", "post"])
def test_the_pytorch_twin_computes_learned_positions_and_gelu(norm):
    rng = np.random.default_rng(8)
    model = sf.DecoderModel(vocab_size=13, d_model=24, n_heads=3, d_ff=20, n_layers=2,
                            norm=norm, max_positions=16, rng=rng, **GPT2_STYLE)
    sf.randomize_parameters(model, rng)
    twin = TorchDecoderModel(model)
    tokens = rng.integers(0, 13, (2, 5))
    with torch.no_grad():
        expected = twin(torch.as_tensor(tokens)).numpy()
    np.testing.assert_allclose(_our_logits(model, tokens), expected, rtol=1e-12, atol=1e-12)
    ours, our_logits = model.generate(tokens, 11, return_logits=True)
    theirs, their_logits = twin.generate(tokens, 11)
    np.testing.assert_array_equal(ours, theirs)
    np.testing.assert_allclose(our_logits, their_logits, rtol=1e-11, atol=1e-11)


def test_the_pytorch_twin_of_a_converted_gpt2_is_transformers(reference, converted):
    tokens = np.random.default_rng(9).integers(0, 50, (2, 16))
    with torch.no_grad():
        twin = TorchDecoderModel(converted)(torch.as_tensor(tokens)).numpy()
    assert _relative(twin, _their_logits(reference, tokens)) <= TOLERANCE


# ---- errors --------------------------------------------------------------------------------

@pytest.mark.parametrize("overrides, message", [
    ({"activation_function": "gelu"}, "activation_function='gelu' is not supported.*erf"),
    ({"activation_function": "relu"}, "activation_function='relu' is not supported"),
    ({"activation_function": "gelu_fast"}, "activation_function='gelu_fast'"),
    ({"scale_attn_by_inverse_layer_idx": True}, "scale_attn_by_inverse_layer_idx=True"),
    ({"reorder_and_upcast_attn": True}, "reorder_and_upcast_attn=True"),
    ({"scale_attn_weights": False}, "scale_attn_weights=False"),
    ({"add_cross_attention": True}, "add_cross_attention=True"),
    ({"tie_word_embeddings": False}, "tie_word_embeddings=False is not supported"),
])
def test_configurations_the_model_cannot_represent_are_refused(overrides, message):
    with pytest.raises(ValueError, match=message):
        gpt2_options(_config(**overrides))


def test_the_tanh_gelu_of_pytorch_is_accepted_and_n_inner_is_d_ff():
    options = gpt2_options(_config(activation_function="gelu_pytorch_tanh", n_inner=40))
    assert options["feed_forward"] == "gelu" and options["d_ff"] == 40
    with pytest.raises(ValueError, match="model_type='llama'"):
        gpt2_options({"model_type": "llama"})
    with pytest.raises(ValueError, match="has no n_embd, n_head"):
        gpt2_options({"vocab_size": 5, "n_layer": 1, "n_positions": 4})


def test_bad_weights_are_named(reference):
    sd = dict(reference.state_dict())
    config = reference.config
    with pytest.raises(ValueError, match=r"missing \['h.1.mlp.c_fc.bias'\], unexpected \[\]"):
        from_gpt2({k: v for k, v in sd.items() if k != "transformer.h.1.mlp.c_fc.bias"},
                  config)
    with pytest.raises(ValueError, match=r"unexpected \['h.0.attn.extra'\]"):
        from_gpt2(sd | {"transformer.h.0.attn.extra": sd["transformer.ln_f.bias"]}, config)
    with pytest.raises(ValueError, match="blocks.0.ffn.w_1 must have shape"):
        from_gpt2(sd | {"transformer.h.0.mlp.c_fc.weight":
                        sd["transformer.h.0.mlp.c_fc.weight"].T}, config)
    with pytest.raises(ValueError, match="c_attn.weight must have 3 \\* n_embd columns"):
        from_gpt2(sd | {"transformer.h.0.attn.c_attn.weight":
                        sd["transformer.h.0.attn.c_attn.weight"][:, :95]}, config)
    with pytest.raises(ValueError, match="an untied head is not supported"):
        from_gpt2(sd | {"lm_head.weight": sd["lm_head.weight"] + 1.0}, config)
    with pytest.raises(ValueError, match="must be finite"):
        from_gpt2(sd | {"transformer.ln_f.bias": sd["transformer.ln_f.bias"] * np.nan},
                  config)
    with pytest.raises(TypeError, match="needs a config"):
        from_gpt2(sd)
    with pytest.raises(TypeError, match="GPT-2 model or its state_dict"):
        from_gpt2([1, 2], config)
    # the mask buffers of older checkpoints are not weights, and are skipped
    old = sd | {"transformer.h.0.attn.bias": torch.ones(1, 1, 16, 16),
                "transformer.h.1.attn.masked_bias": torch.tensor(-1e4)}
    assert from_gpt2(old, config).num_parameters == from_gpt2(sd, config).num_parameters


@pytest.mark.parametrize("kwargs, message", [
    ({"activation": "swish"}, "activation must be 'relu' or 'gelu', got 'swish'"),
    ({"activation": None}, "activation must be"),
])
def test_bad_activation_is_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        sf.FeedForward(4, 8, **kwargs)


def test_bad_positions_are_named():
    with pytest.raises(ValueError, match="positions must be 'rotary' or 'sinusoidal' or "
                                         "'learned', got 'absolute'"):
        sf.DecoderModel(vocab_size=5, d_model=8, n_heads=2, d_ff=8, n_layers=1,
                        positions="absolute")
    # learned positions need no even width, unlike the sinusoidal encoding and RoPE
    model = sf.DecoderModel(vocab_size=5, d_model=9, n_heads=3, d_ff=8, n_layers=1,
                            max_positions=4, **GPT2_STYLE)
    assert model.position_embedding.params["table"].shape == (4, 9)
    with pytest.raises(ValueError, match="exceed the model's max_positions=4"):
        model.forward(np.zeros((1, 5), dtype=int))
