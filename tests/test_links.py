"""Every internal link of the built site leads to a page that exists, and to an anchor on it."""

from __future__ import annotations

import html.parser
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

pytestmark = pytest.mark.site  # reads the built book in _build/html

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "_build" / "html"


class _Links(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.hrefs, self.ids = [], set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag == "a" and attrs.get("name"):
            self.ids.add(attrs["name"])
        for key in ("href", "src"):
            if attrs.get(key) and tag in ("a", "img", "link", "script"):
                self.hrefs.append(attrs[key])


def parse(page: Path) -> _Links:
    links = _Links()
    links.feed(page.read_text(encoding="utf-8"))
    return links


def test_internal_links_and_anchors_resolve():
    if not (SITE / "index.html").exists():
        pytest.skip("no built site: run `make book` first (`make test` does)")
    pages = [p for p in SITE.rglob("*.html") if not p.relative_to(SITE).parts[0] == "_static"]
    parsed = {page: parse(page) for page in pages}
    broken = []
    for page, links in parsed.items():
        for href in links.hrefs:
            url = urlparse(href)
            if url.scheme or url.netloc or href.startswith(("mailto:", "javascript:")):
                continue  # external: not requested by the site (tests/test_site.py checks that)
            target = (page.parent / unquote(url.path)).resolve() if url.path else page
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{page.relative_to(SITE)}: {href} (no such file)")
                continue
            if url.fragment and target.suffix == ".html":
                ids = parsed[target].ids if target in parsed else parse(target).ids
                if unquote(url.fragment) not in ids:
                    broken.append(f"{page.relative_to(SITE)}: {href} (no such anchor)")
    assert broken == [], "\n".join(broken[:20])
    assert len(parsed) >= 10


def test_every_chapter_weighs_at_most_a_megabyte():
    """HTML plus images of each page of the table of contents (benchmarks/page_weight.py)."""
    if not (SITE / "index.html").exists():
        pytest.skip("no built site: run `make book` first (`make test` does)")
    import importlib.util

    spec = importlib.util.spec_from_file_location("page_weight",
                                                  ROOT / "benchmarks" / "page_weight.py")
    page_weight = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(page_weight)
    weights = {page: sum(page_weight.page_weight(SITE, page)[:2])
               for page in page_weight.toc_pages()}
    assert len(weights) >= 10
    heavy = {page: size for page, size in weights.items() if size > 1_000_000}
    assert heavy == {}
    assert page_weight.page_weight(SITE, "book/scaling")[2] >= 3  # figures are counted
