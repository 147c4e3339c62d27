"""chrF, a character n-gram F-score of a translation against its reference.

Exact match gives a translation all or nothing; chrF (Popović, 2015) gives partial credit for
the characters it shares with the reference. The chapter "Decoding the trained translator"
(``book/decoding_translator.md``) uses it beside exact match. The settings are sacreBLEU's
defaults (Post, 2018), ``CHRF()``: character n-grams of orders 1 to 6, whitespace removed,
:math:`\\beta = 2`, and the precision and recall averaged over the orders that both strings
have.
"""

from __future__ import annotations

import math
from collections import Counter

from ._validation import positive_float, positive_int

__all__ = ["chrf", "corpus_chrf"]

CHAR_ORDER = 6  # n-grams of 1 to 6 characters
BETA = 2  # recall weighs beta^2 = 4 times as much as precision


def _ngrams(text: str, order: int) -> list[Counter]:
    """The character n-grams of ``text`` without its whitespace, one counter per n."""
    text = "".join(text.split())
    return [Counter(text[i:i + n] for i in range(len(text) - n + 1))
            for n in range(1, order + 1)]


def _statistics(hypothesis: str, reference: str, order: int) -> list[tuple[int, int, int]]:
    """For every n: n-grams in the hypothesis, in the reference, and matched (clipped)."""
    statistics = []
    for hyp, ref in zip(_ngrams(hypothesis, order), _ngrams(reference, order)):
        matched = sum(min(count, ref[gram]) for gram, count in hyp.items())
        # A reference too short for this n contributes no hypothesis n-grams either, so a
        # corpus's precision at n counts only the pairs whose reference has n-grams.
        statistics.append((hyp.total() if ref else 0, ref.total(), matched))
    return statistics


def _f_score(statistics, beta: float) -> float:
    """F_beta of the precision and recall averaged over the orders both strings have."""
    orders = [(matched / n_hyp, matched / n_ref)
              for n_hyp, n_ref, matched in statistics if n_hyp > 0 and n_ref > 0]
    if not orders:  # a string shorter than one character, whitespace aside
        return 0.0
    precision = sum(p for p, _ in orders) / len(orders)
    recall = sum(r for _, r in orders) / len(orders)
    if precision + recall == 0:
        return 0.0
    return (1 + beta**2) * precision * recall / (beta**2 * precision + recall)


def _text(value, name: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, got {type(value).__name__}")
    return value


def _beta(beta) -> float:
    """``beta`` as a float if it is a finite real number (NumPy's too) > 0 whose square is
    finite: the score weighs recall by ``beta**2``."""
    number = positive_float(beta, "beta")
    if not math.isfinite(number * number):
        raise ValueError(f"beta must be at most about 1e154, so that its square is finite, "
                         f"got {beta!r}")
    return number


def chrf(hypothesis, reference, *, order=CHAR_ORDER, beta=BETA):
    r"""chrF of one hypothesis against one reference, between 0 and 1.

    Parameters
    ----------
    hypothesis, reference : str
        Whitespace is removed before the n-grams are counted.
    order : int, default 6
        The longest character n-gram.
    beta : float, default 2
        Recall counts ``beta**2`` times as much as precision.

    Returns
    -------
    score : float
        0 when no n-gram matches or when either string is empty (whitespace aside); 1 when
        the two are equal but for whitespace. sacreBLEU reports 100 times this.

    Notes
    -----
    For every n-gram order :math:`n` that both strings have, the precision :math:`P_n` is the
    share of the hypothesis's character n-grams found in the reference (each counted at most
    as often as the reference has it) and the recall :math:`R_n` the share of the
    reference's found in the hypothesis. With :math:`P` and :math:`R` their means over those
    orders,

    .. math:: \operatorname{chrF}_\beta = \frac{(1 + \beta^2)\, P R}{\beta^2 P + R}.

    Popović (2015); the settings of sacreBLEU's ``CHRF()`` (Post, 2018). Used in the chapter
    :doc:`Decoding </book/decoding>`.
    """
    hypothesis, reference = _text(hypothesis, "hypothesis"), _text(reference, "reference")
    order = positive_int(order, "order")
    return _f_score(_statistics(hypothesis, reference, order), _beta(beta))


def corpus_chrf(hypotheses, references, *, order=CHAR_ORDER, beta=BETA):
    """chrF of a corpus: the n-gram counts of every pair added up, then one score.

    Not the mean of the pairs' :func:`chrf`: a long sentence weighs more than a short one.

    Parameters
    ----------
    hypotheses, references : sequence of str
        One reference for each hypothesis, in the same order; at least one pair.
    order, beta
        As for :func:`chrf`.

    Returns
    -------
    score : float
        Between 0 and 1 (sacreBLEU's ``corpus_score`` reports 100 times this).
    """
    if isinstance(hypotheses, str) or isinstance(references, str):
        raise TypeError("hypotheses and references must be sequences of str, not one str")
    hypotheses, references = list(hypotheses), list(references)
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    if not hypotheses:
        raise ValueError("corpus_chrf needs at least one hypothesis")
    order = positive_int(order, "order")
    totals = [[0, 0, 0] for _ in range(order)]
    for i, (hypothesis, reference) in enumerate(zip(hypotheses, references)):
        pair = _statistics(_text(hypothesis, f"hypotheses[{i}]"),
                           _text(reference, f"references[{i}]"), order)
        for total, counts in zip(totals, pair):
            for k in range(3):
                total[k] += counts[k]
    return _f_score(totals, _beta(beta))
