"""The built book, looked at in a real browser with no network: one sweep, and the controls a
reader taps.

The sweep (``test_page``) opens every HTML page of ``_build/html`` in headless Chromium once for
each colour scheme (light, dark) and width (1280 px, a 375 px phone) and runs every page check
of ``pages.py`` on that visit: nothing may be requested from another host, no request may fail,
no console error may be logged, no script may throw, every image must load and describe itself,
math must be typeset, the page body must not scroll sideways on a phone; every figure is shown
near its drawn size (``test_figures``), every formula is seen whole (``test_equations``), a
cell's text output is read whole at both widths and its code at desktop width, a value glued
after a formula such as "$n =$" starts on the formula's line, at desktop width axe-core finds
no serious violation (``test_accessibility``), and in the light desktop visit the page,
printed, cuts no formula. Figures must stay readable in dark mode. The sidebar toggles a
reader taps must open the chapter list and the page's contents on a phone, and hide and show
the chapter list on a desktop. These tests read ``_build/html``, which ``make test`` builds
first; under CI they fail (rather than skip) when Chromium is missing.
"""

from __future__ import annotations

import io

import numpy as np
import pytest

from pages import (
    OPEN_FOLDED,
    PAGES,
    TABLES,
    WIDTHS,
    accessibility_faults,
    code_faults,
    figure_faults,
    formula_faults,
    glued_value_faults,
    load_faults,
    measure_formulas,
    output_faults,
    print_faults,
    printed,
    table_faults,
    toc_pages,
    visit,
    wait_for_drawn_math,
    wait_for_mathjax,
)

pytestmark = pytest.mark.browser


def test_the_sweep_covers_every_chapter():
    assert set(toc_pages()) <= set(PAGES)
    assert len(toc_pages()) >= 10


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("viewport", ["desktop", "phone"])
@pytest.mark.parametrize("path", PAGES)
def test_page(browser, reader, site_url, axe_source, path, viewport, scheme):
    """Every check of the page at this width and scheme, on one visit; every fault reported.

    The pages of one width and scheme are opened one after another in one browser context,
    as a reader reads on: the files every page loads (the theme's, MathJax's fonts and its
    speech rules) come from the browser's cache after the first page (with no interception
    of requests, conftest.CHROMIUM_ARGS: the two together took 0.4 CPU-seconds off each of
    32 visits of eight pages on two workers, 5 % of the machine's CPU); what a reader's
    first page loads is checked by the first visit of each width and scheme, and by every
    other browser test, each in a context of its own."""
    page, problems = visit(browser, site_url, path, viewport, scheme,
                           reader=reader(viewport, scheme))
    try:
        if viewport == "desktop":  # axe-core reads what screen readers are given
            wait_for_mathjax(page)
        else:  # the layout: laid out once the formulas are drawn (pages.py)
            wait_for_drawn_math(page)
        faults = load_faults(page, problems, scheme)
        loaded = len(problems["pageerror"])
        faults += figure_faults(page, WIDTHS[viewport])
        faults += table_faults(page)
        faults += glued_value_faults(page)
        if viewport == "desktop":
            faults += accessibility_faults(page, axe_source)
        faults += formula_faults(measure_formulas(page), viewport)  # opens every fold
        if viewport == "desktop":
            faults += code_faults(page)
        faults += output_faults(page)
        if viewport == "desktop" and scheme == "light":
            faults += print_faults(measure_formulas(printed(page)))
        if problems["pageerror"][loaded:]:  # thrown while the checks opened folds or printed
            faults.append(f"uncaught script errors after loading: {problems['pageerror'][loaded:]}")
    finally:
        page.close()
    assert faults == [], f"{path} at {viewport} width, {scheme}:\n" + "\n".join(faults)


