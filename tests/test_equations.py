"""Every formula of the built book can be read whole, on a desktop, on a phone and on paper.

Each page of ``_build/html`` is opened in headless Chromium at 1280 and 375 px and measured after
MathJax has typeset it. At desktop width every display equation fits the column. On a phone an
equation may be wider than the column only if its own box scrolls sideways and shows that it
does (a scrollbar that is not hidden, and the shadow at the side where the formula goes on);
an inline formula must fit its line. Nothing between a formula and the page may clip it
(``overflow: hidden`` cut formulas off with no sign before). Printed, nothing scrolls, so there
every display equation must fit the printed column and nothing may be hidden.
"""

from __future__ import annotations

import pytest

from test_site import PAGES, visit, wait_for_mathjax

pytestmark = pytest.mark.browser

WIDTHS = {"desktop": 1280, "phone": 375}
PRINT_WIDTH = 700  # px: an A4 page's text width at 96 px an inch, margins taken off
TOLERANCE = 1  # px of rounding

MEASURE = r"""() => {
  const article = document.querySelector('article');
  if (!article) return [];  // the search page has no article
  const clipping = (element) => {
    // The first box from the formula up to the article that hides part of the formula: one
    // that hides what overflows it, where the formula reaches past its edges.
    const formula = element.getBoundingClientRect();
    for (let node = element.parentElement; node && node !== article.parentElement;
         node = node.parentElement) {
      const hides = v => v === 'hidden' || v === 'clip';
      if (!hides(getComputedStyle(node).overflowX)) continue;
      const box = node.getBoundingClientRect();
      if (formula.right > box.right + 1 || formula.left < box.left - 1) {
        return node.tagName + '.' + node.className;
      }
    }
    return null;
  };
  const column = (element) => {  // the block that holds the formula
    let node = element.parentElement;
    while (getComputedStyle(node).display.startsWith('inline')) node = node.parentElement;
    return node;
  };
  const text = m => (m.querySelector('mjx-assistive-mml') || m).textContent.slice(0, 70);
  const found = [];
  for (const m of article.querySelectorAll('mjx-container')) {
    const style = getComputedStyle(m);
    const display = m.getAttribute('display') === 'true';
    const box = m.getBoundingClientRect();
    const entry = {display, text: text(m), clippedBy: clipping(m),
                   scrolls: m.scrollWidth > m.clientWidth + 1, overflowX: style.overflowX,
                   scrollbar: style.scrollbarWidth, background: style.backgroundImage,
                   attachment: style.backgroundAttachment};
    if (display) {
      entry.over = m.scrollWidth - m.clientWidth;
      entry.beyondColumn = Math.round(box.right - column(m).getBoundingClientRect().right);
    } else {
      const line = column(m).getBoundingClientRect();
      entry.over = Math.round(Math.max(box.right - line.right, line.left - box.left));
    }
    found.push(entry);
  }
  return found;
}"""


# A reader who opens an exercise's solution or a hidden cell must see its formulas whole too:
# open every dropdown and fold before measuring (a folded one hides its content on purpose).
OPEN_FOLDED = r"""() => {
  document.querySelectorAll('.toggle-hidden').forEach(e => e.classList.remove('toggle-hidden'));
  document.querySelectorAll('details').forEach(d => { d.open = true; });
}"""


def formulas(browser, site_url, path, width, media="screen"):
    page, problems = visit(browser, site_url, path, {"width": width, "height": 900})
    try:
        if media == "print":
            page.emulate_media(media="print")
        wait_for_mathjax(page)
        page.evaluate(OPEN_FOLDED)
        page.wait_for_timeout(300)  # the dropdowns' transition
        return page.evaluate(MEASURE)
    finally:
        page.context.close()


def shows_that_it_scrolls(formula) -> bool:
    """A box that scrolls where the reader can see it: scrollbar kept, shadows at the sides."""
    return (formula["overflowX"] in ("auto", "scroll") and formula["scrollbar"] != "none"
            and formula["background"].count("radial-gradient") == 2
            and "local" in formula["attachment"])


def describe(found):
    return "\n".join(f"  {f['over']:+d}px {f['text']!r}" for f in found)


@pytest.mark.parametrize("viewport", ["desktop", "phone"])
@pytest.mark.parametrize("path", PAGES)
def test_every_formula_is_seen_whole(browser, site_url, path, viewport):
    found = formulas(browser, site_url, path, WIDTHS[viewport])
    clipped = [f for f in found if f["clippedBy"]]
    assert clipped == [], f"formulas clipped on {path}:\n" + "\n".join(
        f"  {f['text']!r} by {f['clippedBy']}" for f in clipped)
    display = [f for f in found if f["display"]]
    beyond = [f for f in display if f["beyondColumn"] > TOLERANCE]
    assert beyond == [], f"display equations reach past the column on {path}:\n" + describe(beyond)
    inline = [f for f in found if not f["display"] and f["over"] > TOLERANCE]
    assert inline == [], f"inline formulas wider than their line on {path}:\n" + describe(inline)
    scrolling = [f for f in display if f["scrolls"]]
    if viewport == "desktop":
        assert scrolling == [], (f"display equations wider than the desktop column on {path} "
                                 "(break them over lines):\n" + describe(scrolling))
    hidden = [f for f in scrolling if not shows_that_it_scrolls(f)]
    assert hidden == [], (f"equations that scroll without showing it on {path}:\n"
                          + describe(hidden))


@pytest.mark.parametrize("path", PAGES)
def test_printed_equations_lose_nothing(browser, site_url, path):
    found = formulas(browser, site_url, path, PRINT_WIDTH, media="print")
    cut = [f for f in found if f["clippedBy"] or (f["display"] and f["scrolls"])
           or f["over"] > TOLERANCE and not f["display"]]
    assert cut == [], f"formulas that would be cut on paper, {path}:\n" + describe(cut)


def test_the_check_sees_every_formula(browser, site_url):
    """The measurement finds the chapter's formulas (a selector gone stale would pass all)."""
    found = formulas(browser, site_url, "book/scaled_dot_product_attention.html", 375)
    assert sum(f["display"] for f in found) >= 3
    assert sum(not f["display"] for f in found) >= 20
