"""The chapters' cells run in the page (book/_ext/live_cells.py, book/_static/live-cells.js,
scratchformer.book.live), in headless Chromium, with every request to another host refused.

- Nothing of the runtime is fetched before a reader's first click, and a browser without
  WebAssembly gets a sentence instead of buttons.
- Every live chapter, its shown cells run one after another by their Run buttons (a folded
  solution opened first, as a reader would), gives the build's text output, with numbers
  equal to the build's where they are not timings (:data:`TIMED`), as many figures, no error
  and no claim that no longer holds.
- An edited cell shows its own output, Reset brings back the build's, a claim the edit makes
  false says so and the page goes on, an error shows its traceback, Stop ends an endless loop
  and the next Run starts Python again.
"""

from __future__ import annotations

import json
import math
import re
from urllib.parse import urlparse

import pytest

from pages import SITE, VIEWPORTS

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("live-cells")]

CELLS = SITE / "_static" / "live" / "cells"


def live_chapters() -> list[str]:
    if not CELLS.exists():
        return ["book/scaled_dot_product_attention"]
    return sorted(str(path.relative_to(CELLS).with_suffix("")) for path in CELLS.rglob("*.json"))


LIVE = live_chapters()
# Cells whose text output is a measured time, or a measured rounding error, which no two
# machines share (WebAssembly's arithmetic has no fused multiply-add and no OpenBLAS kernels):
# their words are compared, their numbers not. (chapter, number of the shown cell)
TIMED: set[tuple[str, int]] = {
    ("book/decoder", 6),  # greedy decoding against the parallel pass, in units of eps
    ("book/decoding", 7),  # milliseconds of greedy decoding and beam search
}
NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")


def open_page(browser, site_url, path, viewport="desktop", scheme="light", init=None):
    context = browser.new_context(viewport=VIEWPORTS[viewport], color_scheme=scheme)
    host = urlparse(site_url).netloc
    problems = {"foreign": [], "console": [], "pageerror": [], "requests": []}

    def route(route):
        url = urlparse(route.request.url)
        if url.scheme in ("http", "https", "ws", "wss") and url.netloc != host:
            problems["foreign"].append(route.request.url)
            return route.abort()
        problems["requests"].append(route.request.url)
        return route.continue_()

    context.route("**/*", route)
    if init:
        context.add_init_script(init)
    page = context.new_page()
    page.on("console", lambda m: m.type == "error" and problems["console"].append(m.text))
    page.on("pageerror", lambda error: problems["pageerror"].append(str(error)))
    page.goto(f"{site_url}/{path}", wait_until="networkidle")
    return page, problems


def reveal(cell) -> None:
    """Open the exercise's solution the cell is folded in, as a reader does (a click on its
    title), and a folded input."""
    button = cell.locator(".live-run")
    if not button.is_visible():
        solution = cell.locator("xpath=ancestor::div[contains(@class, 'dropdown')][1]")
        if solution.count():
            solution.locator(":scope > .admonition-title").click()
        button.wait_for(state="visible")


def run_cell(page, cell, timeout=600_000):
    """Click the cell's Run and wait for its end; returns its status line."""
    reveal(cell)
    button = cell.locator(".live-run")
    button.click()
    page.wait_for_function("(b) => b.dataset.running === 'no'", arg=button.element_handle(),
                           timeout=timeout)
    return cell.locator(".live-status").inner_text()


# The text of an output area as the reader reads it: each text box's lines, each table's rows
# (cells joined by spaces); a figure's caption is the build's prose about its figure, not output.
OUTPUT_TEXT = """(area) => {
    const parts = [];
    for (const node of area.querySelectorAll("pre, table, p")) {
        const inTable = node.tagName !== "TABLE" && node.closest("table") !== null;
        if (node.closest("figcaption") || inTable) continue;
        if (node.tagName === "TABLE") {
            for (const row of node.rows)
                parts.push([...row.cells].map((c) => c.innerText.trim()).join(" "));
        } else if (node.tagName === "PRE" || node.closest(".text_markdown")) {
            parts.push(node.innerText);
        }
    }
    return parts.join("\\n");
}"""


def words_and_numbers(text: str) -> tuple[list[str], list[float]]:
    for left_out in ("(This cell shows nothing: it ran and defined what the next cells use.)",
                     "Copy to clipboard"):  # the runner's note; the copy button's label
        text = text.replace(left_out, "")
    text = re.sub(r"\S+ was also used by .*? differs from the build's\.", "", text)
    text = text.replace("\u2019", "'")  # MyST's typographic apostrophe in a rendered table
    numbers = [float(n) for n in NUMBER.findall(text)]
    words = NUMBER.sub("#", " ".join(text.split())).split()
    return words, numbers


