"""Greedy decoding and beam search, checked against what they promise.

- Greedy: each token is the argmax of the teacher-forced model on the output so far (an
  independent forward pass), EOS ends a row (pads after it), a batch decodes as its rows do.
- Beam search: width 1 is greedy; a beam wide enough to keep every prefix finds the best
  score over all sequences, enumerated by brute force; the returned score is the teacher-forced
  log-probability divided by ``|y|**alpha``.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import scratchformer as sf

BOS, EOS = 1, 2


def _model(seed, target_vocab_size=7, eos_bias=0.0, scale=3.0, norm="post"):
    """An untrained model whose outputs depend on the source (a head of large weights), EOS
    made likelier or rarer by ``eos_bias``: rows end at different lengths, some not at all."""
    rng = np.random.default_rng(seed)
    model = sf.EncoderDecoderModel(vocab_size=6, target_vocab_size=target_vocab_size,
                                   d_model=8, n_heads=2, d_ff=16, n_layers=2, norm=norm,
                                   rng=rng)
    model.head.params["w"][...] = rng.normal(0.0, scale, model.head.params["w"].shape)
    model.head.params["b"][EOS] += eos_bias
    return model


def _sources(seed, batch=8, n=4):
    rng = np.random.default_rng(seed + 100)
    tokens = rng.integers(1, 6, (batch, n))
    tokens[np.arange(n) >= rng.integers(1, n + 1, (batch, 1))] = 0  # padded
    return tokens


def _log_probability(model, source, tokens):
    """log P(tokens | source), teacher-forced, tokens without BOS (one sequence)."""
    logits = model.forward(source[None], np.array([[BOS, *tokens[:-1]]]))[0]
    shifted = logits - logits.max(-1, keepdims=True)
    log_p = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    return float(log_p[np.arange(len(tokens)), tokens].sum())


def _trim(row):
    """A decoded row up to and including its EOS (pads dropped)."""
    row = list(row)
    return row[:row.index(EOS) + 1] if EOS in row else row


@pytest.mark.parametrize("seed", range(4))
def test_greedy_takes_the_argmax_of_the_teacher_forced_model(seed):
    model, source = _model(seed), _sources(seed)
    out = sf.greedy_decode(model, source, bos_id=BOS, eos_id=EOS, max_length=6)
    assert out.shape == (len(source), 6)  # some row of these runs to the maximum length
    for row, src in zip(out, source):
        tokens = _trim(row)
        assert all(t == 0 for t in row[len(tokens):])  # pads after EOS
        assert EOS in tokens or len(tokens) == 6  # EOS or the maximum length
        assert EOS not in tokens[:-1]
        logits = model.forward(src[None], np.array([[BOS, *tokens[:-1]]]))[0]
        np.testing.assert_array_equal(logits.argmax(-1), tokens)


def test_greedy_stops_once_every_row_has_ended():
    model = _model(0, eos_bias=100.0)  # EOS always first
    out = sf.greedy_decode(model, _sources(0), bos_id=BOS, eos_id=EOS, max_length=6)
    assert out.shape == (8, 1) and (out == EOS).all()


def test_a_batch_decodes_as_its_rows_do():
    model, source = _model(5), _sources(5)
    batch = sf.greedy_decode(model, source, bos_id=BOS, eos_id=EOS, max_length=6)
    for row, src in zip(batch, source):
        alone = sf.greedy_decode(model, src, bos_id=BOS, eos_id=EOS, max_length=6)
        assert _trim(alone) == _trim(row)


@pytest.mark.parametrize("seed", range(3))
def test_a_forced_prefix_is_kept_and_decoding_goes_on_from_it(seed):
    model, source = _model(seed), _sources(seed)
    kwargs = dict(bos_id=BOS, eos_id=EOS, max_length=6)
    free = sf.greedy_decode(model, source, **kwargs)
    # its own first token as the prefix: nothing changes
    np.testing.assert_array_equal(sf.greedy_decode(model, source, prefix=free[:, :1],
                                                   **kwargs), free)
    # another first token (never EOS): kept, and every later token is the argmax of the
    # teacher-forced model on the tokens before it, the forced one included
    forced = (free[:, :1] + 1) % 7
    forced[forced == EOS] = 3
    out = sf.greedy_decode(model, source, prefix=forced, **kwargs)
    np.testing.assert_array_equal(out[:, :1], forced)
    for row, src in zip(out, source):
        tokens = _trim(row)
        logits = model.forward(src[None], np.array([[BOS, *tokens[:-1]]]))[0]
        np.testing.assert_array_equal(logits.argmax(-1)[1:], tokens[1:])
    # a whole row, or one that has ended, is returned as it is
    ended = np.array([EOS, 0, 0, 0, 0, 0])
    np.testing.assert_array_equal(
        sf.greedy_decode(model, source[0], prefix=ended[:1], **kwargs), [EOS])
    one = sf.greedy_decode(model, source[0], prefix=free[0], **kwargs)
    np.testing.assert_array_equal(one, free[0])


def test_a_bad_prefix_is_refused():
    model, source = _model(0), _sources(0)
    kwargs = dict(bos_id=BOS, eos_id=EOS, max_length=3)
    with pytest.raises(ValueError, match="prefix has 2 rows for 8 sources"):
        sf.greedy_decode(model, source, prefix=np.ones((2, 1), int), **kwargs)
    with pytest.raises(ValueError, match="more than max_length 3"):
        sf.greedy_decode(model, source, prefix=np.ones((8, 4), int), **kwargs)
    with pytest.raises(ValueError, match="prefix must have shape"):
        sf.greedy_decode(model, source, prefix=np.ones(2, int), **kwargs)
    with pytest.raises(ValueError, match="prefix"):
        sf.greedy_decode(model, source, prefix=np.full((8, 1), 7), **kwargs)  # not a token


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("alpha", [0.0, 1.0, 2.5])
def test_beam_width_one_is_greedy(seed, alpha):
    model, source = _model(seed, norm="pre" if seed % 2 else "post"), _sources(seed)
    greedy = sf.greedy_decode(model, source, bos_id=BOS, eos_id=EOS, max_length=6)
    beam, _ = sf.beam_search(model, source, bos_id=BOS, eos_id=EOS, max_length=6,
                             beam_width=1, alpha=alpha)
    assert [_trim(r) for r in beam] == [_trim(r) for r in greedy]


def _brute_force(model, source, max_length, alpha, vocab):
    """The best score over every sequence: EOS-terminated up to max_length, or max_length
    tokens without EOS (where the search has to stop)."""
    others = [t for t in range(vocab) if t != EOS]
    candidates = [(*prefix, EOS) for n in range(max_length)
                  for prefix in itertools.product(others, repeat=n)]
    candidates += list(itertools.product(others, repeat=max_length))
    scored = [(_log_probability(model, source, np.array(c)) / len(c)**alpha, c)
              for c in candidates]
    return max(scored)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_a_wide_beam_finds_the_best_sequence_of_all(seed, alpha):
    model = _model(seed, target_vocab_size=5, eos_bias=-1.0, scale=1.5)
    source = _sources(seed, batch=4)
    tokens, scores = sf.beam_search(model, source, bos_id=BOS, eos_id=EOS, max_length=3,
                                    beam_width=64, alpha=alpha)  # keeps every prefix
    for row, score, src in zip(tokens, scores, source):
        best_score, best = _brute_force(model, src, 3, alpha, 5)
        assert tuple(_trim(row)) == best
        assert score == pytest.approx(best_score, abs=1e-12)


def test_the_wide_beam_of_the_test_above_does_beat_greedy_somewhere():
    """Otherwise the exhaustive test would not tell a beam search from greedy decoding."""
    model = _model(1, target_vocab_size=5, eos_bias=-1.0, scale=1.5)
    source = _sources(1, batch=4)
    kwargs = {"bos_id": BOS, "eos_id": EOS, "max_length": 3, "alpha": 0.0}
    _, wide = sf.beam_search(model, source, beam_width=64, **kwargs)
    _, narrow = sf.beam_search(model, source, beam_width=1, **kwargs)
    assert (wide >= narrow - 1e-12).all() and (wide > narrow + 1e-6).any()


@pytest.mark.parametrize("width", [2, 3])
def test_the_beams_score_is_its_normalised_log_probability(width):
    model, source = _model(7), _sources(7, batch=4)
    tokens, scores = sf.beam_search(model, source, bos_id=BOS, eos_id=EOS, max_length=6,
                                    beam_width=width, alpha=0.7)
    for row, score, src in zip(tokens, scores, source):
        hypothesis = np.array(_trim(row))
        expected = _log_probability(model, src, hypothesis) / len(hypothesis)**0.7
        assert score == pytest.approx(expected, abs=1e-12)


def test_sequence_log_probability_is_the_beams_unnormalised_score():
    model, source = _model(9), _sources(9, batch=4)
    tokens, scores = sf.beam_search(model, source, bos_id=BOS, eos_id=EOS, max_length=6,
                                    beam_width=3, alpha=0.0)
    log_p = sf.sequence_log_probability(model, source, tokens, bos_id=BOS)
    np.testing.assert_allclose(log_p, scores, rtol=0, atol=1e-12)
    for row, value, src in zip(tokens, log_p, source):
        assert value == pytest.approx(_log_probability(model, src, np.array(_trim(row))),
                                      abs=1e-12)
    with pytest.raises(ValueError, match="one batch"):
        sf.sequence_log_probability(model, source, tokens[:2], bos_id=BOS)


def test_decoding_saves_nothing_for_backward():
    model = _model(8)
    sf.greedy_decode(model, _sources(8), bos_id=BOS, eos_id=EOS, max_length=3)
    assert all(layer._saved is None for _, layer in model._tree())


def test_beam_search_of_no_source_returns_no_row_as_greedy_does():
    model, sources = _model(0), _sources(0)[:0]  # shape (0, n): a batch of no source
    tokens, scores = sf.beam_search(model, sources, bos_id=1, eos_id=2, max_length=3,
                                    beam_width=2)
    greedy = sf.greedy_decode(model, sources, bos_id=1, eos_id=2, max_length=3)
    assert tokens.shape == greedy.shape == (0, 0) and tokens.dtype == np.int64
    assert scores.shape == (0,) and scores.dtype == np.float64
