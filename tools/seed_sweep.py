"""Execute the training chapters with other seeds: every assertion, and how often it holds.

The training chapters read their seed from ``scratchformer.book.book_seed()`` (0 unless
``SCRATCHFORMER_SEED`` names another). ``tests/test_seeds.py`` executes them with seeds 0 to 4
and fails if any assertion fails; this script is the maintainer's view of the same sweep. It
executes each chapter once per seed with every ``assert`` statement made non-fatal (an IPython
AST transformer turns it into a call that records whether it held and the values of the
quantities it compares), and prints, per assertion, in how many runs it held and the range of
each compared quantity: what a threshold can rest on, with its margin.

Usage::

    python -m tools.seed_sweep [--seeds 0-4] [--jobs 2] [--out sweep.jsonl] [chapter.md ...]

Without chapters, it sweeps ``SEEDED_CHAPTERS``. Each chapter's kernel gets BLAS on one thread
(as in the build's pooled pass). To compare BLAS kernels, run it once per kernel, setting the
kernel's variable for that one command only (``OPENBLAS_CORETYPE=Haswell python -m
tools.seed_sweep --out haswell.jsonl``), and read both files with ``--report``.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from . import chapters
from .build_book import ONE_THREAD, _read_notebook

ROOT = Path(__file__).resolve().parent.parent

#: The chapters whose claims rest on trained runs (or on random initialisations) that
#: ``book_seed`` chooses: those whose front matter says ``seeded: true`` (tools/chapters.py).
SEEDED_CHAPTERS = chapters.seeded()

# Run in the kernel before the chapter: every assert becomes _sweep_record(...), which
# appends one JSON line to $SWEEP_RECORD and never raises.
_RECORDER = r'''
import ast as _ast, json as _json, os as _os
import numpy as _np

def _sweep_value(value):
    try:
        array = _np.asarray(value, dtype=float)
    except Exception:
        return None
    if array.size == 0:
        return None
    return [float(_np.nanmin(array)), float(_np.nanmax(array))]

def _sweep_record(cell, line, source, test, operands):
    try:
        held = bool(test())
    except Exception as error:
        held = f"error: {type(error).__name__}: {error}"
    try:
        values = [_sweep_value(v) for v in operands()]
    except Exception:
        values = []
    with open(_os.environ["SWEEP_RECORD"], "a") as handle:
        handle.write(_json.dumps({"cell": cell, "line": line, "source": source,
                                  "held": held, "values": values}) + "\n")

class _SweepAsserts(_ast.NodeTransformer):
    cell = 0
    def visit_Assert(self, node):
        def operands(test):
            if isinstance(test, _ast.Compare):
                return [test.left, *test.comparators]
            if isinstance(test, _ast.BoolOp):
                return [o for value in test.values for o in operands(value)]
            if isinstance(test, _ast.Call) and test.args:  # all(...), np.all(...)
                return operands(test.args[0])
            return []
        source = _ast.unparse(node.test)
        listed = ", ".join(_ast.unparse(o) for o in operands(node.test))
        call = _ast.parse(f"_sweep_record({self.cell}, {node.lineno}, {source!r}, "
                          f"lambda: ({source}), lambda: [{listed}])").body[0]
        return _ast.copy_location(call, node)
    def visit(self, node):
        if isinstance(node, _ast.Module):
            _SweepAsserts.cell += 1
        return super().visit(node)

get_ipython().ast_transformers.append(_SweepAsserts())
'''


def execute(chapter: str, seed: int, record: str | None = None, timeout: int = 1200) -> str | None:
    """Execute ``chapter`` with ``SCRATCHFORMER_SEED=seed`` in a fresh kernel, BLAS on one
    thread. With ``record`` (a file), assertions are recorded there instead of raised.
    Returns None, or the error of the cell that failed."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    path = ROOT / chapter
    notebook = _read_notebook(path)
    if record is not None:
        notebook.cells.insert(0, nbformat.v4.new_code_cell(_RECORDER))
    env = dict(os.environ) | ONE_THREAD
    env["SCRATCHFORMER_SEED"] = str(seed)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"),
                                                      env.get("PYTHONPATH")]))
    env["MPLBACKEND"] = "agg"
    if record is not None:
        env["SWEEP_RECORD"] = record
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)  # the kernel inherits exactly this environment
    try:
        with tempfile.TemporaryDirectory(prefix="kernel-") as sockets:
            from jupyter_client.manager import KernelManager

            manager = KernelManager(kernel_name="python3", transport="ipc",
                                    ip=os.path.join(sockets, "k"))
            client = NotebookClient(notebook, km=manager, timeout=timeout,
                                    startup_timeout=180,
                                    resources={"metadata": {"path": str(path.parent)}})
            try:
                client.execute()
            except CellExecutionError as error:
                return str(error)
            finally:
                if manager.has_kernel:
                    manager.shutdown_kernel(now=True)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return None


