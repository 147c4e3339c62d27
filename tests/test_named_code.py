"""Shown package code is captioned with its object and its file (book/_ext/named_code.py)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("named_code", ROOT / "book/_ext/named_code.py")
named_code = importlib.util.module_from_spec(spec)
spec.loader.exec_module(named_code)


def test_a_whole_object_is_named_with_its_file():
    caption = named_code.caption_for("../src/scratchformer/optim.py", {"pyobject": "Adam.step"})
    assert caption == "Adam.step, from src/scratchformer/optim.py"


@pytest.mark.parametrize("option", ["start-at", "start-after", "end-before", "lines"])
def test_an_excerpt_says_so(option):
    caption = named_code.caption_for("../src/scratchformer/train/loop.py",
                                     {"pyobject": "train_step", option: "x"})
    assert caption == "train_step, in part, from src/scratchformer/train/loop.py"


def test_an_own_caption_or_a_file_without_object_is_left_alone():
    assert named_code.caption_for("../src/a.py", {"pyobject": "f", "caption": "mine"}) is None
    assert named_code.caption_for("../src/a.py", {"lines": "1-3"}) is None


@pytest.mark.site
def test_every_shown_object_is_captioned_on_the_built_pages():
    site = ROOT / "_build" / "html"
    pages = sorted(site.glob("book/*.html"))
    assert pages, "no built book: run `make book` first (`make test` does)"
    captions = [c for page in pages
                for c in re.findall(r'<span class="caption-text">([^<]*, from src/[^<]*)</span>',
                                    page.read_text())]
    includes = [m for chapter in (ROOT / "book").glob("*.md")
                for m in re.findall(r"```\{literalinclude\}[^`]*?:pyobject:", chapter.read_text())]
    assert len(captions) == len(includes) > 0


def test_docstring_markup_is_written_plainly():
    code = ('    """Softmax of ``scores`` over ``axis``; :func:`~scratchformer.softmax`,\n'
            '    :meth:`Layer.inference <scratchformer.Layer.inference>`, :py:class:`a.B`."""\n'
            '    return x  # ``not`` code, a comment\n')
    assert named_code.plain_markup(code) == (
        '    """Softmax of `scores` over `axis`; `softmax`,\n'
        '    `Layer.inference`, `a.B`."""\n'
        '    return x  # `not` code, a comment\n')
    assert named_code.plain_markup("y = x[a:b]  # `s`\n") == "y = x[a:b]  # `s`\n"
