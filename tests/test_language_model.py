"""Tests for scratchformer.language_model, the budgeted training loop and the text command."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from scratchformer import DecoderModel, cross_entropy
from scratchformer import tokenizer as tk
from scratchformer.gradcheck import numerical_gradient, randomize_parameters, relative_error
from scratchformer.language_model import (
    CharTokenizer,
    TextTask,
    addresses_task,
    characters_per_token,
    log_probabilities,
)
from scratchformer.train import TEXT_MODEL, TrainConfig, text_model, train
from scratchformer.train.cli import main

EOT = "<|endoftext|>"


def small_task(vocab=7, context=5, n_train=200, n_held=61, seed=0):
    rng = np.random.default_rng(seed)
    return TextTask(rng.integers(0, vocab, n_train), rng.integers(0, vocab, n_held),
                    vocab_size=vocab, context=context, characters=np.ones(vocab, np.int64))


def small_model(task, seed=0, dtype=np.float64):
    return DecoderModel(vocab_size=task.vocab_size, d_model=8, n_heads=2, d_ff=16, n_layers=2,
                        max_positions=task.context, rng=np.random.default_rng(seed),
                        dtype=dtype)


# --- the character tokenizer -------------------------------------------------------------

@given(st.text(alphabet="ab \n\u00e9\U0001f600", max_size=40))
def test_characters_round_trip(text):
    tok = CharTokenizer("ab \n\u00e9\U0001f600", [EOT])
    ids = tok.encode(text)
    assert ids.dtype == np.int64 and len(ids) == len(text)
    assert tok.decode(ids) == text


def test_a_special_token_is_one_id_and_training_leaves_it_out_of_the_alphabet():
    tok = CharTokenizer.train(f"ab{EOT}ba{EOT}", [EOT])
    assert tok.alphabet == ("a", "b") and tok.special_tokens == {EOT: 2}
    assert tok.vocab_size == 3
    assert tok.encode(f"a{EOT}{EOT}b").tolist() == [0, 2, 2, 1]
    assert tok.decode([0, 2, 1]) == f"a{EOT}b"


def test_character_tokenizer_errors_name_the_problem():
    tok = CharTokenizer("ab")
    with pytest.raises(ValueError, match="'c' is not in the tokenizer's alphabet"):
        tok.encode("abc")
    with pytest.raises(ValueError, match=r"ids must lie in \[0, 2\)"):
        tok.decode([0, 2])
    with pytest.raises(TypeError, match="must be integers"):
        tok.decode([0.5])
    with pytest.raises(TypeError, match="must be a str"):
        tok.encode(b"ab")
    with pytest.raises(ValueError, match="single characters"):
        CharTokenizer(["ab"])
    with pytest.raises(ValueError, match="each character once"):
        CharTokenizer("aa")
    with pytest.raises(ValueError, match="at least two characters"):
        CharTokenizer("ab", ["x"])


# --- counting characters ----------------------------------------------------------------

@given(st.lists(st.text(max_size=12), min_size=1, max_size=4))
def test_characters_per_token_sum_to_the_characters_of_any_text(documents):
    """Counted at each character's first byte, the characters of a text's tokens add up to
    len(text), with the end-of-text token counted as one, even where BPE ends a token inside
    a character of several bytes."""
    text = "".join(document + EOT for document in documents)
    bpe = tk.BPE.train(text + "\u00e9\u00e9\u00e9 \U0001f600\U0001f600", 256 + 6 + 1,
                       special_tokens=[EOT])
    counts = characters_per_token(bpe)
    expected = sum(len(document) for document in documents) + len(documents)
    assert int(counts[bpe.encode(text)].sum()) == expected


def test_a_byte_token_inside_a_character_begins_no_character():
    bpe = tk.BPE.train("ab", 256 + 1)
    counts = characters_per_token(bpe)
    e_acute = "\u00e9".encode()  # two bytes: a lead byte and a continuation byte
    assert counts[bpe.byte_ids[e_acute[0]]] == 1
    assert counts[bpe.byte_ids[e_acute[1]]] == 0
    assert counts[bpe.byte_ids[ord("a")]] == 1


def test_log_probabilities_are_the_cross_entropy_of_each_token():
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(3, 4, 11)) * 30  # large logits: the log-softmax must be stable
    targets = rng.integers(0, 11, size=(3, 4))
    picked = log_probabilities(logits, targets)
    assert picked.shape == (3, 4) and (picked <= 0).all()
    loss, _ = cross_entropy(logits, targets)
    assert -picked.mean() == pytest.approx(loss, rel=1e-12)


# --- the task ---------------------------------------------------------------------------

def test_training_windows_are_consecutive_tokens_of_the_training_stream():
    task = small_task()
    (windows,) = task.sample(np.random.default_rng(0), 50)
    assert windows.shape == (50, task.context + 1) and windows.dtype == np.int64
    stream = task.train_ids.tolist()
    for window in windows.tolist():
        starts = [i for i in range(len(stream) - task.context)
                  if stream[i:i + task.context + 1] == window]
        assert starts


def test_held_out_windows_tile_the_stream_and_validation_and_test_are_disjoint():
    task = small_task(context=5, n_held=61)  # 12 windows of 5 predicted tokens
    assert task.held_windows == 12
    split = task.split(np.random.default_rng(0), 4, 8)
    (valid,), (test,) = split.valid, split.test
    windows = [tuple(w) for w in np.concatenate([valid, test]).tolist()]
    tiles = [tuple(task.held_ids[5 * i:5 * i + 6].tolist()) for i in range(12)]
    assert sorted(windows) == sorted(tiles)  # every tile once: no token predicted twice
    with pytest.raises(ValueError, match="12 windows"):
        task.split(np.random.default_rng(0), 6, 7)


def test_a_model_that_knows_nothing_scores_log2_of_the_vocabulary_per_token():
    """All-zero head weights and biases give the uniform distribution: every token costs
    ln V nats, log2 V bits, whatever the window; per character it is that times tokens over
    characters."""
    task = TextTask(np.arange(40) % 6, np.arange(31) % 6, vocab_size=6, context=5,
                    characters=np.array([1, 2, 3, 1, 0, 1]))
    model = small_model(task)
    model.head.params["w"][...] = 0
    model.head.params["b"][...] = 0
    split = task.split(np.random.default_rng(0), 2, 4)
    scores = task.evaluate(model, split.test, batch_size=3)  # batches of 3 and 1
    (test,) = split.test
    tokens, characters = test[:, 1:].size, int(task.characters[test[:, 1:]].sum())
    assert scores["nats_per_token"] == pytest.approx(math.log(6), rel=1e-12)
    assert scores["characters"] == characters
    assert scores["bits_per_char"] == pytest.approx(math.log2(6) * tokens / characters,
                                                    rel=1e-12)
    assert scores["nats_per_char"] == pytest.approx(math.log(6) * tokens / characters,
                                                    rel=1e-12)


def test_the_loss_gradient_matches_finite_differences():
    """The task's loss (every next token of every window) and the gradient its backward
    sets, against central differences of that loss, for the embedding, a block and the
    head."""
    task = small_task(vocab=5, context=4)
    model = small_model(task)
    randomize_parameters(model, np.random.default_rng(3))
    batch = task.sample(np.random.default_rng(4), 3)
    (windows,) = batch

    def loss():
        return cross_entropy(model.forward(windows[:, :-1]), windows[:, 1:])[0]

    assert task.loss_and_backward(model, batch) == pytest.approx(loss(), rel=1e-12)
    checked = 0
    for name, layer, key in model.named_parameters():
        if name.split(".")[0] in ("embedding", "head") or name.startswith("blocks.1.ffn"):
            analytic = layer.grads[key].copy()
            with model.inference():
                numeric = numerical_gradient(loss, layer.params[key])
            assert relative_error(analytic, numeric) < 1e-6, name
            checked += 1
    assert checked >= 4


def test_the_run_key_sees_the_streams():
    first, second = small_task(seed=0), small_task(seed=1)
    assert repr(first) != repr(second) and repr(first) == repr(small_task(seed=0))
    assert len(repr(first)) < 200  # a digest, not the streams


def test_bad_streams_get_clear_errors():
    with pytest.raises(ValueError, match="fewer than one window"):
        TextTask([0, 1], [0, 1, 0, 1], vocab_size=2, context=3, characters=[1, 1])
    with pytest.raises(ValueError, match=r"held_ids must lie in \[0, 2\)"):
        TextTask([0, 1, 0, 1], [0, 1, 2, 1], vocab_size=2, context=3, characters=[1, 1])
    with pytest.raises(ValueError, match="1-d array of token ids"):
        TextTask(np.zeros((2, 4), int), [0, 1, 0, 1], vocab_size=2, context=3,
                 characters=[1, 1])
    with pytest.raises(ValueError, match="2 integers, one per id"):
        TextTask([0, 1, 0, 1], [0, 1, 0, 1], vocab_size=2, context=3, characters=[1])


# --- training on a budget ---------------------------------------------------------------

def test_a_budgeted_run_stops_once_its_cpu_seconds_are_spent_and_decays_over_them():
    task = small_task(vocab=5, context=4, n_train=500)
    config = TrainConfig(batch_size=8, max_steps=100_000, warmup_steps=3, eval_every=50,
                         n_valid=2, n_test=2, target_accuracy=None, cpu_seconds=0.5,
                         peak_lr=1e-2, final_lr_fraction=0.1)
    begun = time.process_time()
    result = train(small_model(task), task, config)
    assert time.process_time() - begun >= 0.5
    spent = result.history["cpu_seconds"]
    assert result.cpu_seconds == spent[-1] >= 0.5 and (np.diff(spent) > 0).all()
    assert (spent[:-1] < 0.5).all()  # it stopped at the first step past the budget
    lr = result.history["lr"]
    assert lr[2] == pytest.approx(1e-2)  # the end of the warm-up: the peak
    assert (np.diff(lr[3:]) <= 1e-15).all()  # then it only decays
    assert 1e-3 <= lr[-1] < 1.2e-3  # to the final fraction as the budget runs out
    assert result.history["eval_step"][-1] == result.steps  # scored when it stopped
    assert set(result.test) >= {"bits_per_char", "nats_per_char", "accuracy"}
    assert len(result.history["valid_bits_per_char"]) == len(result.history["eval_step"])


def test_a_budget_must_be_positive():
    with pytest.raises(ValueError, match="cpu_seconds must be positive"):
        TrainConfig(cpu_seconds=0)


def test_the_text_model_is_pre_ln_rotary_with_the_task_s_context():
    task = small_task(context=5)
    model = text_model(task, seed=0)
    c = model.config
    assert (c.norm, c.positions, c.max_positions, c.d_model) == ("pre", "rotary", 5,
                                                                TEXT_MODEL["d_model"])
    with pytest.raises(TypeError, match="text_model takes"):
        text_model(task, width=3)


# --- the addresses and the command ------------------------------------------------------

@pytest.fixture(scope="module")
def char_task(texts):
    return addresses_task("char", context=64)


def test_the_addresses_task_holds_out_whole_addresses(char_task):
    task, tok = char_task
    assert task.vocab_size == tok.vocab_size == len(tok.alphabet) + 1
    eot = tok.special_tokens[EOT]
    # 210 training addresses and 23 held out, each ended by the end-of-text token
    assert int((task.train_ids == eot).sum()) == 210
    assert int((task.held_ids == eot).sum()) == 23
    assert task.held_ids[-1] == eot
    assert int(task.characters[task.held_ids].sum()) == len(task.held_ids)


def test_the_addresses_task_rejects_an_unknown_tokenizer():
    with pytest.raises(ValueError, match="tokenizer must be one of"):
        addresses_task("word")


@pytest.mark.slow
@pytest.mark.usefixtures("texts")
def test_the_command_ends_with_bits_per_char_and_seconds(capsys):
    assert main(["--task", "text", "--seconds", "1", "--quiet"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    bits, seconds = last.split()
    assert bits.startswith("bits_per_char=") and seconds.startswith("seconds=")
    assert 0 < float(bits.split("=")[1]) < 8 and float(seconds.split("=")[1]) >= 1


def test_bits_per_character_of_no_characters_is_an_error():
    task = small_task()
    model = small_model(task)
    with pytest.raises(ValueError, match="bits per character needs windows that spell"):
        task.evaluate(model, (np.zeros((0, task.context + 1), np.int64),))
    rng = np.random.default_rng(0)
    # tokens that begin no character (UTF-8 continuation bytes)
    none = TextTask(rng.integers(0, 7, 200), rng.integers(0, 7, 61), vocab_size=7, context=5,
                    characters=np.zeros(7, np.int64))
    with pytest.raises(ValueError, match="predicted tokens begin none"):
        none.evaluate(model, none.split(rng, 1, 1).valid)


def test_a_special_token_inside_another_is_matched_longest_first():
    for specials in (["<e>", "<e>x"], ["<e>x", "<e>"]):
        tokenizer = CharTokenizer("abcx", specials)
        ids = tokenizer.special_tokens
        assert tokenizer.encode("<e>x<e>a").tolist() == [ids["<e>x"], ids["<e>"], 0]
        assert tokenizer.decode(tokenizer.encode("a<e>xx<e>")) == "a<e>xx<e>"


@pytest.mark.parametrize("argv, message", [
    (["--task", "text", "--seconds", "inf"], "--seconds must be finite and positive, got inf"),
    (["--task", "text", "--seconds", "1e400"], "--seconds must be finite and positive, got inf"),
    (["--seed", "-1", "--max-steps", "1"], "--seed must be a non-negative integer, got -1"),
    # the text model is pre-LN only: --norm post would be silently ignored
    (["--task", "text", "--norm", "post"], "--norm does not apply to --task text"),
])
def test_the_command_rejects_an_endless_budget_and_a_negative_seed(argv, message, capsys):
    with pytest.raises(SystemExit):
        main(argv)
    assert message in capsys.readouterr().err


def test_the_command_rejects_text_options_elsewhere():
    with pytest.raises(SystemExit):
        main(["--task", "reverse", "--tokenizer", "bpe"])
    with pytest.raises(SystemExit):
        main(["--task", "text", "--seconds", "0"])