def _sweep_one(chapter: str, seed: int, out: str) -> tuple[str, int, str | None, float]:
    import time

    with tempfile.NamedTemporaryFile("r", suffix=".jsonl", delete=False) as handle:
        record = handle.name
    started = time.perf_counter()
    error = execute(chapter, seed, record=record)
    seconds = time.perf_counter() - started
    with open(record) as handle, open(out, "a") as sink:
        for line in handle:
            entry = json.loads(line)
            entry.update(chapter=chapter, seed=seed,
                         kernel=os.environ.get("OPENBLAS_CORETYPE", "default"))
            sink.write(json.dumps(entry) + "\n")
    os.unlink(record)
    return chapter, seed, error, seconds


def report(files: list[str]) -> None:
    """Per assertion: held in k of n runs, and each compared quantity's range."""
    runs = defaultdict(list)
    for name in files:
        for line in Path(name).read_text().splitlines():
            entry = json.loads(line)
            runs[entry["chapter"], entry["cell"], entry["line"], entry["source"]].append(entry)
    for (chapter, cell, line, source), entries in sorted(runs.items()):
        held = sum(e["held"] is True for e in entries)
        mark = "  " if held == len(entries) else "!!"
        print(f"{mark} {chapter} cell {cell} line {line}: held {held}/{len(entries)}: "
              f"{source[:110]}")
        if held < len(entries) or any(e["values"] for e in entries):
            ranges = defaultdict(list)
            for e in entries:
                for i, v in enumerate(e["values"] or []):
                    if v is not None:
                        ranges[i].append(v)
            for i, values in sorted(ranges.items()):
                low = min(v[0] for v in values)
                high = max(v[1] for v in values)
                print(f"       operand {i}: {low:.6g} .. {high:.6g}")
            failed = [(e["seed"], e["kernel"]) for e in entries if e["held"] is not True]
            if failed:
                print(f"       failed at (seed, kernel): {failed}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("chapters", nargs="*", default=list(SEEDED_CHAPTERS))
    parser.add_argument("--seeds", default="0-4", help="a range (0-4) or a list (0,3)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", default="seed-sweep.jsonl")
    parser.add_argument("--runs", default=str(ROOT / "_build" / ".sweep-runs"),
                        help="the store of training runs (scratchformer.book.runs), so that "
                             "two chapters of one seed train a shared run once")
    parser.add_argument("--report", nargs="+", metavar="FILE",
                        help="print the report of earlier sweeps and stop")
    args = parser.parse_args(argv)
    if args.report:
        report(args.report)
        return 0
    if "-" in args.seeds:
        low, high = map(int, args.seeds.split("-"))
        seeds = range(low, high + 1)
    else:
        seeds = [int(s) for s in args.seeds.split(",")]
    unknown = [chapter for chapter in args.chapters if not (ROOT / chapter).is_file()]
    if unknown:
        parser.error(f"no chapter file {', '.join(unknown)} (give paths from the repository's "
                     f"root, as book/warmup.md; the seeded ones: {', '.join(SEEDED_CHAPTERS)})")
    os.environ["SCRATCHFORMER_RUNS"] = args.runs
    jobs = [(chapter, seed) for seed in seeds for chapter in args.chapters]
    context = __import__("multiprocessing").get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(args.jobs, mp_context=context) as pool:
        futures = [pool.submit(_sweep_one, chapter, seed, args.out) for chapter, seed in jobs]
        for future in concurrent.futures.as_completed(futures):
            chapter, seed, error, seconds = future.result()
            last = error.strip().splitlines()[-1] if error else "ran to the end"
            print(f"{chapter} seed {seed}: {last} ({seconds:.0f} s)", flush=True)
    report([args.out])
    return 0


if __name__ == "__main__":
    sys.exit(main())
