"""The task of counting letters (scratchformer.letters): words held out whole, balanced counts,
SmolLM2's chat template, the mask of the answer's tokens, reading a count from an answer, and
the greedy answer's loop."""

from __future__ import annotations

import itertools
import random
from collections import Counter

import numpy as np
import pytest

from conftest import smollm2_file
from scratchformer import corpus, letters
from scratchformer.letters import Question


@pytest.fixture(scope="module")
def tokenizer():
    from scratchformer.pretrained import tokenizer_from_gguf

    return tokenizer_from_gguf(smollm2_file())


def test_a_question_knows_its_count_prompt_and_answers():
    q = Question("strawberry", "r")
    assert q.count == 3 and Question("strawberry", "z").count == 0
    prompt = q.prompt()
    assert prompt.startswith(f"<|im_start|>system\n{letters.SYSTEM}<|im_end|>\n<|im_start|>user\n")
    assert prompt.endswith('the word "strawberry"?<|im_end|>\n<|im_start|>assistant\n')
    assert q.answer() == 'The letter "r" appears 3 times in the word "strawberry".'
    assert Question("cat", "a").answer() == 'The letter "a" appears 1 time in the word "cat".'
    assert q.answer("spelled") == ("s-t-r-a-w-b-e-r-r-y. The letter \"r\" appears 3 times in "
                                   "the word \"strawberry\".")


