"""scratchformer.tokenizer: GPT-2's byte table and pre-tokenizer, BPE training worked by hand,
the fast trainer against the textbook loop, round trips for every string, and the errors.

GPT-2 itself (its files, against Hugging Face's tokenizer) is tests/test_tokenizer_gpt2.py.
"""

from __future__ import annotations

import json
import unicodedata

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from conftest import examples
from scratchformer import tokenizer as tk
from scratchformer.tokenizer import BPE, ENDOFTEXT

A, B, C, D, SPACE = b"abcd "  # the byte values 97, 98, 99, 100 and 32

TRAINING_TEXT = """\
The quick brown fox jumps over the lazy dog. It's 2024, and the dog's 3 friends don't care.
Ünïcödé, naïve café, 東京, Москва, emoji 🙂🙂 and tabs\tand  double  spaces.
<|endoftext|>A second document: numbers 12345 and 3.14159, and the end.
"""


@pytest.fixture(scope="module")
def trained():
    return BPE.train(TRAINING_TEXT * 3, 256 + 60 + 1)


# --- the byte table --------------------------------------------------------------------------

def test_bytes_to_unicode_from_its_definition():
    table = tk.bytes_to_unicode()
    assert sorted(table) == list(range(256))
    assert len(set(table.values())) == 256 and all(len(c) == 1 for c in table.values())
    printable = set(range(33, 127)) | set(range(161, 173)) | set(range(174, 256))
    assert len(printable) == 188
    assert all(table[b] == chr(b) for b in printable)
    # The other 68 in increasing order: 0..32 are 256..288, 127..160 are 289..322, 173 is 323.
    assert [ord(table[b]) for b in range(33)] == list(range(256, 289))
    assert [ord(table[b]) for b in range(127, 161)] == list(range(289, 323))
    assert table[173] == chr(323)
    assert table[32] == "Ġ" and table[10] == "Ċ"  # the marks GPT-2's tokens show
    assert all(c.isprintable() and not c.isspace() for c in table.values())


# --- the pre-tokenizer -----------------------------------------------------------------------

# Each expected split follows from the pattern's alternatives, tried in order at each position:
# contractions, " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+", "\s+(?!\S)", "\s+".
PRETOKENIZED = [
    ("", []),
    ("hello world", ["hello", " world"]),
    ("I don't", ["I", " don", "'t"]),
    ("we'll they're I've I'm he'd it's", ["we", "'ll", " they", "'re", " I", "'ve", " I", "'m",
                                         " he", "'d", " it", "'s"]),
    ("DON'T", ["DON", "'", "T"]),  # the contractions are lower case only
    ("  hello", [" ", " hello"]),  # \s+(?!\S) leaves the space before the word to the word
    ("a   b", ["a", "  ", " b"]),
    ("hi  ", ["hi", "  "]),  # trailing whitespace: \s+(?!\S) at the end
    ("Hello\n\n  world", ["Hello", "\n\n ", " world"]),
    ("tab\there", ["tab", "\t", "here"]),  # only a space (U+0020) joins the next chunk
    ("x²", ["x", "²"]),  # ² is a number (No), not a letter
    ("²3½", ["²3½"]),  # No, Nd, No: one run of numbers
    ("café", ["café"]),  # é (U+00E9) is a letter (Ll)
    ("cafe\u0301", ["cafe", "\u0301"]),  # a combining acute (Mn) is neither letter nor number
    ("snake_case", ["snake", "_", "case"]),  # _ (Pc) is neither
    ("3.14", ["3", ".", "14"]),
    ("1234567", ["1234567"]),  # GPT-2 does not cut runs of digits
    ("abc123", ["abc", "123"]),
    (" !!! ?", [" !!!", " ?"]),
    ("東京 タワー", ["東京", " タワー"]),  # Lo
    ("🙂🙂 ok", ["🙂🙂", " ok"]),  # So: a symbol run
    ("a\u00a0b", ["a", "\u00a0", "b"]),  # no-break space is White_Space, and not " "
    ("\u3000hi", ["\u3000", "hi"]),
    ("!\x1c!", ["!\x1c!"]),  # U+001C is not White_Space (re's \s would take it)
    ("<|endoftext|>", ["<|", "endoftext", "|>"]),
]


