"""Checks of the chapters' sources that the build itself does not make."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
INCLUDE = re.compile(r"```\{literalinclude\} (?P<path>\S+)\n(?P<options>(?::[^\n]*\n)*)")
CHAPTERS = sorted((ROOT / "book").glob("*.md"))


def shown_objects():
    """(chapter, file, object name) for every ``literalinclude`` with ``:pyobject:``."""
    for chapter in CHAPTERS:
        for match in INCLUDE.finditer(chapter.read_text()):
            name = re.search(r":pyobject: *(\S+)", match["options"])
            if name:
                yield chapter.name, (chapter.parent / match["path"]).resolve(), name[1]


SHOWN = list(shown_objects())


def test_chapters_show_package_code():
    assert any(name == "attention_kernel" for _, _, name in SHOWN)


@pytest.mark.parametrize("chapter, path, name", SHOWN, ids=[s[2] for s in SHOWN])
def test_shown_code_fits_the_page(chapter, path, name):
    source = path.read_text()
    node = ast.parse(source)
    for part in name.split("."):  # "Class.method" as Sphinx's :pyobject: reads it
        node = next((n for n in node.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))
                     and n.name == part), None)
        if node is None:
            break
    assert node is not None, f"{chapter} shows {name}, which {path.name} does not define"
    lines = source.splitlines()[node.lineno - 1:node.end_lineno]
    too_long = [line for line in lines if len(line) > 79]
    assert too_long == [], f"{chapter} shows {name} with lines wider than the page"


def code_cell_lines(chapter: Path):
    """(line number, text) of the source lines of every code cell, metadata excluded."""
    in_cell = in_metadata = False
    for number, line in enumerate(chapter.read_text().splitlines(), start=1):
        if line.startswith("```{code-cell}"):
            in_cell, in_metadata, first = True, False, True
            continue
        if in_cell and line.startswith("```"):
            in_cell = False
        elif in_cell and line == "---":
            in_metadata = first or not in_metadata
        elif in_cell and not in_metadata and not line.startswith(":tags:"):
            yield number, line
        first = False


@pytest.mark.parametrize("chapter", CHAPTERS, ids=[c.name for c in CHAPTERS])
def test_code_cells_fit_the_page(chapter):
    too_long = [(n, line) for n, line in code_cell_lines(chapter) if len(line) > 79]
    assert too_long == [], f"{chapter.name}: code lines wider than the page (79)"
