"""Generation: the KV cache changes the arithmetic, never the result; greedy is argmax;
sampling follows softmax(logits / T) over the top k or the nucleus of top p, drawing from
``rng`` only."""

from __future__ import annotations

import numpy as np
import pytest

import scratchformer as sf


def make_model(positions, norm="pre", seed=0):
    rng = np.random.default_rng(seed)
    model = sf.DecoderModel(vocab_size=11, d_model=16, n_heads=2, d_ff=32, n_layers=2,
                            positions=positions, norm=norm, max_positions=64, rng=rng)
    sf.randomize_parameters(model, rng)  # sharper logits than a fresh model's
    model.head.params["b"][...] = 0.0  # a random bias alone would pick one token throughout
    return model


@pytest.mark.parametrize("positions", ["rotary", "sinusoidal"])
@pytest.mark.parametrize("norm", ["pre", "post"])
def test_cached_and_uncached_greedy_generation_agree(positions, norm):
    model = make_model(positions, norm)
    prompt = np.random.default_rng(1).integers(0, 11, (3, 5))
    cached, logits_c = model.generate(prompt, 30, return_logits=True)
    uncached, logits_u = model.generate(prompt, 30, use_cache=False, return_logits=True)
    np.testing.assert_array_equal(cached, uncached)
    np.testing.assert_allclose(logits_c, logits_u, rtol=0, atol=1e-10)
    assert cached.shape == (3, 35) and np.array_equal(cached[:, :5], prompt)
    # and the uncached logits are those of a plain forward of the sequence so far
    for step in (0, 17, 29):
        np.testing.assert_allclose(logits_u[:, step], model.forward(cached[:, :5 + step])[:, -1],
                                   rtol=0, atol=1e-12)
    # the logits change from step to step: a constant the comparison above could not miss
    assert np.abs(np.diff(logits_c, axis=1)).max() > 1e-3


@pytest.mark.parametrize("positions", ["rotary", "sinusoidal"])
def test_cached_and_uncached_sampling_agree_for_one_seed(positions):
    model = make_model(positions)
    prompt = np.random.default_rng(2).integers(0, 11, (4, 3))
    runs = [model.generate(prompt, 25, use_cache=use_cache, temperature=1.3, top_k=6,
                           rng=np.random.default_rng(42))
            for use_cache in (True, False)]
    np.testing.assert_array_equal(*runs)
    other = model.generate(prompt, 25, temperature=1.3, top_k=6, rng=np.random.default_rng(43))
    assert not np.array_equal(other, runs[0])  # the seed matters: the draws are random


@pytest.mark.parametrize("positions", ["rotary", "sinusoidal"])
def test_a_prompt_read_in_chunks_through_the_cache_gives_the_full_logits(positions):
    # queries of a chunk after a cached prefix: the causal mask aligned bottom-right
    model = make_model(positions)
    tokens = np.random.default_rng(3).integers(0, 11, (2, 12))
    full = model.forward(tokens)
    with model.inference():
        cache = model.new_cache()
        parts = [model.forward(tokens[:, a:b], cache=cache)
                 for a, b in ((0, 4), (4, 5), (5, 12))]
        assert cache.position == 12
    np.testing.assert_allclose(np.concatenate(parts, axis=1), full, rtol=0, atol=1e-12)


def test_greedy_is_argmax_and_takes_the_first_of_ties():
    logits = np.array([[0.0, 2.0, 2.0, 1.0], [5.0, -1.0, 0.0, 4.0]])
    assert sf.next_token(logits).tolist() == [1, 0]


def test_top_1_and_tiny_temperatures_are_greedy_and_never_nan():
    model = make_model("rotary")
    prompt = np.random.default_rng(4).integers(0, 11, (3, 4))
    greedy = model.generate(prompt, 10)
    rng = np.random.default_rng(0)
    np.testing.assert_array_equal(model.generate(prompt, 10, temperature=1.0, top_k=1,
                                                 rng=rng), greedy)
    np.testing.assert_array_equal(model.generate(prompt, 10, temperature=1e-300, rng=rng),
                                  greedy)


def test_sampling_follows_the_softmax_of_the_top_k():
    logits = np.array([[2.0, 1.0, 0.5, -1.0, 0.0]])
    rng = np.random.default_rng(5)
    draws = 40_000
    rows = np.repeat(logits, draws, axis=0)
    for temperature, top_k in ((1.0, None), (0.5, 3)):
        chosen = sf.next_token(rows, temperature=temperature, top_k=top_k, rng=rng)
        z = logits[0] / temperature
        if top_k is not None:
            z = np.where(z >= np.sort(z)[-top_k], z, -np.inf)
        expected = np.exp(z - z.max()) / np.exp(z - z.max()).sum()
        frequencies = np.bincount(chosen, minlength=5) / draws
        # four standard errors of a frequency
        assert np.all(np.abs(frequencies - expected) <= 4 * np.sqrt(expected / draws) + 1e-12)
        if top_k is not None:
            assert set(chosen.tolist()) <= {0, 1, 2}