def same_numbers(built: list[float], live: list[float]) -> bool:
    return len(built) == len(live) and all(
        math.isclose(a, b, rel_tol=1e-3, abs_tol=1e-6) for a, b in zip(built, live))


@pytest.mark.parametrize("chapter", LIVE)
def test_every_shown_cell_runs_in_the_page_as_in_the_build(browser, site_url, chapter):
    page, problems = open_page(browser, site_url, f"{chapter}.html")
    # Cells that draw from a generator a cell the page skips drew from first: the page says
    # so under them, and their numbers are not the build's.
    data = json.loads((CELLS / f"{chapter}.json").read_text())
    differs = {cell["number"] for cell in data["cells"] if cell["differs"]}
    try:
        cells = page.locator("div.cell:has(> .live-bar .live-run)")
        faults = []
        for i in range(cells.count()):
            cell = cells.nth(i)
            reveal(cell)
            number = int(cell.locator(".live-number").inner_text().split()[-1])
            built = cell.locator(":scope > .cell_output:not(.live-output)")
            built_text = page.evaluate(OUTPUT_TEXT, built.element_handle()) if built.count() else ""
            built_figures = built.locator("img").count() if built.count() else 0
            status = run_cell(page, cell)
            if not status.startswith("Ran in the page"):
                shown = cell.locator(".live-output").inner_text()
                faults.append(f"cell {number}: {status}: {shown}")
                continue
            if cell.locator(".live-claim, .live-error, .live-train").count():
                faults.append(f"cell {number}: {cell.locator('.live-output').inner_text()}")
            live_text = page.evaluate(OUTPUT_TEXT, cell.locator(".live-output").element_handle())
            built_words, built_numbers = words_and_numbers(built_text)
            live_words, live_numbers = words_and_numbers(live_text)
            if "".join(built_words) != "".join(live_words):  # NumPy pads its columns
                faults.append(f"cell {number} printed other words:\n  build: {built_text[:300]!r}"
                              f"\n  page:  {live_text[:300]!r}")
            elif number in differs:
                if not cell.locator(".live-differs").count():
                    faults.append(f"cell {number} does not say its numbers differ")
            elif (chapter, number) not in TIMED and not same_numbers(built_numbers, live_numbers):
                faults.append(f"cell {number} printed other numbers:\n  build: {built_numbers[:12]}"
                              f"\n  page:  {live_numbers[:12]}")
            if cell.locator(".live-output img").count() != built_figures:
                faults.append(f"cell {number} drew {cell.locator('.live-output img').count()} "
                              f"figures, the build {built_figures}")
        assert not faults, "\n".join(faults)
        assert not problems["foreign"] and not problems["pageerror"], problems
        assert not problems["console"], problems["console"]
    finally:
        page.context.close()


PAGE = "book/scaled_dot_product_attention.html"


def test_nothing_of_the_runtime_is_fetched_before_the_first_click(browser, site_url):
    page, problems = open_page(browser, site_url, PAGE)
    try:
        assert page.locator(".live-run").count() > 5
        first = page.locator(".live-status").first.inner_text()
        manifest = json.loads((SITE / "_static" / "live" / "manifest.json").read_text())
        megabytes = f"{manifest['sets']['matplotlib']['bytes'] / 1e6:.1f} MB"
        assert megabytes in first, first  # the page says what a first run downloads
        assert manifest["sets"]["matplotlib"]["bytes"] <= 30e6
        fetched = [url for url in problems["requests"]
                   if "/_static/live/" in url or "live-worker" in url]
        assert fetched == []
        run_cell(page, page.locator("div.cell:has(.live-run)").first)
        assert any("pyodide.asm.wasm" in url for url in problems["requests"])
        assert not problems["foreign"]
    finally:
        page.context.close()


def test_a_browser_without_webassembly_gets_a_sentence(browser, site_url):
    page, _ = open_page(browser, site_url, PAGE, init="delete window.WebAssembly;")
    try:
        assert page.locator(".live-run").count() == 0
        note = page.locator(".live-bar-skip").first.inner_text()
        assert "cannot run the code in the page" in note
    finally:
        page.context.close()


def cell_with(page, code: str):
    """The shown live cell whose code holds ``code`` (found once: editing changes its code)."""
    found = page.locator("div.cell:has(.live-run)").filter(
        has=page.locator(".cell_input pre", has_text=code))
    index = found.evaluate("(node) => /live-cell-(\\d+)/.exec(node.className)[1]")
    return page.locator(f"div.cell.live-cell-{index}")


def edit(page, cell, code: str) -> None:
    cell.locator(".live-edit").click()
    box = cell.locator(".cell_input pre")
    box.evaluate("(node, code) => { node.textContent = code; }", code)


