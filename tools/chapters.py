"""What each chapter needs from the build, said once, in the chapter's own front matter.

A chapter's MyST header may hold a ``scratchformer`` table::

    scratchformer:
      seeded: true                         # its claims rest on runs that book_seed() draws
      alone: true                          # the build executes it alone, with every core
      after: book/language_modelling.md    # it reads a run that chapter trains

- ``seeded``: its claims rest on trained runs or random draws whose seed
  ``scratchformer.book.book_seed()`` chooses; ``tests/test_seeds.py`` and ``python -m
  tools.seed_sweep`` execute it with seeds 0 to 4.
- ``alone``: it times code and says what every core gives, so ``tools/build_book.py`` leaves it
  out of the parallel pass and the Sphinx build executes it alone, with BLAS's default threads.
- ``after``: it reads a run (``scratchformer.book.runs``) that the named chapter trains; the
  parallel pass starts it once that chapter is done.

What a chapter needs installed (PyTorch, the texts, SmolLM2's wheel) is not written down: the
notebooks' writer (``tools/notebooks.py``) reads it from the chapter's code. This module reads
the tables for the build, the seed sweep and the tests; a key it does not know, or a value of
the wrong kind, is an error that names the chapter.
"""

from __future__ import annotations

import functools
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
FIELD = "scratchformer"
#: The keys of the table and the type of each value.
KEYS = {"seeded": bool, "alone": bool, "after": str}


def front_matter(path: Path) -> dict:
    """The YAML header of a MyST file (``{}`` if it has none)."""
    text = Path(path).read_text()
    if not text.startswith("---\n"):
        return {}
    header, found, _ = text[4:].partition("\n---\n")
    if not found:
        raise ValueError(f"{path}: the front matter opened by '---' is never closed")
    return yaml.safe_load(header) or {}


@functools.cache
def needs(name: str, root: Path = ROOT) -> dict:
    """The chapter's ``scratchformer`` table (``name`` as ``book/training.md``), every key of
    :data:`KEYS` present (``False`` or ``None`` when the chapter does not say)."""
    table = front_matter(root / name).get(FIELD) or {}
    if not isinstance(table, dict):
        raise ValueError(f"{name}: the front matter's {FIELD!r} must be a table of "
                         f"{', '.join(KEYS)}, got {table!r}")
    unknown = set(table) - set(KEYS)
    if unknown:
        raise ValueError(f"{name}: unknown key(s) {sorted(unknown)} under {FIELD!r}; the "
                         f"known ones are {', '.join(KEYS)}")
    for key, value in table.items():
        if not isinstance(value, KEYS[key]):
            raise ValueError(f"{name}: {FIELD}.{key} must be a {KEYS[key].__name__}, got "
                             f"{value!r}")
    if "after" in table and not (root / table["after"]).exists():
        raise ValueError(f"{name}: {FIELD}.after names {table['after']!r}, which does not exist")
    return {"seeded": False, "alone": False, "after": None} | table


def chapter_names(root: Path = ROOT) -> list[str]:
    """Every page of ``_toc.yml`` that holds code, as ``book/<name>.md``, in the toc's order."""
    from .notebooks import toc_pages

    return [str(path.relative_to(root)) for path in toc_pages(root)
            if path.exists() and "```{code-cell}" in path.read_text()]


def seeded(root: Path = ROOT) -> tuple[str, ...]:
    """The chapters swept over seeds, in the toc's order."""
    return tuple(name for name in chapter_names(root) if needs(name, root)["seeded"])


def alone(root: Path = ROOT) -> tuple[str, ...]:
    """The chapters the build executes alone, after the parallel pass."""
    return tuple(name for name in chapter_names(root) if needs(name, root)["alone"])


def after(root: Path = ROOT) -> dict[str, str]:
    """Each chapter that reads another's run, and that chapter."""
    return {name: needs(name, root)["after"] for name in chapter_names(root)
            if needs(name, root)["after"]}
