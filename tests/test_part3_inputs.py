"""Bad input to the decoder, the encoder–decoder, decoding and the translation task.

The table has the form of ``BAD_INPUTS`` in ``test_house.py``: what is tried, the call, the
error and (a regular expression of) its message, which names the argument and its value.
"""

from __future__ import annotations

import numpy as np
import pytest

import scratchformer as sf
from scratchformer import translation as tl


def _model(**changes):
    dims = dict(vocab_size=31, target_vocab_size=34, d_model=8, n_heads=2, d_ff=8,
                n_layers=1)
    return sf.EncoderDecoderModel(**(dims | changes))


def _block_forward(x, memory, **masks):
    return lambda: sf.DecoderBlock(8, 2, 16).forward(x, memory, **masks)


def _greedy(source=((3, 4, 0),), **changes):
    kwargs = dict(bos_id=1, eos_id=2, max_length=6) | changes
    return lambda: sf.greedy_decode(_model(), np.array(source), **kwargs)


def _beam(**changes):
    kwargs = dict(bos_id=1, eos_id=2, max_length=6, beam_width=3) | changes
    return lambda: sf.beam_search(_model(), np.array([[3, 4, 0]]), **kwargs)


X, MEMORY = np.zeros((2, 3, 8)), np.zeros((2, 4, 8))

