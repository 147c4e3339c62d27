"""Each page of the built book loads each of its scripts once.

A script written twice runs twice; an inline one that declares a ``const`` (sphinx-thebe's
settings) then throws on every page. Sphinx 7 wrote the inline scripts that extensions add
after the build has started twice; ``book/_ext/unique_scripts.py`` drops the repeats.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

pytestmark = pytest.mark.site  # reads the built book in _build/html

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "_build" / "html"
# Every page of the built site but the bare redirect index.html, which has no scripts.
PAGES = sorted(str(p.relative_to(SITE)) for p in SITE.rglob("*.html")
               if not p.relative_to(SITE).parts[0].startswith("_")
               and str(p.relative_to(SITE)) != "index.html") if SITE.exists() else []


def scripts(page: str) -> list[str]:
    path = SITE / page
    if not path.exists():
        pytest.skip(f"no built site at {SITE}: run `make book` first (`make test` does)")
    document = BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")
    return [tag.get("src") or tag.get_text() for tag in document.find_all("script")
            if tag.get("type", "text/javascript") == "text/javascript"]


def test_the_pages_are_found():
    assert len(PAGES) >= 15


@pytest.mark.parametrize("page", PAGES)
def test_no_script_twice(page):
    found = scripts(page)
    assert any("THEBE_JS_URL" in script for script in found)  # the one that threw is there
    twice = [script for script, count in Counter(found).items() if count > 1]
    assert twice == [], f"scripts written more than once on {page}"
