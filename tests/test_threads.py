"""Work shared among threads, with BLAS on one thread inside each (``scratchformer._threads``)."""

from __future__ import annotations

import subprocess
import sys
import threading

import numpy as np
import pytest

from scratchformer import _threads
from scratchformer._threads import blas_thread_count, blas_threads, parallel_map


def test_numpy_wheels_openblas_sets_threads_per_thread():
    config = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
    if config["name"] != "scipy-openblas":
        pytest.skip(f"NumPy here uses {config['name']}, not the OpenBLAS of NumPy's wheels")
    version = tuple(int(part) for part in config["version"].split(".")[:3])
    assert version >= (0, 3, 27)  # the first OpenBLAS with openblas_set_num_threads_local
    assert _threads.BLAS_THREAD_CONTROL


@pytest.mark.skipif(not _threads.BLAS_THREAD_CONTROL, reason="no BLAS thread control")
def test_blas_threads_is_restored_on_exit_and_after_an_error():
    before = blas_thread_count()
    with blas_threads(1):
        assert blas_thread_count() == 1
        with blas_threads(3):
            assert blas_thread_count() == 3
        assert blas_thread_count() == 1
    assert blas_thread_count() == before
    with pytest.raises(RuntimeError, match="inside"):
        with blas_threads(1):
            raise RuntimeError("inside")
    assert blas_thread_count() == before


@pytest.mark.skipif(not _threads.BLAS_THREAD_CONTROL, reason="no BLAS thread control")
def test_concurrent_callers_each_get_their_results_and_the_setting_is_restored():
    before = blas_thread_count()
    results = {}

    def call(name):
        results[name] = parallel_map(lambda i: (i, blas_thread_count()), range(5), workers=2)

    callers = [threading.Thread(target=call, args=(name,)) for name in "ab"]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join()
    expected = [(i, 1) for i in range(5)]
    assert results == {"a": expected, "b": expected}
    assert blas_thread_count() == before


def test_parallel_map_keeps_the_order_and_runs_blas_on_one_thread():
    def work(i):
        blas = blas_thread_count() if _threads.BLAS_THREAD_CONTROL else 1
        return i * i, threading.current_thread().name, blas

    results = parallel_map(work, range(7), workers=2)
    assert [r[0] for r in results] == [i * i for i in range(7)]
    assert {r[2] for r in results} == {1}
    assert all(r[1].startswith("scratchformer") for r in results)
    # one worker, or a call from inside a worker: in the calling thread
    assert parallel_map(lambda i: threading.current_thread().name, [0], workers=2) == [
        threading.current_thread().name]
    nested = parallel_map(lambda i: parallel_map(lambda j: threading.current_thread().name,
                                                 range(3)), range(2), workers=2)
    assert all(len(set(names)) == 1 for names in nested)


def test_parallel_map_raises_the_error_of_a_worker():
    def work(i):
        if i == 3:
            raise ValueError(f"item {i} is bad")
        return i

    with pytest.raises(ValueError, match="item 3 is bad"):
        parallel_map(work, range(6), workers=2)
    assert parallel_map(work, [0, 1, 2], workers=2) == [0, 1, 2]  # the pool still works


@pytest.mark.skipif(not _threads.BLAS_THREAD_CONTROL, reason="no BLAS thread control")
def test_as_many_workers_as_blas_would_use_by_default():
    names = set()
    with blas_threads(1):  # as OPENBLAS_NUM_THREADS=1 would
        parallel_map(lambda i: names.add(threading.current_thread().name), range(4))
    assert names == {threading.current_thread().name}


def test_importing_the_package_does_not_probe_blas():
    """The BLAS probe (which loads BLAS and reads the process's libraries) runs on first use."""
    code = ("import scratchformer, scratchformer._threads as t; "
            "print(t._controls.cache_info().currsize); t.blas_thread_count(); "
            "print(t._controls.cache_info().currsize)")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["0", "1"]


def test_a_set_count_stays_and_blocks_restore_it():
    if not _threads.BLAS_THREAD_CONTROL:
        pytest.skip("no BLAS thread control")
    before = blas_thread_count()
    try:
        _threads.set_blas_thread_count(1)
        assert blas_thread_count() == 1
        with blas_threads(2):
            pass
        assert blas_thread_count() == 1
    finally:
        _threads.set_blas_thread_count(before)


def test_blas_threads_inside_a_worker_of_parallel_map_returns_at_once():
    """The map's caller holds BLAS's lock while it waits for its threads, so a thread of the
    map that asked for the lock would wait for ever (a training step asks for it, for its
    norm). In a process of its own, so that a hang fails the test instead of the session."""
    code = """
from scratchformer._threads import BLAS_THREAD_CONTROL, blas_thread_count, blas_threads
from scratchformer._threads import parallel_map

def item(i):
    with blas_threads(2):
        return blas_thread_count()

counts = parallel_map(item, range(4), 2)
print(set(counts) == {1} if BLAS_THREAD_CONTROL else True)
"""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["True"]
