"""The built pages read as text: no TeX left in the prose.

Plain HTML, no browser. Math is typeset by MathJax in the reader's browser from the
``span.math`` and ``div.math`` containers Sphinx writes; TeX anywhere else on a page (a ``$``
that did not open a formula, a wrapped line that Markdown read as a list item and tore a formula
in two) would reach the reader as raw TeX.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "_build" / "html"
# What MathJax typesets, code shown as code, and what is not text at all.
NOT_PROSE = ".math, pre, code, script, style"
TEX = re.compile(r"\\[A-Za-z]+|\\[()\[\]{}]|[\^_]\{|\$")


def built_pages():
    """Every HTML page of the built site but the bare redirect ``index.html``."""
    if not SITE.exists():
        return []
    pages = sorted(str(p.relative_to(SITE)) for p in SITE.rglob("*.html")
                   if not p.relative_to(SITE).parts[0].startswith("_"))
    return [page for page in pages if page != "index.html"]


PAGES = built_pages()


def soup(page: str) -> BeautifulSoup:
    path = SITE / page
    if not path.exists():
        pytest.skip(f"no built site at {SITE}: run `make book` first (`make test` does)")
    return BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")


def prose(document: BeautifulSoup) -> str:
    """The page's text as the reader sees it before MathJax runs, less math and code."""
    body = document.body
    for element in body.select(NOT_PROSE):
        element.decompose()
    return body.get_text(" ")


def test_the_pages_are_found():
    assert len(PAGES) >= 15 and "book/positional_encoding.html" in PAGES


@pytest.mark.parametrize("page", PAGES)
def test_no_tex_outside_math(page):
    text = prose(soup(page))
    found = [text[max(0, m.start() - 40):m.end() + 40].replace("\n", " ")
             for m in TEX.finditer(text)]
    assert found == [], f"raw TeX in the rendered text of {page}:\n" + "\n".join(found)


def test_the_check_sees_tex_outside_math_and_none_inside():
    document = BeautifulSoup(
        '<body><p><span class="math">\\(\\sqrt{d_k}\\)</span> and <code>a_{i}</code></p>'
        '<div class="math">\\[x^{2}\\]</div><ul><li><p>\\sin b = 1$.</p></li></ul></body>',
        "html.parser")
    assert [m.group() for m in TEX.finditer(prose(document))] == ["\\sin", "$"]