def test_chapter_math_and_figures(browser, site_url):
    page, _ = visit(browser, site_url, "book/scaled_dot_product_attention.html")
    try:
        wait_for_mathjax(page)
        rendered = page.locator("mjx-container").count()
        display = page.locator("mjx-container[display='true']").count()
        figures = page.locator("figure img").count()
        named = page.evaluate("() => [...document.querySelectorAll('figure')].map(f => f.id)")
    finally:
        page.context.close()
    assert rendered >= 20 and display >= 3, (rendered, display)
    # the flow of the four steps, the sentence's weights, its three strengths; the causal
    # mask's figure is in attention_masks
    assert figures == 3
    assert named == ["fig-sdpa-flow", "fig-sdpa-toy", "fig-sdpa-strengths"], named


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


def test_a_request_to_another_host_is_reported_and_never_leaves_the_machine(browser, reader,
                                                                             site_url):
    """What the sweep does if a page asks another host for anything: the request is reported
    (a fault of the page), and it fails at once, the browser resolving no other host's name
    (conftest.CHROMIUM_ARGS), in a fresh context and in a reader's alike."""
    for context in (None, reader("desktop", "light")):
        page, problems = visit(browser, site_url, "book/intro.html", reader=context)
        why = []
        page.on("requestfailed", lambda request, why=why: why.append(request.failure))
        try:
            error = page.evaluate("""() => fetch('https://example.org/x.js')
                .then(() => 'fetched', error => String(error))""")
            page.wait_for_timeout(100)
            faults = load_faults(page, problems, "light")
        finally:
            page.context.close() if context is None else page.close()
        assert error.startswith("TypeError"), error
        assert why == ["net::ERR_NAME_NOT_RESOLVED"]
        assert problems["foreign"] == ["https://example.org/x.js"]
        assert problems["failed"] == ["https://example.org/x.js"]
        assert any("x.js" in fault for fault in faults), faults


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


def test_the_api_reference_lists_its_module_groups_in_its_side_contents(browser, site_url):
    """The API reference's side contents show its second level (the module groups) at the top
    of the page, which the theme folds until scrolled to; a chapter's stay folded."""
    def shown(path):
        page, problems = visit(browser, site_url, path, "desktop")
        try:
            # On a loaded machine the side contents were not yet laid out at networkidle (the
            # rehearsal of stop 57 read none on the API page); wait until one entry shows.
            page.locator("#pst-page-toc-nav li.toc-h2").first.wait_for(state="visible",
                                                                       timeout=60_000)
            return page.evaluate("""() => [...document.querySelectorAll(
                '#pst-page-toc-nav li')].filter(li => li.checkVisibility()).map(
                li => li.className.match(/toc-h[0-9]/)[0])"""), problems
        finally:
            page.context.close()

    api, problems = shown("book/api.html")
    assert api.count("toc-h2") == 3 and api.count("toc-h3") >= 20, api
    assert "toc-h4" not in api  # the classes and functions still unfold on scrolling
    assert problems["pageerror"] == [] and problems["console"] == []
    chapter, _ = shown("book/decoding.html")
    assert set(chapter) == {"toc-h2"}, chapter


