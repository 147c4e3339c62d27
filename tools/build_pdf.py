"""Print the whole book as one PDF, from the same sources and outputs as the website.

Route: Sphinx's ``singlehtml`` builder writes every chapter into one page, taking each
chapter's outputs from the execution cache that ``make book`` filled (nothing is executed
again: a chapter that would be is an error), with MathJax served from the build itself; then
headless Chromium (the system's, driven by Playwright) typesets the maths and prints that page
with the book's print style (``book/_static/print.css``). Before printing, every display
equation wider than the printed column is set in a smaller size until it fits, and the build
fails if anything (an equation, a code line, a table, a figure) would still be cut at the
margin. The PDF is written into the website, ``_build/html/<PDF_NAME>``, which every page
links to (``book/_ext/book_pdf.py``).

Usage: ``python -m tools.build_pdf`` after ``python -m tools.build_book`` (``make pdf`` runs both).
Without Chromium it says so and exits 0 (the PDF tests then skip), except under CI (``CI``
set), where it fails. Prints the time the step took, the PDF's size and its page count.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
import time
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
CHROMIUM_CANDIDATES = ("chromium", "chromium-browser", "google-chrome")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--disable-dev-shm-usage"]

# A4 with 15 mm side margins; the page is laid out at 1/SCALE of the paper's width, so the
# 16 px body text of the site prints at about 10 pt, the size of a printed book's.
SCALE = 0.82
MARGIN = {"top": "16mm", "bottom": "16mm", "left": "15mm", "right": "15mm"}
PRINTABLE_WIDTH_PX = (210 - 30) / 25.4 * 96 / SCALE
SMALLEST_EQUATION = 0.55  # below this fraction of the text size an equation is unreadable

FOOTER = ('<div style="width:100%;font-size:8px;color:#555;text-align:center;">'
          '<span class="pageNumber"></span> / <span class="totalPages"></span></div>')
HEADER = ('<div style="width:100%;font-size:8px;color:#555;text-align:center;">'
          '<span class="title"></span></div>')

# The scripts run in the page, each a JavaScript function in its own file (tools/pdf/): first the
# single page laid out as a book (parts, chapters, a list of contents), then, laid out for
# print, the wide equations fitted and what would still be cut listed.
PDF_SCRIPTS = Path(__file__).resolve().parent / "pdf"
BOOK_LAYOUT = (PDF_SCRIPTS / "book-layout.js").read_text()

FIT_AND_CHECK = (PDF_SCRIPTS / "fit-and-check.js").read_text()


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
               "--builder", "singlehtml", "-W", "-n", "--keep-going"]
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
    """Typeset the single page in Chromium, fit wide equations, and print it to PDF."""
    import yaml
    from playwright.sync_api import sync_playwright

    handler = functools.partial(_QuietHandler, directory=str(SINGLE))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    # The page holding every chapter is written as the root chapter's page (book/intro.html),
    # yet it links its assets relative to the build's top folder, where it belongs.
    root = yaml.safe_load((ROOT / "_toc.yml").read_text())["root"]  # book/intro
    shutil.copyfile(SINGLE / f"{root}.html", SINGLE / "book.html")
    url = f"http://127.0.0.1:{server.server_address[1]}/book.html"
    errors: list[str] = []
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
            problem = page.evaluate(BOOK_LAYOUT, [part["caption"] for part in toc["parts"]])
            if problem:
                errors.append(f"cannot lay the page out as a book: {problem}")
            page.emulate_media(media="print")
            checked = page.evaluate(FIT_AND_CHECK, SMALLEST_EQUATION)
            pdf_bytes = page.pdf(format="A4", scale=SCALE, margin=MARGIN, print_background=True,
                                 display_header_footer=True, header_template=HEADER,
                                 footer_template=FOOTER, tagged=True)
            _log("printed")
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
    PDF.write_bytes(pdf_bytes)
    return checked


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
              "equations_set_smaller": checked["scaled"]}
    REPORT.write_text(json.dumps(report, indent=1) + "\n")
    print(f"build_pdf: {report['pdf']}: {pages} pages, {report['bytes'] / 1e6:.1f} MB, "
          f"{len(checked['scaled'])} wide equations set smaller to fit; {seconds:.0f} s "
          f"({single:.0f} s of them the single-page build)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
