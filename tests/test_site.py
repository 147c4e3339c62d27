"""The built book, looked at in a real browser with no network: math typeset, figures drawn.

These tests read ``_build/html``, which ``make test`` builds first. They fail (rather than
skip) under CI when Chromium is missing.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parent.parent


def toc_pages():
    """Every page of the book, read from _toc.yml, as paths of the built site."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]]
    for part in toc.get("parts", []):
        files += [chapter["file"] for chapter in part["chapters"]]
    return [f"{file}.html" for file in files]


PAGES = toc_pages()


def visit(browser, site_url, path):
    """Open ``path``; return the page and what went wrong while loading it."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    problems = {"console": [], "failed": [], "foreign": []}
    host = urlparse(site_url).netloc

    def on_request(request):
        if urlparse(request.url).scheme in ("http", "https") and urlparse(request.url).netloc != host:
            problems["foreign"].append(request.url)

    page.on("request", on_request)
    page.on("requestfailed", lambda request: problems["failed"].append(request.url))
    page.on("console", lambda msg: msg.type == "error" and problems["console"].append(msg.text))
    page.route(lambda url: urlparse(url).netloc != host, lambda route: route.abort())
    page.goto(f"{site_url}/{path}", wait_until="networkidle")
    return page, problems


def wait_for_mathjax(page):
    page.wait_for_function(
        "() => window.MathJax && MathJax.startup && MathJax.startup.promise"
        " && (MathJax.startup.promise.then(() => { window.__typeset = true; }), window.__typeset)",
        timeout=20_000)


def test_every_page_of_the_toc_is_tested():
    assert "book/scaled_dot_product_attention.html" in PAGES and len(PAGES) >= 3


@pytest.mark.parametrize("path", PAGES)
def test_page_loads_everything_locally(browser, site_url, path):
    page, problems = visit(browser, site_url, path)
    page.close()
    assert problems["foreign"] == [], "the page requested other hosts"
    assert problems["failed"] == [], "requests failed"
    assert problems["console"] == [], "console errors"


def test_chapter_math_is_typeset(browser, site_url):
    page, problems = visit(browser, site_url, "book/scaled_dot_product_attention.html")
    wait_for_mathjax(page)
    rendered = page.locator("mjx-container").count()
    display = page.locator("mjx-container[display='true']").count()
    text = page.locator("article").inner_text()
    page.close()
    assert rendered >= 20 and display >= 3, (rendered, display)
    for raw in ("$$", "\\(", "\\[", "\\frac", "\\operatorname"):
        assert raw not in text, f"raw TeX {raw!r} left in the rendered text"
    assert problems["foreign"] == [] and problems["failed"] == []


def test_chapter_figures_are_drawn(browser, site_url):
    page, _ = visit(browser, site_url, "book/scaled_dot_product_attention.html")
    figures = page.locator("figure img")
    count = figures.count()
    images = [figures.nth(i).evaluate(
        "img => ({w: img.naturalWidth, h: img.naturalHeight, alt: img.alt, done: img.complete})")
        for i in range(count)]
    page.close()
    assert count == 2
    for image in images:
        assert image["done"] and image["w"] > 200 and image["h"] > 200, image
        assert len(image["alt"]) > 40, f"figure without a real description: {image['alt']!r}"
