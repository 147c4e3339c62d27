"""What the browser tests share: the pages of the built site, a visit to one of them in headless
Chromium, and the checks the sweep (``test_site.test_page``) runs on each visit.

Each check takes an open page and returns its faults as sentences (an empty list when there are
none), so one visit runs them all and a failure lists every fault of the page at once. The
tests of ``test_accessibility``, ``test_equations`` and ``test_figures`` show that each check
can fail, and say what it holds the book to.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlparse

import yaml

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "_build" / "html"
AXE = ROOT / "tools" / "axe" / "node_modules" / "axe-core" / "axe.min.js"
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


def visit(browser, site_url, path, viewport="desktop", scheme="light", touch=False,
          reader=None):
    """Open ``path``; return the page and what went wrong while loading it.

    ``viewport`` is a name of VIEWPORTS or a size; ``touch`` gives the page a touch screen.
    ``problems["pageerror"]`` collects the page's uncaught exceptions (a script that fails to
    parse, or throws), which Chromium does not report as console errors.

    The page opens in a browser context of its own (no cache, no stored state: a reader's
    first page), closed with ``page.context.close()``; or, given ``reader`` (a context made
    by :func:`reading_context` with this viewport and scheme), as one more page a reader
    opens in the browser they read on (made at the same size and scheme), which the caller
    closes with ``page.close()``.
    """
    size = VIEWPORTS[viewport] if isinstance(viewport, str) else viewport
    if reader is None:
        context = browser.new_context(viewport=size, color_scheme=scheme, has_touch=touch)
    else:
        context = reader
    page = context.new_page()
    assert page.viewport_size == size, "a reader's context opens pages at its own size"
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
    page.goto(f"{site_url}/{path}", wait_until="networkidle")
    return page, problems


def reading_context(browser, viewport="desktop", scheme="light"):
    """A browser context in which pages are opened one after another, as a reader reads the
    book: the theme's setting and the files it has loaded (scripts, styles, fonts, MathJax's
    speech rules) are kept from one page to the next, in the browser's cache."""
    return browser.new_context(viewport=VIEWPORTS[viewport], color_scheme=scheme)


def wait_for_mathjax(page):
    """Wait until MathJax has typeset the page (if the page loads MathJax at all).

    MathJax 4's promise also waits for the words its speech worker writes for screen readers,
    which come seconds after the formulas are drawn (book/api.html: drawn after 3 s, the
    promise after 13 s, on a loaded 2-core machine): hence the minute allowed."""
    if not page.evaluate("() => !!window.MathJax"):
        return
    page.wait_for_function(
        "() => window.MathJax.startup && window.MathJax.startup.promise"
        " && (window.MathJax.startup.promise.then(() => { window.__typeset = true; }),"
        " window.__typeset)", timeout=60_000)


def wait_for_drawn_math(page):
    """Wait until MathJax has drawn every formula of the page, not for the speech it then
    writes for screen readers (:func:`wait_for_mathjax` waits for that too).

    What a phone's visit checks (overflow, figures, tables, formulas seen whole) is laid out
    once the formulas are drawn, which came 2 to 6 s before the speech on the longest pages
    (book/api.html: drawn after 1.4 s, speech written after 7.5 s, on a quiet 2-core
    machine); the speech, and anything a script throws while it is written, is waited for
    in the desktop visits of the same page."""
    if not page.evaluate("() => !!window.MathJax"):
        return
    page.wait_for_function(
        "() => [...document.querySelectorAll('.math')].every("
        "element => element.querySelector('mjx-container'))", timeout=60_000)


# -- Loading: the network, scripts, the reader's colour scheme, images, typeset math, overflow

