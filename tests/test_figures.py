"""Every figure of the built book is shown near the size it was drawn at, so its text is legible.

The figures are pixel-doubled PNGs that carry their drawn (1x) size as the image's CSS width;
``scratchformer.book.plotting`` writes its text at 10 pt or more, drawn at 100 dpi. A figure
drawn wider than the column is shrunk to fit it, and its text with it: three or four panels in a
row came out at half their size or less, their labels 4 to 8 px. So at 1280 px every figure must
be shown at ``DESKTOP_SCALE`` of its drawn width or more (its 10 pt text at 11 px or more), and
on a 375 px phone at ``PHONE_SCALE`` or more (``pages.figure_faults``, which the sweep
``test_site.test_page`` runs on every visit). The tests here show that the check finds the
figures and can fail.

On a phone that is not enough: a figure drawn 6.7 in wide is shown at about half its size, its
10 pt text at 7 px. Wherever a figure's text is shown below ``LEGIBLE_PX``, the figure says
"Tap to enlarge" under it and a tap opens it in an overlay at a legible scale
(``book/_static/figure-zoom.js``); the sweep requires that button on every such figure, and the
tests here tap, read the enlarged text's size, close the overlay each way a reader can, and run
axe-core on it.
"""

from __future__ import annotations

import pytest

from pages import (
    BLOCKING,
    FIGURE_TEXT_PX,
    FIGURES,
    LEGIBLE_PX,
    audit,
    describe,
    drawn_width,
    figure_faults,
    text_px,
    visit,
)

pytestmark = pytest.mark.browser
# A chapter with two figures, both drawn 6.7 in wide (two panels each)
CHAPTER = "book/post_ln_pre_ln.html"


def test_the_figures_are_found(browser, site_url):
    page, _ = visit(browser, site_url, CHAPTER, {"width": 1280, "height": 900})
    try:
        found = page.evaluate(FIGURES)
        faults = figure_faults(page, 1280)
    finally:
        page.context.close()
    assert len(found) >= 2 and faults == []
    assert all(drawn_width(f) > 300 and f["natural"] >= 2 * drawn_width(f) - 2 for f in found)


def test_a_shrunk_figure_is_reported(browser, site_url):
    page, _ = visit(browser, site_url, CHAPTER, {"width": 1280, "height": 900})
    try:
        page.evaluate("""() => {
            document.querySelector('article .cell_output img').style.maxWidth = '100px'; }""")
        faults = figure_faults(page, 1280)
    finally:
        page.context.close()
    assert "of its drawn size (below 0.8) at 1280 px" in faults[0], faults
    assert len(faults) == 2 and "no way shown to enlarge it" in faults[1], faults


PHONE = {"width": 375, "height": 800}
TAP_TIMEOUT = 5_000


def expect(locator):
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect(locator)


def test_on_a_phone_a_figure_too_small_to_read_says_so_and_the_check_can_fail(browser, site_url):
    """At 375 px the chapter's figures show their text below 9 px, and each has its button;
    without the button the sweep's check reports every one of them."""
    page, problems = visit(browser, site_url, CHAPTER, PHONE, touch=True)
    try:
        found = page.evaluate(FIGURES)
        passed = figure_faults(page, 375)
        page.evaluate("() => document.querySelectorAll('button.figure-zoom-cue')"
                      ".forEach(b => b.remove())")
        failed = figure_faults(page, 375)
    finally:
        page.context.close()
    small = [f for f in found if text_px(f) < LEGIBLE_PX]
    assert len(small) >= 2 and all(f["cue"] for f in small), found
    assert passed == []
    assert len(failed) == len(small) and "no way shown to enlarge it" in failed[0], failed
    assert problems["pageerror"] == []


def test_on_a_desktop_the_figures_need_no_button(browser, site_url):
    page, _ = visit(browser, site_url, CHAPTER, {"width": 1280, "height": 900})
    try:
        found = page.evaluate(FIGURES)
    finally:
        page.context.close()
    assert found and all(text_px(f) >= LEGIBLE_PX and not f["cue"] for f in found), found


