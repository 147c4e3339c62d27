"""chrF (scratchformer.metrics): cases worked out by hand, edge cases, errors, and sacreBLEU.

Each hand case counts the character n-grams in the test's comments; the expected score is the
fraction those counts give, not a number read off the code.
"""

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import scratchformer as sf
from conftest import _unavailable, examples


def f_beta(precision, recall, beta=2):
    return (1 + beta**2) * precision * recall / (beta**2 * precision + recall)


def test_a_prefix_of_the_reference():
    # "ab" against "abc". n = 1: a, b found among a, b, c: P = 1, R = 2/3.
    # n = 2: "ab" found among "ab", "bc": P = 1, R = 1/2. n >= 3: "ab" has none, not counted.
    precision, recall = Fraction(1), (Fraction(2, 3) + Fraction(1, 2)) / 2
    assert f_beta(precision, recall) == Fraction(7, 11)
    assert sf.chrf("ab", "abc") == pytest.approx(7 / 11, rel=1e-15)
    assert sf.chrf("ab", "abc", beta=1) == pytest.approx(float(f_beta(1, recall, 1)),
                                                         rel=1e-15)


def test_a_repeated_character_is_counted_once_for_each_in_the_reference():
    # "aaa" against "a": n = 1: three a's, one in the reference: P = 1/3, R = 1.
    # n = 2: the reference has no 2-gram, so the order is not counted.
    assert sf.chrf("aaa", "a") == pytest.approx(float(f_beta(Fraction(1, 3), 1)), rel=1e-15)
    assert float(f_beta(Fraction(1, 3), 1)) == pytest.approx(5 / 7, rel=1e-15)


def test_recall_weighs_more_than_precision():
    # Swapping the two strings swaps P and R: the longer hypothesis ("abc") keeps all of
    # the reference ("ab"), R = 1, and scores higher than the shorter one with P = 1.
    assert sf.chrf("abc", "ab") > sf.chrf("ab", "abc")
    assert sf.chrf("ab", "abc", beta=1) == pytest.approx(sf.chrf("abc", "ab", beta=1))


def test_a_corpus_adds_the_counts_not_the_scores():
    # ("ab", "abc") and ("aaa", "a"). n = 1: hyp 2 + 3, ref 3 + 1, matched 2 + 1:
    # P = 3/5, R = 3/4. n = 2: (1, 2, 1) and, "a" having no 2-gram, (0, 0, 0): P = 1, R = 1/2.
    # n = 3: ("ab" has none) (0, 1, 0): not counted. P = 4/5, R = 5/8: F = 100/153.
    precision = (Fraction(3, 5) + 1) / 2
    recall = (Fraction(3, 4) + Fraction(1, 2)) / 2
    assert f_beta(precision, recall) == Fraction(100, 153)
    score = sf.corpus_chrf(["ab", "aaa"], ["abc", "a"])
    assert score == pytest.approx(100 / 153, rel=1e-15)
    mean = (sf.chrf("ab", "abc") + sf.chrf("aaa", "a")) / 2
    assert abs(score - mean) > 0.01


def test_whitespace_does_not_count():
    assert sf.chrf("drei und zwanzig", "dreiundzwanzig") == 1.0
    assert sf.chrf(" a\tb\n", "ab") == 1.0


@pytest.mark.parametrize(("hypothesis", "reference"), [
    ("", "abc"), ("abc", ""), ("", ""), ("   ", "abc"), ("abc", "xyz")])
def test_nothing_shared_scores_zero(hypothesis, reference):
    assert sf.chrf(hypothesis, reference) == 0.0
    assert sf.corpus_chrf([hypothesis], [reference]) == 0.0


@given(st.text(alphabet="abcä ", max_size=12), st.text(alphabet="abcä ", max_size=12))
@examples(200)
def test_between_zero_and_one_and_one_when_equal(hypothesis, reference):
    score = sf.chrf(hypothesis, reference)
    assert 0.0 <= score <= 1.0
    hyp, ref = "".join(hypothesis.split()), "".join(reference.split())
    if hyp == ref != "":
        assert score == 1.0
    if sorted(hyp) != sorted(ref):  # the characters differ: P_1 or R_1 is below 1
        assert score < 1.0


@pytest.mark.parametrize(("call", "error", "match"), [
    (lambda: sf.chrf(None, "a"), TypeError, "hypothesis must be a str"),
    (lambda: sf.chrf("a", b"a"), TypeError, "reference must be a str"),
    (lambda: sf.chrf("a", "a", beta=0), ValueError, "beta must be finite and positive"),
    (lambda: sf.chrf("a", "a", beta=float("nan")), ValueError, "beta must be finite and positive"),
    (lambda: sf.chrf("a", "a", order=0), ValueError, "order"),
    (lambda: sf.corpus_chrf("ab", ["ab"]), TypeError, "not one str"),
    (lambda: sf.corpus_chrf(["a", "b"], ["a"]), ValueError, "2 hypotheses but 1"),
    (lambda: sf.corpus_chrf([], []), ValueError, "at least one"),
    (lambda: sf.corpus_chrf(["a", 3], ["a", "b"]), TypeError, r"hypotheses\[1\]"),
])
def test_bad_input_is_named(call, error, match):
    with pytest.raises(error, match=match):
        call()


@pytest.fixture(scope="module")
def sacrebleu_chrf():
    try:
        from sacrebleu.metrics import CHRF
    except ImportError:
        _unavailable("sacrebleu is not installed (pip install sacrebleu==2.6.0), so there is "
                     "no reference for chrF", "CI must compare chrF with sacreBLEU's")
    return CHRF()  # the defaults: 6 character orders, no word orders, beta 2, no whitespace


TEXT = st.text(alphabet="abcdeäß -", max_size=20)


@given(TEXT, TEXT)
@examples(300)
def test_sentence_chrf_equals_sacrebleu(sacrebleu_chrf, hypothesis, reference):
    expected = sacrebleu_chrf.sentence_score(hypothesis, [reference]).score
    assert 100 * sf.chrf(hypothesis, reference) == pytest.approx(expected, rel=1e-12,
                                                                  abs=1e-12)


@given(st.lists(st.tuples(TEXT, TEXT), min_size=1, max_size=8))
@examples(100)
def test_corpus_chrf_equals_sacrebleu(sacrebleu_chrf, pairs):
    hypotheses, references = (list(side) for side in zip(*pairs))
    expected = sacrebleu_chrf.corpus_score(hypotheses, [references]).score
    assert 100 * sf.corpus_chrf(hypotheses, references) == pytest.approx(
        expected, rel=1e-12, abs=1e-12)


def test_german_numbers_against_sacrebleu(sacrebleu_chrf):
    # The kind of strings the book scores: one wrong piece of a German number.
    hypothesis, reference = "dreihundertvierundzwanzig", "dreihundertfünfundzwanzig"
    expected = sacrebleu_chrf.sentence_score(hypothesis, [reference]).score
    assert 100 * sf.chrf(hypothesis, reference) == pytest.approx(expected, rel=1e-12)
    assert 0.5 < sf.chrf(hypothesis, reference) < 1.0


def test_numpy_numbers_are_a_beta():
    """A NumPy scalar is a number like any other (it was refused as 'not a positive number')."""
    score = sf.chrf("abc", "abd", beta=2)
    assert sf.chrf("abc", "abd", beta=np.float32(2)) == score
    assert sf.chrf("abc", "abd", beta=np.int64(2)) == score
    assert sf.corpus_chrf(["abc"], ["abd"], beta=np.float64(2)) == sf.corpus_chrf(["abc"],
                                                                                   ["abd"])
