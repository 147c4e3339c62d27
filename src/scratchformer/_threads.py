"""Running independent pieces of NumPy work on several cores at once.

NumPy's elementwise functions (``np.exp``, ``np.multiply``, ...) run on one core, while its
matrix products run on all of them through the BLAS library. Attention alternates between the
two, so for half its time one core idles. :func:`parallel_map` runs independent pieces of work
(the heads of attention) in threads, one per core; NumPy releases Python's lock inside both its
elementwise loops and its matrix products, so the threads run at the same time.

Inside those threads the BLAS library must not start threads of its own (two threads each
asking BLAS for two would put four on two cores). :func:`blas_threads` limits BLAS's threads for
the duration of a ``with`` block and restores the previous number on exit, also after an
exception. The number is the BLAS library's own, for the whole process (OpenBLAS, which NumPy's
wheels ship, keeps one count for all threads: its ``openblas_set_num_threads_local`` sets that
count too), so the blocks are serialised by a lock, and while one is open BLAS calls from other
Python threads run on one thread as well; nothing outlives the block. Without OpenBLAS it does
nothing and :data:`BLAS_THREAD_CONTROL` is False: the results are the same, only slower when
the threads oversubscribe the cores. The library is looked for on first use, not when the
package is imported.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import ctypes
import functools
import os
import sys
import threading

__all__ = ["BLAS_THREAD_CONTROL", "blas_thread_count", "blas_threads", "cores", "parallel_map",  # noqa: F822 (module __getattr__)
           "set_blas_thread_count", "shares"]


def openblas_libraries() -> list:
    """The OpenBLAS libraries NumPy loaded, as ``ctypes.CDLL`` handles (the same libraries, not
    second copies); empty off Linux or without OpenBLAS."""
    import numpy as np

    np.dot(np.ones((2, 2)), np.ones((2, 2)))  # make sure BLAS is loaded
    try:
        with open("/proc/self/maps") as maps:  # the shared libraries this process has loaded
            paths = {line.split()[-1] for line in maps if "openblas" in line.lower()}
    except OSError:  # not Linux
        return []
    libraries = []
    for path in sorted(paths):
        try:
            libraries.append(ctypes.CDLL(path))
        except OSError:
            continue
    return libraries


def _find_controls():
    """``(set, get)`` of the OpenBLAS NumPy loaded, or ``(None, None)``.

    ``set`` is ``openblas_set_num_threads_local``, which sets OpenBLAS's thread count and
    returns the previous one (OpenBLAS 0.3.27 and later); ``get`` reads the count
    (``openblas_get_num_threads``, with the symbol prefix of NumPy's wheels when it has one).
    """
    for library in openblas_libraries():
        setter = getattr(library, "openblas_set_num_threads_local", None)
        getters = [getattr(library, name, None) for name in (
            "scipy_openblas_get_num_threads64_", "scipy_openblas_get_num_threads",
            "openblas_get_num_threads")]
        getter = next((g for g in getters if g is not None), None)
        if setter is not None and getter is not None:
            setter.argtypes, setter.restype = [ctypes.c_int], ctypes.c_int
            getter.argtypes, getter.restype = [], ctypes.c_int
            return setter, getter
    return None, None


@functools.cache
def _controls():
    """:func:`_find_controls`, on first use (not when the package is imported)."""
    return _find_controls()


def __getattr__(name):
    # BLAS_THREAD_CONTROL: whether blas_threads can set the number of threads BLAS uses,
    # found out when first asked (the probe loads BLAS and reads the process's libraries).
    if name == "BLAS_THREAD_CONTROL":
        return _controls()[0] is not None
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def set_blas_thread_count(n: int) -> None:
    """Let BLAS use ``n`` threads from now on (nothing without OpenBLAS): for a process that
    shares the machine with others, such as a test worker. :func:`blas_threads` restores
    whatever count was set here."""
    setter, _ = _controls()
    if setter is not None:
        setter(int(n))


_BLAS_LOCK = threading.RLock()


@contextlib.contextmanager
def blas_threads(n: int):
    """Within the block, BLAS uses at most ``n`` threads; the previous number is restored.

    One block at a time in the process (a lock); see the module for what that means for other
    threads. Without OpenBLAS this does nothing, nor in a thread of :func:`parallel_map`,
    where BLAS is on one thread already.
    """
    setter, _ = _controls()
    if setter is None or _in_worker():
        # The map's caller holds the lock while it waits for this thread: waiting for the
        # lock here would wait for ever.
        yield
        return
    with _BLAS_LOCK:
        previous = setter(int(n))
        try:
            yield
        finally:
            setter(previous)


def blas_thread_count() -> int | None:
    """The number of threads BLAS uses now, or None without OpenBLAS."""
    _, getter = _controls()
    return None if getter is None else int(getter())


def cores() -> int:
    """The number of cores this process may run on: 1 in a browser's Pyodide (the page's live
    cells), which cannot start threads, so :func:`parallel_map` runs there in its caller."""
    if sys.platform == "emscripten":
        return 1
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


_POOL = None
_POOL_LOCK = threading.Lock()
_WORKER_PREFIX = "scratchformer"


def _in_worker() -> bool:
    """Whether this thread is one of :func:`parallel_map`'s."""
    return threading.current_thread().name.startswith(_WORKER_PREFIX)


def _pool(workers: int) -> concurrent.futures.ThreadPoolExecutor:
    """One pool for the process, created on first use (threads are started once)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None or _POOL._max_workers < workers:
            _POOL = concurrent.futures.ThreadPoolExecutor(
                max_workers=workers, thread_name_prefix=_WORKER_PREFIX)
        return _POOL


def shares(items, workers: int | None = None) -> list[list]:
    """``items`` dealt round robin into one share per worker (similar amounts each).

    ``workers`` defaults to as many as BLAS would use: one per core unless
    ``OPENBLAS_NUM_THREADS`` or the like says less; never more than there are items.
    """
    items = list(items)
    if workers is None:
        workers = min(cores(), blas_thread_count() or cores())
    workers = max(1, min(workers, len(items)))
    return [items[i::workers] for i in range(workers)]


def parallel_map(function, items, workers: int | None = None):
    """``[function(item) for item in items]``, the items shared among threads.

    ``workers`` threads (default as in :func:`shares`) each take a share of the items, with
    BLAS limited to one thread meanwhile (:func:`blas_threads`). With one worker, or when
    called from inside one of these threads, everything runs in the calling thread. The first
    exception raised by ``function`` is raised here, after every thread has stopped.
    """
    items = list(items)
    dealt = shares(items, workers)
    if len(dealt) <= 1 or _in_worker():
        return [function(item) for item in items]

    def run(share):
        return [function(item) for item in share]

    with blas_threads(1):
        futures = [_pool(len(dealt)).submit(run, share) for share in dealt]
        concurrent.futures.wait(futures)
    results = [future.result() for future in futures]  # raises the first exception
    ordered = [None] * len(items)
    for i, share in enumerate(results):
        ordered[i::len(dealt)] = share
    return ordered
