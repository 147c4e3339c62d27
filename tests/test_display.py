"""Tests for scratchformer.book.display's table of a training run: the model and settings a
reader needs to repeat the run, as they were set."""

from __future__ import annotations

import numpy as np
import pytest

import scratchformer as sf
from scratchformer import train as tr
from scratchformer.book import markdown_table, run_settings


def settings(table):
    """The table's rows as {setting: value}, after checking its two header lines."""
    lines = table.splitlines()
    assert lines[:2] == ["| setting | value |", "|:--|:--|"]
    rows = {}
    for line in lines[2:]:
        assert line.startswith("| ") and line.endswith(" |")
        setting, value = line[2:-2].split(" | ")
        assert setting not in rows, f"{setting} twice"
        rows[setting] = value.strip()
    return rows


def test_run_settings_shows_the_model_and_the_settings_as_set():
    task = sf.LabellingTask(kind="sort", length=8, vocab_size=6)
    model = tr.book_model(task, d_model=48, n_heads=3, d_ff=96, n_layers=3, norm="pre")
    config = tr.TrainConfig(batch_size=32, peak_lr=3e-4, warmup_steps=50,
                            final_lr_fraction=0.05, weight_decay=1e-5, clip_norm=0.5,
                            max_steps=2500, eval_every=25, n_valid=300, n_test=1200,
                            target_accuracy=0.98, seed=7)
    rows = settings(run_settings(model, config, task=task))
    assert rows == {
        "**task**": "`LabellingTask`", "`kind`": "sort", "`length`": "8",
        "`vocab_size`": "6",
        "**model**": "`EncoderModel`", "blocks": "3", "`d_model`": "48", "heads": "3",
        "`d_ff`": "96", "vocabulary": "6", "labels": "6", "norms": "pre-LN",
        "parameters": f"{model.num_parameters:,}",
        "**training**": "", "batch size": "32", "peak learning rate": "0.0003",
        "warm-up steps": "50", "cosine decay to": "0.05 × peak",
        "weight decay": "1e-5", "gradient clipping": "at norm 0.5",
        "stops after": "2,500 steps", "target accuracy": "98 % (validation)",
        "evaluated every": "25 steps", "validation set": "300", "test set": "1,200",
        "seed": "7"}


def test_run_settings_reads_each_kind_of_model():
    translation = sf.TranslationTask(label_smoothing=0.2)
    rows = settings(run_settings(tr.book_model(translation), tr.TRANSLATION_CONFIG,
                                 task=translation))
    assert rows["**model**"] == "`EncoderDecoderModel`"
    assert rows["blocks per stack"] == str(tr.BOOK_MODEL["n_layers"])
    assert rows["source vocabulary"] == str(translation.vocab_size)
    assert rows["target vocabulary"] == str(translation.target_vocab_size)
    assert rows["`label_smoothing`"] == "0.2"
    assert rows["evaluated every"] == f"{tr.TRANSLATION_CONFIG.eval_every} steps"
    assert rows["dropout"] == "none"
    compared = settings(run_settings([tr.book_model(translation),
                                      tr.book_model(translation, dropout=0.1)],
                                     tr.TRANSLATION_CONFIG))
    assert compared["dropout"] == "none or 0.1"

    llama = sf.DecoderModel(vocab_size=300, d_model=32, n_heads=4, n_kv_heads=2, d_ff=40,
                            n_layers=1, max_positions=1024, normalization="rms",
                            feed_forward="swiglu", tie_embeddings=True,
                            rng=np.random.default_rng(0))
    budget = tr.TrainConfig(cpu_seconds=600.0, max_steps=1_000_000, clip_norm=None,
                            target_accuracy=None)
    rows = settings(run_settings(llama, budget))
    assert "**task**" not in rows and "labels" not in rows
    assert rows["heads"] == "4, 2 key/value"
    assert rows["`d_ff`"] == "40, SwiGLU"
    assert rows["vocabulary"] == "300, head tied"
    assert rows["positions"] == "rotary" and rows["longest sequence"] == "1,024"
    assert rows["norms"] == "pre, RMS norm"
    assert rows["stops after"] == "600 CPU-s, at most 1,000,000 steps"
    assert rows["gradient clipping"] == "none" and rows["target accuracy"] == "none"


