"""Search, from the query to the place of the words: what the results quote, where they lead,
the marks on the page opened, and the search field itself.

Sphinx's search quotes each page around the words found, from the page's HTML, where MathJax has
not yet typeset the formulas: every quoted formula read "\\(\\sqrt{d_k}\\)".
``book/_static/search-snippets.js`` writes formulas as plain text first, quotes the article
alone, links each result to the section quoted and marks the words on the page opened; the
search field's rules are in ``book/_static/book.css``. The first queries below land in passages
full of formulas.
"""

from __future__ import annotations

import pytest

from pages import visit, wait_for_mathjax
from test_rendered_text import TEX

pytestmark = pytest.mark.browser


def expect(locator):
    """Playwright's retrying assertions (imported here: conftest skips when it is missing)."""
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect(locator)


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


# -- Landing where the words are. A reader searches (the search page, or the dialog Ctrl+K opens
# on every page), reads a quote of each page found, and opens one. The issue: the quotes came
# from the page's printed contents list, each result opened at the top of its page with nothing
# marked, the magnifier sat on the query's first letter, and a desktop page had two search
# fields (one in an empty 64 px strip above the page).

FINISHED = """() => {
  const status = document.querySelector('#search-results p.search-summary');
  return !!status && status.innerText.startsWith('Search finished')
    && [...document.querySelectorAll('#search-results li')].every(
         li => li.querySelector('p.context') || li.querySelector(':scope > span'));
}"""


def results(browser, site_url, query, viewport="desktop", scheme="light"):
    """The search page for ``query``, every result with its quote, and its load problems."""
    page, problems = visit(browser, site_url, f"search.html?q={query}", viewport, scheme)
    page.wait_for_function(FINISHED, timeout=60_000)
    return page, problems


# Where a quote could have come from: the text of the article alone, as the quote writes it
# (formulas as text by the page's own texToText, permalinks dropped, white space collapsed).
QUOTES_FROM_ARTICLE = """async () => {
  const flat = (text) => text.replace(/\\s+/g, ' ').trim();
  const found = [];
  for (const li of document.querySelectorAll('#search-results li')) {
    const quote = li.querySelector('p.context');
    if (!quote) continue;
    const html = await (await fetch(li.querySelector('a').href)).text();
    const page = new DOMParser().parseFromString(html, 'text/html');
    page.querySelectorAll('.headerlink, script, style').forEach((el) => el.remove());
    page.querySelectorAll('.math').forEach((formula) => {
      const walker = page.createTreeWalker(formula, NodeFilter.SHOW_TEXT);
      for (let node = walker.nextNode(); node; node = walker.nextNode())
        if (!node.parentElement.closest('.eqno')) node.nodeValue = texToText(node.nodeValue) + ' ';
    });
    const article = page.querySelector('article.bd-article');
    const words = flat(quote.textContent).replace(/^\\.\\.\\.|\\.\\.\\.$/g, '').trim();
    found.push({page: li.querySelector('a').getAttribute('href'), quote: words,
                inArticle: !!article && flat(article.textContent).includes(words)});
  }
  return found;
}"""


@pytest.mark.parametrize("query", ["variance", "causal"])
def test_search_quotes_come_from_the_article(browser, site_url, query):
    """Not from the contents list printed above it (a print-only copy of the page's contents,
    which Sphinx's ``[role=main]`` includes): "...Contents 3.1. The variance of a dot
    product 3.2. What large scores...". """
    page, problems = results(browser, site_url, query)
    try:
        quotes = page.evaluate(QUOTES_FROM_ARTICLE)
    finally:
        page.context.close()
    assert len(quotes) >= 3
    outside = [f"{q['page']}: {q['quote']}" for q in quotes if not q["inArticle"]]
    assert outside == [], f"quotes for {query!r} not from the article:\n" + "\n".join(outside)
    assert all(query in q["quote"].lower() for q in quotes)
    assert problems["pageerror"] == [] and problems["console"] == []


# Each result's link, where it points and whether that section holds the words.
RESULT_LINKS = """async (query) => {
  const links = [];
  for (const a of document.querySelectorAll('#search-results li > a')) {
    const url = new URL(a.href);
    let holds = false;
    if (url.hash) {
      const html = await (await fetch(url.pathname)).text();
      const page = new DOMParser().parseFromString(html, 'text/html');
      const section = page.getElementById(decodeURIComponent(url.hash.slice(1)));
      holds = !!section && section.textContent.toLowerCase().includes(query);
    }
    links.push({href: a.getAttribute('href'), hash: url.hash, holds});
  }
  return links;
}"""


def test_search_results_link_to_the_section_that_holds_the_words(browser, site_url):
    page, problems = results(browser, site_url, "variance")
    try:
        links = page.evaluate(RESULT_LINKS, "variance")
    finally:
        page.context.close()
    assert len(links) >= 3
    wrong = [link["href"] for link in links if not (link["hash"] and link["holds"])]
    assert wrong == [], f"results that do not open at their words: {wrong}"
    assert problems["pageerror"] == [] and problems["console"] == []


