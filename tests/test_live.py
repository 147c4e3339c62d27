"""The kernel of the page's live cells (scratchformer.book.live), run here under CPython: what a
cell shows, claims that no longer hold, cells skipped in the page, and the build's stored runs
taken from the site or, when the reader changed the run, training asked for first."""

from __future__ import annotations

import base64
import dataclasses
import pickle
import sys

import numpy as np
import pytest

from conftest import another_kernel
from scratchformer import train as tr
from scratchformer.book import live, runs

TASK = tr.make_task("reverse", length=4, vocab_size=5)
CONFIG = tr.TrainConfig(max_steps=3, warmup_steps=1, eval_every=3, n_valid=8, n_test=8,
                        batch_size=4, target_accuracy=None)


def small_model(seed=0):
    return tr.book_model(TASK, seed=seed, d_model=8, n_heads=2, d_ff=8, n_layers=1)


class Page:
    """What the page is sent: (kind, data) pairs, in order."""

    def __init__(self):
        self.outputs: list[tuple[str, object]] = []

    def __call__(self, kind, data):
        self.outputs.append((kind, data))

    def kinds(self):
        return [kind for kind, _ in self.outputs]

    def text(self, kind):
        return "".join(data for k, data in self.outputs if k == kind)


@pytest.fixture
def kernel():
    page = Page()
    try:
        made = live.Kernel(page)
        made.page = page
        yield made
    finally:
        runs.site_runs = None  # the kernel's store is the page's, not the other tests'


def test_prints_and_the_last_expression_are_shown(kernel):
    assert kernel.run("x = 21\nprint('half of', 2 * x)\nx * 2", "cell 1")
    assert kernel.page.text("stdout") == "half of 42\n"
    assert kernel.page.outputs[-1] == ("text/plain", "42")


def test_a_trailing_semicolon_or_none_shows_nothing(kernel):
    assert kernel.run("y = 1\ny;", "cell 1") and kernel.run("None", "cell 2")
    assert kernel.page.outputs == []


def test_the_namespace_is_shared_by_the_cells(kernel):
    kernel.run("a = 3", "cell 1")
    kernel.run("a + 1", "cell 2")
    assert kernel.page.outputs == [("text/plain", "4")]


def test_figures_are_shown_once_as_doubled_pngs(kernel):
    kernel.run("import matplotlib\nmatplotlib.use('agg')\nimport matplotlib.pyplot as plt\n"
               "fig, ax = plt.subplots(figsize=(3, 2), dpi=100)\nax.plot([0, 1])\nfig", "c")
    images = [data for kind, data in kernel.page.outputs if kind == "image/png"]
    assert len(images) == 1 and kernel.page.kinds() == ["image/png"]
    png = base64.b64decode(images[0]["data"])
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert int.from_bytes(png[16:20], "big") in (2 * images[0]["width"], 2 * images[0]["width"] - 1)
    assert 150 < images[0]["width"] <= 300  # the figure's 3 inches at 100 dpi, cropped tight


def test_markdown_is_shown_as_markdown(kernel):
    """Where IPython is missing (Pyodide), IPython.display is the kernel's stand-in."""
    saved = {name: sys.modules.get(name) for name in ("IPython", "IPython.display")}
    live.install_display(kernel.show, force=True)
    try:
        kernel.run("from IPython.display import Markdown, display\n"
                   "display(Markdown('| a |\\n|--:|\\n| 1 |'))", "cell 1")
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
    assert kernel.page.outputs == [("text/markdown", "| a |\n|--:|\n| 1 |")]


def test_a_failed_claim_is_reported_and_the_cell_goes_on(kernel):
    assert kernel.run("w = 0.93\nassert 0.5 < w < 0.8  # a blend\nafter = 1", "cell 4")
    assert kernel.namespace["after"] == 1
    assert kernel.page.kinds() == ["claim"]
    report = kernel.page.text("claim")
    assert "(cell 4, line 2)" in report and "w = 0.93" in report


