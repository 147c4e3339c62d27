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
from pathlib import Path

__all__ = ["interleaved_medians", "interleaved_times", "largest_cache_bytes", "peak_allocated"]


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


# Where Linux describes the caches of the first processor: one index* folder per cache, its
# size written as, for example, "32K" or "32768K".
CPU_CACHES = Path("/sys/devices/system/cpu/cpu0/cache")
_UNITS = {"K": 2**10, "M": 2**20, "G": 2**30}


def largest_cache_bytes(caches: Path = CPU_CACHES) -> int | None:
    """The size in bytes of the largest cache the operating system reports for the first
    processor (on Linux, ``/sys/devices/system/cpu/cpu0/cache``), or ``None`` when it reports
    none that can be read (another system, or no such files)."""
    sizes = []
    for entry in sorted(Path(caches).glob("index*/size")):
        try:
            text = entry.read_text().strip()
        except OSError:
            continue
        number, unit = (text[:-1], text[-1]) if text[-1:] in _UNITS else (text, "")
        if number.isdigit():
            sizes.append(int(number) * _UNITS.get(unit, 1))
    return max(sizes) if sizes else None