@pytest.mark.parametrize("viewport", ["desktop", "phone"])
def test_a_result_opens_with_its_words_highlighted_in_view(browser, site_url, viewport):
    """Post-LN versus pre-LN says "variance" first far down the page (a proof in its second
    half). pydata-sphinx-theme loads Sphinx's search on every page (its search dialog), and
    sphinx_highlight.js marks the words only on pages without it: nothing was ever marked."""
    page, problems = results(browser, site_url, "variance", viewport)
    try:
        link = page.locator("#search-results li > a[href^='book/post_ln_pre_ln.html']")
        link.click(timeout=5_000)
        page.wait_for_url("**/book/post_ln_pre_ln.html*", timeout=10_000)
        wait_for_mathjax(page)
        marked = page.locator("article.bd-article span.highlighted")
        expect(marked.first).to_be_attached(timeout=5_000)
        texts = marked.all_inner_texts()
        # Scrolled there once the formulas are typeset and the page has settled.
        shown = page.locator("article.bd-article span.highlighted").filter(visible=True)
        page.wait_for_function(
            """() => [...document.querySelectorAll('article.bd-article span.highlighted')]
                 .some(s => { const r = s.getBoundingClientRect();
                              return r.height > 0 && r.top >= 0 && r.bottom <= innerHeight; })""",
            timeout=10_000)
        # The page's first mark lies below its first screen (else this test shows nothing).
        below = page.evaluate("""() => document.querySelector('article.bd-article span.highlighted')
                                 .getBoundingClientRect().top + scrollY > innerHeight""")
        scrolled = page.evaluate("() => scrollY")
        outside = page.locator("span.highlighted:not(article.bd-article span.highlighted)")
        assert outside.count() == 0, "words marked outside the article (contents, navigation)"
        assert shown.count() >= 1
    finally:
        page.context.close()
    assert texts and all("varian" in t.lower() for t in texts), texts
    assert below and scrolled > 0, "the page opened at its top"
    assert problems["pageerror"] == [] and problems["console"] == []


def test_a_page_opened_without_searching_marks_nothing(browser, site_url):
    """The words are marked on the result the reader opens, not on the next page whatever it is
    (Sphinx keeps them for the next page loaded, however it is reached)."""
    page, problems = results(browser, site_url, "variance")
    try:
        page.locator("nav.bd-docs-nav a[href='book/scaling.html']").click(timeout=5_000)
        page.wait_for_url("**/book/scaling.html", timeout=10_000)
        page.wait_for_load_state("load")
        marked = page.locator("span.highlighted").count()
    finally:
        page.context.close()
    assert marked == 0
    assert problems["pageerror"] == []


# The magnifier and the query's first letter, measured: the icon must end before the text does.
ICON_AND_TEXT = """(form) => {
  const icon = form.querySelector('.fa-magnifying-glass, svg');
  const input = form.querySelector('input');
  const style = getComputedStyle(input);
  return {icon: icon.getBoundingClientRect().right,
          text: input.getBoundingClientRect().left + parseFloat(style.paddingLeft)
                + parseFloat(style.borderLeftWidth)};
}"""


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("viewport", ["desktop", "phone"])
def test_the_magnifier_leaves_the_query_readable(browser, site_url, viewport, scheme):
    """On the search page's field and in the dialog that Ctrl+K opens on every other page."""
    page, problems = visit(browser, site_url, "search.html?q=variance", viewport, scheme)
    try:
        on_page = page.evaluate(ICON_AND_TEXT, page.query_selector(".bd-search-container form"))
        page.goto(page.url.replace("search.html?q=variance", "book/scaling.html"))
        page.keyboard.press("Control+k")
        dialog = page.locator("#pst-search-dialog form.bd-search")
        expect(dialog).to_be_visible(timeout=5_000)
        page.keyboard.type("variance")
        in_dialog = page.evaluate(ICON_AND_TEXT, dialog.element_handle())
    finally:
        page.context.close()
    assert on_page["icon"] <= on_page["text"], f"search page: {on_page}"
    assert in_dialog["icon"] <= in_dialog["text"], f"search dialog: {in_dialog}"
    assert problems["pageerror"] == []


SEARCH_CONTROLS = ".search-button__button, form.bd-search"


@pytest.mark.parametrize("viewport", ["desktop", "phone"])
def test_a_page_has_one_search_field_and_ctrl_k_opens_search(browser, site_url, viewport):
    page, problems = visit(browser, site_url, "book/scaling.html", viewport)
    try:
        shown = page.locator(SEARCH_CONTROLS).filter(visible=True)
        count = shown.count()
        where = [shown.nth(i).evaluate("e => e.parentElement.className") for i in range(count)]
        strip = page.locator("#pst-header").evaluate("e => e.getBoundingClientRect().height")
        page.keyboard.press("Control+k")
        field = page.locator("#pst-search-dialog input[name=q]")
        expect(field).to_be_focused(timeout=5_000)
        page.keyboard.type("softmax")
        page.keyboard.press("Enter")
        page.wait_for_url("**/search.html?q=softmax", timeout=10_000)
        page.wait_for_function(FINISHED, timeout=60_000)
    finally:
        page.context.close()
    assert count == 1, f"{count} search fields shown: {where}"
    assert strip == 0, f"an empty strip of {strip}px above the page"
    assert problems["pageerror"] == [] and problems["console"] == []


def test_the_search_button_shows_while_the_chapter_list_is_hidden(browser, site_url):
    """On a desktop the field sits in the chapter list; hiding the list must not hide search."""
    page, problems = visit(browser, site_url, "book/scaling.html")
    try:
        page.locator(".primary-toggle").filter(visible=True).click(timeout=5_000)
        expect(page.locator("nav.bd-docs-nav")).to_be_hidden(timeout=5_000)
        shown = page.locator(SEARCH_CONTROLS).filter(visible=True)
        expect(shown).to_have_count(1, timeout=5_000)
        shown.click()
        expect(page.locator("#pst-search-dialog input[name=q]")).to_be_focused(timeout=5_000)
    finally:
        page.context.close()
    assert problems["pageerror"] == [] and problems["console"] == []
