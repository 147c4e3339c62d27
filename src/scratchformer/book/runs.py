"""Training runs shared by the chapters of one build: each run is trained once per build.

Several chapters read the same trained model (the translator in the chapters on translation
and on decoding, the adder in "A decoder-only Transformer" and in "Rotary against sinusoidal
on the adder"). :func:`train_once` trains it the first time a build asks for it and hands the
later chapters the same :class:`~scratchformer.train.TrainResult`, read back from disk, instead
of training it again.

The store is the directory named by the environment variable ``SCRATCHFORMER_RUNS``, which
``tools/build_book.py`` sets to ``_build/.runs`` and empties whenever the package changes, as
it does with the execution cache. Without the variable (a reader running a downloaded
notebook), :func:`train_once` simply trains.

A run is found by a key over everything that decides its outcome: the model's class, its
configuration and its initial parameters (bytes), the task, the training configuration, the
source of the package itself, and what decides the rounding of its matrix products: the BLAS
library's number of threads and the kernel a variable such as ``OPENBLAS_CORETYPE`` forces.
Two chapters asking for the same run with the same seed get the same key; any other
difference trains anew. Every run is trained with BLAS on one thread (a chapter that times code
runs with BLAS's default threads, and would otherwise train, and round, differently from the
chapter it shares a run with), so a chapter that measures speed and one that does not read
the same trained model, and a reader running a downloaded notebook on the same machine gets
the build's run. A lock on the entry makes a chapter wait for one
that is training the same run at the same time (the build executes chapters in parallel).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
from pathlib import Path

from .. import train as _train

__all__ = ["RUNS_VARIABLE", "SEED_VARIABLE", "book_seed", "run_key", "site_key", "train_once"]

#: The environment variable naming the directory of stored runs.
RUNS_VARIABLE = "SCRATCHFORMER_RUNS"
#: The environment variable that gives the training chapters another seed than the book's.
SEED_VARIABLE = "SCRATCHFORMER_SEED"
# Variables that choose how BLAS computes (and so rounds) a matrix product.
_BLAS_VARIABLES = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "MKL_CBWR", "MKL_ENABLE_INSTRUCTIONS")
_PACKAGE = Path(__file__).resolve().parent.parent
#: Where the page's live cells take stored runs from (a :class:`scratchformer.book.live.SiteRuns`
#: the in-page kernel sets); None everywhere else.
site_runs = None


def _package_digest() -> bytes:
    digest = hashlib.sha256()
    for path in sorted(_PACKAGE.rglob("*.py")):
        digest.update(str(path.relative_to(_PACKAGE)).encode() + b"\0" + path.read_bytes())
    return digest.digest()


def book_seed() -> int:
    """The seed of the training chapters' runs: 0, the book's, unless ``SCRATCHFORMER_SEED``
    names another.

    The chapters pass it to every model and training run whose outcome they state, so that
    ``tests/test_seeds.py`` can execute them with seeds 0 to 4 and check that every claim
    they assert holds for each, not for the book's seed alone.
    """
    value = os.environ.get(SEED_VARIABLE, "").strip()
    if not value:
        return 0
    try:
        seed = int(value)
    except ValueError:
        raise ValueError(f"{SEED_VARIABLE} must be a non-negative integer, got {value!r}") from None
    if seed < 0:
        raise ValueError(f"{SEED_VARIABLE} must be a non-negative integer, got {value!r}")
    return seed


def _rounding() -> bytes:
    """What decides the rounding of the run's matrix products besides the code: BLAS's thread
    count (a product split among threads may sum in another order) and forced kernels."""
    from .._threads import blas_thread_count

    settings = [f"threads={blas_thread_count()}"]
    settings += [f"{name}={os.environ[name]}" for name in _BLAS_VARIABLES if name in os.environ]
    return ";".join(settings).encode()


def run_key(model, task, config) -> str:
    """The hexadecimal key of training ``model`` (as it is now) on ``task`` with ``config``,
    on this process's BLAS settings."""
    return _key(model, task, config, _rounding())


def site_key(model, task, config) -> str:
    """The key of the same run on the book's site: everything :func:`run_key` holds but the
    rounding settings, since the page's live cells (WebAssembly, no OpenBLAS) take the build's
    trained weights whatever machine built it. The build writes it beside each stored run
    (``<key>.site``), and ``tools/live_runtime.py`` publishes the run under it."""
    return _key(model, task, config, b"site")


def _key(model, task, config, rounding: bytes) -> str:
    digest = hashlib.sha256(_package_digest())
    digest.update(rounding)
    digest.update(type(model).__qualname__.encode())
    digest.update(repr(getattr(model, "config", None)).encode())
    for name, owner, key in model.named_parameters():
        array = owner.params[key]
        digest.update(f"{name}:{array.dtype}:{array.shape}".encode())
        digest.update(array.tobytes())
    digest.update(repr(task).encode())
    digest.update(repr(config).encode())
    return digest.hexdigest()


@contextlib.contextmanager
def _locked(path: Path):
    import fcntl  # POSIX only; the build runs on Linux

    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def train_once(model, task, config=None):
    """:func:`~scratchformer.train.train` ``model`` on ``task``, or return the stored run.

    Returns the :class:`~scratchformer.train.TrainResult`. When the run is stored, its
    ``model`` is the stored trained model (``model`` itself is left untrained), and its
    ``seconds`` are those of the build that trained it. ``config`` defaults to
    :class:`~scratchformer.train.TrainConfig`'s defaults. BLAS runs on one thread while it
    trains (and while the key is taken).
    """
    from .._threads import blas_threads

    if config is None:
        config = _train.TrainConfig()
    if site_runs is not None:  # a live cell in the page: the site's copy of the build's runs
        return site_runs.train(model, task, config)
    with blas_threads(1):  # one rounding for every chapter: see the module
        store = os.environ.get(RUNS_VARIABLE)
        if not store:
            return _train.train(model, task, config)
        return _train_stored(Path(store), model, task, config)


def _train_stored(directory: Path, model, task, config):
    directory.mkdir(parents=True, exist_ok=True)
    key = run_key(model, task, config)
    entry = directory / f"{key}.pickle"
    with _locked(directory / f"{key}.lock"):
        if entry.exists():
            with open(entry, "rb") as handle:
                return pickle.load(handle)
        published = site_key(model, task, config)  # before training changes the model
        result = _train.train(model, task, config)
        partial = entry.with_suffix(".partial")
        with open(partial, "wb") as handle:
            pickle.dump(result, handle, protocol=pickle.HIGHEST_PROTOCOL)
        partial.replace(entry)
        # The key the site publishes the run under (site_key): the page has no BLAS settings.
        entry.with_suffix(".site").write_text(published + "\n")
        return result
