"""Print the whole book as one PDF, from the same sources and outputs as the website.

Route: Sphinx's ``singlehtml`` builder writes every chapter into one page, taking each
chapter's outputs from the execution cache that ``make book`` filled (nothing is executed
again: a chapter that would be is an error), with MathJax served from the build itself; then
headless Chromium (the system's, driven by Playwright) typesets the maths and prints that page
with the book's print style (``book/_static/print.css``). The page is laid out as a book
(``tools/pdf/book-layout.js``): a title page (the title and author of ``_config.yml``, the date
of the build and the commit it was built from), a list of contents, the introduction, then each
part and its chapters; the PDF's outline (its bookmarks) reads part, chapter, section.

Before printing, every display equation wider than the printed column is set in a smaller size
until it fits, and the build fails if anything (an equation, a code line, a table, a figure)
would still be cut at the margin; a block kept on one page that is taller than a page (or a
block of code taller than half of one) may break across pages instead of leaving a page empty.
The book is printed twice: the first print is the book, and says on which page each part and
chapter begins (its link target, a named destination of the PDF); the numbers are written into
the contents, in boxes whose width was reserved, and the second print gives only the front
matter (the title page and the contents), spliced in place of the first's
(``splice_front_matter``: Chromium does not paginate the same page the same way twice). The
build fails if a number is not the page where that title is printed, or if a page has nothing
on it. The PDF is written into the website, ``_build/html/<PDF_NAME>``, which every page
links to (``book/_ext/book_pdf.py``).

Usage: ``python -m tools.build_pdf`` after ``python -m tools.build_book`` (``make pdf`` runs both).
Without Chromium it says so and exits 0 (the PDF tests then skip), except under CI (``CI``
set), where it fails. Prints the time the step took, the PDF's size and its page count.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import http.server
import io
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import unicodedata
import weakref
from pathlib import Path

from . import build_book, sphinx_extensions  # build_book: the fingerprint of the inputs

sphinx_extensions()
from book_pdf import PDF_NAME  # noqa: E402  (book/_ext/book_pdf.py: the name the pages link)

ROOT = Path(__file__).resolve().parent.parent

BUILD = ROOT / "_build"
WORK = BUILD / "pdf"  # jupyter-book's --path-output: its own doctrees, the cache is shared
SINGLE = WORK / "_build" / "singlehtml"
PDF = BUILD / "html" / PDF_NAME
REPORT = WORK / "report.json"
REJECTED = WORK / "rejected.pdf"  # a PDF the checks after printing refused, kept to look at
CHROMIUM_CANDIDATES = ("chromium", "chromium-browser", "google-chrome")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--disable-dev-shm-usage"]

# A4 with 15 mm side margins; the page is laid out at 1/SCALE of the paper's width, so the
# 16 px body text of the site prints at about 10 pt, the size of a printed book's.
SCALE = 0.82
MARGIN = {"top": "16mm", "bottom": "16mm", "left": "15mm", "right": "15mm"}
PRINTABLE_WIDTH_PX = (210 - 30) / 25.4 * 96 / SCALE
PRINTABLE_HEIGHT_PX = (297 - 32) / 25.4 * 96 / SCALE  # the page's height as the page is laid out
MARGIN_PT = {side: float(value.removesuffix("mm")) / 25.4 * 72 for side, value in MARGIN.items()}
# A block of code more than this share of a page tall may break across pages: kept whole, it
# would leave as large a gap before it.
CODE_SHARE = 0.5
SMALLEST_EQUATION = 0.55  # below this fraction of the text size an equation is unreadable

FOOTER = ('<div style="width:100%;font-size:8px;color:#555;text-align:center;">'
          '<span class="pageNumber"></span> / <span class="totalPages"></span></div>')
HEADER = ('<div style="width:100%;font-size:8px;color:#555;text-align:center;">'
          '<span class="title"></span></div>')

# The scripts run in the page, each a JavaScript function in its own file (tools/pdf/): first the
# single page laid out as a book (a title page, the contents, parts, chapters); then, laid out
# for print, the wide equations fitted and what would still be cut listed, blocks taller than a
# page allowed to break, and the headings' titles read; between the two prints, the page
# numbers written into the contents.
PDF_SCRIPTS = Path(__file__).resolve().parent / "pdf"
BOOK_LAYOUT = (PDF_SCRIPTS / "book-layout.js").read_text()
FIT_AND_CHECK = (PDF_SCRIPTS / "fit-and-check.js").read_text()
BREAK_TALL_BLOCKS = (PDF_SCRIPTS / "break-tall-blocks.js").read_text()
HEADING_TITLES = (PDF_SCRIPTS / "heading-titles.js").read_text()
PAGE_NUMBERS = (PDF_SCRIPTS / "page-numbers.js").read_text()


def describe_commit(root: Path = ROOT, git: str | None = "git") -> str:
    """The commit the book is built from, as the title page prints it: ``commit 1a2b3c4``,
    with ``, with uncommitted changes`` when a tracked file differs from the commit
    (``git status --porcelain --untracked-files=no``; an untracked log does not count), or why
    it is unknown (no git, or not a git checkout); never an error."""
    git = git and shutil.which(git)
    if not git:
        return "an unknown commit (git is not available)"
    try:
        head = subprocess.run([git, "rev-parse", "--short", "HEAD"], cwd=root, check=True,
                              capture_output=True, text=True).stdout.strip()
        # tracked files only: logs and scratch files nobody committed change nothing printed
        status = subprocess.run([git, "status", "--porcelain", "--untracked-files=no"],
                                cwd=root, check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "an unknown commit (not a git checkout)"
    return f"commit {head}" + (", with uncommitted changes" if status.strip() else "")


def build_date() -> datetime.date:
    """Today, or the date of ``SOURCE_DATE_EPOCH`` where a reproducible build sets it."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch:
        return datetime.datetime.fromtimestamp(int(epoch), datetime.UTC).date()
    return datetime.date.today()