ENLARGED = """() => {
    const d = document.querySelector('dialog.figure-zoom');
    const img = d && d.querySelector('img');
    const pane = d && d.querySelector('.figure-zoom-pane');
    return d && {open: d.open, shown: img.getBoundingClientRect().width, loaded: img.naturalWidth,
                 alt: img.alt, pans: pane.scrollWidth > pane.clientWidth,
                 inView: img.getBoundingClientRect().top < innerHeight};
}"""
FOCUSED = "() => document.activeElement && document.activeElement.className"


def test_a_tap_opens_a_figure_legible_and_it_closes_three_ways(browser, site_url, axe_source):
    """At 375 px a tap on the figure opens it at a scale that sets its smallest text at 9 px or
    more, panning sideways; the overlay passes axe-core; its Close button, a tap beside the
    figure and Escape each close it, and focus goes back to what opened it."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

    page, problems = visit(browser, site_url, CHAPTER, PHONE, touch=True)
    try:
        figure = page.locator("article figure").first
        image = figure.locator("img")
        drawn = drawn_width(page.evaluate(FIGURES)[0])
        dialog = page.locator("dialog.figure-zoom")
        image.scroll_into_view_if_needed()
        image.tap(timeout=TAP_TIMEOUT)
        expect(dialog).to_be_visible(timeout=TAP_TIMEOUT)
        page.wait_for_function("() => document.querySelector('dialog.figure-zoom img')"
                               ".complete", timeout=TAP_TIMEOUT)
        enlarged = page.evaluate(ENLARGED)
        violations = [v for v in audit(page, axe_source) if v["impact"] in BLOCKING]
        assert page.url.endswith(CHAPTER), "the tap followed the link to the image file"

        page.locator("button.figure-zoom-close").tap(timeout=TAP_TIMEOUT)  # 1. Close
        expect(dialog).to_be_hidden(timeout=TAP_TIMEOUT)
        after_close = page.evaluate(FOCUSED)

        cue = figure.locator("button.figure-zoom-cue")
        cue.tap(timeout=TAP_TIMEOUT)
        expect(dialog).to_be_visible(timeout=TAP_TIMEOUT)
        box = page.locator(".figure-zoom-pane img").bounding_box()
        page.touchscreen.tap(20, min(790, box["y"] + box["height"] + 30))  # 2. beside it
        expect(dialog).to_be_hidden(timeout=TAP_TIMEOUT)
        after_tap = page.evaluate(FOCUSED)

        cue.focus()
        page.keyboard.press("Enter")  # a keyboard opens it too
        expect(dialog).to_be_visible(timeout=TAP_TIMEOUT)
        in_dialog = page.evaluate("() => !!document.activeElement.closest('dialog')")
        page.keyboard.press("Escape")  # 3. Escape
        expect(dialog).to_be_hidden(timeout=TAP_TIMEOUT)
        after_escape = page.evaluate(FOCUSED)
        # The dialog's `close` event, which unlocks the page's scroll, is fired in a task queued
        # after the dialog hides: wait for it rather than read the class in the same instant.
        try:
            page.wait_for_function(
                "() => !document.documentElement.classList.contains('figure-zoom-open')",
                timeout=TAP_TIMEOUT)
            scroll_locked = False
        except PlaywrightTimeoutError:
            scroll_locked = True
    finally:
        page.context.close()
    scale = enlarged["shown"] / drawn
    assert enlarged["open"] and enlarged["loaded"] > 0 and enlarged["inView"], enlarged
    assert FIGURE_TEXT_PX * scale >= LEGIBLE_PX, f"enlarged text at {FIGURE_TEXT_PX * scale} px"
    assert enlarged["pans"], "the enlarged figure is wider than a phone: it must pan"
    assert len(enlarged["alt"]) > 30, "the enlarged figure keeps its description"
    assert violations == [], describe(violations)
    assert "image-reference" in after_close  # the link that was tapped
    assert after_tap == after_escape == "figure-zoom-cue"
    assert in_dialog and not scroll_locked
    assert problems["pageerror"] == [] and problems["console"] == []


def test_the_button_is_not_printed(browser, site_url):
    page, _ = visit(browser, site_url, CHAPTER, PHONE)
    try:
        shown = page.locator("button.figure-zoom-cue").first.is_visible()
        page.emulate_media(media="print")
        printed = page.locator("button.figure-zoom-cue").first.is_visible()
    finally:
        page.context.close()
    assert shown and not printed
