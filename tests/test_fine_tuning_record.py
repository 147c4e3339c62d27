"""benchmarks/fine_tuning_runs.py reads what the command printed, and only a log of the
command it is asked about; the record it wrote is what the chapter prints."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def script():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    spec = importlib.util.spec_from_file_location("fine_tuning_runs",
                                                  ROOT / "benchmarks" / "fine_tuning_runs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def log(method="lora", seconds=1800, lr=None, printed=True):
    command = " ".join(script().command(method, "spelled", seconds, 0, lr)[1:])
    rate = f", peak learning rate {lr or 0.001:g}" if printed else ""
    return (f"# date=2026-12-07 commit=abc1234 command={command}\n"
            f"{method}: 460,800 trainable parameters of 134,975,808{rate}\n"
            "step=25 loss=0.5104 valid_accuracy=0.1250 seconds=311.7\n"
            "step=50 loss=0.3892 valid_accuracy=0.2250 seconds=637.8\n"
            "steps=312\naccuracy=0.5240 seconds=1800.4\n")


def test_a_log_of_the_command_is_read():
    run = script().parse(log(), "lora", "spelled", 1800, 0)
    assert run["trainable"] == 460_800 and run["steps"] == 312
    assert run["accuracy"] == pytest.approx(0.524) and run["cpu_seconds"] == pytest.approx(1800.4)
    assert run["valid"] == [(25, 0.125), (50, 0.225)]
    assert (run["date"], run["commit"], run["n_test"]) == ("2026-12-07", "abc1234", 500)
    assert run["peak_lr"] == pytest.approx(0.001)  # the rate the command printed


def test_the_rate_given_is_the_rate_recorded():
    text = log(lr=3e-3)
    assert "--lr 0.003 " in text.splitlines()[0]
    assert script().parse(text, "lora", "spelled", 1800, 0, 3e-3)["peak_lr"] == 3e-3
    with pytest.raises(ValueError, match="not of"):  # a log of another rate
        script().parse(text, "lora", "spelled", 1800, 0)
    with pytest.raises(ValueError, match="no peak learning rate"):
        script().parse(log(printed=False), "lora", "spelled", 1800, 0)


def test_a_new_run_replaces_only_the_run_of_its_command():
    def run(method, lr, accuracy):
        return {"method": method, "format": "spelled", "seed": 0, "budget_seconds": 1800.0,
                "peak_lr": lr, "accuracy": accuracy}

    old = [run("full", 3e-5, 0.6), run("lora", 1e-3, 0.5), run("full", 1e-4, 0.7)]
    new = [run("full", 1e-4, 0.8)]
    assert script().merged(old, new) == [old[0], old[1], new[0]]


def test_a_run_recorded_without_its_rate_gets_its_commits_recipe():
    # the record's first runs (commit 4644df3) predate the rate in the record
    assert script().recipe_lr({"method": "full", "commit": "4644df3"}) == 3e-5
    assert script().recipe_lr({"method": "lora", "commit": "4644df3"}) == 1e-3


def test_a_log_of_another_command_is_refused():
    with pytest.raises(ValueError, match="not of"):
        script().parse(log(seconds=600), "lora", "spelled", 1800, 0)
    with pytest.raises(ValueError, match="not of"):
        script().parse(log(method="full"), "lora", "spelled", 1800, 0)


def test_the_record_holds_what_the_chapter_prints():
    from scratchformer.book.measured_fine_tuning import FINE_TUNING

    methods = {(run["method"], run["format"]) for run in FINE_TUNING["runs"]}
    assert {("full", "spelled"), ("lora", "spelled"), ("base", "spelled")} <= methods
    for run in FINE_TUNING["runs"]:
        assert 0 <= run["accuracy"] <= 1 and run["n_test"] >= 500
    keys = [script().key(run) for run in script().recorded()]
    assert len(keys) == len(set(keys)), "two runs of one command"
