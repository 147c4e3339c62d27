"""The time-to-loss table of the language model: ``python -m scratchformer.train --task text``
for each tokenizer and budget, recorded for the chapter "Language modelling on real text".

Usage: ``python benchmarks/text_time_to_loss.py [--budgets 180 600] [--tokenizers char bpe]
[--seed 0] [--jobs 1]``

Each run is the command itself, in its own process, on a budget of process CPU-seconds with
BLAS on one thread, so a loaded machine changes how long a run takes, hardly what it reaches.
The runs are too long for the book's build; this script writes what they reached, with when,
from which commit and on which CPU and BLAS kernel, into
``src/scratchformer/book/measured.py``, which the chapter prints as a table of what this
script measured (not what the build did). Run it again after a change to the model, the
training or the tokenizer, and commit the module it rewrites.
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import ctypes
import datetime
import os
import platform
import pprint
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODULE = ROOT / "src" / "scratchformer" / "book" / "measured.py"

HEADER = '''"""What ``benchmarks/text_time_to_loss.py`` measured (written by it, not by hand).

``TIME_TO_LOSS`` holds the runs of ``python -m scratchformer.train --task text`` (held-out bits
per character reached on a budget of process CPU-seconds, BLAS on one thread) and where and
when they ran. The chapter "Language modelling on real text" prints it as a table.
"""

'''


def run(tokenizer: str, seconds: float, seed: int) -> dict:
    command = [sys.executable, "-m", "scratchformer.train", "--task", "text", "--tokenizer",
               tokenizer, "--seconds", f"{seconds:g}", "--seed", str(seed), "--quiet"]
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    out = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True,
                         check=True).stdout
    values = dict(re.findall(r"(\w+)=([0-9.]+)", out))
    sample = re.search(r"^sample: (.*)$", out, re.MULTILINE)
    return {"tokenizer": tokenizer, "budget_seconds": seconds, "seed": seed,
            "steps": int(values["steps"]), "bits_per_char": float(values["bits_per_char"]),
            "cpu_seconds": float(values["seconds"]),
            "sample": ast.literal_eval(sample.group(1)) if sample else None}


def blas_kernel() -> str:
    """OpenBLAS's name for the kernel it chose on this CPU (``openblas_get_corename``)."""
    from scratchformer._threads import openblas_libraries

    for library in openblas_libraries():
        for name in ("scipy_openblas_get_corename64_", "scipy_openblas_get_corename",
                     "openblas_get_corename"):
            function = getattr(library, name, None)
            if function is not None:
                function.restype = ctypes.c_char_p
                return function().decode()
    return "unknown"


def machine() -> dict:
    import numpy as np

    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                if line.startswith("model name")), platform.processor() or "unknown")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip() or "unknown"
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "src",
                            ":!src/scratchformer/book/measured.py"], cwd=ROOT,
                           capture_output=True, text=True).stdout.strip()
    return {"date": datetime.date.today().isoformat(),
            "commit": commit + (" (package changed since)" if dirty else ""),
            "cpu": cpu, "cores": os.cpu_count(), "blas_kernel": blas_kernel(),
            "numpy": np.__version__, "python": platform.python_version()}


def write_record(module: Path, header: str, name: str, record: dict) -> None:
    """Write ``record`` as the module's one constant ``name``, below its docstring
    ``header``, and say where (the chapters import it; it is written, never typed)."""
    module.write_text(header + f"{name} = " + pprint.pformat(record, width=96,
                                                              sort_dicts=False) + "\n")
    print(f"written: {module.relative_to(ROOT)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budgets", type=float, nargs="+", default=[180.0, 600.0])
    parser.add_argument("--tokenizers", nargs="+", default=["char", "bpe"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=1,
                        help="runs at a time (each on one core; CPU-seconds do not change)")
    args = parser.parse_args()
    where = machine()
    jobs = [(t, s) for s in args.budgets for t in args.tokenizers]
    with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
        runs = list(pool.map(run, *zip(*jobs), [args.seed] * len(jobs)))
    for r in runs:
        print(f"{r['tokenizer']:>5} {r['budget_seconds']:>6.0f} CPU-s: {r['steps']:>5} steps, "
              f"{r['bits_per_char']:.3f} bits/char ({r['cpu_seconds']:.0f} s)")
    write_record(MODULE, HEADER, "TIME_TO_LOSS", {"machine": where, "runs": runs})
    return 0


if __name__ == "__main__":
    sys.exit(main())