def title_page(root: Path = ROOT) -> dict:
    """The lines of the title page: the title and author of ``_config.yml``, when and from
    which commit the book was built, and where its sources are."""
    import yaml

    config = yaml.safe_load((root / "_config.yml").read_text())
    date = build_date()
    lines = {"title": config["title"], "author": config.get("author") or "",
             "built": f"Built on {date.day} {date:%B %Y} from {describe_commit(root)}"}
    repository = (config.get("repository") or {}).get("url")
    if repository:
        lines["source"] = f"Source: {repository}"
    return lines


def squash(text: str) -> str:
    """Text compared without regard to spacing or line breaks (as pypdf extracts it)."""
    return re.sub(r"\s+", "", unicodedata.normalize("NFKC", text))


def body_text(page) -> str:
    """The text a page of the PDF prints inside its margins, from the top line down (each
    line from the left): not its running header (the book's title) nor its footer (the page
    number)."""
    return _texts(page)[1]


def _texts(page) -> tuple[str, str]:
    """The page's whole text, as pypdf extracts it, and its :func:`body_text`: one pass."""
    height = float(page.mediabox.height)
    low, high = MARGIN_PT["bottom"], height - MARGIN_PT["top"]
    found: list[tuple[float, float, str]] = []

    def visit(text, cm, tm, font, size):
        x = tm[4] * cm[0] + tm[5] * cm[2] + cm[4]  # the text's origin on the page
        y = tm[4] * cm[1] + tm[5] * cm[3] + cm[5]
        if text.strip() and low < y < high:
            found.append((-round(y), x, text))

    whole = page.extract_text(visitor_text=visit)
    return whole, " ".join(text for _, _, text in sorted(found)).strip()