@pytest.mark.parametrize("text, chunks", PRETOKENIZED, ids=[repr(t) for t, _ in PRETOKENIZED])
def test_pretokenize_follows_gpt2s_pattern(text, chunks):
    assert tk.pretokenize(text) == chunks


def test_letter_and_number_classes_are_the_unicode_categories():
    pattern = tk.pretokenizer()
    for c in [*range(0, 0x3000), *range(0x1F000, 0x1F700), 0x10FFFF]:
        ch = chr(c)
        category = unicodedata.category(ch)
        if category == "Cs":
            continue
        letter, number = bool(pattern.fullmatch("a" + ch)), bool(pattern.fullmatch("1" + ch))
        assert letter == category.startswith("L"), (hex(c), category)
        assert number == category.startswith("N"), (hex(c), category)


@given(st.text(st.characters(codec="utf-8")))
@example("  \n\t  x  y\r\n\u2028 ")
def test_pretokenize_chunks_concatenate_back(text):
    chunks = tk.pretokenize(text)
    assert "".join(chunks) == text
    assert all(chunks)


# --- training, worked by hand ----------------------------------------------------------------

def test_training_worked_by_hand():
    # "aaabdaaabac" (Gage 1994, and Wikipedia's example) is one chunk: all letters. Its pairs,
    # counted at every position: (a,a) 4 times, (a,b) 2, (b,d) (d,a) (b,a) (a,c) once each.
    #   merge 0: (a,a) -> 256 "aa":        aa a b d aa a b a c
    #     (aa,a) 2, (a,b) 2, the rest once; the tie goes to the smaller pair, (97,98) < (256,97)
    #   merge 1: (a,b) -> 257 "ab":        aa ab d aa ab a c
    #   merge 2: (aa,ab) -> 258 "aaab":    aaab d aaab a c       ((256,257) is the only 2)
    #     four pairs, once each: (258,100) (100,258) (258,97) (97,99); the least is (97,99)
    #   merge 3: (a,c) -> 259 "ac":        aaab d aaab ac
    #     (258,100) (100,258) (258,259): the least is (100,258)
    #   merge 4: (d,aaab) -> 260 "daaab":  aaab daaab ac
    #   merge 5: (aaab,daaab) -> 261:      aaabdaaab ac           ((258,260) < (260,259))
    #   merge 6: (261,ac) -> 262:          aaabdaaabac, one token: no pair left, training stops
    expected = [(A, A), (A, B), (256, 257), (A, C), (D, 258), (258, 260), (261, 259)]
    for train in (BPE.train, tk.train_naive):
        bpe = train("aaabdaaabac", 300, special_tokens=())
        assert bpe.merges == expected
        assert bpe.vocab_size == 256 + 7  # stopped early: fewer merges than asked
        assert [bpe.token_bytes(256 + r) for r in range(7)] == [
            b"aa", b"ab", b"aaab", b"ac", b"daaab", b"aaabdaaab", b"aaabdaaabac"]
        assert bpe.encode("aaabdaaabac").tolist() == [262]
        assert bpe.encode("aaab aaaa").tolist() == [258, SPACE, 256, 256]  # " aaaa" is a chunk


def test_merges_never_cross_chunk_boundaries():
    # "a b a b a b" is the chunks a, " b", " a", " b", " a", " b": the pairs are (" ", b) 3 times
    # and (" ", a) twice, and (a, " ") or (b, " ") never, though they are adjacent in the text.
    bpe = BPE.train("a b a b a b", 300, special_tokens=())
    assert bpe.merges == [(SPACE, B), (SPACE, A)]
    assert bpe.encode("a b a").tolist() == [A, 256, 257]


def test_ties_go_to_the_smallest_pair_of_ids():
    # the chunks "dc", "." and "ba": the pairs (100,99) and (98,97) tie; (98,97) is the smaller
    assert BPE.train("dc.ba", 257, special_tokens=()).merges == [(B, A)]
    assert BPE.train("ba.dc", 257, special_tokens=()).merges == [(B, A)]
    # (97,99) and (97,98) once each: the first ids tie, the second decides
    assert BPE.train("ac.ab", 257, special_tokens=()).merges == [(A, B)]


