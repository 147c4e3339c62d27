"""Shared settings and fixtures: one Hypothesis profile, the built site served on localhost, and
headless Chromium to look at it."""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import threading
from pathlib import Path

import pytest
from hypothesis import settings

# One Hypothesis profile for every property test. No deadline: a single example may take
# several times its usual time on a loaded 2-core machine, which says nothing about
# correctness (speed is measured by benchmarks/, never by tests).
settings.register_profile("scratchformer", deadline=None)
settings.load_profile("scratchformer")

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "_build" / "html"
CHROMIUM_CANDIDATES = ("chromium", "chromium-browser", "google-chrome")
# Flags for a closed network: no background services that would phone home at start-up.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--disable-dev-shm-usage"]


def _unavailable(reason: str,
                 under_ci: str = "CI must run the browser tests; .ci/run installs Chromium"):
    """Skip locally, but fail under CI, which must run the test (``under_ci`` says why)."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason} ({under_ci})")
    pytest.skip(reason)


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
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


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
