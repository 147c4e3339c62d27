"""Language modelling on real text: a character tokenizer, the task, and bits per character.

A language model reads a stream of token ids and predicts each next one. :class:`TextTask`
holds two streams, one to train on and one held out (whole documents the model never reads a
line of), and gives :func:`scratchformer.train.train` what it asks of every task: training
windows drawn at random offsets of the training stream, held-out windows drawn once, the
cross-entropy of every next token and its gradient, and the held-out score.

The score is in one unit for every tokenizer: **bits per character**, the total of
:math:`-\\log_2 p` over every predicted token divided by the number of characters those
tokens spell. A tokenizer that packs three characters into a token predicts a third as many
tokens, each harder; dividing by characters, not tokens, puts a character-level and a BPE model
on one scale. A character is counted where it begins (its first UTF-8 byte), so that a token
ending inside a character and the next one beginning there share it out exactly, and the
end-of-text token counts as one character: it is one symbol of the stream, which the model must
predict like any other.

The book's chapter "Language modelling on real text" (``book/language_modelling.md``) trains
both models on the State of the Union addresses (:mod:`scratchformer.corpus`).
"""

from __future__ import annotations

import hashlib
import math
import re

import numpy as np

from ._validation import class_ids, non_negative_int, positive_int, require_finite
from .model import cross_entropy
from .tasks import Split, Task, parts_by_rows

__all__ = ["TOKENIZERS", "CharTokenizer", "TextTask", "addresses_task", "characters_per_token",
           "log_probabilities"]

#: The tokenizers of :func:`addresses_task`.
TOKENIZERS = ("char", "bpe")


class CharTokenizer:
    """One token per character of an alphabet, and special tokens after them.

    Parameters
    ----------
    alphabet : iterable of str
        The characters, each a string of length 1 (duplicates are an error); their ids are
        ``0 .. len(alphabet) - 1`` in the order given.
    special_tokens : iterable of str, default ()
        Strings that become one id each, after the alphabet's (``"<|endoftext|>"``).

    Notes
    -----
    :meth:`train` builds the alphabet from a text: its distinct characters, sorted. A
    character outside the alphabet cannot be encoded (``ValueError`` naming it): a
    character-level model has no way to spell what it never saw.
    """

    def __init__(self, alphabet, special_tokens=()):
        alphabet = list(alphabet)
        for char in alphabet:
            if not isinstance(char, str) or len(char) != 1:
                raise ValueError(f"the alphabet holds single characters, got {char!r}")
        if len(set(alphabet)) != len(alphabet):
            raise ValueError("the alphabet holds each character once")
        specials = list(special_tokens)
        for token in specials:
            if not isinstance(token, str) or len(token) < 2:
                raise ValueError(f"a special token is a string of at least two characters, "
                                 f"got {token!r}")
        if len(set(specials)) != len(specials):
            raise ValueError("each special token is given once")
        self.alphabet = tuple(alphabet)
        self.special_tokens = {token: len(alphabet) + i for i, token in enumerate(specials)}
        self._ids = {char: i for i, char in enumerate(alphabet)}
        self._strings = np.array([*alphabet, *specials], dtype=object)

    @classmethod
    def train(cls, text, special_tokens=()):
        """The tokenizer of ``text``'s distinct characters (sorted); special tokens written
        in the text are left out of its alphabet."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        specials = list(special_tokens)
        for token in specials:
            text = text.replace(token, "")
        return cls(sorted(set(text)), specials)

    @property
    def vocab_size(self):
        """Characters and special tokens."""
        return len(self._strings)

    def __repr__(self):
        return (f"CharTokenizer({len(self.alphabet)} characters, special_tokens="
                f"{list(self.special_tokens)})")

    def encode(self, text):
        """The ids of ``text`` (int64, one per character; each special token one id)."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        ids = []
        # one pass over the text, each special token matched where it begins, the longest
        # first ("<e>x" is one token when "<e>" is another), as BPE matches them
        for piece in _split_specials(text, self.special_tokens):
            if piece in self.special_tokens:
                ids.append(self.special_tokens[piece])
                continue
            try:
                ids.extend(self._ids[char] for char in piece)
            except KeyError as error:
                raise ValueError(f"the character {error.args[0]!r} is not in the tokenizer's "
                                 f"alphabet of {len(self.alphabet)}") from None
        return np.asarray(ids, dtype=np.int64)

    def decode(self, ids):
        """The text of ``ids`` (any integer array of ids below ``vocab_size``)."""
        ids = np.asarray(ids)
        if ids.size and not np.issubdtype(ids.dtype, np.integer):
            raise TypeError(f"ids must be integers, got dtype {ids.dtype}")
        ids = ids.astype(np.int64).reshape(-1)
        if ids.size and (ids.min() < 0 or ids.max() >= self.vocab_size):
            raise ValueError(f"ids must lie in [0, {self.vocab_size}), got values from "
                             f"{ids.min()} to {ids.max()}")
        return "".join(self._strings[ids])

    def token_bytes(self, token):
        """The UTF-8 bytes of one token (an id in ``[0, vocab_size)``)."""
        if non_negative_int(token, "token") >= self.vocab_size:
            raise ValueError(f"token must be an id from 0 to {self.vocab_size - 1}, got "
                             f"{token}")
        return str(self._strings[token]).encode("utf-8")


