"""The book's build tools, run from the repository's root as ``python -m tools.<module>``.

- :mod:`tools.build_book`: what ``make book`` runs (the execution cache, the parallel pass,
  the Sphinx build, the downloadable notebooks).
- :mod:`tools.build_pdf`: what ``make pdf`` runs after it (the single-page build, printed).
- :mod:`tools.downloadable`: each chapter's downloadable notebook as plain Jupyter Markdown.
- :mod:`tools.notebooks`: the install cell, the walk of the table of contents, and the copy of
  the notebooks the Colab and Binder buttons open.
- :mod:`tools.seed_sweep`: the training chapters executed with other seeds.
- :mod:`tools.live_runtime`: the Pyodide runtime, its checked wheels and the package's wheel,
  served from the site for the code readers run in their browser.

The modules import one another as a package (``from .notebooks import toc_pages``). The
book's Sphinx extensions (``book/_ext``) are not part of it: Sphinx imports them by their
top-level names (``named_code``), and so must anything that reads their objects back
(:func:`sphinx_extensions`).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXTENSIONS = ROOT / "book" / "_ext"


def sphinx_extensions() -> None:
    """Make ``book/_ext`` importable as Sphinx makes it (``_config.yml``'s
    ``local_extensions``): the pickled build environment names its nodes by those modules,
    and the PDF and the notebooks read names they define (``book_pdf.PDF_NAME``,
    ``named_code.caption_for``)."""
    if str(EXTENSIONS) not in sys.path:
        sys.path.append(str(EXTENSIONS))
