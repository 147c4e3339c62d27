"""The whole book as one PDF (``make pdf``, ``tools/build_pdf.py``), linked from every page.

The PDF is read back with pypdf: it must hold every chapter's title, the numbers of every
theorem, equation and figure the website shows, every bibliography entry and every figure,
and no TeX left untypeset. It is a book: a title page (title, author, date, commit), contents
whose page numbers are the pages where each part and chapter begins, an outline that reads
part, chapter, section, no empty page, and no shadow printed as an image. Printing must cut
nothing: the fitting of wide equations is checked in Chromium on an equation far wider than the
page, and the breaking of a code cell taller than a page on one that leaves a page empty when
kept whole. Locally these tests skip when the PDF was not built (no Chromium, or ``make book``
without ``make pdf``); under CI they fail.
"""

from __future__ import annotations

import functools
import html.parser
import io
import json
import re
import shutil
import subprocess
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


@functools.cache  # one reader per worker: build_pdf extracts each page's text once per reader
def pdf_reader():
    require_pdf()
    from pypdf import PdfReader

    return PdfReader(PDF)


def report() -> dict:
    require_pdf()
    return json.loads(build_pdf.REPORT.read_text())


def pdf_text() -> str:
    """The whole PDF's text, as pypdf extracts it page by page (once per worker, with the
    body texts the other checks read: ``build_pdf.page_texts``)."""
    return "\n".join(whole for whole, _ in build_pdf.page_texts(pdf_reader()))


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
    return [p for p in pages if 'http-equiv="Refresh"' not in p.read_text(encoding="utf-8")]


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
    # and words of their own: a reader found two entries reading ".pdf" (issue 50)
    texts = re.findall(r'<span class="btn__text-container">([^<]*)</span>', menu)
    assert book_pdf.BOOK_TEXT in texts and book_pdf.PAGE_TEXT in texts
    assert ".pdf" not in texts


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
    shown = set()
    for file in toc_files():
        page = (SITE / f"{file}.html").read_text(encoding="utf-8")
        shown |= set(re.findall(r'<img[^>]+src="[./]*_images/([^"]+\.png)"', page))
    assert len(shown) >= 10
    images = sum(build_pdf.image_count(page) for page in pdf_reader().pages)
    assert images >= len(shown), f"{images} images in the PDF, {len(shown)} figures on the site"


@pytest.mark.site
def test_the_image_count_is_pypdf_s_on_the_pages_with_figures_and_some_without():
    reader = pdf_reader()
    counts = [build_pdf.image_count(page) for page in reader.pages]
    with_images = [i for i, n in enumerate(counts) if n]
    assert len(with_images) >= 10
    without = [i for i, n in enumerate(counts) if not n][::40]
    for i in with_images + without:  # pypdf's own count, slow on every page
        assert counts[i] == len(reader.pages[i].images), f"page {i + 1}"


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


