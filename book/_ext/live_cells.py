"""Live cells: the chapters' code, edited and run in the reader's browser.

For every chapter whose cells can run in a browser, this extension

* marks each code cell on the page with its index in the chapter's notebook (``live-cell-<i>``)
  and, where the cell cannot run in a browser, with why (``live-needs-torch``, ``-texts``,
  ``-model``: PyTorch, the State of the Union addresses, SmolLM2's file);
* writes the chapter's cells, the ones the page hides included, to
  ``_static/live/cells/<page>.json``, which the page reads on a reader's first click;
* adds ``live-cells.js`` (the bar under each cell; it starts ``live-worker.js``, Pyodide in a
  Web Worker, on the first click) and ``live-cells.css`` to that page only.

A cell that imports PyTorch beside what it needs (a chapter's first cell) runs without that
import: the import lines are left out of the cell the page runs (the JSON's ``source``), and
the cells that then use ``torch`` are marked. A chapter is live when its first code cell and at
least one cell it shows can run. The runtime (Pyodide, NumPy, matplotlib, the package's wheel)
is copied into ``_static/live/`` by ``tools/live_runtime.py`` when the builder starts, so that
each page can say how many bytes a first run downloads; the training runs the build stored are
published under ``_static/live/runs/`` when the build ends (the page's kernel reads them when a
cell trains, :class:`scratchformer.book.live.SiteRuns`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

from docutils import nodes

ROOT = Path(__file__).resolve().parent.parent.parent
CELLS = Path("_static") / "live" / "cells"
NUM2WORDS = re.compile(r"\bTranslationTask\b|\btranslation\b|\bnum2words\b")
_RUNTIME: dict = {}  # tools/live_runtime.py's manifest of what it installed

# What a browser cannot run (the patterns of tools/notebooks.py, which decides what a
# downloaded notebook installs).
TORCH_IMPORT = re.compile(
    r"^[ \t]*(?:import torch(?:\.\w+)*(?: as \w+)?|from torch(?:\.\w+)* import [^\n]+"
    r"|from scratchformer import pytorch(?: as \w+)?|import scratchformer\.pytorch(?: as \w+)?"
    r"|from scratchformer\.pytorch(?:\.\w+)* import [^\n]+)[ \t]*(?:#[^\n]*)?$", re.M)


def _tools():
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tools import live_runtime, notebooks

    return notebooks, live_runtime


def classify(source: str) -> dict:
    """How the page runs a cell: ``run`` (bool), ``need`` (why not, or None) and ``source``
    (the code the page runs: the cell's own, less any PyTorch import it could do without)."""
    notebooks, _ = _tools()
    if notebooks.needs_model(source):
        return {"run": False, "need": "model", "source": source, "stripped": []}
    if notebooks.needs_texts(source):
        return {"run": False, "need": "texts", "source": source, "stripped": []}
    if notebooks.needs_torch(source):
        stripped = [match.group(0).strip() for match in TORCH_IMPORT.finditer(source)]
        rest = TORCH_IMPORT.sub("", source)
        if stripped and not notebooks.needs_torch(rest):
            # each left-out line stays as an empty one: the lines keep the page's numbers
            return {"run": True, "need": None, "source": rest, "stripped": stripped}
        return {"run": False, "need": "torch", "source": source, "stripped": []}
    return {"run": True, "need": None, "source": source, "stripped": []}


def _names(source: str) -> tuple[set[str], set[str], set[str], set[str]]:
    """(the names a cell reads, the names it binds, the names it imports, the names whose
    methods it calls: ``rng`` in ``rng.normal(...)``, whose state the call may change), from
    its syntax."""
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set(), set(), set(), set()
    read, bound, imported, called = set(), set(), set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (bound if isinstance(node.ctx, ast.Store) else read).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            imported.update(alias.asname or alias.name.split(".")[0] for alias in node.names)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and isinstance(node.func.value, ast.Name)):
            called.add(node.func.value.id)
    return read - bound - imported, bound | imported, imported, called