@pytest.mark.parametrize("viewport", ["desktop", "phone"])
def test_the_exercise_named_in_a_solution_s_bar_opens_the_solution(browser, site_url, viewport):
    """The largest part of a solution's bar is the link to its exercise: a click (a tap on a
    phone) there opens the solution where it is, and closes it again, with no script error."""
    page, problems = visit(browser, site_url, "book/scaling.html", viewport,
                           touch=viewport == "phone")
    try:
        solution = page.locator(".solution.dropdown").first
        link = solution.locator(".admonition-title a")
        content = solution.locator("section").first
        expect(content).to_be_hidden()
        link.scroll_into_view_if_needed()
        before = page.evaluate("() => [location.hash, Math.round(window.scrollY)]")
        press = link.tap if viewport == "phone" else link.click
        press(timeout=TAP_TIMEOUT)
        expect(content).to_be_visible(timeout=TAP_TIMEOUT)
        after = page.evaluate("() => [location.hash, Math.round(window.scrollY)]")
        press(timeout=TAP_TIMEOUT)
        expect(content).to_be_hidden(timeout=TAP_TIMEOUT)
        solution.locator(".toggle-button").click(timeout=TAP_TIMEOUT)  # the button still works
        expect(content).to_be_visible(timeout=TAP_TIMEOUT)
    finally:
        page.context.close()
    assert after == before, "the click followed the link instead of opening the solution"
    assert problems["pageerror"] == [] and problems["console"] == []


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_a_citation_lands_on_its_entry_marked_and_readable(browser, site_url, axe_source,
                                                           scheme):
    """A click on a citation opens the bibliography at the entry, framed, and the framed entry
    (its links included) passes axe-core's contrast rules."""
    page, problems = visit(browser, site_url, "book/scaling.html", scheme=scheme)
    try:
        page.locator("a[href^='bibliography.html#']").first.click(timeout=TAP_TIMEOUT)
        page.wait_for_url("**/book/bibliography.html#*", timeout=TAP_TIMEOUT)
        entry = page.evaluate("""() => { const e = document.querySelector(':target');
            const style = e && getComputedStyle(e);
            return e && {cls: e.className, outline: style.outlineStyle,
                         top: e.getBoundingClientRect().top}; }""")
        faults = accessibility_faults(page, axe_source)
    finally:
        page.context.close()
    assert entry and entry["cls"] == "citation" and entry["outline"] == "solid", entry
    assert 0 <= entry["top"] < 800, "the entry is not on the screen"
    assert faults == [], "\n".join(faults)
    assert problems["pageerror"] == [] and problems["console"] == []


def test_the_phone_drawer_opens_at_the_current_chapter(browser, site_url):
    """On the last chapter the list would open at its top, the chapter 1,500 px below."""
    last = toc_pages()[-1].removeprefix("book/")
    page, problems = visit(browser, site_url, f"book/{last}", {"width": 375, "height": 700},
                           touch=True)
    try:
        reader_toggle(page, "primary").tap(timeout=TAP_TIMEOUT)
        current = page.locator("nav.bd-docs-nav a.current").filter(visible=True)
        expect(current).to_be_in_viewport(ratio=1, timeout=TAP_TIMEOUT)
    finally:
        page.context.close()
    assert problems["pageerror"] == [] and problems["console"] == []


def test_the_table_check_finds_wide_tables_and_catches_a_cut_one(browser, site_url):
    """On a phone the trained translator's chapter's wide tables pass; the same tables fail once
    their box hides what overflows, or once the fade is gone."""
    page, _ = visit(browser, site_url, "book/trained_translator.html", "phone")
    try:
        wide = [t for t in page.evaluate(TABLES) if t["over"] > 1]
        passed = table_faults(page)
        page.evaluate("""() => document.querySelectorAll('div.pst-scrollable-table-container')
            .forEach(box => box.classList.remove('more-right'))""")
        unmarked = table_faults(page)
        page.evaluate("""() => document.querySelectorAll('div.pst-scrollable-table-container')
            .forEach(box => { box.style.overflowX = 'hidden'; })""")
        cut = table_faults(page)
    finally:
        page.context.close()
    assert wide and passed == []
    assert len(unmarked) == len(wide) and "without showing it" in unmarked[0]
    assert len(cut) == len(wide) and "cut at the column's edge" in cut[0]


# What a box that hid its overflow would do to the boxes a selector finds: each text as wide
# as its lines, its container cutting what does not fit (the checks must still see it).
HIDE_OVERFLOW = """(selector) => document.querySelectorAll(selector)
    .forEach(pre => { pre.style.width = 'max-content';
                      pre.parentElement.style.overflow = 'hidden'; })"""


