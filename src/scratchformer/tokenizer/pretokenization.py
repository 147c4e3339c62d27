"""Pre-tokenization: cutting a text into chunks that no merge crosses, as GPT-2 and SmolLM2 do.

GPT-2's regular expression (:data:`GPT2_PATTERN`) and SmolLM2's (:data:`SMOLLM_PATTERNS`) are
written for the third-party ``regex`` module; :func:`pretokenizer` rewrites them for the
standard library's ``re``, building Unicode's letter and number classes from ``unicodedata``,
and :func:`pretokenize` cuts a text with them. Here too: the special tokens, which a text is
cut at first and which are never merged (:data:`ENDOFTEXT`, GPT-2's one), and
:func:`bytes_to_unicode`, GPT-2's table that spells every byte as a printable character, the
alphabet of its files.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable

__all__ = ["GPT2_PATTERN", "SMOLLM_PATTERNS", "ENDOFTEXT", "bytes_to_unicode", "pretokenizer",
           "pretokenize"]

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

# Unicode's White_Space property: what ``\s`` means in the ``regex`` module GPT-2 used and in
# Hugging Face's tokenizers. Python's ``re`` adds U+001C to U+001F (the information separators,
# which ``str.isspace`` counts), so the pattern spells its whitespace out instead of using \s.
_WHITE_SPACE = ((0x09, 0x0D), (0x20, 0x20), (0x85, 0x85), (0xA0, 0xA0), (0x1680, 0x1680),
                (0x2000, 0x200A), (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F),
                (0x3000, 0x3000))


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
