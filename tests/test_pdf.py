"""The whole book as one PDF (``make pdf``, ``tools/build_pdf.py``), linked from every page.

The PDF is read back with pypdf: it must hold every chapter's title, the numbers of every
theorem, equation and figure the website shows, every bibliography entry and every figure,
and no TeX left untypeset. Printing must cut nothing: the fitting of wide equations is checked
in Chromium on an equation far wider than the page. Locally these tests skip when the PDF was
not built (no Chromium, or ``make book`` without ``make pdf``); under CI they fail.
"""

from __future__ import annotations

import html.parser
import json
import re
import unicodedata
from pathlib import Path

import book_pdf  # book/_ext/book_pdf.py
import pytest
import yaml
from tools import build_pdf

from conftest import _unavailable

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "_build" / "html"

PDF = SITE / book_pdf.PDF_NAME
RAW_TEX = ("\\frac", "\\sqrt", "$$", "\\begin", "\\end{", "\\mathrm", "\\left", "\\(", "\\[")


def toc_files() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    return [toc["root"]] + [c["file"] for part in toc["parts"] for c in part["chapters"]]


def squash(text: str) -> str:
    """Text compared without regard to spacing, line breaks, sub- and superscript forms, or
    icons (the theme draws one before a GitHub link, from an icon font's private-use area)."""
    return re.sub(r"[\s\ue000-\uf8ff]+", "", unicodedata.normalize("NFKC", text))


VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
        "track", "wbr"}


class _Texts(html.parser.HTMLParser):
    """The text of every element whose class list holds one of ``classes``, and every link."""

    def __init__(self, classes):
        super().__init__()
        self.classes, self.found, self.links, self._open = set(classes), [], [], []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "a" and attrs.get("href"):
            self.links.append(attrs)
        if tag in VOID:
            return
        hit = self.classes & set((attrs.get("class") or "").split())
        for entry in self._open:
            entry[1] += 1
        if hit:
            self._open.append([[], 1, sorted(hit)[0]])

    def handle_endtag(self, tag):
        for entry in list(self._open):
            entry[1] -= 1
            if entry[1] == 0:
                self._open.remove(entry)
                text = "".join(entry[0]).strip().removesuffix("#")  # the headerlink
                self.found.append((entry[2], text.strip()))

    def handle_data(self, data):
        for entry in self._open:
            entry[0].append(data)


def parse(path: Path, *classes: str) -> _Texts:
    parser = _Texts(classes)
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def require_pdf() -> None:
    if not PDF.exists():
        _unavailable(f"no {PDF.relative_to(ROOT)}: run `make pdf` (`make test` does; it needs "
                     "Chromium)")


def pdf_text() -> str:
    require_pdf()
    from pypdf import PdfReader

    return "\n".join(page.extract_text() for page in PdfReader(PDF).pages)


@pytest.fixture(scope="module")
def text():
    return pdf_text()


@pytest.fixture(scope="module")
def squashed(text):
    return squash(text)


def html_pages() -> list[Path]:
    """Every page of the website a reader can open (not the redirect at the root)."""
    if not (SITE / "index.html").exists():
        _unavailable("no built site: run `make book` first (`make test` does)")
    pages = [p for p in SITE.rglob("*.html") if not p.relative_to(SITE).parts[0].startswith("_")]
    return [p for p in pages if "<body" in p.read_text(encoding="utf-8")]


@pytest.mark.site
def test_every_page_links_to_the_book_pdf():
    pages = html_pages()
    assert len(pages) >= len(toc_files())
    missing = []
    for page in pages:
        links = [a for a in parse(page).links if a.get("title") == book_pdf.TOOLTIP]
        hrefs = {(page.parent / a["href"]).resolve() for a in links}
        if hrefs != {PDF.resolve()}:
            missing.append(f"{page.relative_to(SITE)}: {[a['href'] for a in links]}")
    assert missing == [], "pages without a link to the PDF:\n" + "\n".join(missing)
    if not PDF.exists():
        _unavailable("the pages link to the PDF, which is not built: run `make pdf`")
    assert PDF.read_bytes().startswith(b"%PDF-")