def test_code_is_read_whole_at_the_narrowest_desktop_column(browser, site_url):
    """At 1200 px, where both sidebars first show, the column is narrowest: the warm-up
    chapter's code fits it, folded code included (book.css shrinks the code's font there); at
    the theme's 14 px, its 79-character lines scroll, and the sweep's check says so; and a box
    that hid what overflows would cut them, which the check says too."""
    page, problems = visit(browser, site_url, "book/warmup.html", {"width": 1200, "height": 900})
    try:
        page.evaluate(OPEN_FOLDED)  # the solutions' code too, in their narrower boxes
        fits = code_faults(page)
        page.evaluate("""() => document.querySelectorAll('article div.highlight pre')
            .forEach(pre => { pre.style.fontSize = '14px'; })""")
        scrolls = code_faults(page)
        page.evaluate(HIDE_OVERFLOW, "article div.highlight pre")
        hidden = code_faults(page)
    finally:
        page.context.close()
    assert fits == [] and problems["pageerror"] == []
    assert scrolls and "code wider than its box by" in scrolls[0]
    assert len(hidden) >= len(scrolls)


def test_a_glued_value_stays_on_the_line_of_its_formula_on_a_phone(browser, site_url):
    """At 375 px the appendix's "$n =$ 4096" and its like are read on one line (each pair is
    wrapped by book/_ext/glued_values.py, kept together by book.css); once the wrapper may
    break, the sweep's check finds the pairs that fall on two lines."""
    page, problems = visit(browser, site_url, "book/appendix_speed.html", "phone")
    try:
        wait_for_drawn_math(page)
        kept = glued_value_faults(page)
        wrapped = page.locator("span.keep-together").count()
        page.evaluate("""() => document.querySelectorAll('span.keep-together')
            .forEach(span => { span.style.whiteSpace = 'normal'; })""")
        broken = glued_value_faults(page)
    finally:
        page.context.close()
    assert kept == [] and problems["pageerror"] == []
    assert wrapped >= 5
    assert broken and "starts a line after" in broken[0]


# The widest outputs of the part on real language, by the pixels they hid at 1280 px before
# book.css wrapped output lines: the repr of SmolLM2's tokenizer (2,253), of its model (1,540),
# and its sampled continuation (729), in the chapter "A real model".
WIDEST_OUTPUTS = ("BPE(vocab_size=49152", "DecoderModel(vocab_size=49152",
                  "' a public-private partnership")


@pytest.mark.parametrize("viewport", ["desktop", "phone"])
def test_outputs_are_read_whole_and_the_check_sees_one_that_is_not(browser, site_url, viewport):
    """At 1280 and 375 px the real model's chapter shows every output whole, its longest lines
    wrapped (book.css); without book.css's rule they scroll sideways by hundreds to thousands
    of pixels, and the sweep's check names them; a box that hid what overflows would cut them,
    which the check says too."""
    page, problems = visit(browser, site_url, "book/real_model.html", viewport)
    try:
        page.evaluate(OPEN_FOLDED)
        whole = output_faults(page)
        wrapped = page.evaluate("""() => [...document.querySelectorAll(
            'article .cell_output pre')].filter(pre => getComputedStyle(pre).whiteSpace
            === 'pre-wrap').length""")
        removed = page.evaluate("""() => {
            let n = 0;
            for (const sheet of document.styleSheets) {
                if (!(sheet.href || '').split('?')[0].endsWith('/_static/book.css')) continue;
                const rules = sheet.cssRules;
                for (let i = rules.length - 1; i >= 0; i--) {
                    if (rules[i].selectorText === '.bd-article div.cell_output pre') {
                        sheet.deleteRule(i); n++;
                    }
                }
            }
            return n;
        }""")
        scrolls = output_faults(page)
        page.evaluate(HIDE_OVERFLOW, "article .cell_output pre")
        cut = output_faults(page)
    finally:
        page.context.close()
    assert whole == [] and problems["pageerror"] == []
    assert wrapped >= 10 and removed == 1
    for start in WIDEST_OUTPUTS:
        assert any(start in fault for fault in scrolls), (start, scrolls)
        assert any(start in fault for fault in cut), (start, cut)
    widest = max(int(fault.split(" by ")[1].split("px")[0]) for fault in scrolls)
    assert widest > 1000, scrolls
