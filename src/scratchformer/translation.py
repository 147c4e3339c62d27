"""The translation task: English number words into German number words, 0 to 999.

Both languages come from ``num2words`` (pinned in ``requirements.txt``): ``"forty-five"`` and
``"fünfundvierzig"``. German writes its numbers as one compound and puts the units before the
tens, so the model has to reorder, not just look words up. The English side is cut into its
words (about 30 of them: spaces and hyphens separate); the German compounds are cut into their
morphemes (31 pieces) by :func:`split_german`, a longest-match splitter whose pieces, joined,
give back ``num2words``' string exactly, for every number (the tests check all 1000):
``"fünfundvierzig"`` is ``["fünf", "und", "vierzig"]``, at most five pieces.

:class:`TranslationTask` holds out numbers for validation and test that training never sees,
trains with teacher forcing and scores by exact match of greedy translations. ``num2words`` is
imported when the words are first needed, so ``import scratchformer`` stays NumPy only.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from ._validation import excluded, non_negative_float, positive_int
from .decoding import greedy_decode
from .seq2seq import sequence_cross_entropy
from .tasks import Split, Task

__all__ = ["NUMBERS", "ENGLISH_WORDS", "GERMAN_PIECES", "PAD", "BOS", "EOS",
           "english_words", "german_words", "split_german", "source_vocabulary",
           "target_vocabulary", "encode_source", "encode_target", "decode_target",
           "TranslationTask"]

#: The numbers translated: 0 to 999.
NUMBERS = range(1000)

#: The special tokens. The source uses PAD only; the target all three, with the same ids.
PAD, BOS, EOS = "<pad>", "<bos>", "<eos>"

_UNITS = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
_TEENS = ("ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen",
          "seventeen", "eighteen", "nineteen")
_TENS = ("twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")

#: The 30 English words of the numbers 0 to 999.
ENGLISH_WORDS = ("zero", *_UNITS, *_TEENS, *_TENS, "hundred", "and")

#: The 31 German morphemes: units (with "ein", the form before "hundert" and "und"), "zehn"
#: to "neunzehn", the tens, "und" and "hundert".
GERMAN_PIECES = ("null", "eins", "ein", "zwei", "drei", "vier", "fünf", "sechs", "sieben",
                 "acht", "neun", "zehn", "elf", "zwölf", "dreizehn", "vierzehn", "fünfzehn",
                 "sechzehn", "siebzehn", "achtzehn", "neunzehn", "zwanzig", "dreißig",
                 "vierzig", "fünfzig", "sechzig", "siebzig", "achtzig", "neunzig", "und",
                 "hundert")

# Longest first: "dreizehn" before "drei", "sechzehn" before "sechs" would not match anyway.
_BY_LENGTH = sorted(GERMAN_PIECES, key=len, reverse=True)


def _number(n):
    """``n`` as an int in [0, 999], or a clear error."""
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"number must be an integer, got {n!r} of type {type(n).__name__}")
    if not 0 <= n <= 999:
        raise ValueError(f"number must lie in [0, 999], got {n}")
    return int(n)


@functools.cache
def _num2words():
    try:
        from num2words import num2words
    except ImportError:  # pragma: no cover - the pins install it
        raise ImportError("the translation task needs num2words (pip install "
                          "num2words==0.5.14, pinned in requirements.txt)") from None
    return num2words


def english_words(n):
    """The English words of ``n`` (``num2words``, split at spaces and hyphens).

    ``english_words(145)`` is ``["one", "hundred", "and", "forty", "five"]``.
    """
    return _num2words()(_number(n), lang="en").replace("-", " ").split()


def german_words(n):
    """``num2words``' German for ``n``, one compound: ``german_words(45) == "fünfundvierzig"``."""
    return _num2words()(_number(n), lang="de")


def split_german(word):
    """Cut a German number word into the morphemes of ``GERMAN_PIECES``.

    Longest match first, from the left: ``"einhunderteins"`` is ``["ein", "hundert", "eins"]``.
    ``"".join(split_german(w)) == w`` for every word it accepts.

    Raises
    ------
    ValueError
        If some part of ``word`` is no piece (naming the part that is left).
    """
    if not isinstance(word, str) or not word:
        raise ValueError(f"word must be a non-empty string, got {word!r}")
    pieces, rest = [], word
    while rest:
        piece = next((p for p in _BY_LENGTH if rest.startswith(p)), None)
        if piece is None:
            raise ValueError(f"{word!r} is no German number word: no piece starts {rest!r}")
        pieces.append(piece)
        rest = rest[len(piece):]
    return pieces


def source_vocabulary():
    """Token id of each source word: ``PAD`` is 0, then :data:`ENGLISH_WORDS`."""
    return {word: i for i, word in enumerate((PAD, *ENGLISH_WORDS))}


def target_vocabulary():
    """Token id of each target piece: ``PAD``, ``BOS``, ``EOS`` are 0, 1, 2, then the pieces."""
    return {piece: i for i, piece in enumerate((PAD, BOS, EOS, *GERMAN_PIECES))}


