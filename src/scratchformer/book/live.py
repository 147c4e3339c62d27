"""The kernel of the page's live cells: a chapter's code run cell by cell, in the browser.

The book's site lets a reader edit a code cell and run it in the page: Pyodide (CPython compiled
to WebAssembly) runs in a Web Worker, and ``book/_static/live-worker.js`` hands each cell to a
:class:`Kernel`, which does what a Jupyter kernel does for the chapters, with what Pyodide has:

* runs the cell in one namespace shared by the chapter's cells, showing the value of its last
  expression (unless the line ends with ``;``), what it prints, each figure it drew (as a PNG
  at twice its size, as the build draws them) and ``IPython.display``'s ``Markdown`` (a stand-in
  module where IPython is not installed);
* turns every ``assert`` into a reported claim (:mod:`~scratchformer.book.claims`): a claim the
  reader's change makes false says so, with its values, and the cell goes on;
* skips the cells that cannot run in the page (PyTorch, the addresses, SmolLM2's file), which it
  is told of, and when a later cell fails on a name such a cell would have defined, says which
  cell it skipped and why;
* takes a training run from the site's copy of the build's stored runs
  (:mod:`~scratchformer.book.runs`) when the reader did not change what the run depends on, and
  otherwise asks before training (:class:`TrainingAsked`, with the time a few steps predict).

Everything it shows goes through one callback, ``emit(kind, data)``: ``stdout``, ``stderr``,
``claim``, ``error``, ``text/plain``, ``text/markdown``, ``image/png`` (``{"data": base64,
"width": px, "height": px}``) and ``train`` (``{"message": text, "seconds": estimate}``). The
module runs under CPython as well, which is where its tests run it.
"""

from __future__ import annotations

import ast
import base64
import builtins
import contextlib
import dataclasses
import importlib.util
import io
import pickle
import sys
import time
import traceback
import types
import warnings

from . import claims as _claims
from . import runs as _runs

__all__ = ["Kernel", "SiteRuns", "TrainingAsked", "assigned_names", "install_display"]


class _Stream(io.TextIOBase):
    """A text stream whose writes go to ``emit(kind, text)`` as they come."""

    def __init__(self, emit, kind: str):
        self.emit, self.kind = emit, kind

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if text:
            self.emit(self.kind, text)
        return len(text)


