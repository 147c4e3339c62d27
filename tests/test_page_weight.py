"""Pages load only the scripts they use; the icons are drawn from the theme's web fonts.

Every page loaded the theme's ``fontawesome.js``, 1.5 MB, to turn about fifteen icons into
inline SVGs, which matters to themes whose users add icons of their own; this book adds none,
and the theme's stylesheet draws every Font Awesome icon from the web fonts. The template
``book/_templates/static/webpack-macros.html`` is the theme's file without that script.
"""

from __future__ import annotations

import re
from pathlib import Path

import pydata_sphinx_theme
import pytest

from pages import PAGES, visit

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "_build" / "html"
OURS = ROOT / "book" / "_templates" / "static" / "webpack-macros.html"
THEIRS = (Path(pydata_sphinx_theme.__file__).parent / "theme" / "pydata_sphinx_theme"
          / "static" / "webpack-macros.html")
# The scripts of a page, besides MathJax (typesetting, 1.2 MB) and the search index (which
# grows with the book), in bytes. With fontawesome.js it was 1.66 MB.
SCRIPT_BUDGET = 300_000
LARGE_SCRIPTS = ("mathjax/", "searchindex.js")


def test_the_template_is_the_themes_without_fontawesome():
    """A theme upgrade that changes the file fails here, instead of our copy going stale."""
    ours = OURS.read_text().split("-#}\n", 1)[1]  # after our comment
    theirs = THEIRS.read_text()
    dropped = [line for line in theirs.splitlines(keepends=True) if "fontawesome" in line
               or "custom icons" in line]
    assert len(dropped) == 2
    for line in dropped:
        theirs = theirs.replace(line, "")
    assert ours == theirs


def scripts(page: str) -> list[Path]:
    path = SITE / page
    if not path.exists():
        pytest.skip(f"no built site at {SITE}: run `make book` first (`make test` does)")
    sources = re.findall(r'<script[^>]*\ssrc="([^"]+)"', path.read_text(encoding="utf-8"))
    return [(path.parent / src.split("?")[0]).resolve() for src in sources
            if "://" not in src]


@pytest.mark.site
@pytest.mark.parametrize("page", [p for p in PAGES if p != "index.html"])
def test_pages_load_small_scripts(page):
    files = scripts(page)
    assert files, f"no scripts found on {page}"
    assert not [f for f in files if "fontawesome" in f.name]
    small = [f for f in files if not any(large in f.as_posix() for large in LARGE_SCRIPTS)]
    total = sum(f.stat().st_size for f in small)
    largest = sorted(small, key=lambda f: -f.stat().st_size)
    assert total <= SCRIPT_BUDGET, (f"{page} loads {total:,} bytes of scripts:\n" + "\n".join(
        f"  {f.stat().st_size:>9,} {f.name}" for f in largest))


ICONS = """async () => {
  await document.fonts.ready;
  return [...document.querySelectorAll('i[class*="fa-"]')]
    .filter(i => i.getClientRects().length)  // the ones on the screen
    .map(i => {
      const before = getComputedStyle(i, '::before');
      return {cls: i.className, content: before.content, font: before.fontFamily,
              width: i.getBoundingClientRect().width};
    });
}"""


@pytest.mark.browser
@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_icons_are_drawn(browser, site_url, scheme):
    page, problems = visit(browser, site_url, "book/scaling.html", scheme=scheme)
    try:
        icons = page.evaluate(ICONS)
        solid = page.evaluate("() => document.fonts.check('900 16px \"Font Awesome 6 Free\"')")
        brands = page.evaluate("() => document.fonts.check('16px \"Font Awesome 6 Brands\"')")
    finally:
        page.context.close()
    assert len(icons) >= 5, icons  # the buttons above the page
    blank = [icon["cls"] for icon in icons if icon["content"] in ("none", "normal", '""')
             or "Font Awesome" not in icon["font"] or icon["width"] < 8]
    assert blank == []
    assert solid and brands
    assert problems["failed"] == [] and problems["console"] == []


@pytest.mark.site
def test_the_script_no_page_loads_is_not_shipped():
    """tools/build_book.py drops the theme's fontawesome.js (1.5 MB, and its 1.7 MB map)."""
    if not (SITE / "index.html").exists():
        pytest.skip(f"no built site at {SITE}: run `make book` first (`make test` does)")
    assert not list((SITE / "_static" / "scripts").glob("fontawesome.js*"))
    assert list((SITE / "_static" / "vendor" / "fontawesome").rglob("*.woff2"))  # the fonts stay


@pytest.mark.site
@pytest.mark.parametrize("page", [p for p in PAGES if p != "index.html"])  # index: a redirect
def test_every_page_names_the_book_s_icon(page):
    """A page without an icon of its own made the browser ask for /favicon.ico: a 404."""
    path = SITE / page
    if not path.exists():
        pytest.skip(f"no built site at {SITE}: run `make book` first (`make test` does)")
    icons = re.findall(r'<link rel="icon" href="([^"]+)"', path.read_text(encoding="utf-8"))
    assert len(icons) == 1, icons
    assert (path.parent / icons[0]).resolve().name == "favicon.svg"
    assert (path.parent / icons[0]).resolve().is_file()
