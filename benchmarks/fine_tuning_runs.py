"""Full fine-tuning against LoRA at equal CPU time: ``python -m scratchformer.train --task
count-letters`` for each method, recorded for the chapter "Teaching the real model to count
letters".

Usage: ``python benchmarks/fine_tuning_runs.py [--methods full lora base] [--format spelled]
[--lr RATE] [--seconds 1800] [--seed 0] [--jobs 2] [--logs DIR] [--reuse]``

Each run is the command itself, in its own process, on a budget of process CPU-seconds with
BLAS on one thread (``--method base`` scores the file's model on the same held-out questions
without training). Each command's whole output is kept in ``--logs`` (default
``_build/fine-tuning-runs``), its first line saying when and from which commit it ran; with
``--reuse``, a finished log there is read instead of running its command again (a run of about
an hour that was interrupted after it ended need not be repeated). The runs are too long for
the book's build: this script writes what they reached, with when, from which commit and on
which CPU and BLAS kernel, into ``src/scratchformer/book/measured_fine_tuning.py``, which the
chapter prints as a table of what this script measured (not what the build did). Run it again
after a change to the model, the task or the training, and commit the module it rewrites.

Each run says the machine it ran on (its CPU, cores and BLAS kernel): runs recorded on
different machines are compared in CPU-seconds of different CPUs.
The record keeps the runs of other commands it already holds (another format, another peak
learning rate, another method): a run replaces only the one of the same command. Each run
says its peak learning rate (``--lr``, or the recipe's, which the command prints).
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import datetime
import os
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from text_time_to_loss import ROOT, machine, write_record  # noqa: E402  (the same record)

MODULE = ROOT / "src" / "scratchformer" / "book" / "measured_fine_tuning.py"

HEADER = '''"""What ``benchmarks/fine_tuning_runs.py`` measured (written by it, not by hand).

``FINE_TUNING`` holds the runs of ``python -m scratchformer.train --task count-letters`` (the
held-out accuracy reached by each method on a budget of process CPU-seconds, BLAS on one
thread, and the file's model without training) and where and when they ran. The chapter
"Teaching the real model to count letters" prints it as a table.
"""

'''


def command(method: str, format: str, seconds: float, seed: int,
            lr: float | None = None) -> list[str]:
    rate = [] if lr is None else ["--lr", f"{lr:g}"]
    return [sys.executable, "-m", "scratchformer.train", "--task", "count-letters", "--method",
            method, "--format", format, *rate, "--seconds", f"{seconds:g}", "--seed", str(seed)]


def run(method: str, format: str, seconds: float, seed: int, log: Path, reuse: bool,
        lr: float | None = None) -> dict:
    """The run's record, from its log: the one written now, or with ``reuse`` a finished one."""
    finished = log.exists() and re.search(r"^accuracy=", log.read_text(), re.MULTILINE)
    if not (reuse and finished):
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                                capture_output=True, text=True).stdout.strip()
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
        with log.open("w") as out:
            out.write(f"# date={datetime.date.today().isoformat()} commit={commit} "
                      f"command={' '.join(command(method, format, seconds, seed, lr)[1:])}\n")
            out.flush()
            subprocess.run(command(method, format, seconds, seed, lr), cwd=ROOT, env=env,
                           stdout=out, stderr=subprocess.STDOUT, check=True)
    return parse(log.read_text(), method, format, seconds, seed, lr)


def parse(text: str, method: str, format: str, seconds: float, seed: int,
          lr: float | None = None) -> dict:
    first = dict(re.findall(r"(\w+)=(\S+)", text.splitlines()[0]))
    expected = " ".join(command(method, format, seconds, seed, lr)[1:])
    if not text.startswith("# date=") or not text.splitlines()[0].endswith(expected):
        raise ValueError(f"the log is not of `{expected}`: it begins {text[:200]!r}")
    last = dict(re.findall(r"^(accuracy|seconds|steps)=([0-9.]+)", text, re.MULTILINE))
    last |= dict(re.findall(r"\b(accuracy|seconds)=([0-9.]+)", text.splitlines()[-1]))
    trainable = re.search(r"^\w+: ([0-9,]+) trainable parameters", text, re.MULTILINE)
    printed = re.search(r"^\w+: [0-9,]+ trainable parameters .*peak learning rate (\S+)$",
                        text, re.MULTILINE)
    if method == "base":
        peak_lr = None
    elif lr is not None or printed:
        peak_lr = lr if lr is not None else float(printed.group(1))
    else:
        raise ValueError("the log says no peak learning rate: the command printed none and "
                         "was given no --lr")
    valid = [(int(step), float(score)) for step, score in
             re.findall(r"^step=(\d+) .*valid_accuracy=([0-9.]+)", text, re.MULTILINE)]
    from scratchformer.train.recipes import LETTERS_TRAINING  # what the command scores

    n_test = LETTERS_TRAINING["n_test"]
    return {"method": method, "format": format, "seed": seed,
            "budget_seconds": 0.0 if method == "base" else seconds,
            "peak_lr": peak_lr, "date": first["date"], "commit": first["commit"],
            "trainable": int(trainable.group(1).replace(",", "")) if trainable else 0,
            "steps": int(last.get("steps", 0)), "cpu_seconds": float(last["seconds"]),
            "accuracy": float(last["accuracy"]), "n_test": n_test, "valid": valid}