def test_ids_of_a_trained_tokenizer(trained):
    assert trained.vocab_size == 256 + 60 + 1 == len(trained.vocab)
    assert trained.special_tokens == {ENDOFTEXT: 316}
    assert trained.byte_ids == list(range(256))
    assert trained.merged_ids == list(range(256, 316))
    for rank, (a, b) in enumerate(trained.merges):
        assert trained.token_bytes(256 + rank) == trained.token_bytes(a) + trained.token_bytes(b)
        assert a < 256 + rank and b < 256 + rank
    assert trained.vocab[316] == ENDOFTEXT.encode()
    assert repr(trained) == "BPE(vocab_size=317, merges=60, special_tokens=['<|endoftext|>'])"


# --- the fast trainer learns what the textbook loop learns -----------------------------------

def test_fast_and_naive_agree_on_a_fixed_text():
    for size in (257, 300, 400):
        assert BPE.train(TRAINING_TEXT, size).merges == tk.train_naive(TRAINING_TEXT, size).merges


@examples(150)
@given(st.text("ab c'\n1é🙂", max_size=80), st.integers(257, 320))
@example("aaaa aaaa aa", 270)
@example("ab ab ba ba", 270)
def test_fast_and_naive_agree_on_small_texts(text, vocab_size):
    fast, naive = BPE.train(text, vocab_size), tk.train_naive(text, vocab_size)
    assert fast.merges == naive.merges
    assert fast.vocab == naive.vocab


@examples(60)
@given(st.lists(st.text(st.characters(codec="utf-8"), max_size=20) | st.just(ENDOFTEXT),
                max_size=8).map("".join),
       st.integers(257, 300))
def test_fast_and_naive_agree_on_any_text(text, vocab_size):
    assert BPE.train(text, vocab_size).merges == tk.train_naive(text, vocab_size).merges


# --- special tokens --------------------------------------------------------------------------

def test_special_tokens_are_atomic_and_never_merged():
    text = "ab<|endoftext|>ab<|endoftext|>ab<|endoftext|>" * 5
    bpe = BPE.train(text, 400, special_tokens=("<|endoftext|>", "<|pad|>"))
    # only "ab" is ever merged: the special tokens' bytes are cut out of the training text
    assert bpe.merges == [(A, B)]
    assert bpe.special_tokens == {"<|endoftext|>": 257, "<|pad|>": 258}
    ids = bpe.encode("ab<|endoftext|><|pad|>ab").tolist()
    assert ids == [256, 257, 258, 256]
    assert bpe.encode("<|endoftext|>", allowed_special={"<|pad|>"}).tolist() == list(
        b"<|endoftext|>")
    assert bpe.encode("<|pad|>", allowed_special="none").tolist() == list(b"<|pad|>")
    assert bpe.decode(ids) == "ab<|endoftext|><|pad|>ab"


def test_longer_special_tokens_win():
    bpe = BPE(merges=[], special_tokens=("<|a|>", "<|a|><|b|>"))
    assert bpe.encode("<|a|><|b|><|a|>").tolist() == [257, 256]


# --- encoding and decoding -------------------------------------------------------------------

unicode_text = st.text(st.characters(codec="utf-8"))
whitespace_runs = st.text(" \t\n\r\x0b\x0c\u00a0\u2028\u3000x", max_size=30)
emoji = st.lists(st.sampled_from(["🙂", "👍🏽", "👨\u200d👩\u200d👧", "🇩🇪", "é", "e\u0301", " "]),
                 max_size=20).map("".join)


@examples(300)
@given(unicode_text | whitespace_runs | emoji)
@example("")
@example(TRAINING_TEXT)
@example("<|endoftext|><|endoftext|> <|endoftext")
def test_decode_encode_round_trip(trained, text):
    for allowed in ("all", "none"):
        ids = trained.encode(text, allowed_special=allowed)
        assert ids.dtype == np.int64 and ids.ndim == 1
        assert trained.decode(ids) == text
        assert trained.decode_bytes(ids) == text.encode("utf-8")


@examples(100)
@given(unicode_text)
def test_token_boundaries_include_every_chunk_boundary(trained, text):
    ids = trained.encode(text, allowed_special="none")
    ends = np.cumsum([len(trained.token_bytes(i)) for i in ids.tolist()])
    chunk_ends = np.cumsum([len(chunk.encode()) for chunk in tk.pretokenize(text)])
    assert set(chunk_ends.tolist()) <= set(ends.tolist())


