"""Build the book, re-executing every chapter when the package has changed.

Jupyter Book's execution cache keys a chapter on its own code cells only, so after an edit to
``src/`` it would serve the old outputs: figures and glued numbers drawn by code that no longer
exists. This script fingerprints everything the chapters execute besides their own cells (the
package, the pinned requirements, the book's Sphinx extensions) and, when the fingerprint
differs from that of the last successful build, clears the cache and rebuilds every page.

Usage: ``python tools/build_book.py`` (``make book`` calls it). Exits with the build's status.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "_build"
FINGERPRINT = BUILD / ".inputs-fingerprint"
RUNS = BUILD / ".runs"  # training runs shared by the chapters (scratchformer.book.runs)
INPUTS = ("src", "requirements.txt", "pyproject.toml", "book/_ext", "tools/build_book.py")
# Figures as pixel-doubled PNGs ("retina"): crisp on high-DPI screens, shown at their 1x size
# (IPython records that size, and MyST-NB writes it as the image's width and height).
KERNEL_CONFIG = 'c.InlineBackend.figure_formats = {"retina"}\n'


def fingerprint(root: Path = ROOT) -> str:
    """SHA-256 over the paths and bytes of every file the executed chapters depend on."""
    digest = hashlib.sha256()
    for entry in INPUTS:
        path = root / entry
        files = sorted(path.rglob("*")) if path.is_dir() else [path]
        for file in files:
            if not file.is_file() or "__pycache__" in file.parts or ".egg-info" in str(file):
                continue
            digest.update(str(file.relative_to(root)).encode() + b"\0")
            digest.update(file.read_bytes() + b"\0")
    return digest.hexdigest()


def main() -> int:
    current = fingerprint()
    previous = FINGERPRINT.read_text().strip() if FINGERPRINT.exists() else None
    jupyter_book = Path(sys.executable).parent / "jupyter-book"  # beside this venv's python
    command = [str(jupyter_book), "build", str(ROOT),
               "--builder", "html", "-W", "-n", "--keep-going"]
    if current != previous:
        print("build_book: the package or its requirements changed since the last build: "
              "clearing the execution cache and re-executing every chapter", flush=True)
        shutil.rmtree(BUILD / ".jupyter_cache", ignore_errors=True)
        shutil.rmtree(RUNS, ignore_errors=True)
        command.append("--all")

    env = dict(os.environ)
    # The chapters import the package from this checkout, whichever copy of it is installed.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    env["SCRATCHFORMER_RUNS"] = str(RUNS)  # a run two chapters need is trained once
    env["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"  # figures into the page
    ipython_dir = BUILD / "ipython"  # the kernels' IPython profile, with KERNEL_CONFIG
    (ipython_dir / "profile_default").mkdir(parents=True, exist_ok=True)
    (ipython_dir / "profile_default" / "ipython_kernel_config.py").write_text(KERNEL_CONFIG)
    env["IPYTHONDIR"] = str(ipython_dir)
    status = subprocess.run(command, cwd=ROOT, env=env).returncode
    if status != 0:
        FINGERPRINT.unlink(missing_ok=True)  # the next build starts from scratch again
        print(f"build_book: the build failed (exit status {status})", file=sys.stderr)
        return status
    (BUILD / "html" / ".nojekyll").touch()  # GitHub Pages would hide the _static/ folders
    restore_downloadable_outputs(BUILD / "html" / "_sources", BUILD / ".jupyter_cache")
    FINGERPRINT.write_text(current + "\n")
    return 0


def restore_downloadable_outputs(sources: Path, cache_path: Path) -> None:
    """Put the outputs back into the downloadable ``.ipynb`` of chapters taken from the cache.

    When a chapter's prose changed but not its code, MyST-NB takes the outputs from the
    execution cache for the page, but writes the notebook it offers for download as it was
    before the merge, without them (myst_nb/sphinx_.py writes its own ``notebook``, not the
    client's merged one). Such notebooks get their outputs from the same cache entry here.
    """
    import nbformat
    from jupyter_cache import get_cache

    cache = get_cache(str(cache_path))
    for path in sorted(sources.rglob("*.ipynb")):
        notebook = nbformat.read(path, as_version=4)
        code = [cell for cell in notebook.cells if cell.cell_type == "code"]
        if not code or any(cell.execution_count for cell in code):
            continue
        _, merged = cache.merge_match_into_notebook(notebook)  # KeyError: not cached
        nbformat.write(merged, path)


if __name__ == "__main__":
    sys.exit(main())
