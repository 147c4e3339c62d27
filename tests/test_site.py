"""The built book, looked at in a real browser with no network.

Every HTML page of ``_build/html`` is opened in headless Chromium in light and dark mode, at
desktop width and at a 375 px phone width: nothing may be requested from another host, no
request may fail, no console error may be logged, no script may throw, every image must load
and describe itself, math must be typeset, the page body must not scroll sideways on a phone,
and figures must stay readable in dark mode. The sidebar toggles a reader taps must open the
chapter list and the page's contents on a phone, and hide and show the chapter list on a
desktop. These tests read ``_build/html``, which ``make test`` builds first; under CI they fail
(rather than skip) when Chromium is missing.
"""

from __future__ import annotations

import io
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
import pytest
import yaml

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "_build" / "html"
VIEWPORTS = {"desktop": {"width": 1280, "height": 900}, "phone": {"width": 375, "height": 800}}


def toc_pages():
    """Every page of the book, read from _toc.yml, as paths of the built site."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]]
    for part in toc.get("parts", []):
        files += [chapter["file"] for chapter in part["chapters"]]
    return [f"{file}.html" for file in files]


def site_pages():
    """Every HTML page of the built site (the TOC's pages when the site is not built yet)."""
    if not SITE.exists():
        return toc_pages()
    return sorted(str(p.relative_to(SITE)) for p in SITE.rglob("*.html")
                  if not p.relative_to(SITE).parts[0].startswith("_"))


PAGES = site_pages()


def visit(browser, site_url, path, viewport="desktop", scheme="light", touch=False):
    """Open ``path``; return the page and what went wrong while loading it.

    ``viewport`` is a name of VIEWPORTS or a size; ``touch`` gives the page a touch screen.
    ``problems["pageerror"]`` collects the page's uncaught exceptions (a script that fails to
    parse, or throws), which Chromium does not report as console errors.
    """
    size = VIEWPORTS[viewport] if isinstance(viewport, str) else viewport
    context = browser.new_context(viewport=size, color_scheme=scheme, has_touch=touch)
    page = context.new_page()
    problems = {"console": [], "failed": [], "foreign": [], "pageerror": []}
    host = urlparse(site_url).netloc

    def on_request(request):
        url = urlparse(request.url)
        if url.scheme in ("http", "https", "ws", "wss") and url.netloc != host:
            problems["foreign"].append(request.url)

    page.on("request", on_request)
    page.on("requestfailed", lambda request: problems["failed"].append(request.url))
    page.on("console", lambda msg: msg.type == "error" and problems["console"].append(msg.text))
    page.on("pageerror", lambda error: problems["pageerror"].append(str(error)))
    page.route(lambda url: urlparse(url).netloc != host, lambda route: route.abort())
    page.goto(f"{site_url}/{path}", wait_until="networkidle")
    return page, problems


def wait_for_mathjax(page):
    """Wait until MathJax has typeset the page (if the page loads MathJax at all)."""
    if not page.evaluate("() => !!window.MathJax"):
        return
    page.wait_for_function(
        "() => window.MathJax.startup && window.MathJax.startup.promise"
        " && (window.MathJax.startup.promise.then(() => { window.__typeset = true; }),"
        " window.__typeset)", timeout=20_000)


def test_the_sweep_covers_every_chapter():
    assert set(toc_pages()) <= set(PAGES)
    assert len(toc_pages()) >= 10


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("viewport", ["desktop", "phone"])
@pytest.mark.parametrize("path", PAGES)
def test_page(browser, site_url, path, viewport, scheme):
    page, problems = visit(browser, site_url, path, viewport, scheme)
    try:
        wait_for_mathjax(page)
        images = page.evaluate("""() => [...document.querySelectorAll('article img')].map(
            img => ({src: img.src, alt: img.alt, done: img.complete, w: img.naturalWidth}))""")
        text = page.locator("article").inner_text() if page.locator("article").count() else ""
        overflow = page.evaluate(
            "() => document.documentElement.scrollWidth - document.documentElement.clientWidth")
        theme = page.evaluate("() => document.documentElement.dataset.theme")
    finally:
        page.context.close()
    assert problems["foreign"] == [], "requests to other hosts"
    assert problems["failed"] == [], "failed requests"
    assert problems["console"] == [], "console errors"
    assert problems["pageerror"] == [], "uncaught script errors"
    assert theme == scheme, f"the page did not follow the reader's {scheme} preference"
    for image in images:
        assert image["done"] and image["w"] > 0, f"image not loaded: {image['src']}"
        assert len(image["alt"]) > 30, f"image without a description: {image['src']}"
    for raw in ("$$", "\\(", "\\[", "\\frac{", "\\operatorname"):
        assert raw not in text, f"raw TeX {raw!r} left in the rendered text"
    assert overflow <= 0, f"the page body scrolls sideways by {overflow}px"


def test_chapter_math_and_figures(browser, site_url):
    page, _ = visit(browser, site_url, "book/scaled_dot_product_attention.html")
    try:
        wait_for_mathjax(page)
        rendered = page.locator("mjx-container").count()
        display = page.locator("mjx-container[display='true']").count()
        figures = page.locator("figure img").count()
    finally:
        page.context.close()
    assert rendered >= 20 and display >= 3, (rendered, display)
    assert figures == 2


def luminance(png_bytes):
    """Mean relative luminance (0 black .. 1 white) of a screenshot."""
    from PIL import Image

    rgb = np.asarray(Image.open(io.BytesIO(png_bytes)).convert("RGB"), dtype=float) / 255
    return float((rgb @ np.array([0.2126, 0.7152, 0.0722])).mean())


@pytest.mark.parametrize("path", ["book/scaling.html", "book/positional_encoding.html"])
def test_figures_are_readable_in_dark_mode(browser, site_url, path):
    """Dark mode keeps figures on a light card: dark ink on light, not dark on dark."""
    page, _ = visit(browser, site_url, path, scheme="dark")
    try:
        body = luminance(page.screenshot(clip={"x": 0, "y": 0, "width": 40, "height": 40}))
        figures = page.locator("figure img")
        assert figures.count() >= 2
        cards = []
        for i in range(figures.count()):
            figures.nth(i).scroll_into_view_if_needed()
            cards.append(luminance(figures.nth(i).screenshot()))
    finally:
        page.context.close()
    assert body < 0.25, "the page is not dark"
    assert min(cards) > 0.6, f"a figure is dark in dark mode (mean luminance {min(cards):.2f})"


def test_search_finds_a_chapter_by_a_word_in_it(browser, site_url):
    page, problems = visit(browser, site_url, "search.html?q=permutation")
    try:
        page.wait_for_selector("#search-results li a", timeout=20_000)
        hits = page.eval_on_selector_all("#search-results li a", "els => els.map(e => e.href)")
    finally:
        page.context.close()
    assert any(hit.split("#")[0].endswith("book/self_attention.html") for hit in hits), hits
    assert problems["foreign"] == [] and problems["failed"] == []
    assert problems["pageerror"] == []


# The chapter list (the primary sidebar): below 992 px it opens as a drawer over the page, from
# 992 px on it sits beside the page and its toggle hides and shows it.
DRAWER_WIDTHS = [375, 900]
SIDEBAR_WIDTHS = [1000, 1280]
TAP_TIMEOUT = 5_000  # ms: a control that cannot be tapped fails fast instead of waiting 30 s


def expect(locator):
    """Playwright's retrying assertions (imported here: conftest skips when it is missing)."""
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect(locator)


def reader_toggle(page, sidebar):
    """The toggle of the ``primary`` or ``secondary`` sidebar that a reader sees and can tap.

    The two themes render two toggles for each sidebar, one of them hidden; the reader can only
    reach the one that is visible.
    """
    toggles = page.locator(f".{sidebar}-toggle").filter(visible=True)
    assert toggles.count() == 1, f"{toggles.count()} visible {sidebar}-sidebar toggles"
    return toggles.first


def chapter_link(page, href):
    """The chapter list's link to ``href`` (it moves into a drawer on narrow screens)."""
    return page.locator(f"nav.bd-docs-nav a.reference[href='{href}']")


@pytest.mark.parametrize("width", DRAWER_WIDTHS)
def test_a_tap_on_the_toggle_opens_the_chapter_list_on_a_phone(browser, site_url, width):
    page, problems = visit(browser, site_url, "book/scaling.html",
                           {"width": width, "height": 800}, touch=True)
    try:
        chapter = chapter_link(page, "positional_encoding.html")
        expect(chapter).not_to_be_in_viewport()
        reader_toggle(page, "primary").tap(timeout=TAP_TIMEOUT)
        expect(chapter).to_be_visible(timeout=TAP_TIMEOUT)
        expect(chapter).to_be_in_viewport(ratio=1)  # wholly on the screen
        # A tap beside the drawer closes it; the toggle opens it again.
        page.touchscreen.tap(width - 10, 400)
        expect(chapter).not_to_be_in_viewport(timeout=TAP_TIMEOUT)
        reader_toggle(page, "primary").tap(timeout=TAP_TIMEOUT)
        chapter.tap(timeout=TAP_TIMEOUT)  # fails if anything covers the link
        page.wait_for_url("**/book/positional_encoding.html", timeout=TAP_TIMEOUT)
    finally:
        page.context.close()
    assert problems["pageerror"] == [] and problems["console"] == []


@pytest.mark.parametrize("width", SIDEBAR_WIDTHS)
def test_the_toggle_hides_and_shows_the_chapter_list_on_a_desktop(browser, site_url, width):
    page, problems = visit(browser, site_url, "book/scaling.html", {"width": width, "height": 900})
    try:
        chapter = chapter_link(page, "positional_encoding.html")
        article = page.locator("main article")
        expect(chapter).to_be_in_viewport(ratio=1)
        beside = article.bounding_box()["x"]
        reader_toggle(page, "primary").click(timeout=TAP_TIMEOUT)
        expect(chapter).to_be_hidden(timeout=TAP_TIMEOUT)
        page.wait_for_function(f"() => document.querySelector('main article')"
                               f".getBoundingClientRect().x < {beside}", timeout=TAP_TIMEOUT)
        reader_toggle(page, "primary").click(timeout=TAP_TIMEOUT)
        expect(chapter).to_be_visible(timeout=TAP_TIMEOUT)
        expect(chapter).to_be_in_viewport(ratio=1)
        chapter.click(timeout=TAP_TIMEOUT)
        page.wait_for_url("**/book/positional_encoding.html", timeout=TAP_TIMEOUT)
    finally:
        page.context.close()
    assert problems["pageerror"] == [] and problems["console"] == []


@pytest.mark.parametrize("width", [375, 1000])
def test_a_tap_on_the_toggle_opens_the_contents_of_the_page(browser, site_url, width):
    """Below 1200 px the page's contents (the secondary sidebar) open as a drawer too."""
    page, problems = visit(browser, site_url, "book/scaling.html",
                           {"width": width, "height": 800}, touch=True)
    try:
        entry = page.locator("#pst-page-toc-nav a[href='#why-saturation-stops-learning']")
        section = page.locator("#why-saturation-stops-learning h2")
        expect(entry).not_to_be_in_viewport()
        reader_toggle(page, "secondary").tap(timeout=TAP_TIMEOUT)
        expect(entry).to_be_visible(timeout=TAP_TIMEOUT)
        expect(entry).to_be_in_viewport(ratio=1)
        entry.tap(timeout=TAP_TIMEOUT)
        page.wait_for_url("**/book/scaling.html#why-saturation-stops-learning",
                          timeout=TAP_TIMEOUT)
        expect(section).to_be_in_viewport(timeout=TAP_TIMEOUT)
        page.touchscreen.tap(10, 400)  # beside the drawer, which opens on the right
        expect(entry).not_to_be_in_viewport(timeout=TAP_TIMEOUT)
        expect(section).to_be_visible()
    finally:
        page.context.close()
    assert problems["pageerror"] == [] and problems["console"] == []
