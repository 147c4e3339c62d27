"""The translation task: its data, its exact splitter, its held-out numbers, and training on it.

The expected German below is written out from the rules of German number words (units
before tens, joined by "und"; "ein" before "hundert" and "und", "eins" alone), not copied from
the splitter; the splitter is checked against ``num2words`` for every number.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import scratchformer as sf
from conftest import training_environment
from scratchformer import train as tr
from scratchformer import translation as tl

TASK = sf.TranslationTask()


def test_the_joined_pieces_give_back_num2words_for_every_number():
    for n in tl.NUMBERS:
        word = tl.german_words(n)
        pieces = tl.split_german(word)
        assert "".join(pieces) == word, n
        assert 1 <= len(pieces) <= 5, n


@pytest.mark.parametrize("n, english, german", [
    (0, "zero", "null"),
    (1, "one", "eins"),
    (7, "seven", "sieben"),
    (11, "eleven", "elf"),
    (16, "sixteen", "sechzehn"),
    (17, "seventeen", "siebzehn"),
    (21, "twenty one", "ein und zwanzig"),
    (30, "thirty", "dreißig"),
    (45, "forty five", "fünf und vierzig"),
    (66, "sixty six", "sechs und sechzig"),
    (77, "seventy seven", "sieben und siebzig"),
    (100, "one hundred", "ein hundert"),
    (101, "one hundred and one", "ein hundert eins"),
    (113, "one hundred and thirteen", "ein hundert dreizehn"),
    (331, "three hundred and thirty one", "drei hundert ein und dreißig"),
    (999, "nine hundred and ninety nine", "neun hundert neun und neunzig"),
])
def test_known_translations(n, english, german):
    assert tl.english_words(n) == english.split()
    assert tl.split_german(tl.german_words(n)) == german.split()


def test_the_vocabularies_and_lengths():
    assert len(tl.ENGLISH_WORDS) == 30 and len(tl.GERMAN_PIECES) == 31
    used_english = {w for n in tl.NUMBERS for w in tl.english_words(n)}
    used_german = {p for n in tl.NUMBERS for p in tl.split_german(tl.german_words(n))}
    assert used_english == set(tl.ENGLISH_WORDS)  # every word is needed, none is missing
    assert used_german == set(tl.GERMAN_PIECES)
    assert max(len(tl.english_words(n)) for n in tl.NUMBERS) == tl.SOURCE_LENGTH
    assert TASK.vocab_size == 31 and TASK.target_vocab_size == 34
    numbers, source, target = TASK.batch([45, 0])
    assert source.shape == (2, 5) and target.shape == (2, 7)
    assert tl.decode_target(target[0]) == "fünfundvierzig"
    assert target[1].tolist() == [1, tl.target_vocabulary()["null"], 2, 0, 0, 0, 0]


def test_held_out_numbers_are_never_trained_on():
    split = TASK.split(np.random.default_rng(0), 100, 200)
    valid, test = set(split.valid[0].tolist()), set(split.test[0].tolist())
    assert len(valid) == 100 and len(test) == 200 and not valid & test
    assert set(split.exclude.tolist()) == valid | test
    seen = set()
    rng = np.random.default_rng(1)
    for _ in range(40):
        seen |= set(TASK.sample(rng, 64, split.exclude)[0].tolist())
    assert not seen & (valid | test)
    assert len(seen) > 650  # of the 700 others: drawn from all of them
    with pytest.raises(ValueError, match="would take up half"):
        TASK.split(np.random.default_rng(0), 300, 300)


def test_exact_match_scores_whole_translations():
    class Oracle(sf.EncoderDecoderModel):
        """Puts all its weight on a fixed answer: the reference, with one number wrong."""

        def __init__(self, answers):
            super().__init__(vocab_size=31, target_vocab_size=34, d_model=4, n_heads=1,
                             d_ff=4, n_layers=1)
            self.answers = answers

        def decode(self, target, memory, memory_mask=None):
            logits = np.zeros((*target.shape, 34))
            step = target.shape[1] - 1
            logits[np.arange(len(target)), :, self.answers[:, min(step, 5)]] = 1.0
            return logits

    batch = TASK.batch([45, 101, 999, 7])
    answers = batch[2][:, 1:].copy()
    answers[2, 0] = tl.target_vocabulary()["acht"]  # 999 becomes "acht hundert ..."
    scores = TASK.evaluate(Oracle(answers), batch)
    assert scores["accuracy"] == 0.75
    real = batch[2][:, 1:] != 0
    assert scores["token_accuracy"] == pytest.approx(1 - 1 / real.sum())


@pytest.mark.slow
def test_a_short_run_learns_to_translate_held_out_numbers():
    config = tr.TrainConfig(max_steps=150, warmup_steps=30, eval_every=150, n_valid=50,
                            n_test=100, target_accuracy=None)
    result = tr.train(tr.book_model(TASK), TASK, config)
    chance = np.log(TASK.target_vocab_size)  # a uniform guess over the pieces
    assert result.history["loss"][:5].mean() > 0.8 * chance
    assert result.history["loss"][-5:].mean() < 0.3 * chance
    # whole translations of numbers never trained on: chance is about (1/34)^3
    assert result.test["accuracy"] > 0.5


@pytest.mark.slow
def test_the_command_line_translates_held_out_numbers():
    """The deterministic default run: its last line, and the exact match it reaches."""
    completed = subprocess.run([sys.executable, "-m", "scratchformer.train", "--task",
                                "translate", "--quiet"], capture_output=True, text=True,
                               timeout=1200, env=training_environment())
    assert completed.returncode == 0, completed.stderr
    last = completed.stdout.strip().split("\n")[-1]
    accuracy, seconds = last.split()
    assert accuracy.startswith("accuracy=") and seconds.startswith("seconds=")
    assert float(accuracy.split("=")[1]) >= 0.99