def nucleus_by_definition(probabilities, top_p):
    """The nucleus as its definition reads: the most likely tokens, one at a time, until
    their mass reaches top_p; then every token tied with the last one taken."""
    order = sorted(range(len(probabilities)), key=lambda i: -probabilities[i])
    kept, mass = [], 0.0
    for i in order:
        kept.append(i)
        mass += probabilities[i]
        if mass >= top_p * (1 - 1e-12):
            break
    last = probabilities[kept[-1]]
    return sorted(i for i in order if probabilities[i] >= last)


def test_top_p_samples_the_softmax_of_the_nucleus():
    logits = np.array([[2.0, 1.0, 0.5, -1.0, 0.0]])
    probabilities = np.exp(logits[0]) / np.exp(logits[0]).sum()  # .52 .19 .12 .04 .07
    rng = np.random.default_rng(8)
    draws = 40_000
    rows = np.repeat(logits, draws, axis=0)
    for top_p in (0.5, 0.6, 0.75, 0.9):
        nucleus = nucleus_by_definition(probabilities.tolist(), top_p)
        chosen = sf.next_token(rows, temperature=1.0, top_p=top_p, rng=rng)
        assert set(chosen.tolist()) == set(nucleus)
        expected = np.zeros(5)
        expected[nucleus] = probabilities[nucleus] / probabilities[nucleus].sum()
        frequencies = np.bincount(chosen, minlength=5) / draws
        assert np.all(np.abs(frequencies - expected) <= 4 * np.sqrt(expected / draws) + 1e-12)


def test_top_p_keeps_ties_with_the_last_token_and_one_is_plain_sampling():
    logits = np.log(np.array([[0.4, 0.2, 0.2, 0.2]]))
    rng = np.random.default_rng(9)
    rows = np.repeat(logits, 2000, axis=0)
    # 0.5 is reached at the second token; the other two tied with it join the nucleus
    assert set(sf.next_token(rows, temperature=1.0, top_p=0.5, rng=rng).tolist()) == {0, 1,
                                                                                      2, 3}
    plain = sf.next_token(rows, temperature=0.7, rng=np.random.default_rng(10))
    whole = sf.next_token(rows, temperature=0.7, top_p=1.0, rng=np.random.default_rng(10))
    np.testing.assert_array_equal(plain, whole)
    tiny = sf.next_token(np.repeat([[0.0, 3.0, 1.0]], 50, axis=0), temperature=1.0,
                         top_p=1e-9, rng=rng)
    assert set(tiny.tolist()) == {1}  # the nucleus of a tiny mass is the most likely token


def test_top_p_must_lie_in_the_unit_interval():
    model = make_model("rotary")
    prompt = np.zeros((1, 2), np.int64)
    for top_p in (0.0, 1.5):
        with pytest.raises(ValueError, match=r"top_p must lie in \(0, 1\]"):
            model.generate(prompt, 2, temperature=1.0, top_p=top_p, rng=np.random.default_rng())


def test_sampling_draws_one_uniform_per_sequence_and_step_from_rng_only():
    model = make_model("sinusoidal")
    prompt = np.random.default_rng(6).integers(0, 11, (3, 2))
    rng = np.random.default_rng(7)
    model.generate(prompt, 5, temperature=0.8, rng=rng)
    reference = np.random.default_rng(7)
    for _ in range(5):
        reference.random((3, 1))
    assert rng.random() == reference.random()  # the same point of the stream


def test_zero_new_tokens_return_the_prompt():
    model = make_model("rotary")
    prompt = np.array([[1, 2, 3]], dtype=np.int32)
    out, logits = model.generate(prompt, 0, return_logits=True)
    assert out.dtype == np.int64 and out.tolist() == [[1, 2, 3]] and logits.shape == (1, 0, 11)
    assert sf.generate(model, prompt, 0, use_cache=False).tolist() == [[1, 2, 3]]


def test_the_cache_is_for_inference_and_fits_its_positions():
    model = make_model("rotary")
    with pytest.raises(RuntimeError, match="inside inference"):
        model.forward([[1, 2]], cache=model.new_cache())
    with model.inference():
        cache = model.new_cache()
        model.forward(np.zeros((1, 60), int), cache=cache)
        with pytest.raises(ValueError, match="60 \\+ 5 tokens exceed the model's "
                                             "max_positions=64"):
            model.forward(np.zeros((1, 5), int), cache=cache)
        with pytest.raises(TypeError, match="cache must be a KVCache of 2 layers"):
            model.forward([[1]], cache=sf.KVCache(3, 64))
        with pytest.raises(ValueError, match="do not fit a cache"):
            model.forward(np.zeros((2, 1), int), cache=cache)  # another batch size