# Each reader's pages' texts, extracted once: extracting 350 pages takes pypdf tens of
# seconds, and the checks of a PDF read every page more than once.
_TEXTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def page_texts(reader) -> list[tuple[str, str]]:
    """The whole text and the :func:`body_text` of every page of ``reader``, in order
    (extracted once per reader)."""
    if reader not in _TEXTS:
        _TEXTS[reader] = [_texts(page) for page in reader.pages]
    return _TEXTS[reader]


def body_texts(reader) -> list[str]:
    """:func:`body_text` of every page of ``reader``, in order (extracted once per reader)."""
    return [body for _, body in page_texts(reader)]


def image_count(page) -> int:
    """The images a page draws from its resources (image XObjects, in forms too), read from
    the page's dictionaries without decoding anything: pypdf's ``page.images`` parses every
    content stream for inline images too, 15 CPU-s for the book's 350 pages (Chromium
    writes none) against 0.06 s for this, with the same count."""
    def count(resources, forms_seen) -> int:
        objects = resources.get("/XObject") if resources else None
        found = 0
        for reference in (objects.get_object().values() if objects else ()):
            thing = reference.get_object()
            if thing.get("/Subtype") == "/Image":
                found += 1
            elif thing.get("/Subtype") == "/Form" and id(thing) not in forms_seen:
                forms_seen.add(id(thing))
                found += count(thing.get("/Resources"), forms_seen)
        return found

    return count(page.get("/Resources"), set())


def blank_pages(reader) -> list[int]:
    """The pages (numbered from 1) with neither text nor an image inside the margins."""
    return [number for number, (page, text) in enumerate(zip(reader.pages, body_texts(reader)), 1)
            if not text and not page.images]


def target_pages(reader) -> dict[str, int]:
    """The page (numbered from 1) of every link target of the PDF (its named destinations:
    Chromium writes one for each element a link of the page points at), by the element's id."""
    return {name.removeprefix("/"): reader.get_destination_page_number(destination) + 1
            for name, destination in reader.named_destinations.items()}


def outline_items(reader) -> list:
    """The PDF's outline as ``(depth, title, page)``, in its order (page numbered from 1)."""
    items = []

    def walk(nodes, depth):
        for node in nodes:
            if isinstance(node, list):
                walk(node, depth + 1)
            else:
                items.append((depth, node.title, reader.get_destination_page_number(node) + 1))

    walk(reader.outline, 0)
    return items


def _holds(printed: str, title: str) -> bool:
    """Whether ``title``'s characters occur in order in ``printed`` (spacing aside)."""
    rest = iter(squash(printed))
    return all(char in rest for char in squash(title))


@contextlib.contextmanager
def quiet_pypdf():
    """pypdf's warnings silenced for the block: Chromium's trailer counts fewer objects than
    it writes, which pypdf mends, and says so for every PDF it reads."""
    logger = logging.getLogger("pypdf")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def retitle_outline(pdf: bytes, titles: list[str]) -> tuple[bytes, list[str]]:
    """The PDF with its outline's titles written as the headings' ``titles`` (the page's
    order), and what does not match. Chromium builds each title from the heading's printed
    lines, and drops the space where a heading wraps ("its chain ofJacobians")."""
    from pypdf import PdfReader, PdfWriter
    from pypdf.generic import NameObject, TextStringObject

    reader = PdfReader(io.BytesIO(pdf))
    printed = [title for _, title, _ in outline_items(reader)]
    if len(printed) != len(titles):
        return pdf, [f"{len(printed)} entries in the outline, {len(titles)} headings printed"]
    wrong = [f"{old!r} for the heading {new!r}" for old, new in zip(printed, titles)
             if not _holds(old, new)]
    if wrong:
        return pdf, wrong
    with quiet_pypdf():
        writer = PdfWriter(clone_from=reader)
    nodes, new = [writer._root_object["/Outlines"].get_object().get("/First")], iter(titles)
    while nodes:  # depth first, as the outline is read: a node, its children, its next
        node = nodes.pop()
        if node is None:
            continue
        node = node.get_object()
        node[NameObject("/Title")] = TextStringObject(next(new))
        nodes += [node.get("/Next"), node.get("/First")]
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue(), []


