"""Every figure of the built book is shown near the size it was drawn at, so its text is legible.

The figures are pixel-doubled PNGs that carry their drawn (1x) size as the image's CSS width;
``scratchformer.book.plotting`` writes its text at 10 pt or more, drawn at 100 dpi. A figure
drawn wider than the column is shrunk to fit it, and its text with it: three or four panels in a
row came out at half their size or less, their labels 4 to 8 px. So at 1280 px every figure must
be shown at ``DESKTOP_SCALE`` of its drawn width or more (its 10 pt text at 11 px or more), and
on a 375 px phone at ``PHONE_SCALE`` or more.
"""

from __future__ import annotations

import re

import pytest

from test_site import PAGES, visit

pytestmark = pytest.mark.browser

DESKTOP_SCALE = 0.8
PHONE_SCALE = 0.45
SCALES = {1280: DESKTOP_SCALE, 375: PHONE_SCALE}

FIGURES = """() => [...document.querySelectorAll('article .cell_output img')].map(img => ({
    src: img.getAttribute('src').split('/').pop(), alt: img.alt.slice(0, 60),
    style: img.getAttribute('style') || '', natural: img.naturalWidth,
    shown: img.getBoundingClientRect().width}))"""


def drawn_width(figure) -> float:
    """The figure's 1x width: its inline CSS width (half the doubled PNG's pixels)."""
    match = re.search(r"width:\s*([\d.]+)px", figure["style"])
    return float(match.group(1)) if match else figure["natural"] / 2


def figures(browser, site_url, path, width):
    page, _ = visit(browser, site_url, path, {"width": width, "height": 900})
    try:
        return page.evaluate(FIGURES)
    finally:
        page.context.close()


@pytest.mark.parametrize("width", sorted(SCALES))
@pytest.mark.parametrize("path", PAGES)
def test_figures_are_shown_near_their_drawn_size(browser, site_url, path, width):
    small = [(f["alt"], round(f["shown"] / drawn_width(f), 2))
             for f in figures(browser, site_url, path, width)
             if f["shown"] < SCALES[width] * drawn_width(f)]
    assert small == [], (f"figures of {path} shown below {SCALES[width]} of their drawn size at "
                         f"{width} px (draw them for the column):\n"
                         + "\n".join(f"  {scale}: {alt}..." for alt, scale in small))


def test_the_figures_are_found(browser, site_url):
    found = figures(browser, site_url, "book/training.html", 1280)
    assert len(found) >= 2
    assert all(drawn_width(f) > 300 and f["natural"] >= 2 * drawn_width(f) - 2 for f in found)
