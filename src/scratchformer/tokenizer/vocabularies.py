"""Other tokenizers' vocabularies: GPT-2's files, and the tokens and merges a GGUF file holds.

The algorithms of :meth:`BPE.from_gpt2 <scratchformer.tokenizer.BPE.from_gpt2>`,
:meth:`~scratchformer.tokenizer.BPE.from_vocabulary` and
:meth:`~scratchformer.tokenizer.BPE.from_gguf_metadata`, which document them: each takes the
class to make and gives the tokenizer, with the vocabulary's own ids.
"""

from __future__ import annotations

import json
from os import PathLike

import numpy as np

from .._validation import non_negative_int
from .pretokenization import ENDOFTEXT, _check_pattern, bytes_to_unicode

__all__: list[str] = []

# GGUF's token types (``tokenizer.ggml.token_type``, llama.cpp's ``llama_token_type``) that a
# byte-level BPE vocabulary holds: an ordinary token, and the two kinds matched whole in text.
_GGUF_NORMAL, _GGUF_CONTROL, _GGUF_USER_DEFINED = 1, 3, 4
# GGUF's ``tokenizer.ggml.pre`` names to this package's patterns (llama.cpp's llama-vocab.cpp).
_GGUF_PRE = {"gpt2": "gpt2", "smollm": "smollm"}


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


def _from_gpt2(cls, encoder_json_path, vocab_bpe_path):
    """:meth:`BPE.from_gpt2`: GPT-2's tokenizer, a ``cls``, from its two files."""
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


def _from_vocabulary(cls, tokens, merges, special_ids, pattern):
    """:meth:`BPE.from_vocabulary`: a ``cls`` from a vocabulary spelled as GPT-2's files."""
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


def _from_gguf_metadata(cls, metadata):
    """:meth:`BPE.from_gguf_metadata`: a ``cls`` from a GGUF file's tokenizer metadata."""
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
    for key, value in (("tokenizer.ggml.tokens", tokens), ("tokenizer.ggml.merges", merges),
                       ("tokenizer.ggml.token_type", get("tokenizer.ggml.token_type"))):
        if not isinstance(value, (list, tuple, np.ndarray)):
            raise TypeError(f"{key} must be a list, got {type(value).__name__}")
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
