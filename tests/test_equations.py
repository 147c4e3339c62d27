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

MathJax 4 (``book/_ext/offline_mathjax.py``) breaks a display equation wider than the column over
lines; with MathJax 3, 72 of the book's 149 display equations scrolled at 375 px (the first of
self-attention showed "V =" and a shadow). The chapters with the widest equations must now show
every one whole on a phone, every glyph inside the column, also after a window narrowed to a
phone's width.
"""

from __future__ import annotations

import pytest

from pages import (
    PRINT_WIDTH,
    describe_formulas,
    formula_faults,
    measure_formulas,
    print_faults,
    printed,
    visit,
    wait_for_drawn_math,
    wait_for_equations,
    wait_for_mathjax,
)

pytestmark = pytest.mark.browser

CHAPTER = "book/scaled_dot_product_attention.html"


def formulas(browser, site_url, path, width, media="screen"):
    page, _ = visit(browser, site_url, path, {"width": width, "height": 900})
    try:
        if media == "print":
            page.emulate_media(media="print")
        wait_for_drawn_math(page)  # a layout: drawn is enough (pages.wait_for_drawn_math)
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


# Chapters whose display equations all scrolled at 375 px with MathJax 3 (9, 2, 4, 3 and 14 of
# them); each equation of theirs can be broken at a relation or an operator.
WIDEST = ["book/backpropagation.html", "book/post_ln_pre_ln.html", "book/self_attention.html",
          "book/recurrence.html", "book/api.html"]

# Where the glyphs of each display equation lie, against its own box and the article's column.
GLYPHS = r"""() => {
  const column = document.querySelector('article').getBoundingClientRect();
  return [...document.querySelectorAll("article mjx-container[display='true']")].map(m => {
    const box = m.getBoundingClientRect();
    let left = Infinity, right = -Infinity, n = 0;
    for (const c of m.querySelectorAll('mjx-c')) {
      const r = c.getBoundingClientRect();
      if (!r.width) continue;
      left = Math.min(left, r.left); right = Math.max(right, r.right); n += 1;
    }
    const text = m.textContent.slice(0, 70);
    return {text, n, shown: box.width > 0,
            beyond: Math.round(Math.max(right - Math.min(box.right, column.right),
                                        Math.max(box.left, column.left) - left))};
  });
}"""


def whole_on_a_phone(found, glyphs):
    """The faults of a page at 375 px: an equation that scrolls, a glyph outside its box or
    the column, anything the sweep's checks report."""
    display = [f for f in found if f["display"]]
    scrolling = [f for f in display if f["scrolls"]]
    faults = formula_faults(found, "phone")
    if scrolling:
        faults.append("display equations that scroll:\n" + describe_formulas(scrolling))
    faults += [f"glyphs {g['beyond']}px outside the column: {g['text']!r}" for g in glyphs
               if g["shown"] and g["beyond"] > 1]
    faults += [f"an equation with no glyphs drawn: {g['text']!r}" for g in glyphs
               if g["shown"] and g["n"] == 0]
    return display, faults


def phone_faults(browser, site_url, path, size, narrowed_to=None):
    """Load ``path`` at ``size`` (then narrow the window to ``narrowed_to``, if given), and
    return its display equations, what :func:`whole_on_a_phone` finds wrong with them, and
    the page's problems."""
    page, problems = visit(browser, site_url, path, size)
    try:
        # narrowing needs equation-breaks.js, which starts once MathJax is wholly done
        (wait_for_mathjax if narrowed_to else wait_for_drawn_math)(page)
        if narrowed_to:
            page.set_viewport_size(narrowed_to)
            wait_for_equations(page)
        found = measure_formulas(page)
        glyphs = page.evaluate(GLYPHS)
    finally:
        page.context.close()
    return (*whole_on_a_phone(found, glyphs), problems)


@pytest.mark.parametrize("path", WIDEST)
def test_on_a_phone_wide_equations_are_broken_over_lines(browser, site_url, path):
    display, faults, problems = phone_faults(browser, site_url, path, {"width": 375,
                                                                       "height": 800})
    assert len(display) >= 4
    assert faults == [], f"{path} at 375 px:\n" + "\n".join(faults)
    assert problems["pageerror"] == [] and problems["console"] == []


def test_a_window_narrowed_to_a_phone_breaks_its_equations_again(browser, site_url):
    """Typeset at 1280 px, then narrowed to 375 px: the equations are broken for the new width."""
    _, faults, problems = phone_faults(browser, site_url, "book/self_attention.html",
                                       "desktop", narrowed_to={"width": 375, "height": 800})
    assert faults == [], "\n".join(faults)
    assert problems["pageerror"] == [] and problems["console"] == []


def test_equation_numbers_and_speech_survive_the_breaks(browser, site_url):
    """Eq. 5.1 (self-attention) at 375 px: its number shown, its last symbol inside the column
    (it was cut after "V =" with MathJax 3), its words for a screen reader whole; every
    numbered equation of the chapter keeps its number."""
    page, _ = visit(browser, site_url, "book/self_attention.html", {"width": 375, "height": 800})
    try:
        wait_for_mathjax(page)
        numbers = page.evaluate("""() => [...document.querySelectorAll(
            'article div.math span.eqno')].map(e => [e.textContent.trim(), e.checkVisibility(),
            !!e.parentElement.querySelector('mjx-container')])""")
        speech = page.evaluate("""() => { const m = document.querySelector(
            "article div.math mjx-container[display='true']");
            const s = m.querySelector('[role=img][aria-label]');
            return s && s.getAttribute('aria-label'); }""")
        first = page.evaluate(GLYPHS)[0]
    finally:
        page.context.close()
    assert numbers and all(shown and typeset for _, shown, typeset in numbers), numbers
    assert numbers[0][0].startswith("(5.1)"), numbers
    assert first["n"] > 20 and first["beyond"] <= 1, first
    assert speech and "SelfAttention of X equals softmax" in speech, speech
    assert "X W sub V period" in speech, speech


def test_on_a_desktop_no_equation_is_broken(browser, site_url):
    """At 1280 px the chapters' equations fit the column as written: MathJax must not break
    them (it did while the theme's flex row shrank the room it measured), and the check that
    says so can fail."""
    page, _ = visit(browser, site_url, "book/backpropagation.html", "desktop")
    try:
        wait_for_mathjax(page)
        found = measure_formulas(page)
        page.set_viewport_size({"width": 375, "height": 800})
        wait_for_equations(page)
        narrowed = measure_formulas(page)  # broken for a phone: the desktop check objects
    finally:
        page.context.close()
    assert sum(f["display"] for f in found) >= 10
    assert formula_faults(found, "desktop") == []
    assert any("MathJax broke" in fault for fault in formula_faults(narrowed, "desktop"))