def marked_content(page) -> list[bytes]:
    """The marked-content operators of a page, in order (``/P <</MCID 3>> BDC`` ...): what its
    tags (the PDF's structure tree) point into."""
    from pypdf.generic import ContentStream

    return [b" ".join(repr(operand).encode() for operand in operands) + b" " + operator
            for operands, operator in ContentStream(page.get_contents(), page.pdf).operations
            if operator in (b"BDC", b"BMC", b"EMC")]


def link_rects(page) -> list[tuple[float, ...]]:
    """Where the links of a page are, rounded to a hundredth of a point."""
    return [tuple(round(float(v), 2) for v in annot.get_object()["/Rect"])
            for annot in page.get("/Annots", [])]


def splice_front_matter(first: bytes, numbered: bytes, body_id: str) -> tuple[bytes, list[str]]:
    """The book as first printed, its front matter (the pages before ``body_id``'s: the title
    page and the contents) replaced by those of the print with the page numbers written in;
    and what keeps them from fitting.

    Chromium does not lay out the same page the same way twice: where a page is filled almost
    exactly, a line moves to the next page or back between one print and the next (seen in
    chapter 7: every later chapter started a page later in every other print). So the numbers
    are taken from one print and the body is that print; only the front matter comes from the
    second, and the numbers written in move nothing there (their boxes' width is reserved).
    The check: the body starts on the same page in both prints, and each front page has its
    links in the same places and the same marked content (so the first print's structure
    tree, which is kept, describes the second's pages)."""
    from pypdf import PdfReader, PdfWriter
    from pypdf.generic import NameObject

    with quiet_pypdf():
        one, two = PdfReader(io.BytesIO(first)), PdfReader(io.BytesIO(numbered))
        start_one, start_two = target_pages(one).get(body_id), target_pages(two).get(body_id)
        if start_one is None or start_one != start_two:
            return first, [f"the body begins on page {start_one} of the first print and on "
                           f"page {start_two} once the contents are numbered"]
        problems = []
        for index in range(start_one - 1):
            if link_rects(one.pages[index]) != link_rects(two.pages[index]):
                problems.append(f"page {index + 1}: the links moved once the contents were "
                                "numbered")
            if marked_content(one.pages[index]) != marked_content(two.pages[index]):
                problems.append(f"page {index + 1}: its marked content changed once the "
                                "contents were numbered")
        if problems:
            return first, problems
        writer = PdfWriter(clone_from=one)
        for index in range(start_one - 1):
            source = two.pages[index]
            for key in ("/Contents", "/Resources"):
                writer.pages[index][NameObject(key)] = source[key].clone(writer)
        out = io.BytesIO()
        writer.write(out)
    return out.getvalue(), []


def misplaced_entries(reader, entries: list[dict]) -> list[str]:
    """The contents' entries (``{title, page}``) whose page does not begin with their title
    (a part's title stands alone on its page, a chapter begins on a new page)."""
    wrong = []
    for entry in entries:
        page = entry["page"]
        text = squash(body_texts(reader)[page - 1]) if 0 < page <= len(reader.pages) else ""
        if not text.startswith(squash(entry["title"])):
            wrong.append(f"{entry['title']!r} listed on page {page}, which begins "
                         f"{text[:40]!r}")
    return wrong


def book_problems(reader, contents: list[dict]) -> list[str]:
    """What is wrong with the printed book: a contents entry (``{id, title, page}``) whose
    page is not where its part or chapter begins, or a page with nothing on it."""
    final = target_pages(reader)
    moved = [f"{entry['title']!r}: page {entry['page']} in the contents, printed on page "
             f"{final.get(entry['id'])}" for entry in contents
             if final.get(entry["id"]) != entry["page"]]
    blank = blank_pages(reader)
    return (moved + misplaced_entries(reader, contents)
            + ([f"pages with nothing printed on them: {blank}"] if blank else []))


