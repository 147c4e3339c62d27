"""Every claim the training chapters assert holds for seeds 0 to 4, not for the book's alone.

A claim about a trained run is a claim about one draw of initial weights and data and one
rounding of its matrix products, which another BLAS kernel or thread count changes. The
chapters whose claims rest on such runs (``tools/seed_sweep.py``'s ``SEEDED_CHAPTERS``) take
their seed from ``scratchformer.book.book_seed()``; this test executes each of them, in a
fresh kernel with BLAS on one thread as the build does, with ``SCRATCHFORMER_SEED`` = 0 to 4,
and fails with the chapter's own error when an assertion does not hold. The chapter's cells
are its claims, written once: the build checks them on the book's seed, this test on five.

The book's seed on this machine is the build's own: when the build recorded the fingerprint of
these sources under this environment (``tools/build_book.py`` records it only after every
chapter executed, each assertion holding, and it covers the seed and any forced BLAS kernel),
seed 0 is not executed again; ``make test`` builds the book before it runs this test.

The runs are stored as the build stores them (``scratchformer.book.runs``), in
``_build/.runs`` beside the build's, so that the book's seed reuses the build's run on this
machine (its key holds the package's source and the BLAS settings) and two chapters that
share a run of another seed train it once. ``python -m tools.seed_sweep`` reports, for every
assertion, in how many seeds it holds and the range of what it compares.
"""

from __future__ import annotations

import concurrent.futures
import functools
import multiprocessing
import os
from pathlib import Path

import pytest
from tools.seed_sweep import SEEDED_CHAPTERS, execute

ROOT = Path(__file__).resolve().parent.parent


# One worker of pytest-xdist runs them all (``make test`` passes --dist loadgroup): the fixture
# below executes every selected pair in a pool of its own, once.
pytestmark = [pytest.mark.seeds, pytest.mark.xdist_group("seeds")]
SEEDS = range(5)
WORKERS = 2  # the machine's cores; each kernel's BLAS has one thread
TEST_NAME = "test_the_chapter_s_claims_hold_for_the_seed"


def built_by_the_book(seed: int) -> bool:
    """Whether the last build executed the chapters with this seed, these sources and this
    environment's BLAS kernel, and every claim held (it records the fingerprint only then)."""
    return seed == 0 and _the_build_is_of_these_sources()


@functools.cache  # once a session: the fingerprint hashes every file of the package
def _the_build_is_of_these_sources() -> bool:
    from tools import build_book

    recorded = build_book.FINGERPRINT
    return ("SCRATCHFORMER_SEED" not in os.environ and recorded.exists()
            and recorded.read_text().strip() == build_book.fingerprint())


def _execute_in_store(chapter: str, seed: int, store: str) -> str | None:
    os.environ["SCRATCHFORMER_RUNS"] = store
    return execute(chapter, seed)


@pytest.fixture(scope="session")
def outcomes(request):
    """(chapter, seed) -> None or the error of the cell that failed: every pair this session
    selected (``-k translation`` selects one chapter's five), executed two at a time, once
    (session-scoped: a pytest-xdist worker that runs a test of another module between two of
    these would otherwise tear a module's fixture down and execute every pair again)."""
    store = ROOT / "_build" / ".runs"
    store.mkdir(parents=True, exist_ok=True)
    pairs = [(item.callspec.params["chapter"], item.callspec.params["seed"])
             for item in request.session.items
             if getattr(item, "originalname", None) == TEST_NAME
             and not built_by_the_book(item.callspec.params["seed"])]
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(WORKERS, mp_context=context) as pool:
        futures = {pair: pool.submit(_execute_in_store, *pair, str(store)) for pair in pairs}
        return {pair: future.result() for pair, future in futures.items()}


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("chapter", SEEDED_CHAPTERS)
def test_the_chapter_s_claims_hold_for_the_seed(outcomes, chapter, seed):
    if built_by_the_book(seed):
        return  # the build executed it (see the module's docstring)
    error = outcomes[chapter, seed]
    assert error is None, f"{chapter} with SCRATCHFORMER_SEED={seed}:\n{error}"


def test_every_chapter_that_trains_is_swept():
    """A chapter that trains a model or reads a trained run takes its seed from book_seed,
    and is in the sweep: a new training chapter cannot be forgotten."""
    markers = ("sfb.train_once(", "tr.train(", "= train(", "train(book_model(", "book_seed()")
    training = set()
    for path in sorted((ROOT / "book").glob("*.md")):
        text = path.read_text()
        if any(marker in text for marker in markers):
            training.add(f"book/{path.name}")
    assert training == set(SEEDED_CHAPTERS)
    for chapter in SEEDED_CHAPTERS:
        assert "sfb.book_seed()" in (ROOT / chapter).read_text(), chapter