def load_faults(page, problems, scheme) -> list[str]:
    """What went wrong while the page loaded, and what a reader sees at once."""
    images = page.evaluate("""() => [...document.querySelectorAll('article img')].map(
        img => ({src: img.src, alt: img.alt, done: img.complete, w: img.naturalWidth}))""")
    text = page.locator("article").inner_text() if page.locator("article").count() else ""
    overflow = page.evaluate(
        "() => document.documentElement.scrollWidth - document.documentElement.clientWidth")
    theme = page.evaluate("() => document.documentElement.dataset.theme")
    faults = [f"{what}: {problems[key]}" for key, what in (
        ("foreign", "requests to other hosts"), ("failed", "failed requests"),
        ("console", "console errors"), ("pageerror", "uncaught script errors")) if problems[key]]
    if theme != scheme:
        faults.append(f"the page did not follow the reader's {scheme} preference ({theme})")
    for image in images:
        if not (image["done"] and image["w"] > 0):
            faults.append(f"image not loaded: {image['src']}")
        if len(image["alt"]) <= 30:
            faults.append(f"image without a description: {image['src']}")
    faults += [f"raw TeX {raw!r} left in the rendered text"
               for raw in ("$$", "\\(", "\\[", "\\frac{", "\\operatorname") if raw in text]
    if overflow > 0:
        faults.append(f"the page body scrolls sideways by {overflow}px")
    return faults


# -- Accessibility: axe-core's rules (the npm package in tools/axe/)

BLOCKING = ("serious", "critical")
# Rules left out of the check, each with the reason. Keep this empty unless a rule cannot apply.
DISABLED_RULES: dict[str, str] = {}


def audit(page, axe_source):
    """Run axe-core over the whole page; return its violations (a list of dicts)."""
    page.add_script_tag(content=axe_source)
    options = {"resultTypes": ["violations"],
               "rules": {rule: {"enabled": False} for rule in DISABLED_RULES}}
    return page.evaluate("options => axe.run(document, options).then(r => r.violations)",
                         options)


def describe(violations):
    """axe-core's violations, each with up to three of the elements it found."""
    lines = []
    for violation in violations:
        lines.append(f"{violation['id']} ({violation['impact']}): {violation['help']}")
        for node in violation["nodes"][:3]:
            lines.append(f"    {' '.join(map(str, node['target']))}: "
                         f"{node['failureSummary'].splitlines()[-1].strip()}")
    return "\n".join(lines)


def accessibility_faults(page, axe_source) -> list[str]:
    """axe-core's violations of serious or critical impact."""
    blocking = [v for v in audit(page, axe_source) if v["impact"] in BLOCKING]
    return [describe(blocking)] if blocking else []


# -- Figures: shown near the size they were drawn at, so that their text stays legible

DESKTOP_SCALE = 0.8
PHONE_SCALE = 0.45
SCALES = {1280: DESKTOP_SCALE, 375: PHONE_SCALE}
# The figures' smallest text: 10 pt at their 100 dpi (scratchformer.book.plotting), in px at
# the drawn (1x) size; below LEGIBLE_PX on the screen a figure must offer to be enlarged.
FIGURE_TEXT_PX = 10 * 100 / 72
LEGIBLE_PX = 9

FIGURES = """() => [...document.querySelectorAll('article .cell_output img')].map(img => {
    const cue = img.closest('figure')?.querySelector('button.figure-zoom-cue');
    return {src: img.getAttribute('src').split('/').pop(), alt: img.alt.slice(0, 60),
            style: img.getAttribute('style') || '', natural: img.naturalWidth,
            shown: img.getBoundingClientRect().width,
            cue: !!cue && cue.checkVisibility() && cue.getBoundingClientRect().height > 0};
})"""


def drawn_width(figure) -> float:
    """The figure's 1x width: its inline CSS width (half the doubled PNG's pixels)."""
    match = re.search(r"width:\s*([\d.]+)px", figure["style"])
    return float(match.group(1)) if match else figure["natural"] / 2


def text_px(figure) -> float:
    """The size on the screen of the figure's smallest text, in CSS px."""
    return FIGURE_TEXT_PX * figure["shown"] / drawn_width(figure)


def figure_faults(page, width) -> list[str]:
    """Figures shown below their width's share of their drawn size; figures whose text is
    shown below LEGIBLE_PX without the button that enlarges them (figure-zoom.js)."""
    found = page.evaluate(FIGURES)
    small = [(f["alt"], round(f["shown"] / drawn_width(f), 2)) for f in found
             if f["shown"] < SCALES[width] * drawn_width(f)]
    faults = [f"figure shown at {scale} of its drawn size (below {SCALES[width]}) at {width} px "
              f"(draw it for the column): {alt}..." for alt, scale in small]
    faults += [f"figure text at {text_px(f):.1f} px (below {LEGIBLE_PX}) at {width} px with no "
               f"way shown to enlarge it: {f['alt']}..." for f in found
               if text_px(f) < LEGIBLE_PX and not f["cue"]]
    return faults


