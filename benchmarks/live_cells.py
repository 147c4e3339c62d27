"""What a reader's first Run costs, and how long each live chapter takes to run in the page.

Usage: ``python benchmarks/live_cells.py [--site _build/html] [--chapters all|NAME ...]``
(after ``make book``; needs Chromium, as the browser tests do)

Serves the built site on loopback and opens a chapter in headless Chromium with a cold cache
(a new browser context; every request to another host refused). Prints

* for the first chapter given (default: scaled dot-product attention), the bytes the first Run
  fetched (response bodies under ``_static/live/`` and the worker) against the target of at
  most 30 MB, the bytes fetched before it (target 0), and the seconds from the click to
  Python's start and to the cell's output against the target of 20 s;
* with ``--chapters all`` or names, for each chapter, the seconds to run every shown cell one
  Run after another, and the sum: what the browser sweep (``tests/test_live_cells.py``) spends.

Times on a shared machine vary by a factor of several from one run to the next: read them as
what this run measured, not as a property of the page.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import shutil
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parent.parent
TARGET_BYTES = 30_000_000
TARGET_SECONDS = 20.0
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run", "--disable-dev-shm-usage"]


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):
        pass


def serve(site: Path) -> tuple[str, http.server.ThreadingHTTPServer]:
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}", server


def open_chapter(browser, url: str, chapter: str):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    host = urlparse(url).netloc
    fetched: list[tuple[str, int]] = []

    def route(route):
        if urlparse(route.request.url).netloc not in ("", host):
            return route.abort()
        return route.continue_()

    context.route("**/*", route)
    page = context.new_page()

    def on_response(response):
        try:
            fetched.append((response.url, len(response.body())))
        except Exception:  # noqa: BLE001 - a body the browser dropped (a redirect, an abort)
            fetched.append((response.url, 0))

    page.on("response", on_response)
    page.goto(f"{url}/{chapter}.html", wait_until="networkidle")
    return page, fetched


def run(page, cell, timeout=1_800_000) -> str:
    button = cell.locator(".live-run")
    if not button.is_visible():  # in an exercise's solution: open it, as a reader does
        solution = cell.locator("xpath=ancestor::div[contains(@class, 'dropdown')][1]")
        solution.locator(":scope > .admonition-title").click()
        button.wait_for(state="visible")
    button.click()
    page.wait_for_function("(b) => b.dataset.running === 'no'", arg=button.element_handle(),
                           timeout=timeout)
    return cell.locator(".live-status").inner_text()


def live(url: str) -> bool:
    return "/_static/live/" in url or url.split("?")[0].endswith("live-worker.js")


def first_run(browser, url: str, chapter: str) -> bool:
    page, fetched = open_chapter(browser, url, chapter)
    before = sum(size for address, size in fetched if live(address))
    cell = page.locator("div.cell:has(> .live-bar .live-run)").first
    start = time.perf_counter()
    status = run(page, cell)
    seconds = time.perf_counter() - start
    page.wait_for_load_state("networkidle")
    after = sum(size for address, size in fetched if live(address))
    started = page.evaluate("window.scratchformerLive.state.startedAt")
    print(f"{chapter}: before the first click {before:,} bytes of the runtime (target 0)")
    print(f"  the first Run fetched {after:,} bytes ({after / 1e6:.1f} MB; target at most "
          f"{TARGET_BYTES / 1e6:.0f} MB)")
    print(f"  first cell's output {seconds:.1f} s after the click (target {TARGET_SECONDS:.0f} "
          f"s); its status: {status!r}; worker started at {started / 1000:.1f} s of the page")
    page.context.close()
    return before == 0 and after <= TARGET_BYTES and seconds <= TARGET_SECONDS


def whole_chapter(browser, url: str, chapter: str) -> float:
    page, _ = open_chapter(browser, url, chapter)
    cells = page.locator("div.cell:has(> .live-bar .live-run)")
    start = time.perf_counter()
    failed = 0
    for i in range(cells.count()):
        if not run(page, cells.nth(i)).startswith("Ran in the page"):
            failed += 1
    seconds = time.perf_counter() - start
    print(f"  {chapter}: {cells.count()} cells in {seconds:.1f} s"
          + (f", {failed} did not run to their end" if failed else ""), flush=True)
    page.context.close()
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", type=Path, default=ROOT / "_build" / "html")
    parser.add_argument("--chapters", nargs="*", default=[],
                        help="'all', or chapters to run whole (book/scaling ...)")
    args = parser.parse_args(argv)
    cells = args.site / "_static" / "live" / "cells"
    if not cells.exists():
        print(f"no live cells in {args.site}: run `make book` first", file=sys.stderr)
        return 2
    chapters = sorted(str(p.relative_to(cells).with_suffix("")) for p in cells.rglob("*.json"))
    chosen = chapters if args.chapters == ["all"] else args.chapters
    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    from playwright.sync_api import sync_playwright

    url, server = serve(args.site)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=ARGS)
        ok = first_run(browser, url, (chosen or ["book/scaled_dot_product_attention"])[0])
        if chosen:
            print("Each chapter's shown cells, one Run after another (a fresh page each):")
            total = sum(whole_chapter(browser, url, chapter) for chapter in chosen)
            print(f"  all {len(chosen)}: {total:.0f} s")
        browser.close()
    server.shutdown()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
