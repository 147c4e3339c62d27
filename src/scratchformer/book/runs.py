"""Training runs shared by the chapters of one build: each run is trained once per build.

Several chapters read the same trained model (the translator in the chapters on translation
and on decoding, the adder in the three chapters of generation). :func:`train_once` trains
it the first time a build asks for it and hands the later chapters the same
:class:`~scratchformer.train.TrainResult`, read back from disk, instead of training it again.

The store is the directory named by the environment variable ``SCRATCHFORMER_RUNS``, which
``tools/build_book.py`` sets to ``_build/.runs`` and empties whenever the package changes, as
it does with the execution cache. Without the variable (a reader running a downloaded
notebook), :func:`train_once` simply trains.

A run is found by a key over everything that decides its outcome: the model's class, its
configuration and its initial parameters (bytes), the task, the training configuration and the
source of the package itself. Two chapters asking for the same run with the same seed get the
same key; any other difference trains anew. A lock on the entry makes a chapter wait for one
that is training the same run at the same time (the build executes chapters in parallel).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
from pathlib import Path

from .. import train as _train

__all__ = ["RUNS_VARIABLE", "run_key", "train_once"]

#: The environment variable naming the directory of stored runs.
RUNS_VARIABLE = "SCRATCHFORMER_RUNS"
_PACKAGE = Path(__file__).resolve().parent.parent


def _package_digest() -> bytes:
    digest = hashlib.sha256()
    for path in sorted(_PACKAGE.rglob("*.py")):
        digest.update(str(path.relative_to(_PACKAGE)).encode() + b"\0" + path.read_bytes())
    return digest.digest()


def run_key(model, task, config) -> str:
    """The hexadecimal key of training ``model`` (as it is now) on ``task`` with ``config``."""
    digest = hashlib.sha256(_package_digest())
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
    :class:`~scratchformer.train.TrainConfig`'s defaults.
    """
    if config is None:
        config = _train.TrainConfig()
    store = os.environ.get(RUNS_VARIABLE)
    if not store:
        return _train.train(model, task, config)
    directory = Path(store)
    directory.mkdir(parents=True, exist_ok=True)
    key = run_key(model, task, config)
    entry = directory / f"{key}.pickle"
    with _locked(directory / f"{key}.lock"):
        if entry.exists():
            with open(entry, "rb") as handle:
                return pickle.load(handle)
        result = _train.train(model, task, config)
        partial = entry.with_suffix(".partial")
        with open(partial, "wb") as handle:
            pickle.dump(result, handle, protocol=pickle.HIGHEST_PROTOCOL)
        partial.replace(entry)
        return result
