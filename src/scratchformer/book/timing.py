"""Timing for the benchmarks: medians of runs interleaved in one process.

Speeds are only comparable when measured together: the same machine, the same moment, the same
thermal and cache state. Each round runs every candidate once, in an order rotated from round
to round so that no candidate always follows the same neighbour; the result is each
candidate's median time. Used by ``benchmarks/`` and by the appendix "Speed" of the book.
"""

from __future__ import annotations

import statistics
import time
import tracemalloc
from collections.abc import Callable

__all__ = ["interleaved_medians", "interleaved_times", "peak_allocated"]


def interleaved_times(candidates: dict[str, Callable[[], object]], *, repeats: int = 5,
                      warmup: int = 1) -> dict[str, list[float]]:
    """Wall-clock seconds of every timed round of each candidate, in interleaved rounds.

    Parameters
    ----------
    candidates : dict of str to callable
        Functions of no arguments; their results are discarded.
    repeats : int, default 5
        Timed rounds (at least 1).
    warmup : int, default 1
        Untimed rounds first (caches, lazy initialisation, thread pools).

    Returns
    -------
    dict of str to list of float
        For each candidate, in the order of ``candidates``, its ``repeats`` times in seconds,
        one per round, in the order of the rounds. Their spread (``min`` to ``max``) shows how
        much one measurement on this machine can be trusted.
    """
    if repeats < 1 or warmup < 0:
        raise ValueError(f"need repeats >= 1 and warmup >= 0, got {repeats}, {warmup}")
    if not candidates:
        raise ValueError("no candidates to time")
    items = list(candidates.items())
    for _ in range(warmup):
        for _, run in items:
            run()
    times = {name: [] for name, _ in items}
    for round_ in range(repeats):
        shift = round_ % len(items)
        for name, run in items[shift:] + items[:shift]:
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    return times


def interleaved_medians(candidates: dict[str, Callable[[], object]], *, repeats: int = 5,
                        warmup: int = 1) -> dict[str, float]:
    """Median wall-clock seconds of each candidate, timed in interleaved rounds.

    The medians of :func:`interleaved_times` (same parameters).

    Returns
    -------
    dict of str to float
        Median seconds per call, in the order of ``candidates``.
    """
    times = interleaved_times(candidates, repeats=repeats, warmup=warmup)
    return {name: statistics.median(seconds) for name, seconds in times.items()}


def peak_allocated(run: Callable[[], object]) -> tuple[int, object]:
    """Peak bytes allocated while ``run()`` executes, above what was allocated before.

    Measured with ``tracemalloc``, which sees NumPy's array buffers as well as Python
    objects. The peak includes the result if it is newly allocated.

    Returns
    -------
    peak : int
        Bytes.
    result : object
        What ``run()`` returned (so that it is not freed before the measurement ends).
    """
    already = tracemalloc.is_tracing()
    if not already:
        tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before, _ = tracemalloc.get_traced_memory()
        result = run()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        if not already:
            tracemalloc.stop()
    return peak - before, result