# -- Tables: one wider than its column scrolls in its box, and shows that it does

TABLES = """() => [...document.querySelectorAll('article table')].map(table => {
  const box = table.parentElement, style = getComputedStyle(box);
  return {text: table.textContent.trim().slice(0, 50), className: box.className,
          over: Math.max(table.scrollWidth, table.getBoundingClientRect().width)
                - box.clientWidth,
          scrolls: box.scrollWidth > box.clientWidth + 1, overflowX: style.overflowX,
          scrollbar: style.scrollbarWidth, mask: style.maskImage || style.webkitMaskImage,
          atStart: box.scrollLeft <= 1};
})"""


def table_faults(page) -> list[str]:
    """A table wider than its box must sit in one that scrolls (nothing cut), keeps its
    scrollbar, and fades on the side where the table goes on (scroll-cues.js, book.css)."""
    faults = []
    for table in page.evaluate(TABLES):
        if table["over"] <= TOLERANCE:
            continue
        if not table["scrolls"] or table["overflowX"] not in ("auto", "scroll"):
            faults.append(f"table cut at the column's edge: {table['text']!r}")
        elif table["scrollbar"] == "none" or "gradient" not in (table["mask"] or "") or (
                table["atStart"] and "more-right" not in table["className"]):
            faults.append(f"table scrolls without showing it: {table['text']!r}")
    return faults


# -- Code and its output: a line is read whole

# Each code block (output=false) or text output (what a cell prints or shows, output=true) that
# is cut: its text is wider than the block (it scrolls), or the block itself reaches past the
# box it sits in or past the article (a box that hides what overflows would cut it).
WIDER_THAN_BOX = """output => [...document.querySelectorAll('article div.highlight pre')]
  .filter(pre => !!pre.closest('.cell_output') === output && pre.getClientRects().length)
  .map(pre => {
    const right = pre.getBoundingClientRect().right;
    const edge = Math.min(pre.parentElement.getBoundingClientRect().right,
                          pre.closest('article').getBoundingClientRect().right);
    return {over: Math.max(pre.scrollWidth - pre.clientWidth, Math.round(right - edge)),
            line: pre.innerText.split('\\n').reduce((a, b) => b.length > a.length ? b : a)};
  })
  .filter(block => block.over > 1)"""


def code_faults(page) -> list[str]:
    """Code (not its output) that scrolls sideways on a desktop screen: its lines are at most
    79 characters (test_named_code), which book.css fits in the column at every width where
    both sidebars show. Call it after the folds are open, so folded code is measured too."""
    return [f"code wider than its box by {block['over']}px (it scrolls or is cut): "
            f"{block['line'].strip()!r}"
            for block in page.evaluate(WIDER_THAN_BOX, False)]


def output_faults(page) -> list[str]:
    """A cell's text output (printed, or the value it shows) that scrolls sideways or is cut, at
    any width: book.css wraps its lines at the box's edge, as the PDF does. Call it after the
    folds are open, so the outputs in exercises' solutions are measured too."""
    return [f"output wider than its box by {block['over']}px (it scrolls or is cut): "
            f"{block['line'].strip()[:100]!r}"
            for block in page.evaluate(WIDER_THAN_BOX, True)]


# -- Glued values: "$n =$ 4096" is read on one line