def test_run_settings_lists_what_the_compared_runs_vary():
    task = sf.AdditionTask()
    models = [tr.adder_model(task), tr.adder_model(task, positions="rotary")]
    configs = [tr.TrainConfig(**(tr.ADDER_TRAINING | {"warmup_steps": w}))
               for w in (0, 40)]
    rows = settings(run_settings(models, configs, task=task))
    assert rows["positions"] == "sinusoidal or rotary"  # in the order given
    assert rows["warm-up steps"] == "0 or 40"
    assert rows["peak learning rate"] == "0.006"  # the same in both: once
    assert rows["parameters"] == f"{models[0].num_parameters:,}"
    assert rows == settings(run_settings(tuple(models), configs, task=task))


def test_run_settings_shows_number_formats_only_where_a_run_changes_them():
    task = sf.AdditionTask()
    model = tr.adder_model(task)
    plain = tr.TrainConfig(**tr.ADDER_TRAINING)
    assert "gradients kept in" not in settings(run_settings(model, plain, task=task))
    half = tr.TrainConfig(**(tr.ADDER_TRAINING | {"gradients": "float16", "micro_batches": 32,
                                                   "loss_scaling": True}))
    rows = settings(run_settings([model, model], [plain, half], task=task))
    assert rows["gradients kept in"] == "float32 or float16"
    assert rows["loss scaling"] == "none or dynamic"
    assert rows["gradients computed as one of"] == "1 micro-batch or 32 micro-batches"
    assert rows["weights stored in"] == "float32"


def test_run_settings_writes_numbers_plainly():
    task = sf.LabellingTask()
    config = tr.TrainConfig(peak_lr=np.float64(1e-3), batch_size=np.int64(128),
                            max_steps=10_000, weight_decay=0.0)
    rows = settings(run_settings(tr.book_model(task), config))
    assert rows["peak learning rate"] == "0.001"
    assert rows["batch size"] == "128"
    assert rows["stops after"] == "10,000 steps"
    assert rows["weight decay"] == "0"


@pytest.mark.parametrize("model, config, task, message", [
    ("EncoderModel", tr.TrainConfig(), None,
     "model must be a model built from a configuration .* got str"),
    (sf.LayerNorm(4), tr.TrainConfig(), None,
     "model must be a model built from a configuration .* got LayerNorm"),
    (None, {"peak_lr": 1e-3}, None, "config must be a TrainConfig, got dict"),
    (None, tr.ADDER_TRAINING, None, "config must be a TrainConfig, got dict"),
    (None, [tr.TrainConfig(), "fast"], None, "config must be a TrainConfig, got str"),
    (None, tr.TrainConfig(), "reverse", "task must be a Task .* got str"),
])
def test_run_settings_refuses_what_is_not_a_model_or_its_settings(model, config, task,
                                                                 message):
    model = tr.book_model(sf.LabellingTask()) if model is None else model
    with pytest.raises(TypeError, match=message):
        run_settings(model, config, task=task)


def test_run_settings_refuses_a_result_in_place_of_its_model():
    task = sf.LabellingTask()
    result = tr.TrainResult(model=tr.book_model(task), history={}, test={}, steps=0,
                            seconds=0.0)
    with pytest.raises(TypeError, match="got TrainResult"):
        run_settings(result, tr.TrainConfig())


def test_run_settings_compares_models_of_one_kind_only():
    labels, add = sf.LabellingTask(), sf.AdditionTask()
    with pytest.raises(ValueError, match="one kind, got DecoderModel, EncoderModel"):
        run_settings([tr.book_model(labels), tr.adder_model(add)], tr.TrainConfig())
    with pytest.raises(ValueError, match="at least one run"):
        run_settings([], tr.TrainConfig())


def test_markdown_table_aligns_columns_as_asked():
    rows = [{"a": "x", "b": 1}]
    columns = [("a", "a", "{}"), ("b", "b", "{}")]
    assert markdown_table(rows, columns).splitlines()[1] == "|--:|--:|"
    assert markdown_table(rows, columns, align="lr").splitlines()[1] == "|:--|--:|"
    for bad in ("l", "lx", ["l", "r"]):
        with pytest.raises(ValueError, match="'l' or 'r' for each of the 2 columns"):
            markdown_table(rows, columns, align=bad)
