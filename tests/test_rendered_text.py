"""The built pages read as text: no TeX left in the prose, no markup in the titles.

Plain HTML, no browser. Math is typeset by MathJax in the reader's browser from the
``span.math`` and ``div.math`` containers Sphinx writes; TeX anywhere else on a page (a ``$``
that did not open a formula, a wrapped line that Markdown read as a list item and tore a formula
in two) would reach the reader as raw TeX. Titles appear in places MathJax never typesets, the
browser tab, the chapter list, the previous/next links and the search results, so there a
``_``, ``$`` or backslash would be shown as typed (a name set as code, as in the API reference's
contents, is exempt).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

pytestmark = pytest.mark.site  # reads the built book in _build/html

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "_build" / "html"
# What MathJax typesets, code shown as code, and what is not text at all.
NOT_PROSE = ".math, pre, code, script, style"
TEX = re.compile(r"\\[A-Za-z]+|\\[()\[\]{}]|[\^_]\{|\$")
TITLE_MARKUP = re.compile(r"[_$\\]")


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


def page_titles(page: str) -> dict[str, list[str]]:
    """Each place a page shows titles as plain text, with the titles it shows there."""
    document = soup(page)
    for code in document.select("code"):  # a name shown as code (the API's entries) may have _
        code.decompose()

    def texts(selector):
        return [" ".join(e.get_text(" ").split()) for e in document.select(selector)]

    return {
        "browser tab <title>": texts("head > title"),
        "page heading": [t.rstrip("#").strip() for t in texts("article h1")],
        "chapter list": texts("nav.bd-docs-nav a"),
        "contents of the page": texts("nav.page-toc a"),
        "previous/next links": texts(".prev-next-area .prev-next-title"),
        "<link rel=prev/next>": [link["title"] for link in document.select("link[rel][title]")
                                 if link["rel"][0] in ("prev", "next")],
    }


@pytest.mark.parametrize("page", PAGES)
def test_titles_are_plain_text(page):
    places = page_titles(page)
    assert places["browser tab <title>"], "a page without a <title>"
    shown = [f"{place}: {title!r}" for place, titles in places.items() for title in titles
             if TITLE_MARKUP.search(title)]
    assert shown == [], f"a title of {page} shows markup as typed:\n" + "\n".join(shown)


def test_search_results_show_plain_titles():
    """The titles of the pages in the search index, which the search page lists as results."""
    path = SITE / "searchindex.js"
    if not path.exists():
        pytest.skip(f"no built site at {SITE}: run `make book` first (`make test` does)")
    source = path.read_text(encoding="utf-8")
    index = json.loads(source[source.index("(") + 1:source.rindex(")")])
    titles = [BeautifulSoup(title, "html.parser").get_text() for title in index["titles"]]
    assert len(titles) >= 15
    assert [title for title in titles if TITLE_MARKUP.search(title)] == []


def test_the_chapter_titles_are_checked_in_every_place():
    places = page_titles("book/scaling.html")
    assert len(places["chapter list"]) >= 14
    assert len(places["contents of the page"]) >= 3
    assert len(places["previous/next links"]) == 2
    assert len(places["<link rel=prev/next>"]) == 2
    assert any("divide by" in title for title in places["page heading"])


def test_the_search_index_holds_no_tex():
    """Every title the search page can show, section and theorem titles (``alltitles``) too."""
    path = SITE / "searchindex.js"
    if not path.exists():
        pytest.skip(f"no built site at {SITE}: run `make book` first (`make test` does)")
    source = path.read_text(encoding="utf-8")
    index = json.loads(source[source.index("(") + 1:source.rindex(")")])
    titles = list(index["titles"]) + list(index["alltitles"])
    assert len(index["alltitles"]) >= 50
    assert [title for title in titles if TEX.search(title)] == []


#: reStructuredText markup as typed: a double-backtick literal or a role.
REST = re.compile(r"``[^`\n]+``|:(?:[a-z]+:)?[a-z]+:`[^`\n]+`")


def rest_markup(document: BeautifulSoup) -> list[str]:
    """The reST markup the page's code listings show (the package's docstrings are reST)."""
    return [match.group() for pre in document.select("div.highlight pre")
            for match in REST.finditer(pre.get_text())]


@pytest.mark.parametrize("page", [page for page in PAGES if page.startswith("book/")
                                  and page != "book/api.html"])
def test_listings_show_no_rest_markup(page):
    assert rest_markup(soup(page)) == []


def test_the_listing_check_sees_rest_markup():
    listing = BeautifulSoup('<div class="highlight"><pre>"""Scores of ``q``; see '
                            ':func:`~scratchformer.softmax`."""\nx = `y`</pre></div>',
                            "html.parser")
    assert rest_markup(listing) == ["``q``", ":func:`~scratchformer.softmax`"]
