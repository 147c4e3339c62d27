"""Tests for scratchformer.book.timing (what is measured, not how fast anything is)."""

from __future__ import annotations

import pytest

from scratchformer.book.timing import interleaved_medians


def test_every_candidate_runs_warmup_plus_repeats_times_in_rotating_order():
    calls = []
    candidates = {name: (lambda name=name: calls.append(name)) for name in "abc"}
    medians = interleaved_medians(candidates, repeats=3, warmup=1)
    assert list(medians) == ["a", "b", "c"] and all(t >= 0 for t in medians.values())
    assert calls == list("abc") + list("abc") + list("bca") + list("cab")


class FakeClock:
    """A stand-in for the module ``time`` inside scratchformer.book.timing: its perf_counter
    moves only when a candidate says it took time, so no test depends on the machine's load."""

    def __init__(self):
        self.now = 0.0

    def perf_counter(self):
        return self.now

    def take(self, seconds):
        self.now += seconds


@pytest.fixture
def clock(monkeypatch):
    from scratchformer.book import timing

    fake = FakeClock()
    monkeypatch.setattr(timing, "time", fake)
    return fake


def test_the_median_ignores_one_slow_round(clock):
    state = {"round": 0}

    def sometimes_slow():
        state["round"] += 1
        clock.take(0.2 if state["round"] == 2 else 0.001)

    medians = interleaved_medians({"f": sometimes_slow}, repeats=5, warmup=0)
    assert medians["f"] == pytest.approx(0.001)


@pytest.mark.parametrize("kwargs", [{"repeats": 0}, {"warmup": -1}])
def test_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        interleaved_medians({"f": lambda: None}, **kwargs)
    with pytest.raises(ValueError, match="no candidates"):
        interleaved_medians({})


def test_peak_allocated_sees_numpy_buffers():
    import numpy as np

    from scratchformer.book.timing import peak_allocated

    def temporary_then_small():
        big = np.ones(1_000_000)  # 8 MB, freed before returning
        return big[:10].copy()

    peak, result = peak_allocated(temporary_then_small)
    assert 8_000_000 <= peak < 9_000_000
    assert result.shape == (10,)


def test_interleaved_times_keeps_every_round_and_the_medians_are_theirs(clock):
    from scratchformer.book.timing import interleaved_times

    state = {"round": 0}

    def slower_each_round():
        state["round"] += 1
        clock.take(0.01 * state["round"])

    times = interleaved_times({"f": slower_each_round, "g": lambda: None}, repeats=3, warmup=1)
    assert list(times) == ["f", "g"] and [len(t) for t in times.values()] == [3, 3]
    # Rounds 2, 3, 4 of f are timed (round 1 is the warm-up), in order; g takes no time.
    assert times["f"] == pytest.approx([0.02, 0.03, 0.04]) and times["g"] == [0.0] * 3
    with pytest.raises(ValueError, match="repeats"):
        interleaved_times({"f": lambda: None}, repeats=0)
    state["round"] = 0
    medians = interleaved_medians({"f": slower_each_round}, repeats=3, warmup=1)
    assert medians["f"] == pytest.approx(0.03)  # the median of 0.02, 0.03, 0.04


def test_the_largest_cache_is_read_from_the_system_s_description(tmp_path):
    from scratchformer.book.timing import largest_cache_bytes

    for index, size in enumerate(["32K", "1024K", "32768K", "junk"]):
        (tmp_path / f"index{index}").mkdir()
        (tmp_path / f"index{index}" / "size").write_text(size + "\n")
    assert largest_cache_bytes(tmp_path) == 32 * 2**20
    (tmp_path / "index4").mkdir()
    (tmp_path / "index4" / "size").write_text("2M\n")
    assert largest_cache_bytes(tmp_path) == 32 * 2**20
    assert largest_cache_bytes(tmp_path / "absent") is None
    empty = tmp_path / "empty" / "index0"
    empty.mkdir(parents=True)
    (empty / "size").write_text("\n")
    assert largest_cache_bytes(tmp_path / "empty") is None