def _split_specials(text, special_tokens):
    """``text`` cut into special tokens and the non-empty runs between them, each special
    token matched where it begins, the longest first (``re`` caches the compiled pattern)."""
    if not special_tokens:
        return [text] if text else []
    longest_first = sorted(special_tokens, key=lambda token: (-len(token), token))
    pattern = "(" + "|".join(map(re.escape, longest_first)) + ")"
    return [piece for piece in re.split(pattern, text) if piece]


def characters_per_token(tokenizer):
    """How many characters each id of ``tokenizer`` begins: an int64 array of ``vocab_size``.

    A character begins at each byte that is not a UTF-8 continuation byte (``10xxxxxx``), so
    summed over the ids of any text this counts its characters exactly, even where a token
    ends inside one. A special token counts as one character.
    """
    counts = np.empty(tokenizer.vocab_size, np.int64)
    specials = set(tokenizer.special_tokens.values())
    for token in range(tokenizer.vocab_size):
        if token in specials:
            counts[token] = 1
        else:
            counts[token] = sum((byte & 0xC0) != 0x80 for byte in tokenizer.token_bytes(token))
    return counts


def log_probabilities(logits, targets):
    """The natural log-probability each row of ``logits`` gives its target: shape of
    ``targets``, float64 (computed as a log-softmax, stable for any finite logits)."""
    logits = np.asarray(logits, dtype=np.float64)
    require_finite(logits, "logits")
    targets = class_ids(targets, logits.shape)
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_total = np.log(np.exp(shifted).sum(axis=-1))
    picked = np.take_along_axis(shifted, targets[..., None], axis=-1)[..., 0]
    return picked - log_total


def _digest(array):
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()[:16]


