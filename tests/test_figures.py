"""Every figure of the built book is shown near the size it was drawn at, so its text is legible.

The figures are pixel-doubled PNGs that carry their drawn (1x) size as the image's CSS width;
``scratchformer.book.plotting`` writes its text at 10 pt or more, drawn at 100 dpi. A figure
drawn wider than the column is shrunk to fit it, and its text with it: three or four panels in a
row came out at half their size or less, their labels 4 to 8 px. So at 1280 px every figure must
be shown at ``DESKTOP_SCALE`` of its drawn width or more (its 10 pt text at 11 px or more), and
on a 375 px phone at ``PHONE_SCALE`` or more (``pages.figure_faults``, which the sweep
``test_site.test_page`` runs on every visit). The tests here show that the check finds the
figures and can fail.
"""

from __future__ import annotations

import pytest

from pages import FIGURES, drawn_width, figure_faults, visit

pytestmark = pytest.mark.browser


def test_the_figures_are_found(browser, site_url):
    page, _ = visit(browser, site_url, "book/training.html", {"width": 1280, "height": 900})
    try:
        found = page.evaluate(FIGURES)
        faults = figure_faults(page, 1280)
    finally:
        page.context.close()
    assert len(found) >= 2 and faults == []
    assert all(drawn_width(f) > 300 and f["natural"] >= 2 * drawn_width(f) - 2 for f in found)


def test_a_shrunk_figure_is_reported(browser, site_url):
    page, _ = visit(browser, site_url, "book/training.html", {"width": 1280, "height": 900})
    try:
        page.evaluate("""() => {
            document.querySelector('article .cell_output img').style.maxWidth = '100px'; }""")
        faults = figure_faults(page, 1280)
    finally:
        page.context.close()
    assert len(faults) == 1 and "of its drawn size (below 0.8) at 1280 px" in faults[0]
