"""The bibliography reads as the chapters cite it, and links each work it can.

Plain HTML, no browser. The chapters cite by author and year ("Vaswani et al., 2017"); each entry
of the bibliography page must carry that same label, not alpha.bst's code ("[VSP+17]"), so that
a reader can find the work a citation names (``book/_ext/author_year_bibliography.py``). Every
entry of ``book/references.bib`` with an arXiv identifier (``eprint``) or a DOI links to it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from pybtex.database import parse_file

pytestmark = pytest.mark.site  # reads the built book in _build/html

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "_build" / "html"
BIB = parse_file(str(ROOT / "book" / "references.bib"))
PAGES = sorted(SITE.rglob("*.html")) if SITE.exists() else []


def text(element) -> str:
    return " ".join(element.get_text(" ").split()).replace(" ,", ",")


@pytest.fixture(scope="module")
def entries():
    """The bibliography page's entries: id to (label, entry element)."""
    path = SITE / "book" / "bibliography.html"
    if not path.exists():
        pytest.skip(f"no built site at {SITE}: run `make book` first (`make test` does)")
    document = BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")
    found = {}
    for entry in document.select("div.citation"):
        label = text(entry.select_one("span.label")).strip("[] ")
        found[entry["id"]] = (label, entry)
    return found


def citations():
    """Every citation in the book: (page, link text, id of the entry it links to)."""
    found = []
    for path in PAGES:
        document = BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")
        for link in document.select("span.bibtex-citation a[href*='bibliography.html#']"):
            found.append((path.name, text(link), link["href"].split("#")[1]))
    return found


def test_the_cited_works_are_listed(entries):
    """The page lists the works the chapters cite (which the citations below link to)."""
    assert 10 <= len(entries) <= len(BIB.entries)
    assert {target for _, _, target in citations()} <= set(entries)


def test_labels_read_as_the_citations(entries):
    found = citations()
    assert len(found) >= 10
    # A year-only citation ({cite:year}, after the authors named in the prose) gives the year.
    differ = [(page, cited, entries[target][0]) for page, cited, target in found
              if cited != entries[target][0]
              and not (cited.isdigit() and entries[target][0].endswith(f", {cited}"))]
    assert differ == [], "citations whose entry is labelled otherwise:\n" + "\n".join(
        f"  {page}: cited {cited!r}, listed as {label!r}" for page, cited, label in differ)


def test_labels_are_author_and_year(entries):
    pattern = re.compile(r"^\w[\w' -]*( and \w[\w' -]*| et al\.)?, \d{4}[a-z]?$")
    assert [label for label, _ in entries.values() if not pattern.match(label)] == []


def test_identifiers_are_links(entries):
    links = {a["href"] for _, entry in entries.values() for a in entry.select("a[href]")}
    expected = set()
    for entry in BIB.entries.values():
        if "eprint" in entry.fields:
            expected.add(f"https://arxiv.org/abs/{entry.fields['eprint']}")
        if "doi" in entry.fields:
            expected.add(f"https://doi.org/{entry.fields['doi']}")
    assert len(expected) >= 10
    assert expected - links == set()


def test_arxiv_preprints_carry_their_identifier():
    """An entry published as an arXiv preprint names it in ``eprint`` (which becomes a link)."""
    preprints = [key for key, entry in BIB.entries.items()
                 if "arxiv" in entry.fields.get("journal", "").lower()
                 and "eprint" not in entry.fields]
    assert preprints == []