def find_chromium() -> str | None:
    return os.environ.get("CHROMIUM") or next(
        (path for name in CHROMIUM_CANDIDATES if (path := shutil.which(name))), None)


def build_single_page() -> None:
    """Every chapter in one HTML page, from the execution cache of ``make book``."""
    recorded = build_book.FINGERPRINT
    if not recorded.exists() or recorded.read_text().strip() != build_book.fingerprint():
        sys.exit("build_pdf: the website is not built from these sources: run `make book` "
                 "first (`make pdf` does), so that the PDF reuses its executed chapters")
    jupyter_book = Path(sys.executable).parent / "jupyter-book"
    command = [str(jupyter_book), "build", str(ROOT), "--path-output", str(WORK),
               "--builder", "singlehtml", "-W", "-n", "--keep-going",
               # A fresh environment: after a chapter was split in two, the incremental
               # build's old environment still held the moved labels and reported each twice.
               # Reading every page from the execution cache takes about half a minute.
               "--all"]
    env = dict(os.environ)  # as tools/build_book.py runs it, should a kernel ever start
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    env["SCRATCHFORMER_RUNS"] = str(build_book.RUNS)
    env["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
    env["IPYTHONDIR"] = str(BUILD / "ipython")
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    log = result.stdout + result.stderr
    if result.returncode != 0:
        sys.exit(f"{log[-6000:]}\nbuild_pdf: the single-page build failed "
                 f"(exit status {result.returncode})")
    if "Executing notebook" in log:
        sys.exit(f"{log[-3000:]}\nbuild_pdf: a chapter was executed again instead of being "
                 "taken from the execution cache: run `make book` first")


_START = time.perf_counter()


def _log(step: str) -> None:
    print(f"build_pdf: {step} ({time.perf_counter() - _START:.0f} s)", flush=True)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):
        pass