BAD_INPUTS = [
    # (what, call, error, message)
    ("DecoderBlock: a float d_ff", lambda: sf.DecoderBlock(8, 2, 16.0), TypeError,
     "d_ff must be a positive integer, got 16.0"),
    ("DecoderBlock: unknown norm", lambda: sf.DecoderBlock(8, 2, 16, norm="mid"),
     ValueError, "norm must be 'post' or 'pre', got 'mid'"),
    ("DecoderBlock: heads do not divide", lambda: sf.DecoderBlock(10, 3, 16), ValueError,
     "d_model=10 is not divisible by n_heads=3"),
    ("DecoderBlock.forward: mask of the wrong shape", _block_forward(
        X, MEMORY, mask=np.ones((3, 4), bool)), ValueError,
     r"mask of shape \(3, 4\) does not broadcast to \(\.\.\., h, n_t, n_t\) = "
     r"\(2, 2, 3, 3\)"),
    ("DecoderBlock.forward: memory_mask of the wrong shape", _block_forward(
        X, MEMORY, memory_mask=np.ones((2, 1, 1, 3), bool)), ValueError,
     r"memory_mask of shape \(2, 1, 1, 3\) does not broadcast to \(\.\.\., h, n_t, n_s\)"),
    ("DecoderBlock.forward: memory of another width", _block_forward(
        X, np.zeros((2, 4, 6))), ValueError,
     r"memory must have shape \(\.\.\., n_s, 8\), got shape \(2, 4, 6\)"),
    ("DecoderBlock.forward: batches that do not broadcast", _block_forward(
        X, np.zeros((3, 4, 8))), ValueError,
     r"leading \(batch\) axes of x \(2, 3, 8\) and memory \(3, 4, 8\) do not broadcast"),
    ("DecoderBlock.forward: NaN in memory", _block_forward(
        X, np.full((2, 4, 8), np.nan)), ValueError, "memory must be finite"),
    ("EncoderDecoderModel: no target vocabulary", lambda: sf.EncoderDecoderModel(
        vocab_size=5, d_model=8, n_heads=2, d_ff=8, n_layers=1), TypeError,
     "target_vocab_size"),
    ("EncoderDecoderModel: pad_id outside a vocabulary", lambda: _model(pad_id=31),
     ValueError, "pad_id=31 must be an id of both vocabularies"),
    ("EncoderDecoderModel: odd width", lambda: _model(d_model=9, n_heads=3), ValueError,
     "d_model must be even"),
    ("EncoderDecoderModel.forward: a word outside the vocabulary", lambda: _model().forward(
        [[3, 31]], [[1, 4]]), ValueError, r"source must lie in \[0, 31\)"),
    ("EncoderDecoderModel.forward: an empty source", lambda: _model().forward(
        np.zeros((1, 0), int), [[1]]), ValueError,
     "source must hold at least one token per sequence"),
    ("EncoderDecoderModel.forward: an empty target", lambda: _model().forward(
        [[3]], np.zeros((1, 0), int)), ValueError,
     "target must hold at least one token per sequence"),
    ("EncoderDecoderModel.forward: batches differ", lambda: _model().forward(
        [[3], [4]], [[1]]), ValueError, "must have the same leading"),
    ("sequence_cross_entropy: smoothing above 1", lambda: sf.sequence_cross_entropy(
        np.zeros((2, 4)), np.array([1, 2]), label_smoothing=1.5), ValueError,
     r"label_smoothing must lie in \[0, 1\], got 1.5"),
    ("sequence_cross_entropy: float targets", lambda: sf.sequence_cross_entropy(
        np.zeros((2, 4)), np.array([1.0, 2.0])), TypeError,
     "targets must be integer class ids"),
    ("sequence_cross_entropy: padding only", lambda: sf.sequence_cross_entropy(
        np.zeros((2, 4)), np.array([0, 0]), pad_id=0), ValueError, "no token is left"),
    ("greedy_decode: maximum length 0", _greedy(max_length=0), ValueError,
     "max_length must be a positive integer, got 0"),
    ("greedy_decode: maximum length a float", _greedy(max_length=6.0), TypeError,
     "max_length must be a positive integer, got 6.0"),
    ("greedy_decode: bos_id outside the vocabulary", _greedy(bos_id=34), ValueError,
     r"bos_id must lie in \[0, 34\)"),
    ("greedy_decode: bos_id equal to eos_id", _greedy(eos_id=1), ValueError,
     "bos_id and eos_id must differ"),
    ("greedy_decode: an empty source", _greedy(source=np.zeros((1, 0), int)), ValueError,
     "source must hold at least one token"),
    ("greedy_decode: a source of three axes", _greedy(source=np.ones((1, 2, 3), int)),
     ValueError, r"source must have shape \(n_s,\) or \(batch, n_s\)"),
    ("beam_search: beam width 0", _beam(beam_width=0), ValueError,
     "beam_width must be a positive integer, got 0"),
    ("beam_search: maximum length 0", _beam(max_length=0), ValueError,
     "max_length must be a positive integer, got 0"),
    ("beam_search: negative alpha", _beam(alpha=-0.5), ValueError,
     "alpha must be finite and non-negative"),
    ("translation: a number above the range", lambda: tl.english_words(1000), ValueError,
     r"number must lie in \[0, 999\], got 1000"),
    ("translation: a negative number", lambda: sf.TranslationTask().batch([-1]), ValueError,
     r"number must lie in \[0, 999\], got -1"),
    ("translation: a float number", lambda: tl.german_words(4.5), TypeError,
     "number must be an integer, got 4.5"),
    ("translation: a word outside the vocabulary", lambda: tl.encode_source(
        ["forty", "fiv"]), ValueError, "'fiv' is not in the source vocabulary"),
    ("translation: a special token as a word", lambda: tl.encode_source(["<pad>"]),
     ValueError, "'<pad>' is not in the source vocabulary"),
    ("translation: an empty source", lambda: tl.encode_source([]), ValueError,
     "an empty source sequence"),
    ("translation: too many pieces", lambda: tl.encode_target(["eins"] * 6), ValueError,
     "6 target tokens do not fit in length 5"),
    ("translation: no German number word", lambda: sf.split_german("fünfundvierzigx"),
     ValueError, "no piece starts 'x'"),
    ("translation: an empty word", lambda: sf.split_german(""), ValueError,
     "word must be a non-empty string"),
    ("TranslationTask: smoothing of 1", lambda: sf.TranslationTask(label_smoothing=1.0),
     ValueError, r"label_smoothing must lie in \[0, 1\), got 1.0"),
]


@pytest.mark.parametrize("call, error, message", [row[1:] for row in BAD_INPUTS],
                         ids=[row[0] for row in BAD_INPUTS])
def test_bad_input_gets_a_clear_error(call, error, message):
    with pytest.raises(error, match=message):
        call()
