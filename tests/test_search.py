"""The search page's results quote the pages as text, formulas included, without TeX.

Sphinx's search quotes each page around the words found, from the page's HTML, where MathJax has
not yet typeset the formulas: every quoted formula read "\\(\\sqrt{d_k}\\)".
``book/_static/search-snippets.js`` writes formulas as plain text first. The queries below land
in passages full of formulas.
"""

from __future__ import annotations

import pytest

from pages import visit
from test_rendered_text import TEX

pytestmark = pytest.mark.browser

QUERIES = ["variance", "softmax", "gradient", "rotation"]


@pytest.mark.parametrize("query", QUERIES)
def test_search_snippets_show_no_tex(browser, site_url, query):
    page, problems = visit(browser, site_url, f"search.html?q={query}")
    try:
        page.wait_for_selector("#search-results li p.context", timeout=30_000)
        page.wait_for_function(  # every result has its snippet
            "() => (document.querySelector('#search-results p.search-summary') || {})"
            ".innerText?.startsWith('Search finished')", timeout=60_000)
        snippets = page.eval_on_selector_all("#search-results li p.context",
                                             "els => els.map(e => e.textContent)")
    finally:
        page.context.close()
    assert len(snippets) >= 3
    tex = [s for s in snippets if TEX.search(s)]
    assert tex == [], f"search snippets with TeX for {query!r}:\n" + "\n".join(tex)
    assert problems["pageerror"] == [] and problems["console"] == []