def test_encode_returns_int64(trained):
    for text in ("", "the dog", "🙂"):
        ids = trained.encode(text)
        assert isinstance(ids, np.ndarray) and ids.dtype == np.int64 and ids.shape[0] <= len(
            text.encode())
    assert trained.encode("").shape == (0,)


def in_training_order(bpe, chunk):
    """A chunk's bytes with merge 0 applied everywhere, then merge 1, ...: what training did."""
    ids = list(chunk.encode("utf-8"))
    for rank, (a, b) in enumerate(bpe.merges):
        merged, i = [], 0
        while i < len(ids):
            if ids[i : i + 2] == [a, b]:
                merged.append(256 + rank)
                i += 2
            else:
                merged.append(ids[i])
                i += 1
        ids = merged
    return ids


@examples(100)
@given(unicode_text)
@example(TRAINING_TEXT)
def test_encoding_by_rank_is_merging_in_training_order(trained, text):
    # Encoding merges the pair of lowest rank present first, as GPT-2 does; a merge only makes
    # pairs with its new token (of higher rank), so this is the training's order, merge by merge.
    expected = [i for chunk in tk.pretokenize(text) for i in in_training_order(trained, chunk)]
    assert trained.encode(text, allowed_special="none").tolist() == expected
    assert trained.encode(text, allowed_special="none").tolist() == expected  # from the cache


def test_a_prefix_of_ids_may_split_a_character():
    bpe = BPE([])  # bytes only: "é" is two tokens, 0xC3 0xA9
    ids = bpe.encode("é")
    assert ids.tolist() == [0xC3, 0xA9]
    assert bpe.decode(ids[:1]) == "\ufffd"
    assert bpe.decode_bytes(ids[:1]) == b"\xc3"
    assert bpe.decode(np.array([], dtype=np.int64)) == "" and bpe.decode([]) == ""


def test_save_and_load(trained, tmp_path):
    path = tmp_path / "bpe.json"
    trained.save(path)
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["format"] == "scratchformer.tokenizer.BPE" and data["version"] == 1
    assert data["merges"][0] == [*trained.merges[0], 256]
    loaded = BPE.load(path)
    assert loaded.merges == trained.merges and loaded.vocab == trained.vocab
    assert loaded.special_tokens == trained.special_tokens
    assert np.array_equal(loaded.encode(TRAINING_TEXT), trained.encode(TRAINING_TEXT))
    path.write_text('{"format": "something else"}', encoding="utf-8")
    with pytest.raises(ValueError, match="not a tokenizer saved by BPE.save"):
        BPE.load(path)
    data["byte_ids"] = 7  # not a list: named with the path, as the other malformed fields
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ValueError, match="bpe.json: 'byte_ids' must be a list of 256 ids, "
                                         "got int"):
        BPE.load(path)


# --- bad input -------------------------------------------------------------------------------

def test_bad_training_arguments():
    with pytest.raises(ValueError, match=r"at least 256 \(the bytes\) \+ 1 .* = 257, got 256"):
        BPE.train("text", 256)
    with pytest.raises(ValueError, match="= 258, got 257"):
        tk.train_naive("text", 257, special_tokens=("<a>", "<b>"))
    with pytest.raises(TypeError, match="text must be a str, got bytes"):
        BPE.train(b"text", 300)
    with pytest.raises(TypeError, match="vocab_size must be a non-negative integer"):
        BPE.train("text", 300.0)
    with pytest.raises(TypeError, match="vocab_size must be a non-negative integer, got the bool"):
        BPE.train("text", True)
    with pytest.raises(TypeError, match="not one string"):
        BPE.train("text", 300, special_tokens="<|endoftext|>")
    with pytest.raises(ValueError, match="non-empty strings"):
        BPE.train("text", 300, special_tokens=("",))
    with pytest.raises(ValueError, match="distinct"):
        BPE.train("text", 300, special_tokens=("<s>", "<s>"))