class TextTask(Task):
    """Predict the next token of a text: random windows of a training stream, scored on
    held-out text in bits per character.

    Parameters
    ----------
    train_ids, held_ids : array_like of int, shape (n,)
        The training stream and the held-out stream (documents the training stream does not
        contain), token ids below ``vocab_size``.
    vocab_size : int
    context : int
        Tokens a window shows the model; each window holds ``context + 1`` tokens, the last
        ``context`` of which are predicted.
    characters : array_like of int, shape (vocab_size,)
        Characters each id begins (:func:`characters_per_token`), to turn nats per token into
        bits per character.

    Notes
    -----
    A batch is an int64 array ``(count, context + 1)`` of consecutive tokens. Training
    windows start anywhere in the training stream. Held-out windows tile the held-out stream
    (window ``i`` starts at token ``i * context``, so each held-out token is predicted once,
    after between 0 and ``context - 1`` tokens of its own window); :meth:`split` draws the
    validation and test windows among them, disjoint, in the order of the stream.
    """

    name = "text"

    def __init__(self, train_ids, held_ids, *, vocab_size, context, characters):
        self.vocab_size = positive_int(vocab_size, "vocab_size")
        self.context = positive_int(context, "context")
        self.train_ids = self._stream(train_ids, "train_ids")
        self.held_ids = self._stream(held_ids, "held_ids")
        characters = np.asarray(characters)
        if characters.shape != (self.vocab_size,) or not np.issubdtype(characters.dtype,
                                                                        np.integer):
            raise ValueError(f"characters must be {self.vocab_size} integers, one per id, "
                             f"got shape {characters.shape} of {characters.dtype}")
        if characters.min() < 0:
            raise ValueError("characters per token cannot be negative")
        self.characters = characters.astype(np.int64)
        self.train_ids.setflags(write=False)
        self.held_ids.setflags(write=False)
        self.characters.setflags(write=False)

    def _stream(self, ids, name):
        ids = np.asarray(ids)
        if ids.ndim != 1 or not np.issubdtype(ids.dtype, np.integer):
            raise ValueError(f"{name} must be a 1-d array of token ids, got shape {ids.shape} "
                             f"of {ids.dtype}")
        if len(ids) < self.context + 1:
            raise ValueError(f"{name} holds {len(ids)} tokens, fewer than one window of "
                             f"context + 1 = {self.context + 1}")
        if ids.min() < 0 or ids.max() >= self.vocab_size:
            raise ValueError(f"{name} must lie in [0, {self.vocab_size}), got values from "
                             f"{ids.min()} to {ids.max()}")
        return ids.astype(np.int64)

    def __repr__(self):
        # the run key (scratchformer.book.runs) reads this: the streams enter by their digest
        return (f"TextTask(vocab_size={self.vocab_size}, context={self.context}, "
                f"train={len(self.train_ids)}:{_digest(self.train_ids)}, "
                f"held={len(self.held_ids)}:{_digest(self.held_ids)}, "
                f"characters={_digest(self.characters)})")

    @property
    def held_windows(self):
        """How many held-out windows tile the held-out stream."""
        return (len(self.held_ids) - 1) // self.context

    def windows(self, starts, stream=None):
        """The windows of ``context + 1`` tokens starting at ``starts`` of ``stream`` (default
        the training stream): int64 ``(len(starts), context + 1)``."""
        stream = self.train_ids if stream is None else stream
        starts = np.asarray(starts, dtype=np.int64)
        return stream[starts[:, None] + np.arange(self.context + 1)]

    def split(self, rng, n_valid, n_test):
        n_valid, n_test = positive_int(n_valid, "n_valid"), positive_int(n_test, "n_test")
        if n_valid + n_test > self.held_windows:
            raise ValueError(f"the held-out stream has {self.held_windows} windows of "
                             f"{self.context} tokens, fewer than n_valid + n_test = "
                             f"{n_valid + n_test}")
        chosen = rng.choice(self.held_windows, size=n_valid + n_test, replace=False)
        valid, test = np.sort(chosen[:n_valid]), np.sort(chosen[n_valid:])
        return Split(valid=(self.windows(valid * self.context, self.held_ids),),
                     test=(self.windows(test * self.context, self.held_ids),),
                     exclude=np.empty(0, np.int64))

    def sample(self, rng, count, exclude=None):
        """``count`` training windows at uniform random offsets (``exclude`` is unused: the
        training stream holds no held-out text)."""
        count = positive_int(count, "count")
        starts = rng.integers(0, len(self.train_ids) - self.context, size=count)
        return (self.windows(starts),)

    def parts(self, batch, count):
        """The windows in ``count`` groups of rows, each weighted by its share of the rows:
        every window predicts the same number of tokens, so the mean over all of them is the
        weighted mean of the groups' means."""
        return parts_by_rows(batch, count)

    def loss_and_backward(self, model, batch):
        """Mean cross-entropy (nats) of every next token of the windows."""
        (windows,) = batch
        logits = model.forward(windows[:, :-1])  # (count, context, vocab)
        loss, d_logits = cross_entropy(logits, windows[:, 1:])
        model.backward(d_logits)
        return loss

    def evaluate(self, model, batch, batch_size=64):
        """Scores of held-out windows: ``bits_per_char`` (the headline), ``nats_per_char``,
        ``nats_per_token``, ``characters`` and ``accuracy`` (the next token is the most likely
        one)."""
        (windows,) = batch
        tokens = windows[:, 1:].size
        characters = int(self.characters[windows[:, 1:]].sum())
        if characters == 0:  # no windows, or tokens that begin no character
            raise ValueError(f"bits per character needs windows that spell at least one "
                             f"character: {len(windows)} windows of {tokens} predicted tokens "
                             "begin none")
        nats = right = 0.0
        with model.inference():
            for i in range(0, len(windows), batch_size):
                part = windows[i:i + batch_size]
                logits = model.forward(part[:, :-1])
                targets = part[:, 1:]
                nats -= float(log_probabilities(logits, targets).sum())
                right += float((logits.argmax(axis=-1) == targets).sum())
        return {"accuracy": right / tokens, "bits_per_char": nats / characters / math.log(2),
                "nats_per_char": nats / characters, "nats_per_token": nats / tokens,
                "characters": characters}


def addresses_task(tokenizer="char", *, context=128, merges=512):
    """The State of the Union addresses as a :class:`TextTask`, and its tokenizer.

    Every tenth address is held out whole (:func:`scratchformer.corpus.held_out_split`); the
    texts are normalised and each ends with the end-of-text token
    (:func:`scratchformer.corpus.join`). ``tokenizer`` is ``"char"`` (a
    :class:`CharTokenizer` of the training addresses' characters) or ``"bpe"`` (a byte-level
    :class:`~scratchformer.tokenizer.BPE` of ``merges`` merges learned on the training
    addresses). Needs the texts installed (:func:`scratchformer.corpus.missing`).

    Returns
    -------
    task : TextTask
    tokenizer : CharTokenizer or BPE
    """
    from . import corpus
    from .tokenizer import BPE

    if tokenizer not in TOKENIZERS:
        raise ValueError(f"tokenizer must be one of {TOKENIZERS}, got {tokenizer!r}")
    kept, held = corpus.held_out_split(corpus.addresses())
    train_text = corpus.join([corpus.normalise(a.text) for a in kept])
    held_text = corpus.join([corpus.normalise(a.text) for a in held])
    if tokenizer == "char":
        tok = CharTokenizer.train(train_text, [corpus.END_OF_TEXT])
    else:
        merges = positive_int(merges, "merges")
        tok = BPE.train(train_text, 256 + merges + 1, special_tokens=[corpus.END_OF_TEXT])
    task = TextTask(tok.encode(train_text), tok.encode(held_text), vocab_size=tok.vocab_size,
                    context=context, characters=characters_per_token(tok))
    return task, tok
