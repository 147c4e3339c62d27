"""tools/chapters.py: what a chapter needs, read from its front matter, and refused by name
when the front matter says something it does not know."""

from __future__ import annotations

import pytest
from tools import build_book, chapters, seed_sweep

HEADER = ("---\njupytext:\n  text_representation:\n    format_name: myst\n"
          "kernelspec:\n  name: python3\n{extra}---\n\n```{{code-cell}} ipython3\nx = 1\n```\n")


def page(tmp_path, extra: str, name: str = "page.md") -> str:
    (tmp_path / "book").mkdir(exist_ok=True)
    (tmp_path / "book" / name).write_text(HEADER.format(extra=extra))
    return f"book/{name}"


def test_a_chapter_that_says_nothing_needs_nothing(tmp_path):
    assert chapters.needs(page(tmp_path, ""), tmp_path) == {
        "seeded": False, "alone": False, "after": None}


def test_the_table_is_read(tmp_path):
    trainer = page(tmp_path, "", "trainer.md")
    name = page(tmp_path, f"scratchformer:\n  seeded: true\n  after: {trainer}\n")
    assert chapters.needs(name, tmp_path) == {"seeded": True, "alone": False, "after": trainer}


@pytest.mark.parametrize("extra, message", [
    ("scratchformer:\n  sedeed: true\n", "unknown key"),
    ("scratchformer:\n  seeded: 'yes'\n", "must be a bool"),
    ("scratchformer:\n  after: book/nowhere.md\n", "does not exist"),
    ("scratchformer: true\n", "must be a table"),
])
def test_what_it_does_not_know_is_refused_naming_the_chapter(tmp_path, extra, message):
    name = page(tmp_path, extra)
    with pytest.raises(ValueError, match=message) as error:
        chapters.needs(name, tmp_path)
    assert name in str(error.value)


def test_the_build_and_the_sweep_read_the_front_matter():
    """The lists the build and the sweep act on are the chapters' own words: the book's
    chapters that time code run alone, those that read another's run wait for it, and the
    training chapters are swept."""
    assert build_book.ALONE == chapters.alone() and "book/appendix_speed.md" in build_book.ALONE
    assert build_book.AFTER == chapters.after()
    assert build_book.AFTER["book/sampling.md"] == "book/language_modelling.md"
    assert seed_sweep.SEEDED_CHAPTERS == chapters.seeded()
    assert "book/training.md" in seed_sweep.SEEDED_CHAPTERS
    assert "book/scaling.md" not in seed_sweep.SEEDED_CHAPTERS