def assigned_names(source: str) -> set[str]:
    """The names a cell's top level binds (assignments, imports, definitions, loop targets)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names.add(alias.asname or alias.name.split(".")[0])
    return names


class TrainingAsked(Exception):
    """A cell would train a model that the site does not hold: the reader is asked first."""

    def __init__(self, message: str, seconds: float):
        super().__init__(message)
        self.message, self.seconds = message, seconds


class SiteRuns:
    """The build's stored runs as the site serves them (``_static/live/runs/<key>.pickle``,
    keyed by :func:`~scratchformer.book.runs.site_key`), read with ``fetch(name) -> bytes or
    None``. A run the site lacks (the reader changed the model, the task or the settings) is
    trained only when ``allow_training`` is set; otherwise :class:`TrainingAsked` says how
    long it would take, from a few steps timed here."""

    PROBE_STEPS = 3

    def __init__(self, fetch):
        self.fetch, self.allow_training = fetch, False
        self.served: list[str] = []  # the keys handed over from the site, in order

    def train(self, model, task, config):
        from .. import train as _train

        key = _runs.site_key(model, task, config)
        data = self.fetch(f"{key}.pickle")
        if data is not None:
            self.served.append(key)
            return pickle.loads(data)
        if not self.allow_training:
            seconds = self.estimate(model, task, config)
            budget = (f"; its budget of {config.cpu_seconds:g} CPU-seconds caps it"
                      if config.cpu_seconds is not None else "")
            raise TrainingAsked(
                "This cell trains a model, and the build's trained weights do not apply: "
                "the model, the task or the settings differ from the book's. Training here "
                f"takes up to about {seconds:.0f} s (at most {config.max_steps:,} steps, "
                f"{self.PROBE_STEPS} of them timed in this page{budget}).", seconds)
        return _train.train(model, task, config)

    def estimate(self, model, task, config) -> float:
        """Seconds for ``config``'s training, from ``PROBE_STEPS`` steps on a copy of the model
        (the model itself is not touched)."""
        import copy

        from .. import train as _train

        probe = dataclasses.replace(
            config, max_steps=self.PROBE_STEPS + 1, warmup_steps=0, eval_every=10**9,
            target_accuracy=None, cpu_seconds=None, n_valid=1, n_test=1)
        start = time.perf_counter()
        _train.train(copy.deepcopy(model), task, probe)
        per_step = (time.perf_counter() - start) / (self.PROBE_STEPS + 1)
        seconds = per_step * config.max_steps
        if config.cpu_seconds is not None:
            seconds = min(seconds, config.cpu_seconds)
        return seconds


class _Markdown:
    def __init__(self, data: str = ""):
        self.data = data

    def _repr_markdown_(self) -> str:
        return self.data

    def __repr__(self) -> str:
        return "<IPython.core.display.Markdown object>"


class _HTML:
    def __init__(self, data: str = ""):
        self.data = data

    def _repr_html_(self) -> str:
        return self.data


def install_display(show, force: bool = False) -> None:
    """Where IPython is not installed (Pyodide), or with ``force``, a module
    ``IPython.display`` whose ``display``, ``Markdown`` and ``HTML`` are the ones the chapters
    use, shown by ``show``."""
    if not force and importlib.util.find_spec("IPython") is not None:
        return
    package = types.ModuleType("IPython")
    display = types.ModuleType("IPython.display")
    display.Markdown, display.HTML = _Markdown, _HTML
    display.display = lambda *objects, **_: [show(item) for item in objects] and None
    package.display = display
    package.get_ipython = lambda: None
    sys.modules["IPython"], sys.modules["IPython.display"] = package, display


class Kernel:
    """One chapter's namespace and the cells run in it (see the module)."""

    def __init__(self, emit, fetch_run=None):
        self.emit = emit
        self.namespace: dict = {"__name__": "__main__", "__builtins__": builtins}
        self.claims = _claims.Claims(write=lambda text: self.emit("claim", text))
        self.namespace[_claims.NAME] = self.claims
        self.skipped: dict[str, tuple[str, str]] = {}  # name -> (cell label, reason)
        install_display(self.show)
        # plt.show() draws nothing here: the figures a cell made are shown when it ends, as
        # the build's inline backend shows them; without a screen, matplotlib would warn.
        warnings.filterwarnings("ignore", message="FigureCanvasAgg is non-interactive")
        warnings.filterwarnings("ignore", message="Matplotlib is currently using agg")
        if sys.platform == "emscripten":
            _wasm32_bincount()
        self.runs = SiteRuns(fetch_run) if fetch_run is not None else None
        _runs.site_runs = self.runs

    def skip(self, source: str, label: str, reason: str) -> None:
        """Record that the cell ``label`` is not run here, and why; later cells that fail on a
        name it binds are told so."""
        for name in assigned_names(source):
            if name not in self.namespace:
                self.skipped[name] = (label, reason)

    def run(self, source: str, label: str = "", allow_training: bool = False) -> bool:
        """Run one cell; returns whether it ran to its end (a failed claim does not stop it)."""
        self.claims.cell_started()
        if self.runs is not None:
            self.runs.allow_training = allow_training
        try:
            tree = _claims.compile_cell(source, self.claims, label, filename=f"<{label}>")
        except SyntaxError:
            self._error()
            return False
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr) and not (
                source.rstrip().endswith(";")):
            last = ast.Expression(tree.body.pop().value)
        out, err = _Stream(self.emit, "stdout"), _Stream(self.emit, "stderr")
        shown: set[int] = set()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                exec(compile(tree, f"<{label}>", "exec"), self.namespace)
                value = (eval(compile(last, f"<{label}>", "eval"), self.namespace)
                         if last is not None else None)
                shown = self._figures()
                if value is not None and id(value) not in shown:
                    self.show(value)
        except TrainingAsked as asked:
            self._figures()
            self.emit("train", {"message": asked.message, "seconds": asked.seconds})
            return False
        except BaseException as error:  # noqa: BLE001 - the reader's code may raise anything
            self._figures()
            self._error(error)
            return False
        finally:
            self.claims.cell_finished()
        return True

    def show(self, value) -> None:
        """Show a value as Jupyter would: a figure as a PNG, ``_repr_markdown_`` or
        ``_repr_html_`` as such, anything else by its ``repr``."""
        if _is_figure(value):
            self.emit("image/png", _png(value))
            return
        for method, kind in (("_repr_markdown_", "text/markdown"), ("_repr_html_", "text/html")):
            render = getattr(value, method, None)
            if callable(render):
                text = render()
                if text is not None:
                    self.emit(kind, text)
                    return
        self.emit("text/plain", repr(value))

    def _figures(self) -> set[int]:
        """Show and close the figures pyplot holds (the inline backend's end of a cell)."""
        if "matplotlib.pyplot" not in sys.modules:
            return set()
        plt = sys.modules["matplotlib.pyplot"]
        shown = set()
        for number in plt.get_fignums():
            figure = plt.figure(number)
            self.emit("image/png", _png(figure))
            shown.add(id(figure))
        plt.close("all")
        return shown

    def _error(self, error: BaseException | None = None) -> None:
        kind, value, tb = sys.exc_info()
        # Drop this module's own frames: the reader's traceback starts in the cell.
        while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
            tb = tb.tb_next
        text = "".join(traceback.format_exception(kind, value, tb))
        if isinstance(error, NameError) and getattr(error, "name", None) in self.skipped:
            label, reason = self.skipped[error.name]
            text += (f"\n{error.name!r} is made by {label}, which does not run in the page "
                     f"({reason}).")
        self.emit("error", text)


def _wasm32_bincount() -> None:
    """NumPy in WebAssembly has a 32-bit ``intp``, and its ``bincount`` refuses an ``int64``
    array (the package's token ids) that a 64-bit machine takes: cast such arrays to ``intp``,
    after checking that their values fit, so that the chapters run as on the book's machines."""
    import numpy as np

    original = np.bincount
    if getattr(original, "_scratchformer", False):
        return

    def bincount(x, weights=None, minlength=0):
        x = np.asarray(x)
        if x.dtype.kind in "iu" and x.dtype.itemsize > np.dtype(np.intp).itemsize:
            info = np.iinfo(np.intp)
            if x.size and (x.min() < info.min or x.max() > info.max):
                raise OverflowError("bincount: values do not fit the platform's integers")
            x = x.astype(np.intp)
        return original(x, weights=weights, minlength=minlength)

    bincount._scratchformer = True
    bincount.__doc__ = original.__doc__
    np.bincount = bincount


def _is_figure(value) -> bool:
    figure = sys.modules.get("matplotlib.figure")
    return figure is not None and isinstance(value, figure.Figure)


def _png(figure) -> dict:
    """A figure as the build shows it: a PNG at twice its dots, shown at its own size."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=2 * figure.dpi, bbox_inches="tight")
    data = buffer.getvalue()
    # The PNG's own size (its IHDR chunk), halved: what the page shows.
    width = (int.from_bytes(data[16:20], "big") + 1) // 2
    height = (int.from_bytes(data[20:24], "big") + 1) // 2
    return {"data": base64.b64encode(data).decode("ascii"), "width": width, "height": height}