@pytest.mark.site
def test_the_book_and_the_page_have_icons_of_their_own():
    """The download menu offers the book's PDF and the page printed as PDF: two entries, which
    one icon for both made look the same."""
    page = SITE / "book" / "scaling.html"
    if not page.exists():
        pytest.skip("no built site: run `make book` first (`make test` does)")
    menu = page.read_text(encoding="utf-8")
    icon = r'title="{}"[^>]*>\s*<span class="btn__icon-container">\s*<i class="([^"]+)"'
    book = re.search(icon.format(re.escape(book_pdf.TOOLTIP)), menu)
    printed = re.search(icon.format("Print to PDF"), menu)
    assert book and printed, "the two PDF entries of the download menu"
    assert book.group(1) == "fas fa-book" and printed.group(1) != book.group(1)


@pytest.mark.site
def test_the_pdf_holds_every_chapter_title_and_no_raw_tex(text, squashed, record_property):
    from pypdf import PdfReader

    pages = len(PdfReader(PDF).pages)
    record_property("pdf_pages", pages)
    print(f"\n{PDF.relative_to(ROOT)}: {pages} pages, {PDF.stat().st_size / 1e6:.1f} MB")
    titles = {}
    for file in toc_files():
        source = (ROOT / f"{file}.md").read_text(encoding="utf-8")
        titles[file] = re.search(r"^# (.+)$", source, re.MULTILINE).group(1)
    absent = [title for title in titles.values() if squash(title) not in squashed]
    assert absent == [], f"chapter titles missing from the PDF: {absent}"
    for raw in RAW_TEX:
        assert raw not in text, f"raw TeX {raw!r} in the PDF"
    assert pages >= 2 * len(titles)


@pytest.mark.site
def test_the_pdf_numbers_theorems_equations_and_figures_as_the_website_does(squashed):
    numbers = []
    for file in toc_files():
        found = parse(SITE / f"{file}.html", "caption-number", "eqno").found
        numbers += [label for _, label in found]
    kinds = ("Theorem", "Lemma", "Corollary", "Proposition")
    assert sum(n.startswith(kinds) for n in numbers) >= 5
    assert sum(n.startswith("(") for n in numbers) >= 15
    assert sum(n.startswith("Fig") for n in numbers) >= 10
    absent = [n for n in numbers if squash(n) not in squashed]
    assert absent == [], f"numbered items of the website missing from the PDF: {absent}"


@pytest.mark.site
def test_the_pdf_holds_the_bibliography(squashed):
    entries = [text for _, text in parse(SITE / "book" / "bibliography.html", "citation").found]
    assert len(entries) >= 5
    absent = []
    for entry in entries:  # the label ([VSP+17]) prints in a column of its own
        label, text = re.fullmatch(r"(\[[^\]]+\])?(.*)", entry, re.DOTALL).groups()
        if squash(text) not in squashed or (label and squash(label) not in squashed):
            absent.append(entry[:80])
    assert absent == [], f"bibliography entries missing from the PDF: {absent}"


@pytest.mark.site
def test_the_pdf_holds_every_figure():
    require_pdf()
    from pypdf import PdfReader

    shown = set()
    for file in toc_files():
        page = (SITE / f"{file}.html").read_text(encoding="utf-8")
        shown |= set(re.findall(r'<img[^>]+src="[./]*_images/([^"]+\.png)"', page))
    assert len(shown) >= 10
    images = sum(len(page.images) for page in PdfReader(PDF).pages)
    assert images >= len(shown), f"{images} images in the PDF, {len(shown)} figures on the site"


@pytest.mark.site
def test_wide_equations_were_fitted_and_nothing_was_cut():
    """The build fails when printing would cut anything; its report lists what it shrank."""
    require_pdf()
    report = json.loads(build_pdf.REPORT.read_text())
    assert report["pages"] >= len(toc_files())
    for equation in report["equations_set_smaller"]:
        assert build_pdf.SMALLEST_EQUATION <= equation["factor"] < 1, equation