#: What the record says of the machine each run ran on.
MACHINE = ("cpu", "cores", "blas_kernel", "numpy", "python")


def key(run: dict) -> tuple:
    """What makes two runs runs of the same command."""
    return (run["method"], run["format"], run["seed"], run["budget_seconds"], run["peak_lr"])


def merged(old: list[dict], new: list[dict]) -> list[dict]:
    """The record's runs: the new ones, and the old ones of other commands, in the old order
    with the new ones after."""
    replaced = {key(run) for run in new}
    return [run for run in old if key(run) not in replaced] + new


def recorded() -> list[dict]:
    """The runs the record holds now (none if there is no record)."""
    if not MODULE.exists():
        return []
    namespace: dict = {}
    exec(compile(MODULE.read_text(), str(MODULE), "exec"), namespace)
    record = namespace["FINE_TUNING"]
    runs = list(record["runs"])
    for run in runs:  # recorded before the record said its rate: the commit's recipe's
        if "peak_lr" not in run:
            run["peak_lr"] = None if run["method"] == "base" else recipe_lr(run)
        if "machine" not in run:  # ... or its machine: the one the record named then
            run["machine"] = {key: record["machine"][key] for key in MACHINE}
    return runs


def recipe_lr(run: dict) -> float:
    """The peak learning rate of ``run``'s method in the recipes of ``run``'s commit (the one
    the command used when given no ``--lr``)."""
    source = subprocess.run(["git", "show", f"{run['commit']}:src/scratchformer/train/"
                             "recipes.py"], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout
    rates = re.search(r"^LETTERS_LR = (\{.*\})$", source, re.MULTILINE)
    if rates is None:
        raise ValueError(f"commit {run['commit']} has no LETTERS_LR in its recipes")
    return float(ast.literal_eval(rates.group(1))[run["method"]])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", nargs="+", default=["full", "lora", "base"],
                        choices=["full", "lora", "base"])
    parser.add_argument("--format", default="spelled", choices=["sentence", "spelled"])
    parser.add_argument("--lr", type=float, default=None,
                        help="the peak learning rate (default: the command's, for each method)")
    parser.add_argument("--seconds", type=float, default=1800.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=2,
                        help="runs at a time (each on one core; CPU-seconds do not change)")
    parser.add_argument("--logs", type=Path, default=ROOT / "_build" / "fine-tuning-runs")
    parser.add_argument("--reuse", action="store_true",
                        help="read a finished log of the same command instead of running it")
    args = parser.parse_args()
    args.logs.mkdir(parents=True, exist_ok=True)
    where = machine()
    rate = "" if args.lr is None else f"-lr{args.lr:g}"
    jobs = [(m, args.format, args.seconds, args.seed,
             args.logs / f"{m}-{args.format}{rate}-{args.seconds:g}-{args.seed}.log",
             args.reuse, None if m == "base" else args.lr)
            for m in args.methods]
    with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
        runs = list(pool.map(run, *zip(*jobs)))
    for r in runs:
        print(f"{r['method']:>4} {r['format']}: {r['steps']:>4} steps in {r['cpu_seconds']:.0f} "
              f"CPU-s, held-out accuracy {r['accuracy']:.3f} ({r['date']}, {r['commit']})")
    for r in runs:  # a log read again (--reuse) was written on this machine too
        r["machine"] = {key: where[key] for key in MACHINE}
    runs = merged(recorded(), runs)
    commits = sorted({r["commit"] for r in runs})
    when = {"date": max(r["date"] for r in runs), "commit": ", ".join(commits)}
    write_record(MODULE, HEADER, "FINE_TUNING", {"recorded": when, "runs": runs})
    return 0


if __name__ == "__main__":
    sys.exit(main())