def test_bad_encode_and_decode_arguments(trained):
    with pytest.raises(TypeError, match="text must be a str, got int"):
        trained.encode(123)
    with pytest.raises(TypeError, match="text must be a str, got NoneType"):
        tk.pretokenize(None)
    with pytest.raises(ValueError, match="pattern must be 'gpt2'"):
        tk.pretokenize("x", pattern="gpt4")
    with pytest.raises(ValueError, match="no UTF-8 encoding"):
        trained.encode("a\ud800b")
    with pytest.raises(ValueError, match="'all', 'none' or a set"):
        trained.encode("x", allowed_special="some")
    with pytest.raises(ValueError, match=r"\['<\|unknown\|>'\], which are not special tokens"):
        trained.encode("x", allowed_special={"<|unknown|>"})
    with pytest.raises(ValueError, match="ids must run from 0 to 316, got 317 at position 1"):
        trained.decode([1, 317])
    with pytest.raises(ValueError, match="got -1 at position 0"):
        trained.decode_bytes(np.array([-1]))
    with pytest.raises(TypeError, match="ids must be integers, got an array of float64"):
        trained.decode([1.5])
    with pytest.raises(TypeError, match="ids must be integers, got an array of bool"):
        trained.decode(np.array([True]))
    with pytest.raises(TypeError, match="ids must be integers"):
        trained.decode("abc")
    with pytest.raises(ValueError, match=r"ids must be 1-D, got shape \(1, 2\)"):
        trained.decode([[1, 2]])
    with pytest.raises(ValueError, match="ids must be 1-D"):
        trained.decode(5)
    with pytest.raises(ValueError, match="ids must run from 0 to 316, got 2361183241434822606848"):
        trained.decode([1, 2**71])
    with pytest.raises(ValueError, match="ids must be a 1-D sequence"):
        trained.decode([[1], [1, 2]])
    with pytest.raises(ValueError, match="token must be an id from 0 to 316, got 317"):
        trained.token_bytes(317)
    with pytest.raises(TypeError, match="token must be a non-negative integer"):
        trained.token_bytes("a")


def test_bad_tokenizers_are_refused():
    with pytest.raises(ValueError, match="neither a byte nor made by an earlier merge"):
        BPE([(A, 257), (A, B)])
    with pytest.raises(ValueError, match="an id already taken"):
        BPE([(A, B)], merged_ids=[97])
    with pytest.raises(ValueError, match="256 ids, one per byte"):
        BPE([], byte_ids=range(255))
    with pytest.raises(ValueError, match="run from 0 to 256"):
        BPE([], {"<s>": 300})
    with pytest.raises(TypeError, match="pairs of ids"):
        BPE([1, 2])


def test_gpt2_format_in_miniature(tmp_path):
    # GPT-2's files for a tokenizer whose ids are the bytes' spelling order, one merge "a b"
    spelling = tk.bytes_to_unicode()
    ids = {spelling[b]: 255 - b for b in range(256)}  # not the byte values: read, not assumed
    encoder, merges = tmp_path / "encoder.json", tmp_path / "vocab.bpe"
    encoder.write_text(json.dumps({**ids, "ab": 256, "<|endoftext|>": 257}), encoding="utf-8")
    merges.write_text("#version: 0.2\na b\n", encoding="utf-8")
    bpe = BPE.from_gpt2(encoder, merges)
    assert bpe.merges == [(255 - A, 255 - B)] and bpe.merged_ids == [256]
    assert bpe.encode("abc<|endoftext|>").tolist() == [256, 255 - C, 257]
    assert bpe.decode([256, 255 - C, 257]) == "abc<|endoftext|>"

    merges.write_text("a b\n", encoding="utf-8")
    with pytest.raises(ValueError, match="must start with a '#version' line"):
        BPE.from_gpt2(encoder, merges)
    merges.write_text("#version: 0.2\na  b\n", encoding="utf-8")
    with pytest.raises(ValueError, match="line 2: a merge is two tokens and one space"):
        BPE.from_gpt2(encoder, merges)
    merges.write_text("#version: 0.2\nb c\n", encoding="utf-8")
    with pytest.raises(ValueError, match="line 2: the token 'bc' is not in"):
        BPE.from_gpt2(encoder, merges)
    encoder.write_text('{"a": 0}', encoding="utf-8")
    with pytest.raises(ValueError, match="byte 0: the token 'Ā' is not in"):
        BPE.from_gpt2(encoder, merges)
    encoder.write_text('["a"]', encoding="utf-8")
    with pytest.raises(ValueError, match="JSON object of token to integer id"):
        BPE.from_gpt2(encoder, merges)