def print_pdf(chromium: str) -> dict:
    """Typeset the single page in Chromium, lay it out as a book, fit wide equations, and
    print it to PDF twice: the book, then its front matter with the contents' page numbers the
    first print gave, spliced in."""
    import yaml
    from playwright.sync_api import sync_playwright
    from pypdf import PdfReader

    handler = functools.partial(_QuietHandler, directory=str(SINGLE))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    # The page holding every chapter is written as the root chapter's page (book/intro.html),
    # yet it links its assets relative to the build's top folder, where it belongs.
    root = yaml.safe_load((ROOT / "_toc.yml").read_text())["root"]  # book/intro
    shutil.copyfile(SINGLE / f"{root}.html", SINGLE / "book.html")
    url = f"http://127.0.0.1:{server.server_address[1]}/book.html"
    errors: list[str] = []
    front = title_page()
    options = dict(format="A4", scale=SCALE, margin=MARGIN, print_background=True,
                   display_header_footer=True, header_template=HEADER,
                   footer_template=FOOTER, tagged=True, outline=True)
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium, headless=True,
                                                 args=CHROMIUM_ARGS)
            context = browser.new_context(
                viewport={"width": round(PRINTABLE_WIDTH_PX), "height": 1200},
                color_scheme="light")
            page = context.new_page()
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.on("requestfailed", lambda request: errors.append(f"failed: {request.url}"))
            origin = url.split("/", 3)[:3]
            page.route(lambda u: u.split("/", 3)[:3] != origin,
                       lambda route: route.abort())  # nothing from any other host
            # The single page has no search, yet the theme's template still loads its index.
            page.route("**/searchindex.js", lambda route: route.fulfill(
                body="", content_type="text/javascript"))
            page.goto(url, wait_until="networkidle", timeout=600_000)
            _log("loaded")
            page.wait_for_function(  # MathJax loads deferred, after the page's own scripts
                "() => window.MathJax && MathJax.startup && MathJax.startup.promise",
                timeout=600_000)
            page.evaluate("() => MathJax.startup.promise.then(() => true)")
            page.wait_for_function("() => document.fonts.status === 'loaded'")
            untypeset = page.evaluate(
                "() => document.querySelectorAll('mjx-merror, .math:not(:has(mjx-container))')"
                ".length")
            _log("typeset")
            toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
            laid_out = page.evaluate(BOOK_LAYOUT, {
                "parts": [part["caption"] for part in toc["parts"]], "titlePage": front})
            if laid_out["problem"]:
                errors.append(f"cannot lay the page out as a book: {laid_out['problem']}")
            entries = laid_out["contents"]
            page.emulate_media(media="print")
            checked = page.evaluate(FIT_AND_CHECK, SMALLEST_EQUATION)
            released = page.evaluate(BREAK_TALL_BLOCKS, {"pageHeight": PRINTABLE_HEIGHT_PX,
                                                         "codeShare": CODE_SHARE})
            headings = page.evaluate(HEADING_TITLES)
            first = page.pdf(**options)
            _log("printed the book")
            # an entry without a target is listed on page 0 (and the check below fails)
            targets = target_pages(PdfReader(io.BytesIO(first)))
            numbers = {entry["id"]: targets.get(entry["id"], 0) for entry in entries}
            page.evaluate(PAGE_NUMBERS, numbers)
            numbered = page.pdf(**options)
            _log("printed the contents with their numbers")
            browser.close()
    finally:
        server.shutdown()
        server.server_close()
    if errors:
        sys.exit("build_pdf: the single page did not load cleanly:\n" + "\n".join(errors[:20]))
    if untypeset:
        sys.exit(f"build_pdf: {untypeset} formulas were not typeset by MathJax")
    if checked["cut"]:
        sys.exit("build_pdf: printing would cut these at the margin:\n"
                 + "\n".join(checked["cut"][:30]))
    contents = [{**entry, "page": numbers[entry["id"]]} for entry in entries]
    pdf_bytes, problems = splice_front_matter(first, numbered, entries[0]["id"])
    if not problems:
        pdf_bytes, problems = retitle_outline(pdf_bytes, headings)
    if not problems:
        problems = book_problems(PdfReader(io.BytesIO(pdf_bytes)), contents)
    REJECTED.unlink(missing_ok=True)
    if problems:
        REJECTED.write_bytes(pdf_bytes)  # to look at
        sys.exit("build_pdf: the printed book is not right:\n" + "\n".join(problems[:30])
                 + f"\nbuild_pdf: the PDF as printed is {REJECTED.relative_to(ROOT)}")
    PDF.write_bytes(pdf_bytes)
    return {**checked, "released": released, "contents": contents, "title_page": front}


def main() -> int:
    chromium = find_chromium()
    if chromium is None:
        message = ("build_pdf: no Chromium found (apt-get install chromium, or set "
                   "CHROMIUM=/path): the PDF is not built")
        if os.environ.get("CI"):
            print(message + " (CI must build it; .ci/run installs Chromium)", file=sys.stderr)
            return 1
        print(message, file=sys.stderr)
        return 0
    start = time.perf_counter()
    build_single_page()
    single = time.perf_counter() - start
    checked = print_pdf(chromium)
    seconds = time.perf_counter() - start

    from pypdf import PdfReader

    pages = len(PdfReader(PDF).pages)
    report = {"pdf": str(PDF.relative_to(ROOT)), "pages": pages, "bytes": PDF.stat().st_size,
              "seconds": round(seconds, 1), "single_page_build_seconds": round(single, 1),
              "equations_set_smaller": checked["scaled"],
              "blocks_allowed_to_break": checked["released"],
              "title_page": checked["title_page"], "contents": checked["contents"]}
    REPORT.write_text(json.dumps(report, indent=1) + "\n")
    print(f"build_pdf: {report['pdf']}: {pages} pages, {report['bytes'] / 1e6:.1f} MB, "
          f"{len(checked['scaled'])} wide equations set smaller to fit; {seconds:.0f} s "
          f"({single:.0f} s of them the single-page build)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
