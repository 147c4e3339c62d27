"""Tests for scratchformer.train and scratchformer.tasks: held-out data, determinism, a loop
that takes any model and task, and the command line."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import numpy as np
import pytest

import scratchformer as sf
from conftest import training_environment
from scratchformer import train as tr
from scratchformer.train import cli

SMALL = tr.TrainConfig(max_steps=120, eval_every=40, n_valid=100, n_test=100,
                       warmup_steps=40, target_accuracy=None)
REVERSE = sf.LabellingTask()


def test_targets():
    tokens = np.array([[3, 1, 2, 1]])
    assert sf.LabellingTask(kind="reverse").targets(tokens).tolist() == [[1, 2, 1, 3]]
    assert sf.LabellingTask(kind="sort").targets(tokens).tolist() == [[1, 1, 2, 3]]
    with pytest.raises(ValueError, match="kind must be 'reverse' or 'sort', got 'copy'"):
        sf.LabellingTask(kind="copy")
    with pytest.raises(ValueError, match="task must be one of"):
        tr.make_task("copy")


def test_training_batches_never_contain_held_out_sequences():
    # a tiny space (3**3 = 27 sequences) so that clashes are certain without the exclusion
    task = sf.LabellingTask(length=3, vocab_size=3)
    split = task.split(np.random.default_rng(0), n_valid=4, n_test=6)
    held = [tuple(row) for part in (split.valid, split.test) for row in part[0]]
    assert len(set(held)) == 10  # distinct, and valid and test disjoint
    tokens, targets = task.sample(np.random.default_rng(1), 500, split.exclude)
    assert not set(map(tuple, tokens)) & set(held)
    assert len(set(map(tuple, tokens))) == 27 - 10  # everything else does appear
    np.testing.assert_array_equal(targets, tokens[:, ::-1])


@pytest.mark.slow
def test_training_is_deterministic_and_learns():
    first = tr.train(tr.book_model(REVERSE), REVERSE, SMALL)
    second = tr.train(tr.book_model(REVERSE), REVERSE, SMALL)
    np.testing.assert_array_equal(first.history["loss"], second.history["loss"])
    assert first.test == second.test
    assert first.test.keys() == {"accuracy", "sequence_accuracy"}
    chance = np.log(10)  # the loss of guessing one of 10 digits uniformly
    assert first.history["loss"][:5].mean() > chance
    assert first.history["loss"][-5:].mean() < 0.5 * chance
    other = tr.train(tr.book_model(REVERSE, seed=1), REVERSE,
                     dataclasses.replace(SMALL, seed=1))
    assert not np.array_equal(other.history["loss"], first.history["loss"])


def test_the_loop_trains_the_model_it_is_given_on_the_task_it_is_given():
    task = sf.LabellingTask(kind="sort", length=5, vocab_size=6)
    model = sf.EncoderModel(vocab_size=6, n_classes=6, d_model=16, n_heads=2, d_ff=32,
                            n_layers=1, norm="pre", rng=np.random.default_rng(3))
    before = model.blocks[0].ffn.params["w_1"].copy()
    result = tr.train(model, task, dataclasses.replace(SMALL, max_steps=40, eval_every=20,
                                                        warmup_steps=10))
    assert result.model is model and result.steps == 40
    assert not np.array_equal(model.blocks[0].ffn.params["w_1"], before)  # trained in place
    with pytest.raises(TypeError, match="model must be a scratchformer Layer"):
        tr.train(object(), task, SMALL)
    with pytest.raises(TypeError, match="task must be a scratchformer.tasks.Task"):
        tr.train(model, "sort", SMALL)


def test_kept_parameters_are_the_model_at_each_evaluation():
    task = sf.LabellingTask(kind="sort", length=5, vocab_size=6)
    config = dataclasses.replace(SMALL, max_steps=40, eval_every=20, warmup_steps=10,
                                 keep_parameters=True)
    result = tr.train(tr.book_model(task), task, config)
    assert sorted(result.parameters_at) == [20, 40]
    final = {name: layer.params[key] for name, layer, key in result.model.named_parameters()}
    for name, value in final.items():
        np.testing.assert_array_equal(result.parameters_at[40][name], value)
        assert result.parameters_at[40][name] is not value  # a copy, not the live array
    assert any(not np.array_equal(result.parameters_at[20][name], value)
               for name, value in final.items())
    # the copy at step 20 scores what the validation scored then
    early = tr.book_model(task)
    early.load_parameters(result.parameters_at[20])
    score = task.evaluate(early, result.split.valid)["accuracy"]
    assert score == result.history["valid_accuracy"][0]
    assert tr.train(tr.book_model(task), task, dataclasses.replace(
        config, keep_parameters=False)).parameters_at == {}


def _text_task(vocab=11, context=6, seed=0):
    from scratchformer.language_model import TextTask

    stream = np.random.default_rng(seed).integers(0, vocab, size=400)
    return TextTask(stream, stream, vocab_size=vocab, context=context,
                    characters=np.ones(vocab, np.int64))


def _gradients(model):
    return {name: layer.grads[key].copy() for name, layer, key in model.named_parameters()}


@pytest.mark.parametrize("count", [5, 8])
def test_a_batch_in_parts_on_threads_gives_the_whole_batch_s_loss_and_gradients(count):
    from scratchformer.train import loop

    task = _text_task()
    model = tr.text_model(task, dtype=np.float64, d_model=16, n_heads=2, d_ff=32, n_layers=2)
    batch = task.sample(np.random.default_rng(1), count)
    whole = loop._loss_and_backward(model, task, batch, workers=1)
    expected = _gradients(model)
    parts = task.parts(batch, 2)
    sizes = sorted(len(p[0]) for p, _ in parts)
    assert sizes == [count // 2, (count + 1) // 2]
    assert sum(weight for _, weight in parts) == pytest.approx(1.0)
    in_parts = loop._loss_and_backward(model, task, batch, workers=2)
    assert in_parts == pytest.approx(whole, rel=1e-13)
    for name, grad in _gradients(model).items():
        np.testing.assert_allclose(grad, expected[name], rtol=1e-10, atol=1e-14, err_msg=name)
    # the replica shares the parameters, also after they are replaced, and not the gradients
    (replica,) = loop._replicas(model, 1)
    for (_, layer), (_, twin) in zip(model._tree(), replica._tree()):
        assert twin.params is layer.params and (not layer.grads or twin.grads is not
                                                layer.grads)
    model.load_parameters({name: layer.params[key] * 0.5
                           for name, layer, key in model.named_parameters()})
    halved = loop._loss_and_backward(model, task, batch, workers=1)
    assert loop._loss_and_backward(model, task, batch, workers=2) == pytest.approx(halved)
    assert halved != pytest.approx(whole)


@pytest.mark.parametrize("task", [REVERSE, sf.AdditionTask()], ids=["reverse", "add"])
def test_the_labelling_and_adding_tasks_cut_their_batches_by_rows(task):
    from scratchformer.train import loop

    model = (tr.book_model(task, dtype=np.float64) if task is REVERSE
             else tr.adder_model(task, dtype=np.float64))
    batch = task.sample(np.random.default_rng(0), 7, np.empty(0, np.int64))
    parts = task.parts(batch, 3)
    assert [len(p[0]) for p, _ in parts] == [2, 3, 2]
    for i in range(len(batch)):  # every array of the batch, cut alike
        np.testing.assert_array_equal(np.concatenate([p[i] for p, _ in parts]), batch[i])
    whole = loop._loss_and_backward(model, task, batch, workers=1)
    expected = _gradients(model)
    assert loop._loss_and_backward(model, task, batch, workers=3) == pytest.approx(whole,
                                                                                   rel=1e-13)
    for name, grad in _gradients(model).items():
        np.testing.assert_allclose(grad, expected[name], rtol=1e-10, atol=1e-14, err_msg=name)


def test_a_task_that_cannot_cut_its_batch_is_taken_whole():
    from scratchformer.train import loop

    task = sf.TranslationTask()
    model = tr.book_model(task)
    batch = task.sample(np.random.default_rng(0), 8, np.empty(0, np.int64))
    assert task.parts(batch, 2) is None  # padding: rows count different numbers of tokens
    whole = loop._loss_and_backward(model, task, batch, workers=1)
    expected = _gradients(model)
    assert loop._loss_and_backward(model, task, batch, workers=2) == whole
    for name, grad in _gradients(model).items():
        np.testing.assert_array_equal(grad, expected[name])


def test_evaluation_runs_in_inference_mode_and_leaves_nothing_saved():
    model = tr.book_model(REVERSE)
    split = REVERSE.split(np.random.default_rng(0), 20, 20)
    scores = REVERSE.evaluate(model, split.test)
    assert 0 <= scores["sequence_accuracy"] <= scores["accuracy"] <= 1
    assert all(layer._saved is None for _, layer in model._tree())
    with pytest.raises(RuntimeError, match="needs a forward pass first"):
        model.backward(np.zeros((20, 10, 10)))


def test_stops_at_the_target_accuracy():
    config = dataclasses.replace(SMALL, target_accuracy=0.0)  # reached at the first check
    result = tr.train(tr.book_model(REVERSE), REVERSE, config)
    assert result.steps == config.eval_every


def test_bad_configs_are_refused():
    with pytest.raises(ValueError, match="2\\*\\*62"):
        sf.LabellingTask(vocab_size=100, length=20)
    with pytest.raises(ValueError, match="half"):
        sf.LabellingTask(length=3, vocab_size=3).split(np.random.default_rng(0), 10, 10)
    with pytest.raises(ValueError, match="warmup_steps"):
        tr.TrainConfig(warmup_steps=10, max_steps=10)
    with pytest.raises(TypeError, match="batch_size must be a positive integer"):
        tr.TrainConfig(batch_size=6.4)


@pytest.mark.slow
def test_command_line_trains_the_book_model_to_99_percent():
    """The default run: deterministic, so its accuracy is a fact to test (its time, which
    the issue bounds by 60 s on 2 cores, is reported by the run and the training chapter)."""
    completed = subprocess.run([sys.executable, "-m", "scratchformer.train", "--quiet"],
                               capture_output=True, text=True, check=True, timeout=600,
                               env=training_environment())
    last = completed.stdout.strip().splitlines()[-1]
    fields = dict(item.split("=") for item in last.split())
    assert fields.keys() == {"accuracy", "seconds"}
    assert float(fields["accuracy"]) >= 0.99 and float(fields["seconds"]) > 0


def test_command_line_rejects_an_unknown_task():
    completed = subprocess.run([sys.executable, "-m", "scratchformer.train", "--task", "copy"],
                               capture_output=True, text=True, timeout=60)
    assert completed.returncode == 2 and "invalid choice: 'copy'" in completed.stderr


def test_the_help_states_the_adders_default_positions(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    default = tr.ADDER_MODEL["positions"]
    assert f"the adder's positions (default {default})" in help_text
    task = sf.AdditionTask()
    assert tr.adder_model(task).config.positions == default  # what --task add then trains


class _PoisonedTask(sf.LabellingTask):
    """Reversal, with one entry of one gradient made NaN at the given step."""

    def __init__(self, poisoned_step):
        super().__init__(kind="reverse", length=4, vocab_size=5)
        self.poisoned_step, self.steps = poisoned_step, 0

    def sample(self, rng, count, exclude):  # once a step
        self.steps += 1
        return super().sample(rng, count, exclude)

    def loss_and_backward(self, model, batch):  # perhaps on parts of the batch, in replicas
        loss = super().loss_and_backward(model, batch)
        if self.steps == self.poisoned_step:
            model.blocks[0].ffn.grads["w_1"][0, 0] = np.nan
        return loss


def test_a_nan_gradient_stops_training_naming_the_step_and_the_parameter_unupdated():
    """Two runs from one seed: the one poisoned at step 3 stops there, names the step and the
    parameter, and leaves every parameter as the clean run had it after step 2."""
    config = tr.TrainConfig(max_steps=2, warmup_steps=1, eval_every=50, n_valid=8, n_test=8,
                            batch_size=4, target_accuracy=None)
    clean_task = _PoisonedTask(poisoned_step=0)
    clean = tr.train(tr.book_model(clean_task, seed=0, d_model=8, n_heads=2, d_ff=8,
                                   n_layers=1), clean_task, config)
    task = _PoisonedTask(poisoned_step=3)
    model = tr.book_model(task, seed=0, d_model=8, n_heads=2, d_ff=8, n_layers=1)
    with pytest.raises(FloatingPointError, match=r"training stopped at step 3: .*the gradient "
                                                 r"for blocks\.0\.ffn\.w_1 is not finite"):
        tr.train(model, task, dataclasses.replace(config, max_steps=5))
    for name, layer, key in model.named_parameters():
        after_two = dict((n, lay.params[k]) for n, lay, k in clean.model.named_parameters())
        assert np.array_equal(layer.params[key], after_two[name]), name
