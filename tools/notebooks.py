"""Write every chapter of the book as a Jupyter notebook that runs on its own (Colab, Binder).

The chapters are MyST Markdown notebooks; Colab opens only ``.ipynb`` files from a repository,
and a notebook opened there has no ``scratchformer``. This script converts each chapter listed
in ``_toc.yml`` (pages with a jupytext header) with jupytext, unexecuted, and puts first a cell
that installs the package from the repository of ``_config.yml`` at ``--ref``, unless it is
already importable. ``.github/workflows/notebooks.yml`` runs it on every push to ``main`` and
publishes the result on the branch that the launch buttons open (``book/_ext/launch_notebooks.py``).

Usage: ``python tools/notebooks.py --out DIR [--ref COMMIT]``; writes ``DIR/book/<page>.ipynb``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import jupytext
import nbformat
import yaml

ROOT = Path(__file__).resolve().parent.parent

INSTALL_CELL = '''\
# Outside the book's repository (Colab, Binder, a download): install its package, scratchformer.
import importlib.util
import subprocess
import sys

if importlib.util.find_spec("scratchformer") is None:
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet",
                    "scratchformer[book] @ git+{repository}.git@{ref}"], check=True)'''


def toc_pages(root: Path = ROOT) -> list[Path]:
    """Every page of ``_toc.yml``, in its order, as the path of its MyST file.

    The one walk of the table of contents: ``tools/build_book.py`` and
    ``tools/downloadable.py`` use it too."""
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


def to_notebook(page: Path, repository: str, ref: str) -> nbformat.NotebookNode:
    notebook = jupytext.read(page)
    install = nbformat.v4.new_code_cell(INSTALL_CELL.format(repository=repository, ref=ref))
    notebook.cells.insert(0, install)
    notebook.metadata.pop("jupytext", None)  # a plain notebook, not paired with a text file
    return notebook


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder to write into")
    parser.add_argument("--ref", default="main", help="commit or branch the notebooks install")
    args = parser.parse_args(argv)
    repository = repository_url()
    for page in chapters():
        target = args.out / page.relative_to(ROOT).with_suffix(".ipynb")
        target.parent.mkdir(parents=True, exist_ok=True)
        notebook = to_notebook(page, repository, args.ref)
        nbformat.validate(notebook)
        nbformat.write(notebook, target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
