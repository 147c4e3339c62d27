r"""Counting letters: a task SmolLM2-135M fails and the book fine-tunes it on.

"How many times does the letter "r" appear in the word "strawberry"?" A model that reads
tokens, not letters (the tokenization chapter), has to know each token's spelling to answer;
SmolLM2-135M-Instruct mostly answers "1 time", whatever the word. This module makes the task
from npm ``word-list``'s English words (:func:`scratchformer.corpus.english_words`):

- whole words are held out (:func:`split_words`: a hash of the word decides, so the split is the
  same on every machine and does not depend on the list's order);
- the answers are balanced (:func:`sample_questions`): counts 0, 1, 2 and 3 equally often, so
  that a constant answer scores a quarter;
- each question is asked in SmolLM2's chat template (:meth:`Question.prompt`), and answered in
  one of :data:`FORMATS` (:meth:`Question.answer`): a sentence with the count, or the word
  spelled out letter by letter before the count;
- :func:`encode` and :func:`batch` make the token ids of prompt and answer with the mask of
  supervised fine-tuning (True on the answer's tokens and its ``<|im_end|>``, the only ones the
  loss counts: :func:`scratchformer.masked_cross_entropy`);
- :func:`read_count` reads the count from an answer in words or digits, and :func:`answer`
  and :func:`accuracy` ask a model greedily, through the KV cache, and score the exact count;
- :class:`CountLettersTask` is all of it as a task of the book's training loop
  (:func:`scratchformer.train.train`).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

import numpy as np

from ._validation import choice, generator, positive_int
from .model import masked_cross_entropy
from .tasks import Split, Task

__all__ = ["SYSTEM", "FORMATS", "COUNTS", "Question", "split_words", "sample_questions",
           "read_count", "encode", "batch", "answer", "accuracy", "CountLettersTask"]

#: SmolLM2-Instruct's default system prompt (its chat template's).
SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
#: How an answer is written: ``"sentence"``, the count in a sentence; ``"spelled"``, the word
#: spelled out, a letter at a time, before the same sentence.
FORMATS = ("sentence", "spelled")
#: The counts asked about, each equally often.
COUNTS = (0, 1, 2, 3)
_LETTERS = "abcdefghijklmnopqrstuvwxyz"
_WORD = re.compile(r"[a-z]+")
END = "<|im_end|>"


def _check_word(word):
    if not isinstance(word, str) or not _WORD.fullmatch(word):
        raise ValueError(f"a word must be lowercase letters a to z only, got {word!r}")
    return word


@dataclass(frozen=True)
class Question:
    """How many times ``letter`` appears in ``word`` (both lowercase ASCII letters)."""

    word: str
    letter: str

    def __post_init__(self):
        _check_word(self.word)
        if not (isinstance(self.letter, str) and len(self.letter) == 1
                and self.letter in _LETTERS):
            raise ValueError(f"the letter must be one of a to z, got {self.letter!r}")

    @property
    def count(self) -> int:
        """The right answer."""
        return self.word.count(self.letter)

    def prompt(self, system: str = SYSTEM) -> str:
        """The question in SmolLM2's chat template, up to the assistant's turn."""
        return (f"<|im_start|>system\n{system}{END}\n"
                f"<|im_start|>user\nHow many times does the letter \"{self.letter}\" appear in "
                f"the word \"{self.word}\"?{END}\n<|im_start|>assistant\n")

    def answer(self, format: str = "sentence") -> str:
        """The right answer in ``format`` (:data:`FORMATS`), without the ``<|im_end|>``."""
        n = self.count
        sentence = (f"The letter \"{self.letter}\" appears {n} time{'' if n == 1 else 's'} in "
                    f"the word \"{self.word}\".")
        if format == "sentence":
            return sentence
        if format == "spelled":
            return f"{'-'.join(self.word)}. {sentence}"
        raise ValueError(f"format must be one of {FORMATS}, got {format!r}")


def _held_out(word: str, every: int) -> bool:
    digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % every == 0


def split_words(words, *, every: int = 10, lengths=(3, 12)) -> tuple[list[str], list[str]]:
    """(training words, held-out words): the words of lowercase letters whose length lies in
    ``lengths`` (inclusive), one in ``every`` held out whole, chosen by a hash of the word.

    A word is held out or not whatever else the list holds, on every machine: a question about
    a held-out word never shares its word with a training question."""
    every = positive_int(every, "every")
    if every < 2:
        raise ValueError(f"every must be at least 2, got {every}")
    low, high = lengths
    kept = [word for word in words if low <= len(word) <= high and _WORD.fullmatch(word)]
    if not kept:
        raise ValueError(f"no word of lowercase letters with {low} to {high} letters")
    train = [word for word in kept if not _held_out(word, every)]
    held = [word for word in kept if _held_out(word, every)]
    return train, held


class _WordPool:
    """Words indexed once by the counts of their letters: ``by_count[c]``, the words that have
    a letter appearing ``c`` times (for ``c = 0``, a letter missing), for each of
    :data:`COUNTS`. Indexing the two hundred thousand training words takes about half a
    CPU-second, which drawing a batch must not pay at every step."""

    def __init__(self, words):
        self.words = [_check_word(word) for word in words]
        self.by_count = {count: [] for count in COUNTS}
        for index, word in enumerate(self.words):
            counts = {word.count(letter) for letter in set(word)}
            if len(set(word)) < len(_LETTERS):
                counts.add(0)
            for count in counts.intersection(COUNTS):
                self.by_count[count].append(index)


def sample_questions(words, n: int, rng=None) -> list[Question]:
    """``n`` questions on ``words``, the counts :data:`COUNTS` in turn (``n`` a multiple of
    their number, so each is asked equally often): for each, a word drawn uniformly among
    those with a letter of that count, and a letter drawn uniformly among those letters."""
    n = positive_int(n, "n")
    if n % len(COUNTS):
        raise ValueError(f"n must be a multiple of {len(COUNTS)}, so that every count is asked "
                         f"equally often, got {n}")
    rng = generator(rng)
    pool = words if isinstance(words, _WordPool) else _WordPool(words)
    questions = []
    for i in range(n):
        count = COUNTS[i % len(COUNTS)]
        having = pool.by_count[count]
        if not having:
            raise ValueError(f"no word has a letter that appears {count} times")
        word = pool.words[having[rng.integers(len(having))]]
        letters = [letter for letter in _LETTERS if word.count(letter) == count]
        questions.append(Question(word, letters[rng.integers(len(letters))]))
    return questions


_NUMBER_WORDS = {"zero": 0, "no": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5,
                 "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10}
_COUNT = re.compile(r"\b(\d+|" + "|".join(_NUMBER_WORDS) + r")\s+times?\b|\b(once|twice|thrice)"
                    r"\b|\b(does not|doesn't|do not|don't|never) appear", re.IGNORECASE)


def read_count(text: str) -> int | None:
    """The count an answer states: the last of "<n> time(s)" (digits or a number word up to
    ten), "once", "twice", "thrice", or "does not appear" (0); None if it states none."""
    found = list(_COUNT.finditer(text))
    if not found:
        return None
    number, adverb, negation = found[-1].groups()
    if negation:
        return 0
    if adverb:
        return {"once": 1, "twice": 2, "thrice": 3}[adverb.lower()]
    return int(number) if number.isdigit() else _NUMBER_WORDS[number.lower()]


def encode(tokenizer, question: Question, format: str = "sentence",
           system: str = SYSTEM) -> tuple[np.ndarray, np.ndarray]:
    """The token ids of the prompt, the answer and ``<|im_end|>``, and the mask of the
    targets: ``(ids, mask)`` with ``mask[t]`` True where predicting ``ids[t + 1]`` counts
    (the answer's tokens and the end of the turn), length ``len(ids) - 1``.

    The prompt and the answer are encoded apart, as the model meets them when it answers: the
    prompt's tokens, then the ones it generates."""
    prompt = tokenizer.encode(question.prompt(system))
    reply = tokenizer.encode(question.answer(format))
    end = tokenizer.special_tokens[END]
    ids = np.concatenate([prompt, reply, [end]]).astype(np.int64)
    mask = np.zeros(len(ids) - 1, dtype=bool)
    mask[len(prompt) - 1:] = True  # from the prompt's last token on, each predicts the answer
    return ids, mask


def batch(tokenizer, questions, format: str = "sentence", system: str = SYSTEM):
    """``(inputs, targets, mask)``, each ``(len(questions), longest - 1)``: the encoded
    questions (:func:`encode`) padded on the right with ``<|endoftext|>``, the padding masked
    out (the causal mask keeps it from every real token)."""
    if not questions:
        raise ValueError("a batch needs at least one question")
    encoded = [encode(tokenizer, question, format, system) for question in questions]
    width = max(len(ids) for ids, _ in encoded)
    pad = tokenizer.special_tokens.get("<|endoftext|>", 0)
    tokens = np.full((len(encoded), width), pad, dtype=np.int64)
    mask = np.zeros((len(encoded), width - 1), dtype=bool)
    for row, (ids, answer_mask) in enumerate(encoded):
        tokens[row, :len(ids)] = ids
        mask[row, :len(answer_mask)] = answer_mask
    return tokens[:, :-1], tokens[:, 1:], mask


def answer(model, tokenizer, question: Question, *, max_new_tokens: int = 48,
           system: str = SYSTEM) -> str:
    """The model's greedy answer to ``question``, up to its ``<|im_end|>`` (or
    ``max_new_tokens`` tokens), read through the KV cache."""
    max_new_tokens = positive_int(max_new_tokens, "max_new_tokens")
    end = tokenizer.special_tokens[END]
    ids = tokenizer.encode(question.prompt(system))
    out = []
    with model.inference():
        cache = model.new_cache()
        logits = model.forward(ids[None], cache=cache)
        for _ in range(max_new_tokens):
            token = int(np.argmax(logits[0, -1]))
            if token == end:
                break
            out.append(token)
            logits = model.forward(np.array([[token]]), cache=cache)
    return tokenizer.decode(np.array(out, dtype=np.int64))


def accuracy(model, tokenizer, questions, **kwargs) -> tuple[float, list[str]]:
    """The share of ``questions`` whose greedy answer (:func:`answer`) states the right count
    (:func:`read_count`), and the answers."""
    if not questions:
        raise ValueError("accuracy needs at least one question")
    answers = [answer(model, tokenizer, question, **kwargs) for question in questions]
    right = sum(read_count(text) == question.count for question, text in zip(questions, answers))
    return right / len(questions), answers


class CountLettersTask(Task):
    """Counting letters as a task of the training loop (a :class:`~scratchformer.Task`).

    A training batch is ``(inputs, targets, mask)`` (:func:`batch`) of questions on the
    training words; the held-out sets are questions (a tuple of :class:`Question`) on the
    held-out words, the validation set's words and the test set's apart. :meth:`evaluate`
    answers each greedily and scores the exact count (``accuracy``).

    Parameters
    ----------
    tokenizer : scratchformer.tokenizer.BPE
        SmolLM2's (:func:`scratchformer.pretrained.smollm2`).
    words : sequence of str, optional
        The words to ask about; default the npm package ``word-list``'s
        (:func:`scratchformer.corpus.english_words`), split by :func:`split_words`.
    format : {"sentence", "spelled"}, default "sentence"
        How the answers it trains on are written (:meth:`Question.answer`).
    max_new_tokens : int, default 48
        The longest answer :meth:`evaluate` waits for.
    """

    name = "count-letters"

    def __init__(self, tokenizer, words=None, *, format="sentence", max_new_tokens=48):
        if words is None:
            from .corpus import english_words

            words = english_words()
        self.tokenizer = tokenizer
        self.format = choice(format, FORMATS, "format")
        self.max_new_tokens = positive_int(max_new_tokens, "max_new_tokens")
        self.train_words, self.held_words = split_words(words)
        self._training = _WordPool(self.train_words)  # indexed once, drawn from every step

    def split(self, rng, n_valid, n_test) -> Split:
        """Validation questions on every other held-out word, test questions on the rest."""
        valid = sample_questions(self.held_words[0::2], n_valid, rng)
        test = sample_questions(self.held_words[1::2], n_test, rng)
        return Split(tuple(valid), tuple(test), np.empty(0, dtype=np.int64))

    def sample(self, rng, count, exclude) -> tuple:
        """A batch of ``count`` questions on the training words (no held-out word is among
        them, so ``exclude`` has nothing to exclude), rounded up to a multiple of 4."""
        count = -(-positive_int(count, "count") // len(COUNTS)) * len(COUNTS)
        questions = sample_questions(self._training, count, rng)
        return batch(self.tokenizer, questions, self.format)

    def loss_and_backward(self, model, batch) -> float:
        """The mean cross-entropy of the answers' tokens
        (:func:`~scratchformer.masked_cross_entropy`)."""
        inputs, targets, mask = batch
        loss, d_logits = masked_cross_entropy(model.forward(inputs), targets, mask)
        model.backward(d_logits)
        return loss

    def evaluate(self, model, batch) -> dict:
        """``{"accuracy": share of right counts}`` of the model's greedy answers."""
        score, _ = accuracy(model, self.tokenizer, batch, max_new_tokens=self.max_new_tokens)
        return {"accuracy": score}