@pytest.mark.parametrize("make, message", [
    (lambda: Question("Straw", "r"), "lowercase letters a to z only"),
    (lambda: Question("naïve", "a"), "lowercase letters a to z only"),
    (lambda: Question("", "a"), "lowercase letters a to z only"),
    (lambda: Question("straw", "rr"), "one of a to z"),
    (lambda: Question("straw", "R"), "one of a to z"),
    (lambda: Question("straw", "r").answer("digits"), "format must be one of"),
    (lambda: letters.sample_questions(["straw"], 6), "multiple of 4"),
    (lambda: letters.sample_questions(["ab"], 4), "appears 2 times"),
    (lambda: letters.split_words(["ab", "cd"]), "no word of lowercase letters"),
    (lambda: letters.split_words(["straw"], every=1), "at least 2"),
])
def test_bad_input_is_named(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_words_are_held_out_whole_and_the_same_whatever_the_order():
    words = [f"{a}{b}{c}" for a in "abcdefghij" for b in "klmnopqrs" for c in "tuvwxyz"]
    train, held = letters.split_words(words)
    assert not set(train) & set(held) and sorted(train + held) == sorted(words)
    assert 0.07 < len(held) / len(words) < 0.13  # one in ten, by a hash
    shuffled = words[:]
    random.Random(0).shuffle(shuffled)
    again_train, again_held = letters.split_words(shuffled + ["Upper", "x1", "ab"])
    assert set(again_held) == set(held) and set(again_train) == set(train)


@pytest.mark.usefixtures("texts")
def test_the_word_list_leaves_hundreds_of_words_held_out():
    train, held = letters.split_words(corpus.english_words())
    assert len(held) >= 500 and len(train) > 8 * len(held)


def test_every_count_is_asked_equally_often_and_each_answer_is_right():
    words = ["strawberry", "banana", "letter", "moon", "sky", "assess", "bookkeeper"]
    questions = letters.sample_questions(words, 40, np.random.default_rng(0))
    counts = Counter(q.count for q in questions)
    assert counts == {0: 10, 1: 10, 2: 10, 3: 10}
    assert all(q.word in words and q.word.count(q.letter) == q.count for q in questions)
    assert questions == letters.sample_questions(words, 40, np.random.default_rng(0))


@pytest.mark.parametrize("text, count", [
    ('The letter "r" appears 3 times in the word "strawberry".', 3),
    ('The letter "q" appears 1 time in the word "summiting".', 1),
    ('The letter "e" appears 10 times in the word "wavemeters."', 10),
    ("s-t-r-a-w. It appears two times, not 3 times... no: it appears 2 times.", 2),
    ("It appears twice.", 2),
    ("The letter z does not appear in this word.", 0),
    ("It doesn't appear at all.", 0),
    ("It appears zero times.", 0),
    ("I cannot count letters.", None),
    ("3", None),  # a bare number states no count of times
])
def test_the_count_an_answer_states(text, count):
    assert letters.read_count(text) == count


def test_the_mask_selects_the_answer_and_the_end_of_the_turn(tokenizer):
    q = Question("strawberry", "r")
    for format in letters.FORMATS:
        ids, mask = letters.encode(tokenizer, q, format)
        assert mask.shape == (len(ids) - 1,)
        targets = ids[1:]
        assert tokenizer.decode(targets[mask]) == q.answer(format) + "<|im_end|>"
        prompt = tokenizer.encode(q.prompt())
        assert np.array_equal(ids[:len(prompt)], prompt) and not mask[:len(prompt) - 1].any()


def test_a_batch_pads_on_the_right_and_masks_the_padding(tokenizer):
    questions = [Question("strawberry", "r"), Question("sky", "k")]
    inputs, targets, mask = letters.batch(tokenizer, questions, "spelled")
    assert inputs.shape == targets.shape == mask.shape and inputs.shape[0] == 2
    assert np.array_equal(inputs[:, 1:], targets[:, :-1])
    for row, q in enumerate(questions):
        ids, own = letters.encode(tokenizer, q, "spelled")
        assert np.array_equal(inputs[row, :len(ids) - 1], ids[:-1])
        assert np.array_equal(mask[row, :len(own)], own) and not mask[row, len(own):].any()
    assert mask[0].sum() > mask[1].sum()  # the longer word's spelling takes more tokens
    with pytest.raises(ValueError, match="at least one question"):
        letters.batch(tokenizer, [])


class ScriptedModel:
    """A model that answers with a fixed list of tokens, one a step, through its cache; what
    it is fed is recorded."""

    def __init__(self, script, vocab_size):
        self.script, self.vocab_size, self.fed = list(script), vocab_size, []

    def inference(self):
        import contextlib

        return contextlib.nullcontext()

    def new_cache(self):
        return object()

    def forward(self, tokens, *, cache=None):
        assert cache is not None
        self.fed.append(np.asarray(tokens).copy())
        logits = np.zeros((1, tokens.shape[1], self.vocab_size))
        logits[0, -1, self.script.pop(0)] = 1.0
        return logits


def test_the_greedy_answer_stops_at_the_end_of_the_turn(tokenizer):
    q = Question("strawberry", "r")
    reply = list(tokenizer.encode(q.answer()))
    end = tokenizer.special_tokens["<|im_end|>"]
    model = ScriptedModel([*reply, end, 7, 7], len(tokenizer.special_tokens) + 50_000)
    assert letters.answer(model, tokenizer, q) == q.answer()
    assert np.array_equal(model.fed[0][0], tokenizer.encode(q.prompt()))
    assert len(model.fed) == 1 + len(reply)  # the prompt, then one token a step, no more
    cut = ScriptedModel([*reply, end], 60_000)
    assert letters.answer(cut, tokenizer, q, max_new_tokens=2) == tokenizer.decode(
        np.array(reply[:2]))
    wrong = [Question("sky", "k"), Question("moon", "o")]  # 1 and 2: "1 time" is right once
    script = [*tokenizer.encode(wrong[0].answer()), end, *tokenizer.encode(wrong[0].answer()),
              end]
    score, answers = letters.accuracy(ScriptedModel(script, 60_000), tokenizer, wrong)
    assert score == 0.5 and answers == [wrong[0].answer()] * 2


def test_the_task_holds_out_words_and_trains_on_the_others(tokenizer):
    words = ["".join(letters_) for letters_ in itertools.product("abcde", repeat=4)]
    task = letters.CountLettersTask(tokenizer, words, format="spelled")
    split = task.split(np.random.default_rng(0), 8, 12)
    valid, test = {q.word for q in split.valid}, {q.word for q in split.test}
    assert len(split.valid) == 8 and len(split.test) == 12 and not valid & test
    assert (valid | test) <= set(task.held_words) and not set(task.held_words) & set(
        task.train_words)
    inputs, targets, mask = task.sample(np.random.default_rng(1), 6, split.exclude)
    assert inputs.shape[0] == 8  # rounded up to a multiple of the four counts
    trained = {tokenizer.decode(row).split('the word "')[1].split('"')[0] for row in inputs}
    assert trained <= set(task.train_words)
    with pytest.raises(ValueError, match="format must be"):
        letters.CountLettersTask(tokenizer, words, format="digits")


@pytest.mark.parametrize("argv, message", [
    (["--task", "reverse", "--method", "lora"], "--method and --format apply to --task "
                                                "count-letters only"),
    (["--task", "add", "--format", "spelled"], "--method and --format apply"),
    (["--task", "count-letters", "--norm", "post"], "--norm does not apply to --task "
                                                    "count-letters"),
    (["--task", "reverse", "--seconds", "5"], "--seconds applies to --task text and --task "
                                              "count-letters only"),
    (["--task", "reverse", "--lr", "0"], "--lr must be finite and positive, got 0"),
    (["--task", "count-letters", "--lr", "nan"], "--lr must be finite and positive, got nan"),
])
def test_the_command_refuses_options_of_other_tasks(argv, message, capsys):
    from scratchformer.train.cli import main

    with pytest.raises(SystemExit):
        main(argv)
    assert message in capsys.readouterr().err


def test_the_learning_rate_given_is_the_one_trained_with(monkeypatch):
    """--lr replaces the recipe's peak rate: the configuration the loop receives says so
    (the loop itself is not run)."""
    from scratchformer.train import cli

    seen = []

    def record(model, task, config, log=None):
        seen.append(config.peak_lr)
        raise KeyboardInterrupt  # stop before any training

    monkeypatch.setattr(cli, "train", record)
    for argv, expected in ((["--task", "reverse", "--lr", "7e-4"], 7e-4),
                           (["--task", "reverse"], cli.TrainConfig().peak_lr)):
        with pytest.raises(KeyboardInterrupt):
            cli.main(argv + ["--max-steps", "1"])
        assert seen.pop() == expected


@pytest.mark.slow
@pytest.mark.usefixtures("texts")
@pytest.mark.parametrize("method", ["lora", "base"])
def test_the_command_ends_with_the_held_out_accuracy_and_seconds(method, capsys, monkeypatch):
    """Two steps of fine-tuning (or none), scored on 8 held-out questions: the last line
    says what the issue asks of it."""
    from scratchformer.train import cli
    from scratchformer.train.cli import main

    monkeypatch.setitem(cli.LETTERS_TRAINING, "n_valid", 4)
    monkeypatch.setitem(cli.LETTERS_TRAINING, "n_test", 8)
    assert main(["--task", "count-letters", "--method", method, "--max-steps", "2",
                 "--quiet"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    score, seconds = last.split()
    assert score.startswith("accuracy=") and seconds.startswith("seconds=")
    assert float(score.split("=")[1]) in {i / 8 for i in range(9)}
    assert (float(seconds.split("=")[1]) > 0) == (method != "base")
