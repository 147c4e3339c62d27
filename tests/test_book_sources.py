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
    node = next((n for n in ast.walk(ast.parse(source))
                 if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == name), None)
    assert node is not None, f"{chapter} shows {name}, which {path.name} does not define"
    lines = source.splitlines()[node.lineno - 1:node.end_lineno]
    too_long = [line for line in lines if len(line) > 79]
    assert too_long == [], f"{chapter} shows {name} with lines wider than the page"
