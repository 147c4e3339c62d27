"""tools/bookkeeping.py: the chapters' glue calls sit in hidden cells, and moving them there
cannot change what a cell computes or shows."""

from __future__ import annotations

from pathlib import Path

import pytest
from tools import bookkeeping

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = sorted((ROOT / "book").glob("*.md"))


@pytest.mark.parametrize("chapter", CHAPTERS, ids=[c.name for c in CHAPTERS])
def test_no_visible_cell_holds_a_glue_call_that_could_be_hidden(chapter):
    assert bookkeeping.movable(chapter) == 0, (
        f"{chapter.name}: glue calls in cells the reader sees; run "
        f"`python -m tools.bookkeeping book/{chapter.name}`")


def chapter(code: str, after: str = "") -> str:
    return f"Text.\n\n```{{code-cell}} ipython3\n{code}```\n{after}\nMore text.\n"


def moved(tmp_path, code: str, after: str = "") -> str:
    path = tmp_path / "page.md"
    path.write_text(chapter(code, after))
    assert bookkeeping.movable(path) == bookkeeping.process(path)
    return path.read_text()


def test_a_glue_call_moves_to_a_hidden_cell_after_its_cell(tmp_path):
    code = "x = 2\n# the value\nglue('x', x, display=False)\nprint(x)\n"
    assert moved(tmp_path, code) == (
        "Text.\n\n```{code-cell} ipython3\nx = 2\nprint(x)\n```\n\n"
        "```{code-cell} ipython3\n:tags: [remove-cell]\n# the value\n"
        "glue('x', x, display=False)\n```\n\nMore text.\n")


def test_it_joins_the_hidden_cell_already_there(tmp_path):
    hidden = "\n```{code-cell} ipython3\n:tags: [remove-cell]\nassert x > 1\n```\n"
    text = moved(tmp_path, "x = 2\nglue('x', x, display=False)\n", hidden)
    assert text.count("```{code-cell}") == 2
    assert ":tags: [remove-cell]\nglue('x', x, display=False)\nassert x > 1\n" in text


@pytest.mark.parametrize("code", [
    "x = [1]\nglue('x', len(x), display=False)\nx.append(2)\n",  # mutated after
    "x = 1\nglue('x', x, display=False)\nx = 2\n",  # rebound after
    "x = {}\nglue('x', len(x), display=False)\nx['a'] = 1\n",  # an item set after
    "x = 1\nfor i in range(2):\n    glue(f'x{i}', x, display=False)\n",  # in a loop
    "x = 1\nglue('x', x)\nprint(x)\n",  # glue displays in place
    "x = 1\nx\nglue('x', x, display=False)\n",  # would make x the displayed value
    "%time x = 1\nglue('x', x, display=False)\n",  # not Python
])
def test_a_call_that_could_change_the_cell_stays(tmp_path, code):
    assert moved(tmp_path, code) == chapter(code)


def test_hidden_cells_are_left_alone(tmp_path):
    code = ":tags: [remove-cell]\nx = 1\nglue('x', x, display=False)\nprint(x)\n"
    assert moved(tmp_path, code) == chapter(code)