def _encode(items, vocabulary, length, what):
    if not items:
        raise ValueError(f"an empty {what} sequence has nothing to translate")
    unknown = [item for item in items if item not in vocabulary or item in (PAD, BOS, EOS)]
    if unknown:
        raise ValueError(f"{unknown[0]!r} is not in the {what} vocabulary (one of "
                         f"{sorted(vocabulary)[:5]}...; {len(vocabulary)} in all)")
    if len(items) > length:
        raise ValueError(f"{len(items)} {what} tokens do not fit in length {length}")
    ids = [vocabulary[item] for item in items]
    return np.array(ids + [vocabulary[PAD]] * (length - len(ids)), dtype=np.int64)


#: Tokens per sequence: 5 English words at most; BOS, 5 pieces at most, EOS.
SOURCE_LENGTH, TARGET_LENGTH = 5, 7


def encode_source(words, length=SOURCE_LENGTH):
    """English words as token ids, padded with 0 to ``length``: shape (length,)."""
    return _encode(list(words), source_vocabulary(), positive_int(length, "length"), "source")


def encode_target(pieces, length=TARGET_LENGTH):
    """German pieces as ``BOS pieces EOS`` ids, padded with 0 to ``length``: (length,)."""
    length = positive_int(length, "length")
    ids = _encode(list(pieces), target_vocabulary(), length - 2, "target")
    ids = ids[ids != 0]
    out = np.zeros(length, dtype=np.int64)
    out[:len(ids) + 2] = [1, *ids, 2]
    return out


def decode_target(ids):
    """The German word of target ids (BOS dropped, up to the first EOS; pads ignored)."""
    pieces = (PAD, BOS, EOS, *GERMAN_PIECES)
    out = []
    for i in np.asarray(ids).tolist():
        if i == 2:
            break
        if i > 2:
            out.append(pieces[i])
    return "".join(out)


@functools.cache
def _corpus():
    """Source and target ids of every number: (1000, 5) and (1000, 7), read-only."""
    source = np.stack([encode_source(english_words(n)) for n in NUMBERS])
    target = np.stack([encode_target(split_german(german_words(n))) for n in NUMBERS])
    source.flags.writeable = target.flags.writeable = False
    return source, target


@dataclasses.dataclass(frozen=True)
class TranslationTask(Task):
    """English number words into German morphemes, scored by exact match of greedy output.

    A batch is ``(numbers, source, target)``: the numbers ``(count,)``, their English ids
    ``(count, 5)`` and German ids ``BOS pieces EOS`` padded, ``(count, 7)``. Training uses
    teacher forcing (the decoder reads ``target[:, :-1]`` and predicts ``target[:, 1:]``);
    the loss counts non-pad tokens only, with label smoothing in PyTorch's convention.

    Attributes
    ----------
    label_smoothing : float
        In ``[0, 1)``, default 0.1.
    """

    label_smoothing: float = 0.1
    name = "translate"

    def __post_init__(self):
        eps = non_negative_float(self.label_smoothing, "label_smoothing")
        if eps >= 1:
            raise ValueError(f"label_smoothing must lie in [0, 1), got {eps}")

    vocab_size = len(ENGLISH_WORDS) + 1
    target_vocab_size = len(GERMAN_PIECES) + 3
    pad_id, bos_id, eos_id = 0, 1, 2

    def batch(self, numbers):
        """The batch of the given numbers."""
        numbers = np.array([_number(n) for n in np.asarray(numbers).reshape(-1)],
                           dtype=np.int64)
        source, target = _corpus()
        return numbers, source[numbers], target[numbers]

    def split(self, rng, n_valid, n_test):
        n_valid, n_test = positive_int(n_valid, "n_valid"), positive_int(n_test, "n_test")
        if n_valid + n_test > len(NUMBERS) // 2:
            raise ValueError(f"the held-out sets ({n_valid} + {n_test}) would take up half "
                             f"of all {len(NUMBERS)} numbers")
        held = rng.permutation(len(NUMBERS))[:n_valid + n_test]
        return Split(valid=self.batch(held[:n_valid]), test=self.batch(held[n_valid:]),
                     exclude=np.sort(held).astype(np.int64))

    def sample(self, rng, count, exclude):
        exclude = excluded(exclude, len(NUMBERS), "number")
        pool = np.setdiff1d(np.arange(len(NUMBERS)), exclude)
        return self.batch(rng.choice(pool, size=positive_int(count, "count")))

    def loss_and_backward(self, model, batch):
        _, source, target = batch
        logits = model.forward(source, target[:, :-1])  # teacher forcing
        loss, d_logits = sequence_cross_entropy(
            logits, target[:, 1:], pad_id=self.pad_id,
            label_smoothing=self.label_smoothing)
        model.backward(d_logits)
        return loss

    def translate(self, model, source):
        """Greedy translations of source ids ``(count, 5)``: ids ``(count, <= 6)``."""
        return greedy_decode(model, source, bos_id=self.bos_id, eos_id=self.eos_id,
                             max_length=TARGET_LENGTH - 1)

    def evaluate(self, model, batch):
        """``accuracy``: the share of greedy translations equal to the reference, every
        piece and the EOS; ``token_accuracy``: of the pieces and EOS, position by position."""
        _, source, target = batch
        reference = target[:, 1:]  # pieces, EOS, pads: (count, 6)
        output = self.translate(model, source)
        padded = np.zeros_like(reference)
        padded[:, :output.shape[1]] = output
        real = reference != self.pad_id
        equal = padded == reference
        return {"accuracy": float(equal.all(axis=1).mean()),
                "token_accuracy": float(equal[real].mean())}