def chapter_cells(path: Path) -> list[dict]:
    """The code cells of a MyST chapter as MyST-NB numbers them, classified. A cell that reads
    a name only a cell the page cannot run binds cannot run either (``after-torch``, ...)."""
    from myst_nb.core.read import read_myst_markdown_notebook

    notebook = read_myst_markdown_notebook(path.read_text())
    cells, number = [], 0
    missing: dict[str, str] = {}  # name -> why the cell that binds it does not run
    modules: set[str] = set()  # names bound by imports: a module's state is not the reader's
    changed: dict[str, str] = {}  # name -> the skipped cell that called its methods
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code":
            continue
        tags = cell.metadata.get("tags", [])
        shown = not ({"remove-cell", "remove_cell", "remove-input", "remove_input"} & set(tags))
        if shown:
            number += 1
        kind = classify(cell.source)
        read, bound, imported, called = _names(kind["source"])
        modules |= imported
        if kind["run"] and read & missing.keys():
            need = missing[sorted(read & missing.keys())[0]]
            kind = {**kind, "run": False, "need": need if need.startswith("after-")
                    else f"after-{need}"}
        # A cell that reads what a skipped cell changed (a generator it drew from) runs, but
        # its numbers need not be the build's: the page says so under it.
        kind["differs"] = (sorted({(name, changed[name]) for name in read & changed.keys()})
                           if kind["run"] else [])
        for name in bound:
            if kind["run"]:
                missing.pop(name, None)
                changed.pop(name, None)
            else:
                missing[name] = kind["need"]
        if not kind["run"]:
            label = f"cell {number}" if shown else "a cell the page hides"
            for name in called - modules:
                changed.setdefault(name, label)
        cells.append({"index": index, "number": number if shown else None, "shown": shown,
                      "tags": tags, **kind})
    return cells


def is_live(cells: list[dict]) -> bool:
    return bool(cells) and cells[0]["run"] and any(c["run"] and c["shown"] for c in cells)


_CACHE: dict[str, list[dict] | None] = {}  # this build's chapters, read once each


def _chapter(app, docname: str) -> list[dict] | None:
    cache = _CACHE
    if docname not in cache:
        path = Path(app.env.doc2path(docname))
        text = path.read_text() if path.suffix == ".md" else ""
        cache[docname] = chapter_cells(path) if "kernelspec:" in text.split("\n---", 1)[0] else None
    return cache[docname]


def mark_cells(app, doctree, docname: str) -> None:
    if app.builder.name != "html":
        return
    cells = _chapter(app, docname)
    if not cells or not is_live(cells):
        return
    by_index = {cell["index"]: cell for cell in cells}
    for node in doctree.findall(nodes.container):
        if node.get("nb_element") != "cell_code":
            continue
        cell = by_index.get(node.get("cell_index"))
        if cell is None:
            continue
        node["classes"].append(f"live-cell-{cell['index']}")
        if cell["need"]:
            node["classes"].append(f"live-needs-{cell['need']}")
        elif cell["stripped"]:
            node["classes"].append("live-without-torch")
    target = Path(app.outdir) / CELLS / f"{docname}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps({
        "page": docname,
        "cells": [{key: cell[key] for key in ("index", "number", "shown", "run", "need",
                                              "source", "stripped", "differs")}
                   for cell in cells],
    }, indent=1))


def add_scripts(app, pagename, templatename, context, doctree) -> None:
    if doctree is None or app.builder.name != "html":
        return
    cells = _chapter(app, pagename)
    if not cells or not is_live(cells):
        return
    code = "\n".join(cell["source"] for cell in cells if cell["run"])
    relative = (CELLS / f"{pagename}.json").relative_to("_static").as_posix()
    app.add_css_file("live-cells.css")
    app.add_js_file("live-cells.js", defer="defer", **{
        "data-cells": relative,
        "data-bytes": str(_RUNTIME["sets"]["matplotlib"]["bytes"]),
        # num2words (the translation task's words) only where a cell names the task
        "data-num2words": "yes" if NUM2WORDS.search(code) else "no",
    })


def install_runtime(app) -> None:
    """Copy the runtime into the site now, so that the pages can say what a first run costs."""
    if app.builder.name != "html":
        return
    _, live_runtime = _tools()
    _CACHE.clear()
    _RUNTIME.clear()
    _RUNTIME.update(live_runtime.install(Path(app.outdir)))


def publish_runs(app, exception) -> None:
    """The build's stored runs under the keys the page asks for (``<key>.site`` beside each:
    :func:`scratchformer.book.runs.site_key`)."""
    if exception is not None or app.builder.name != "html":
        return
    store = os.environ.get("SCRATCHFORMER_RUNS")
    if not store or not Path(store).is_dir():
        return
    target = Path(app.outdir) / "_static" / "live" / "runs"
    target.mkdir(parents=True, exist_ok=True)
    for sidecar in Path(store).glob("*.site"):
        entry = sidecar.with_suffix(".pickle")
        if entry.exists():
            shutil.copyfile(entry, target / f"{sidecar.read_text().strip()}.pickle")


def setup(app):
    app.connect("builder-inited", install_runtime)
    app.connect("doctree-resolved", mark_cells)
    app.connect("html-page-context", add_scripts)
    app.connect("build-finished", publish_runs)
    return {"parallel_read_safe": True, "parallel_write_safe": False}
