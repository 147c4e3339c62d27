"""Training: learning the merges from a text, incrementally and by the textbook loop.

Both trainers cut the text the same way (``_training_setup``: special tokens out, then
pre-token chunks) and learn the same merges; both return them in rank order, with the special
tokens, for :meth:`BPE.train <scratchformer.tokenizer.BPE.train>` and
:func:`~scratchformer.tokenizer.train_naive` to make the tokenizer of. ``_merge``, one
merge applied to one chunk, is shared with encoding. This module knows nothing of the class
(:mod:`~scratchformer.tokenizer.bpe` imports it), so the package's modules import one another
without a cycle.
"""

from __future__ import annotations

import collections
import heapq

from .._validation import non_negative_int
from .pretokenization import (
    _check_pattern,
    _check_specials,
    _check_text,
    _special_splitter,
    pretokenizer,
)

__all__: list[str] = []


def _training_setup(text, vocab_size, special_tokens,
                    pattern) -> tuple[list[str], int, tuple[str, ...]]:
    """The chunks of ``text`` (special tokens cut out), the number of merges, the specials."""
    text = _check_text(text)
    pattern = pretokenizer(_check_pattern(pattern))
    vocab_size = non_negative_int(vocab_size, "vocab_size")
    specials = _check_specials(special_tokens)
    n_merges = vocab_size - 256 - len(specials)
    if n_merges < 0:
        raise ValueError(f"vocab_size must be at least 256 (the bytes) + {len(specials)} (the "
                         f"special tokens) = {256 + len(specials)}, got {vocab_size}")
    splitter = _special_splitter(specials)
    pieces = splitter.split(text)[::2] if splitter else [text]  # the text between specials
    chunks = [chunk for piece in pieces for chunk in pattern.findall(piece)]
    return chunks, n_merges, specials


def _merge(ids: list[int], pair: tuple[int, int], new: int) -> list[int]:
    """``ids`` with every occurrence of ``pair`` replaced by ``new``, left to right."""
    a, b = pair
    out: list[int] = []
    i, n = 0, len(ids)
    while i < n:
        if ids[i] == a and i + 1 < n and ids[i + 1] == b:
            out.append(new)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def _naive_merges(text, vocab_size, special_tokens,
                  pattern) -> tuple[list[tuple[int, int]], tuple[str, ...]]:
    """The algorithm of :func:`train_naive`: the merges in rank order, and the special tokens."""
    chunks, n_merges, specials = _training_setup(text, vocab_size, special_tokens, pattern)
    words = [list(chunk.encode("utf-8")) for chunk in chunks]
    merges = []
    for rank in range(n_merges):
        counts: dict[tuple[int, int], int] = {}
        for ids in words:
            for pair in zip(ids, ids[1:]):
                counts[pair] = counts.get(pair, 0) + 1
        if not counts:
            break
        best = min(counts, key=lambda pair: (-counts[pair], pair))  # most frequent, then least
        words = [_merge(ids, best, 256 + rank) for ids in words]
        merges.append(best)
    return merges, specials


def _incremental_merges(text, vocab_size, special_tokens,
                        pattern) -> tuple[list[tuple[int, int]], tuple[str, ...]]:
    """The algorithm of :meth:`BPE.train`: the merges in rank order, and the special tokens."""
    chunks, n_merges, specials = _training_setup(text, vocab_size, special_tokens, pattern)
    frequency = collections.Counter(chunks)
    words = [list(chunk.encode("utf-8")) for chunk in frequency]
    counts_of_words = list(frequency.values())
    counts: collections.defaultdict[tuple[int, int], int] = collections.defaultdict(int)
    where: collections.defaultdict[tuple[int, int], set[int]] = (
        collections.defaultdict(set))  # pair -> the words that may contain it
    for w, (ids, count) in enumerate(zip(words, counts_of_words)):
        for pair in zip(ids, ids[1:]):
            counts[pair] += count
            where[pair].add(w)
    heap = [(-count, a, b) for (a, b), count in counts.items()]  # least = most frequent
    heapq.heapify(heap)
    merges = []
    while len(merges) < n_merges:
        while heap and counts.get(heap[0][1:], 0) != -heap[0][0]:
            heapq.heappop(heap)  # stale: the pair's count has changed since
        if not heap:
            break
        _, a, b = heapq.heappop(heap)
        pair, new = (a, b), 256 + len(merges)
        merges.append(pair)
        change: collections.defaultdict[tuple[int, int], int] = (
            collections.defaultdict(int))
        for w in where.pop(pair):
            ids = words[w]
            merged = _merge(ids, pair, new)
            if len(merged) == len(ids):
                continue  # the word lost the pair to an earlier merge
            count = counts_of_words[w]
            for old in zip(ids, ids[1:]):
                change[old] -= count
            for fresh in zip(merged, merged[1:]):
                change[fresh] += count
                where[fresh].add(w)
            words[w] = merged
        for changed, delta in change.items():
            if delta:
                total = counts[changed] + delta
                if total:
                    counts[changed] = total
                    heapq.heappush(heap, (-total, *changed))
                else:
                    del counts[changed]
                    where.pop(changed, None)
    return merges, specials
