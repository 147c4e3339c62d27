"""Serve MathJax 3 from the book's own site, so that math renders with no network.

Sphinx loads MathJax from a CDN by default. The PyPI package ``sphinx-mathjax-offline`` ships a
full MathJax 3 (24 MB); this extension copies only what a page typeset with ``tex-chtml`` can
request (the combined component, the TeX extensions it may autoload, the assistive-MathML
module its menu may load, and the woff fonts: about 2 MB) into ``_static/mathjax`` and points
``mathjax_path`` at it. The copy happens after a successful build, outside the source
``_static`` folder, so Jupyter Book does not add MathJax's many ``.js`` files to every page.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

MATHJAX_FILES = (
    "tex-chtml.js",
    "input/tex/extensions",
    "a11y/assistive-mml.js",
    "output/chtml/fonts/woff-v2",
)


def mathjax_source() -> Path:
    """The MathJax folder inside the installed ``sphinx-mathjax-offline`` distribution."""
    spec = importlib.util.find_spec("sphinx-mathjax-offline")
    if spec is None or spec.origin is None:
        raise RuntimeError("sphinx-mathjax-offline is not installed: run `make book`, which "
                           "installs requirements.txt")
    return Path(spec.origin).parent / "static" / "mathjax"


def copy_mathjax(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    source = mathjax_source()
    target = Path(app.outdir) / "_static" / "mathjax"
    for relative in MATHJAX_FILES:
        src, dst = source / relative, target / relative
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dst, dirs_exist_ok=True)
        else:
            shutil.copyfile(src, dst)


def setup(app):
    mathjax_source()  # fail at start-up, not after the build, when the package is missing
    app.config.mathjax_path = "mathjax/tex-chtml.js"  # relative: served from _static/
    app.connect("build-finished", copy_mathjax)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
