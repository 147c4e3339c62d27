"""The store of shared training runs (``scratchformer.book.runs``) and the chapters' seed.

- ``run_key`` changes with everything that changes a run's outcome: the seed, the initial
  weights, the task, the training settings, BLAS's thread count and a variable that forces a
  BLAS kernel; it is the same for the same run asked for twice.
- ``train_once`` trains a run once per store and hands a second caller the stored result.
- ``book_seed`` reads ``SCRATCHFORMER_SEED`` (0 without it) and refuses what is not a
  non-negative integer.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from conftest import KERNELS
from scratchformer import _threads
from scratchformer import train as tr
from scratchformer.book import runs

TASK = tr.make_task("reverse", length=4, vocab_size=5)
CONFIG = tr.TrainConfig(max_steps=3, warmup_steps=1, eval_every=3, n_valid=8, n_test=8,
                        batch_size=4, target_accuracy=None)


def small_model(seed=0):
    return tr.book_model(TASK, seed=seed, d_model=8, n_heads=2, d_ff=8, n_layers=1)


def test_the_key_is_the_same_for_the_same_run():
    assert runs.run_key(small_model(), TASK, CONFIG) == runs.run_key(small_model(), TASK, CONFIG)


def test_the_key_changes_with_what_changes_the_outcome(monkeypatch):
    for name in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):  # a machine may set them already
        monkeypatch.delenv(name, raising=False)
    key = runs.run_key(small_model(), TASK, CONFIG)
    assert runs.run_key(small_model(seed=1), TASK, CONFIG) != key  # initial weights
    assert runs.run_key(small_model(), TASK, dataclasses.replace(CONFIG, seed=1)) != key
    assert runs.run_key(small_model(), tr.make_task("sort", length=4, vocab_size=5),
                        CONFIG) != key
    # A forced kernel rounds differently: forcing one changes the key (unset against set, the
    # machine's own variables removed above), and so does forcing another.
    keys = {key}
    for kernel in KERNELS:
        monkeypatch.setenv("OPENBLAS_CORETYPE", kernel)
        keys.add(runs.run_key(small_model(), TASK, CONFIG))
    monkeypatch.delenv("OPENBLAS_CORETYPE")
    monkeypatch.setenv("OPENBLAS_L2_SIZE", "262144")  # the cache size OpenBLAS assumes
    keys.add(runs.run_key(small_model(), TASK, CONFIG))
    assert len(keys) == 2 + len(KERNELS)


@pytest.mark.skipif(not _threads.BLAS_THREAD_CONTROL, reason="BLAS's threads cannot be set")
def test_the_key_changes_with_blas_threads():
    with _threads.blas_threads(1):
        one = runs.run_key(small_model(), TASK, CONFIG)
    with _threads.blas_threads(2):
        if _threads.blas_thread_count() == 1:
            pytest.skip("BLAS runs on one thread only here")
        two = runs.run_key(small_model(), TASK, CONFIG)
    assert two != one


def test_train_once_trains_once_per_store(tmp_path, monkeypatch):
    monkeypatch.setenv(runs.RUNS_VARIABLE, str(tmp_path))
    first = runs.train_once(small_model(), TASK, CONFIG)
    assert len(list(tmp_path.glob("*.pickle"))) == 1
    second = runs.train_once(small_model(), TASK, CONFIG)
    np.testing.assert_array_equal(first.history["loss"], second.history["loss"])
    assert second.seconds == first.seconds  # read back, not trained again


def test_book_seed(monkeypatch):
    monkeypatch.delenv(runs.SEED_VARIABLE, raising=False)
    assert runs.book_seed() == 0
    monkeypatch.setenv(runs.SEED_VARIABLE, "3")
    assert runs.book_seed() == 3
    for bad in ("-1", "two", "1.5"):
        monkeypatch.setenv(runs.SEED_VARIABLE, bad)
        with pytest.raises(ValueError, match="SCRATCHFORMER_SEED must be a non-negative"):
            runs.book_seed()


@pytest.mark.skipif(not _threads.BLAS_THREAD_CONTROL, reason="BLAS's threads cannot be set")
@pytest.mark.parametrize("stored", [False, True])
def test_train_once_trains_on_one_blas_thread(tmp_path, monkeypatch, stored):
    """So that a chapter that times code (BLAS's default threads) and one that does not
    (one thread) share one run, rounded one way."""
    if stored:
        monkeypatch.setenv(runs.RUNS_VARIABLE, str(tmp_path))
    else:
        monkeypatch.delenv(runs.RUNS_VARIABLE, raising=False)
    seen = []
    real = tr.train

    def train(*args, **kwargs):
        seen.append(_threads.blas_thread_count())
        return real(*args, **kwargs)

    monkeypatch.setattr(runs._train, "train", train)
    before = _threads.blas_thread_count()
    runs.train_once(small_model(), TASK, CONFIG)
    assert seen == [1]
    assert _threads.blas_thread_count() == before  # restored


# Trains a few steps of a small model of each kind the book trains and prints a digest of the
# trained parameters and the loss history.
TRAIN_AND_DIGEST = """
import hashlib, sys
import numpy as np
from scratchformer import train as tr

config = tr.TrainConfig(max_steps=6, warmup_steps=2, eval_every=6, n_valid=8, n_test=8,
                        batch_size=4, target_accuracy=None)
small = dict(d_model=16, n_heads=2, d_ff=16, n_layers=1)
name = sys.argv[1]
if name == "text":
    task = tr.make_task("text", context=32)
    model = tr.text_model(task, **small)
elif name == "add":
    task = tr.make_task("add")
    model = tr.adder_model(task, **small)
else:
    task = tr.make_task(name)
    model = tr.book_model(task, **small)
result = tr.train(model, task, config)
digest = hashlib.sha256(np.asarray(result.history["loss"]).tobytes())
for _, owner, key in result.model.named_parameters():
    digest.update(owner.params[key].tobytes())
print(digest.hexdigest())
"""


@pytest.mark.slow
@pytest.mark.parametrize("task", ["reverse", "add", "translate", "text"])
def test_a_run_is_the_same_in_another_process(task, request):
    """What lets a build's stored run stand for the run another process would train (the
    scratch build of tests/test_build.py starts from the build's runs): two processes with
    different hash seeds (the order of a set of strings, a vocabulary's, changes with it)
    train the same small model of each kind of the book's bit for bit alike."""
    import subprocess
    import sys

    from conftest import training_environment

    if task == "text":
        request.getfixturevalue("texts")  # the addresses, read as characters
    digests = set()
    for hash_seed in ("1", "2"):
        env = training_environment() | {"PYTHONHASHSEED": hash_seed}
        run = subprocess.run([sys.executable, "-c", TRAIN_AND_DIGEST, task], env=env,
                             capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stderr[-3000:]
        digests.add(run.stdout.strip())
    assert len(digests) == 1, f"{task}: two processes trained two different runs"