@pytest.mark.parametrize("viewport,scheme", [("desktop", "light"), ("phone", "dark")])
def test_an_edited_cell_runs_and_reset_brings_back_the_build(browser, site_url, viewport,
                                                              scheme, tmp_path):
    page, problems = open_page(browser, site_url, PAGE, viewport, scheme)
    try:
        cells = page.locator("div.cell:has(.live-run)")
        lookup = cell_with(page, "soft, sharp = 1.0, 8.0")  # the soft dictionary lookup
        built = lookup.locator(".cell_input pre").inner_text()
        assert "soft, sharp = 1.0, 8.0" in built
        # The reader's change of the report: c = 2 makes the soft lookup sharper than the text says.
        edit(page, lookup, built.replace("soft, sharp = 1.0, 8.0", "soft, sharp = 2.0, 8.0")
             + "\nprint('c =', soft)")
        status = run_cell(page, lookup)
        assert status.startswith("Ran in the page"), status
        output = lookup.locator(".live-output").inner_text()
        assert "The text's claim no longer holds" in output
        assert "assert 0.5 < exact[soft][1] < 0.8  # c = 1: a blend, led by the match" in output
        assert "exact[soft][1] = 0.947915" in output, output  # e^4 / (e^4 + 3)
        assert "c = 2.0" in output  # the cell went on
        lookup.screenshot(path=str(tmp_path / f"edited-{viewport}-{scheme}.png"))
        lookup.locator(".live-reset").click()
        assert lookup.locator(".cell_input pre").inner_text() == built
        assert lookup.locator(".live-output").count() == 0
        assert lookup.locator(":scope > .cell_output[hidden]").count() == 0  # the build's, shown
        # The next cell, run after the edit, sees the state the edit left (as a notebook does).
        after = cells.nth(int(lookup.locator(".live-number").inner_text().split()[-1]))
        edit(page, after, "print(soft)")
        run_cell(page, after)
        assert after.locator(".live-output").inner_text().strip() == "2.0"
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"the page scrolls sideways by {overflow} px"
        assert not problems["foreign"] and not problems["pageerror"]
    finally:
        page.context.close()


def test_an_error_shows_its_traceback_and_stop_ends_an_endless_loop(browser, site_url):
    page, problems = open_page(browser, site_url, PAGE)
    try:
        cell = cell_with(page, "soft, sharp = 1.0, 8.0")
        edit(page, cell, "def f():\n    return 1 / 0\nf()")
        status = run_cell(page, cell)
        assert status.startswith("Stopped after")
        assert "ZeroDivisionError" in cell.locator(".live-error").inner_text()
        edit(page, cell, "while True:\n    pass")
        cell.locator(".live-run").click()
        page.wait_for_function("(b) => b.textContent === 'Stop'",
                               arg=cell.locator(".live-run").element_handle())
        page.wait_for_timeout(500)
        cell.locator(".live-run").click()
        assert "Stopped: Python ended" in cell.locator(".live-status").inner_text()
        edit(page, cell, "print(np.eye(4).shape)")  # np: imported by the first cell, run again
        assert run_cell(page, cell).startswith("Ran in the page")
        assert cell.locator(".live-output").inner_text().strip() == "(4, 4)"
        assert not problems["foreign"] and not problems["pageerror"]
    finally:
        page.context.close()


def test_a_changed_training_run_asks_first_then_trains_in_the_page(browser, site_url):
    """The training cell of "Training" takes the build's run from the site (the sweep above
    checks its printed scores against the build's); changed, it says how long training would
    take in the page, and trains when the reader asks."""
    page, problems = open_page(browser, site_url, "book/training.html")
    try:
        cells = page.locator("div.cell:has(.live-run)")
        training = next(cells.nth(i) for i in range(cells.count())
                        if "sfb.train_once(model, task, config)"
                        in cells.nth(i).locator(".cell_input pre").inner_text())
        edit(page, training, "import dataclasses\n"
             "config = dataclasses.replace(config, max_steps=30, warmup_steps=5, "
             "eval_every=10, target_accuracy=None)\n"
             "result = sfb.train_once(model, task, config)\n"
             "print('trained', result.steps, 'steps')")
        status = run_cell(page, training)
        assert status.startswith("Stopped after"), status
        ask = training.locator(".live-train")
        assert re.search(r"Training here takes up to about \d+ s \(at most 30 steps",
                         ask.inner_text()), ask.inner_text()
        ask.locator(".live-train-button").click()
        training.locator(".live-output").get_by_text("trained 30 steps").wait_for(
            timeout=600_000)
        assert not problems["foreign"] and not problems["pageerror"]
    finally:
        page.context.close()
