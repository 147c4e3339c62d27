"""Which cells the page runs (book/_ext/live_cells.py), read from a chapter's MyST source: a
PyTorch import a cell can do without is left out, a cell that needs PyTorch, the addresses or
SmolLM2's file is marked with why, so is a cell that reads what such a cell made, and a cell
that draws from what a skipped cell drew from first is told its numbers differ."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("live_cells", ROOT / "book/_ext/live_cells.py")
live_cells = importlib.util.module_from_spec(spec)
spec.loader.exec_module(live_cells)

HEADER = """---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---

# A chapter
"""


def chapter(tmp_path, *cells: str) -> list[dict]:
    body = "\n\nSome text.\n\n".join(f"```{{code-cell}} ipython3\n{cell}\n```" for cell in cells)
    path = tmp_path / "chapter.md"
    path.write_text(HEADER + body + "\n")
    return live_cells.chapter_cells(path)


def test_a_pytorch_import_beside_what_a_cell_needs_is_left_out(tmp_path):
    first, = chapter(tmp_path, "import numpy as np\nimport torch\nfrom scratchformer import "
                               "pytorch  # the reference\nx = np.ones(3)")
    assert first["run"] and first["need"] is None
    assert first["source"] == "import numpy as np\n\n\nx = np.ones(3)"  # lines keep numbers
    assert first["stripped"] == ["import torch",
                                 "from scratchformer import pytorch  # the reference"]


def test_cells_that_need_what_a_browser_lacks_say_why(tmp_path):
    cells = chapter(tmp_path, "import numpy as np",
                    "y = torch.ones(2)",
                    "from scratchformer import corpus\ntext = corpus.addresses()",
                    "from scratchformer.pretrained import smollm2\nmodel = smollm2()",
                    "z = np.zeros(2)")
    assert [(cell["run"], cell["need"]) for cell in cells] == [
        (True, None), (False, "torch"), (False, "texts"), (False, "model"), (True, None)]
    assert live_cells.is_live(cells)


def test_what_a_skipped_cell_made_cannot_be_read_and_a_hidden_cell_is_numbered_none(tmp_path):
    cells = chapter(tmp_path, "import numpy as np",
                    "reference = torch.ones(2).numpy()",
                    ":tags: [remove-cell]\nerror = float(np.abs(reference).max())",
                    "print(error)",
                    "error = 0.0\nprint(error)")
    assert [(cell["number"], cell["run"], cell["need"]) for cell in cells] == [
        (1, True, None), (2, False, "torch"), (None, False, "after-torch"),
        (3, False, "after-torch"), (4, True, None)]


def test_a_generator_a_skipped_cell_drew_from_is_said_to_differ(tmp_path):
    cells = chapter(tmp_path, "import numpy as np\nrng = np.random.default_rng(0)",
                    "t = torch.from_numpy(rng.normal(size=3))",
                    "x = rng.normal(size=3)",
                    "rng = np.random.default_rng(1)\ny = rng.normal(size=3)")
    assert [cell["differs"] for cell in cells] == [[], [], [("rng", "cell 2")], []]


def test_a_chapter_whose_first_cell_cannot_run_is_not_live(tmp_path):
    cells = chapter(tmp_path, "import torch\nx = torch.ones(2)", "y = 1")
    assert not live_cells.is_live(cells)