# Each value glued after a formula that ends in a relation ("n =", "c \\approx"): whether it
# starts on the line where the formula ends. The formula's box and the value's are compared,
# whatever wraps them.
GLUED_VALUES = r"""() => {
  const relation = /(=|\\approx|\\le|\\ge|\\leq|\\geq|<|>|\\sim)\s*$/;
  const pairs = [];
  if (!window.MathJax || !window.MathJax.startup || !window.MathJax.startup.document) {
    return pairs;  // a page without formulas loads no MathJax
  }
  for (const item of window.MathJax.startup.document.math) {
    const math = item.typesetRoot && item.typesetRoot.closest('article span.math');
    if (!math || item.display || !relation.test(item.math)) continue;
    const space = math.nextSibling, value = space && space.nextSibling;
    if (!space || space.nodeType !== 3 || space.data.trim() !== '' || !value
        || value.nodeType !== 1 || !value.matches('span.pasted-text')) continue;
    pairs.push({formula: item.math, value: value.textContent.trim(),
                apart: value.getBoundingClientRect().top
                       >= item.typesetRoot.getBoundingClientRect().bottom - 1});
  }
  return pairs;
}"""


def glued_value_faults(page) -> list[str]:
    """A formula ending in a relation and the value glued after it, on two lines."""
    return [f"glued value {pair['value']!r} starts a line after {pair['formula']!r}"
            for pair in page.evaluate(GLUED_VALUES) if pair["apart"]]


# -- Formulas: each seen whole, on the screen and on paper

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
      entry.broken = !!m.querySelector('mjx-linebox');  // MathJax 4 broke it over lines
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


def measure_formulas(page):
    """Every formula of the page, measured with every dropdown and fold open (MathJax done)."""
    page.evaluate(OPEN_FOLDED)
    page.wait_for_timeout(300)  # the dropdowns' transition
    return page.evaluate(MEASURE)


def shows_that_it_scrolls(formula) -> bool:
    """A box that scrolls where the reader can see it: scrollbar kept, shadows at the sides."""
    return (formula["overflowX"] in ("auto", "scroll") and formula["scrollbar"] != "none"
            and formula["background"].count("radial-gradient") == 2
            and "local" in formula["attachment"])


def describe_formulas(found):
    return "\n".join(f"  {f['over']:+d}px {f['text']!r}" for f in found)


def formula_faults(found, viewport) -> list[str]:
    """On a desktop every display equation fits the column; on a phone one may be wider only
    if its box scrolls and shows that it does; an inline formula fits its line; nothing clips."""
    faults = [f"formula clipped by {f['clippedBy']}: {f['text']!r}"
              for f in found if f["clippedBy"]]
    display = [f for f in found if f["display"]]
    checks = [("display equations reach past the column",
               [f for f in display if f["beyondColumn"] > TOLERANCE]),
              ("inline formulas wider than their line",
               [f for f in found if not f["display"] and f["over"] > TOLERANCE])]
    scrolling = [f for f in display if f["scrolls"]]
    if viewport == "desktop":
        checks.append(("display equations wider than the desktop column (break them over "
                       "lines)", scrolling))
        checks.append(("display equations MathJax broke over lines at desktop width (the "
                       "room it measured was too narrow)", [f for f in display if f["broken"]]))
    checks.append(("equations that scroll without showing it",
                   [f for f in scrolling if not shows_that_it_scrolls(f)]))
    return faults + [f"{what}:\n" + describe_formulas(bad) for what, bad in checks if bad]


def print_faults(found) -> list[str]:
    """Printed nothing scrolls: every formula must fit the printed column, nothing hidden."""
    cut = [f for f in found if f["clippedBy"] or (f["display"] and f["scrolls"])
           or f["over"] > TOLERANCE and not f["display"]]
    return ["formulas that would be cut on paper:\n" + describe_formulas(cut)] if cut else []


def printed(page):
    """The open page as it prints: print media, at the printed column's width."""
    page.set_viewport_size({"width": PRINT_WIDTH, "height": 900})
    page.emulate_media(media="print")
    page.wait_for_timeout(300)
    wait_for_equations(page)
    return page


def wait_for_equations(page, timeout=60_000):
    """Wait until the display equations are broken for the column's present width (a page
    whose column changed width typesets them again: book/_static/equation-breaks.js).

    A minute, as for :func:`wait_for_mathjax`: turned to print, book/api.html and
    book/backpropagation.html took more than 20 s on a 2-core machine busy with the test
    run's other worker and the seed sweep."""
    page.wait_for_function(
        """() => !window.MathJax || !document.querySelector('article')
            || document.documentElement.dataset.equationsWidth === String(Math.round(
                document.querySelector('article').getBoundingClientRect().width))""",
        timeout=timeout)
