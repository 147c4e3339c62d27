"""Every formula of the built book can be read whole, on a desktop, on a phone and on paper.

The sweep (``test_site.test_page``) measures each page at 1280 and 375 px after MathJax has
typeset it, with every dropdown open (``pages.formula_faults``). At desktop width every display
equation fits the column. On a phone an equation may be wider than the column only if its own
box scrolls sideways and shows that it does (a scrollbar that is not hidden, and the shadow at
the side where the formula goes on); an inline formula must fit its line. Nothing between a
formula and the page may clip it (``overflow: hidden`` cut formulas off with no sign before).
Printed, nothing scrolls, so there every display equation must fit the printed column and
nothing may be hidden (``pages.print_faults``, on the light desktop visit turned to print).
The tests here show that the measurement finds the formulas, that each check can fail, and that
the visit turned to print measures what a page opened for print does.
"""

from __future__ import annotations

import pytest

from pages import (
    PRINT_WIDTH,
    formula_faults,
    measure_formulas,
    print_faults,
    printed,
    visit,
    wait_for_mathjax,
)

pytestmark = pytest.mark.browser

CHAPTER = "book/scaled_dot_product_attention.html"


def formulas(browser, site_url, path, width, media="screen"):
    page, _ = visit(browser, site_url, path, {"width": width, "height": 900})
    try:
        if media == "print":
            page.emulate_media(media="print")
        wait_for_mathjax(page)
        return measure_formulas(page)
    finally:
        page.context.close()


def test_the_check_sees_every_formula(browser, site_url):
    """The measurement finds the chapter's formulas (a selector gone stale would pass all)."""
    found = formulas(browser, site_url, CHAPTER, 375)
    assert sum(f["display"] for f in found) >= 3
    assert sum(not f["display"] for f in found) >= 20
    assert formula_faults(found, "phone") == []


def test_the_checks_catch_a_clipped_and_a_wide_formula(browser, site_url):
    """A display equation grown wider than the column, and an inline one inside a box that
    hides its overflow, are each reported."""
    page, _ = visit(browser, site_url, CHAPTER, "desktop")
    try:
        wait_for_mathjax(page)
        page.evaluate("""() => {
            const display = document.querySelector("article mjx-container[display='true']");
            const wide = document.createElement('mjx-math');  // a formula grown too long
            wide.style.cssText = 'display: inline-block; width: 3000px';
            display.appendChild(wide);
            const inline = document.querySelector("article p mjx-container:not([display])");
            inline.parentElement.style.display = 'inline-block';
            inline.parentElement.style.overflow = 'hidden';
            inline.parentElement.style.width = '10px';
        }""")
        faults = formula_faults(measure_formulas(page), "desktop")
    finally:
        page.context.close()
    text = "\n".join(faults)
    assert "formula clipped by SPAN.math" in text, text
    assert "display equations wider than the desktop column" in text, text


def test_on_paper_a_clipped_a_scrolling_or_a_wide_inline_formula_is_cut():
    entry = {"display": True, "text": "x", "clippedBy": None, "scrolls": False, "over": 0}
    assert print_faults([entry]) == []
    for change in ({"clippedBy": "DIV.box"}, {"scrolls": True, "over": 40},
                   {"display": False, "over": 12}):
        faults = print_faults([entry | change])
        assert len(faults) == 1 and "cut on paper" in faults[0], change


def test_the_visit_turned_to_print_measures_as_a_page_opened_for_print(browser, site_url):
    """The sweep prints the desktop visit it already has; a fresh visit at the printed width
    in print media finds the same formulas, the same widths."""
    page, _ = visit(browser, site_url, CHAPTER, "desktop")
    try:
        wait_for_mathjax(page)
        measure_formulas(page)
        turned = measure_formulas(printed(page))
    finally:
        page.context.close()
    fresh = formulas(browser, site_url, CHAPTER, PRINT_WIDTH, media="print")
    key = [(f["text"], f["display"], f["over"], f["scrolls"]) for f in turned]
    assert key == [(f["text"], f["display"], f["over"], f["scrolls"]) for f in fresh]
    assert len(key) >= 20