def test_an_error_shows_its_traceback_from_the_cell_and_the_kernel_goes_on(kernel):
    assert not kernel.run("def f():\n    return 1 / 0\nf()", "cell 2")
    error = kernel.page.text("error")
    assert "ZeroDivisionError" in error and 'File "<cell 2>", line 2' in error
    assert "live.py" not in error  # the kernel's own frames are left out
    assert kernel.run("print('still here')", "cell 3")


def test_a_syntax_error_is_shown(kernel):
    assert not kernel.run("x = (", "cell 2")
    assert "SyntaxError" in kernel.page.text("error")


def test_a_name_a_skipped_cell_makes_says_which_cell_and_why(kernel):
    kernel.skip("import torch\nreference = torch.ones(3)", "cell 5", "PyTorch does not run here")
    assert not kernel.run("reference.sum()", "cell 6")
    error = kernel.page.text("error")
    assert "NameError" in error
    assert "'reference' is made by cell 5, which does not run in the page " \
           "(PyTorch does not run here)" in error


def test_assigned_names():
    assert live.assigned_names("import numpy as np\nfrom a import b as c\nx, y = 1, 2\n"
                               "def f(): pass\nfor i in []: pass\nwith open('f') as h: pass") \
        == {"np", "c", "x", "y", "f", "i", "h"}


def test_the_site_key_leaves_out_the_rounding_and_keeps_the_rest(monkeypatch):
    key = runs.site_key(small_model(), TASK, CONFIG)
    local = runs.run_key(small_model(), TASK, CONFIG)
    # another kernel than the environment's, so that the rounding changes on every machine
    monkeypatch.setenv("OPENBLAS_CORETYPE", another_kernel())
    assert runs.site_key(small_model(), TASK, CONFIG) == key
    assert runs.run_key(small_model(), TASK, CONFIG) != local
    assert runs.site_key(small_model(seed=1), TASK, CONFIG) != key
    assert runs.site_key(small_model(), TASK, dataclasses.replace(CONFIG, seed=1)) != key


def test_the_store_writes_the_site_key_beside_each_run(tmp_path, monkeypatch):
    monkeypatch.setenv(runs.RUNS_VARIABLE, str(tmp_path))
    key = runs.site_key(small_model(), TASK, CONFIG)
    runs.train_once(small_model(), TASK, CONFIG)
    (sidecar,) = tmp_path.glob("*.site")
    assert sidecar.read_text().strip() == key and sidecar.with_suffix(".pickle").exists()


def test_a_stored_run_comes_from_the_site_without_training(monkeypatch):
    stored = tr.train(small_model(), TASK, CONFIG)
    key = runs.site_key(small_model(), TASK, CONFIG)
    asked = []

    def fetch(name):
        asked.append(name)
        return pickle.dumps(stored) if name == f"{key}.pickle" else None

    page = Page()
    live.Kernel(page, fetch_run=fetch)
    try:
        monkeypatch.setattr(tr, "train", lambda *a, **k: pytest.fail("trained"))
        result = runs.train_once(small_model(), TASK, CONFIG)
    finally:
        runs.site_runs = None
    assert asked == [f"{key}.pickle"]
    assert result.steps == stored.steps
    assert np.array_equal(result.history["loss"], stored.history["loss"])


def test_a_changed_run_asks_before_training_and_trains_when_allowed():
    page = Page()
    kernel = live.Kernel(page, fetch_run=lambda name: None)
    kernel.namespace.update(tr=tr, small_model=small_model, TASK=TASK, CONFIG=CONFIG)
    try:
        source = ("from scratchformer.book import train_once\n"
                  "result = train_once(small_model(seed=7), TASK, CONFIG)\n"
                  "print('trained', len(result.history) > 0)")
        assert not kernel.run(source, "cell 9")
        (kind, data), = page.outputs
        assert kind == "train" and "Training here takes up to about" in data["message"]
        assert data["seconds"] >= 0 and "result" not in kernel.namespace
        page.outputs.clear()
        assert kernel.run(source, "cell 9", allow_training=True)
        assert page.text("stdout") == "trained True\n"
    finally:
        runs.site_runs = None