WIDE_PAGE = """<!doctype html><html><head><style>
article {{ width: 400px; }} div.math {{ overflow-x: auto; }}</style></head>
<body><article class="bd-article"><div class="math" id="eq-wide">{equation}</div>
<p id="end">end</p></article></body></html>"""


@pytest.mark.browser
def test_fitting_shrinks_an_equation_wider_than_the_column_until_it_fits(browser, tmp_path):
    """FIT_AND_CHECK on a display equation 1.5 times the column's width (a stand-in for
    MathJax's output: a container whose first child holds the typeset maths)."""
    equation = ('<mjx-container display="true" style="display:block;font-size:20px">'
                '<span style="display:inline-block;width:30em;white-space:nowrap">x</span>'
                "</mjx-container>")
    page = browser.new_page(viewport={"width": 800, "height": 600})
    try:
        page.set_content(WIDE_PAGE.format(equation=equation))
        checked = page.evaluate(build_pdf.FIT_AND_CHECK, build_pdf.SMALLEST_EQUATION)
        widths = page.evaluate("""() => [document.querySelector('div.math').clientWidth,
            document.querySelector('mjx-container > span').getBoundingClientRect().width]""")
        too_wide = ('<mjx-container display="true" style="display:block;font-size:20px">'
                    '<span style="display:inline-block;width:60em">x</span></mjx-container>')
        page.set_content(WIDE_PAGE.format(equation=too_wide))
        refused = page.evaluate(build_pdf.FIT_AND_CHECK, build_pdf.SMALLEST_EQUATION)
    finally:
        page.close()
    assert [s["id"] for s in checked["scaled"]] == ["eq-wide"]
    assert 0.6 < checked["scaled"][0]["factor"] < 0.67  # a 600 px equation in 400 px
    assert widths[1] <= widths[0], widths
    assert checked["cut"] == []
    # Three times the column: shrinking stops at the smallest readable size, and it is reported.
    assert refused["scaled"][0]["factor"] == build_pdf.SMALLEST_EQUATION
    assert len(refused["cut"]) == 1 and "eq-wide" in refused["cut"][0]


@pytest.mark.site
def test_no_shadow_or_filter_is_printed_as_an_image():
    """Chromium prints a box shadow (or a filter) as a JPEG image of it; every figure of the
    book is a PNG. 377 such images weighed 4.6 MB of a 23.4 MB PDF."""
    require_pdf()
    jpegs = PDF.read_bytes().count(b"/DCTDecode")
    assert jpegs == 0, f"{jpegs} JPEG images in the PDF: shadows or filters printed"


SHADOWS = """() => [...document.querySelectorAll('*')]
  .flatMap((el) => [null, '::before', '::after']
    .map((pseudo) => [el, getComputedStyle(el, pseudo)]))
  .filter(([el, style]) => style.display !== 'none' && (style.boxShadow !== 'none'
          || style.textShadow !== 'none' || style.filter !== 'none'
          || style.backdropFilter !== 'none'))
  .map(([el, style]) => `${el.tagName.toLowerCase()}.${[...el.classList].join('.')}`)"""


@pytest.mark.site
@pytest.mark.browser
def test_printing_draws_no_shadow_and_no_filter(browser, site_url):
    """The theme gives admonitions, proofs and menus shadows, some with !important; print.css
    takes every one away on paper. On screen the same check finds them."""
    page = browser.new_page()
    try:
        page.goto(f"{site_url}/book/scaling.html", wait_until="networkidle")
        on_screen = page.evaluate(SHADOWS)
        page.emulate_media(media="print")
        printed = page.evaluate(SHADOWS)
    finally:
        page.close()
    assert any(name.startswith("div.proof") for name in on_screen), on_screen
    assert printed == []