def chapter_titles() -> dict[str, list[str]]:
    """Each part's caption and its chapters' titles, from ``_toc.yml`` and the sources."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    return {part["caption"]: [first_heading(chapter["file"]) for chapter in part["chapters"]]
            for part in toc["parts"]}


def first_heading(file: str, level: str = "#") -> str:
    source = (ROOT / f"{file}.md").read_text(encoding="utf-8")
    return re.search(rf"^{level} (.+)$", source, re.MULTILINE).group(1)


def plain(title: str) -> str:
    """A heading of the sources as it prints: no backticks, typographic apostrophes."""
    return title.replace("`", "").replace("'", "\u2019")


def numbered(printed: str, title: str) -> bool:
    """``printed`` is ``title``, after its section number if it has one ("3.2. ")."""
    return re.fullmatch(rf"(\d+(\.\d+)*\. )?{re.escape(plain(title))}", printed) is not None


def outline_tree(items: list[tuple[int, str, int]]) -> list[dict]:
    """``build_pdf.outline_items`` as a tree: ``{title, page, children}``."""
    root: list[dict] = []
    stack: list[list[dict]] = [root]
    for depth, title, page in items:
        del stack[depth + 1:]
        node = {"title": title, "page": page, "children": []}
        stack[depth].append(node)
        stack.append(node["children"])
    return root


@pytest.mark.site
def test_the_outline_reads_part_chapter_section():
    reader = pdf_reader()
    tree = outline_tree(build_pdf.outline_items(reader))
    parts = chapter_titles()
    assert [node["title"] for node in tree] == ["Contents", "Introduction", *parts]
    intro = tree[1]
    assert [n["title"] for n in intro["children"]] == [
        plain(t) for t in re.findall(r"^## (.+)$", (ROOT / "book" / "intro.md").read_text(),
                                     re.MULTILINE)]
    files = iter(c["file"] for part in yaml.safe_load((ROOT / "_toc.yml").read_text())["parts"]
                 for c in part["chapters"])
    for node in tree[2:]:
        chapters = node["children"]
        assert len(chapters) == len(parts[node["title"]]), node["title"]
        for chapter, title in zip(chapters, parts[node["title"]]):
            assert numbered(chapter["title"], title), (chapter["title"], title)
            assert chapter["page"] > node["page"]
            sections = re.findall(r"^## (.+)$", (ROOT / f"{next(files)}.md").read_text(),
                                  re.MULTILINE)
            assert len(chapter["children"]) == len(sections), chapter["title"]
            for section, expected in zip(chapter["children"], sections):
                assert numbered(section["title"], expected), (section["title"], expected)
                assert section["page"] >= chapter["page"]


@pytest.mark.site
def test_the_title_page_names_the_book_its_author_the_date_and_the_commit():
    reader, built = pdf_reader(), report()
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    first = build_pdf.body_text(reader.pages[0])
    lines = built["title_page"]
    assert lines["title"] == config["title"] and lines["author"] == (config.get("author") or "")
    for line in lines.values():
        assert squash(line) in squash(first), line
    match = re.fullmatch(r"Built on (\d{1,2} \w+ \d{4}) from (commit ([0-9a-f]{7,})"
                         r"(, with uncommitted changes)?|an unknown commit \((.+)\))",
                         lines["built"])
    assert match, lines["built"]
    if match.group(3) and shutil.which("git"):  # a commit of this repository
        subprocess.run(["git", "cat-file", "-e", f"{match.group(3)}^{{commit}}"], cwd=ROOT,
                       check=True)
    assert "Contents" not in first and len(first) < 400  # the page holds only these lines
    outline = build_pdf.outline_items(reader)
    assert outline[0][1:] == ("Contents", 2)


def test_the_title_page_says_which_commit_and_whether_it_was_changed(tmp_path, monkeypatch):
    if not shutil.which("git"):
        pytest.skip("git is not installed")
    assert build_pdf.describe_commit(tmp_path, git="no-such-git") == (
        "an unknown commit (git is not available)")
    assert build_pdf.describe_commit(tmp_path) == "an unknown commit (not a git checkout)"

    def git(*args):
        return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.org",
                               *args], cwd=tmp_path, check=True, capture_output=True,
                              text=True).stdout.strip()

    git("init", "-q")
    (tmp_path / "_config.yml").write_text("title: A Book\n")
    git("add", "_config.yml")
    git("commit", "-q", "-m", "first")
    head = git("rev-parse", "--short", "HEAD")
    assert build_pdf.describe_commit(tmp_path) == f"commit {head}"
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")  # 2026-01-01 00:00 UTC
    assert build_pdf.title_page(tmp_path) == {
        "title": "A Book", "author": "", "built": f"Built on 1 January 2026 from commit {head}"}
    (tmp_path / "build.log").write_text("an untracked log\n")  # changes nothing printed
    assert build_pdf.describe_commit(tmp_path) == f"commit {head}"
    (tmp_path / "_config.yml").write_text("title: Another Book\n")
    assert build_pdf.describe_commit(tmp_path) == f"commit {head}, with uncommitted changes"


@pytest.mark.site
def test_the_contents_give_the_page_where_each_part_and_chapter_begins():
    reader, contents = pdf_reader(), report()["contents"]
    parts = chapter_titles()
    assert [e["title"] for e in contents if e["level"] == 0] == ["Introduction", *parts]
    listed = [e["title"] for e in contents if e["level"] == 1]
    expected = [title for titles in parts.values() for title in titles]
    assert len(listed) == len(expected)
    assert all(numbered(got, title) for got, title in zip(listed, expected)), listed
    # The numbers are the pages where the titles are, as the PDF's links and its text say.
    assert build_pdf.book_problems(reader, contents) == []
    assert [e["page"] for e in contents] == sorted(e["page"] for e in contents)
    # And they are printed: each entry's title, then its number, on the contents' pages.
    first_page = contents[0]["page"]  # the introduction's, after the contents
    printed = squash(" ".join(build_pdf.body_texts(reader)[1:first_page]))
    missing = [f"{e['title']} {e['page']}" for e in contents
               if squash(e["title"]) + str(e["page"]) not in printed]
    assert missing == [], f"entries not printed with their page in the contents: {missing}"


@pytest.mark.site
def test_a_wrong_page_number_in_the_contents_is_found():
    reader, contents = pdf_reader(), report()["contents"]
    chapter = next(i for i, e in enumerate(contents) if e["level"] == 1)
    for shift in (-1, 1):
        wrong = [dict(e) for e in contents]
        wrong[chapter]["page"] += shift
        assert len(build_pdf.misplaced_entries(reader, wrong)) == 1
        assert len(build_pdf.book_problems(reader, wrong)) == 2  # its link goes elsewhere too


@pytest.mark.site
def test_no_page_of_the_pdf_is_empty():
    reader = pdf_reader()
    assert build_pdf.blank_pages(reader) == []
    assert build_pdf.body_text(reader.pages[0])  # the title page too has its lines


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


# A code cell of the page, copied: one of `lines[0]` lines after a paragraph that fills half a
# page, then one of `lines[1]` lines; nothing else on the page.
TWO_CELLS = """(lines) => {
  const article = document.querySelector('article.bd-article');
  const cell = article.querySelector('div.cell:has(> div.cell_input)').cloneNode(true);
  cell.querySelector(':scope > div.cell_output')?.remove();
  const filler = document.createElement('p');
  filler.style.height = '500px';
  filler.textContent = 'A paragraph, then two code cells.';
  const cells = lines.map((count, cellIndex) => {
    const copy = cell.cloneNode(true);
    copy.querySelector('pre').textContent = Array.from(
      {length: count}, (_, i) => `cell${cellIndex}_line${i} = ${i}`).join('\\n');
    return copy;
  });
  article.replaceChildren(filler, ...cells);
}"""


@pytest.mark.site
@pytest.mark.browser
def test_a_code_cell_taller_than_a_page_breaks_instead_of_leaving_a_page_empty(browser,
                                                                               site_url):
    """A 70-line cell kept whole (print.css: break-inside: avoid) is moved to a new page and
    leaves its empty box there: the blank-page check finds it. Marked by BREAK_TALL_BLOCKS, it
    breaks where it falls; a 10-line cell after it still moves whole to the next page."""
    from pypdf import PdfReader

    options = {"format": "A4", "scale": build_pdf.SCALE, "margin": build_pdf.MARGIN}
    page = browser.new_page(viewport={"width": round(build_pdf.PRINTABLE_WIDTH_PX),
                                      "height": 1200})
    try:
        page.goto(f"{site_url}/book/scaling.html", wait_until="networkidle")
        page.evaluate(TWO_CELLS, [70, 10])
        page.emulate_media(media="print")
        whole = PdfReader(io.BytesIO(page.pdf(**options)))
        released = page.evaluate(build_pdf.BREAK_TALL_BLOCKS, {
            "pageHeight": build_pdf.PRINTABLE_HEIGHT_PX, "codeShare": build_pdf.CODE_SHARE})
        broken = PdfReader(io.BytesIO(page.pdf(**options)))
    finally:
        page.close()
    assert build_pdf.blank_pages(whole) != []
    assert len(released) == 1 and released[0].startswith("div.cell_input"), released
    assert build_pdf.blank_pages(broken) == []
    assert len(broken.pages) < len(whole.pages)
    texts = [build_pdf.body_text(p) for p in broken.pages]
    long_pages = [i for i, t in enumerate(texts) if "cell0_line" in t]
    assert long_pages[0] == 0, "the long cell starts on the first page, after the paragraph"
    short_pages = [i for i, t in enumerate(texts) if "cell1_line" in t]
    assert len(short_pages) == 1, "the short cell stays on one page"
    assert all(f"cell1_line{i}=" in squash(texts[short_pages[0]]) for i in range(10))


def test_make_serve_builds_the_pdf_it_links():
    """Every page links to the PDF: the site `make serve` previews must hold it."""
    makefile = (ROOT / "Makefile").read_text()
    prerequisites = {line.split(":")[0]: line.split(":", 1)[1].split()
                     for line in makefile.splitlines() if re.match(r"^[a-z]+:", line)}
    assert "pdf" in prerequisites["serve"]
    assert f"test -f _build/html/{book_pdf.PDF_NAME}" in makefile  # and says when it is not



FRONT_AND_BODY = """
<nav id="contents"><h1>Contents</h1><p>__BEFORE__<a href="#body">The body</a>
<span id="number" style="display:inline-block;width:2.5em;text-align:right">0</span></p></nav>
<section id="body" style="break-before:page"><h1>The body</h1>
<p>The first page of the body.</p><p style="break-before:page">Its second page.</p></section>
"""


def test_the_front_matter_is_spliced_only_where_nothing_but_its_numbers_changed(browser):
    """Two prints of a contents page and a body, the second with the body's page number written
    into the contents: spliced, the first print's body follows the second's contents. A second
    print whose contents moved a link, tagged other text, or took another page is refused."""
    from pypdf import PdfReader

    options = {"format": "A4", "scale": build_pdf.SCALE, "margin": build_pdf.MARGIN,
               "tagged": True, "outline": True}
    page = browser.new_page()

    def printed(before: str = "", number: str | None = None, more: str = "") -> bytes:
        page.set_content(FRONT_AND_BODY.replace("__BEFORE__", before))
        page.emulate_media(media="print")
        if number is not None:
            page.evaluate("n => document.getElementById('number').textContent = n", number)
        if more:
            page.evaluate("html => document.getElementById('contents').insertAdjacentHTML("
                          "'beforeend', html)", more)
        return page.pdf(**options)

    try:
        first, numbered = printed(), printed(number="2")
        moved = printed(before="See: ", number="2")
        retagged = printed(number="2", more="<p>One more line.</p>")
        longer = printed(number="2", more='<p style="break-before:page">A second page.</p>')
    finally:
        page.close()
    spliced, problems = build_pdf.splice_front_matter(first, numbered, "body")
    assert problems == []
    book = PdfReader(io.BytesIO(spliced))
    texts = [squash(build_pdf.body_text(p)) for p in book.pages]
    assert texts == ["ContentsThebody2", "ThebodyThefirstpageofthebody.", "Itssecondpage."]
    assert build_pdf.target_pages(book)["body"] == 2
    assert "page 1: the links moved once the contents were numbered" in (
        build_pdf.splice_front_matter(first, moved, "body")[1])
    assert build_pdf.splice_front_matter(first, retagged, "body")[1] == [
        "page 1: its marked content changed once the contents were numbered"]
    assert build_pdf.splice_front_matter(first, longer, "body")[1] == [
        "the body begins on page 2 of the first print and on page 3 once the contents are "
        "numbered"]
