"""Build the book, re-executing every chapter when the package has changed.

Jupyter Book's execution cache keys a chapter on its own code cells only, so after an edit to
``src/`` it would serve the old outputs: figures and glued numbers drawn by code that no longer
exists. This script fingerprints everything the chapters execute besides their own cells (the
package, the pinned requirements, the book's Sphinx extensions, this script, and the variables
the runs are keyed on: the seed and any forced BLAS kernel) and, when the fingerprint
differs from that of the last successful build, clears the cache and rebuilds every page.

Before Sphinx reads the chapters, the chapters the cache lacks are executed in parallel, two at
a time (the machine has two cores; each kernel's BLAS gets one thread), and stored in the cache
the way MyST-NB stores them. The chapters whose text rests on a quiet machine with every core
(``ALONE``) are left out of that pass: the Sphinx build executes them, one after another once the
pass is over, with BLAS's default threads. A chapter that fails in the pass stops the build
there: the chapters still running are stopped, those not yet started are not started, the
error is printed, and Sphinx does not run (it would execute the chapter again only to print
the same error minutes later). A kernel that does not start is not the chapter's error: that
chapter is left to the Sphinx build.

Usage: ``python -m tools.build_book [--serial]`` (``make book`` calls it; ``--serial`` leaves all
execution to Sphinx, one chapter after another). Exits with the build's status.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import multiprocessing.connection
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import chapters as chapter_needs

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "_build"
FINGERPRINT = BUILD / ".inputs-fingerprint"
LABELS = BUILD / ".labels"  # label_map() of the last build that succeeded
RUNS = BUILD / ".runs"  # training runs shared by the chapters (scratchformer.book.runs)
INPUTS = ("src", "requirements.txt", "pyproject.toml", "book/_ext", "tools/build_book.py")
# Figures as pixel-doubled PNGs ("retina"): crisp on high-DPI screens, shown at their 1x size
# (IPython records that size, and MyST-NB writes it as the image's width and height).
KERNEL_CONFIG = 'c.InlineBackend.figure_formats = {"retina"}\n'
CACHE = BUILD / ".jupyter_cache"
TIMES = BUILD / ".execution-seconds.json"  # each chapter's last execution time: longest first
FAILED = BUILD / ".failed-chapters"  # those whose code failed in the last pass: they go first
WORKERS = 2
#: The chapters the Sphinx build executes, alone and with BLAS's default threads, after the
#: parallel pass: those whose front matter says ``alone: true`` (``tools/chapters.py``). The
#: appendix on speed measures what every core gives, the KV cache's chapter plots seconds per
#: token, and decoding's prints each search's milliseconds. The other chapters that time code
#: say nothing a second kernel beside them changes: the tokenizer counts CPU-seconds, the
#: chapter on long sequences and the one on training report their interleaved rounds or their
#: run's seconds as what this build measured.
ALONE = chapter_needs.alone()
#: Chapters of the parallel pass that read a run (``scratchformer.book.runs``) another chapter
#: trains, and that chapter (``after:`` in the front matter): each starts once its trainer is
#: done. Started together, one worker would wait on the run's lock while the other trains it
#: (in a clean build, sampling waited for language modelling's run about 58 s of its 62).
AFTER = chapter_needs.after()
ONE_THREAD = {name: "1" for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
                                      "MKL_NUM_THREADS")}


#: Environment variables that change what the chapters print without changing a file: the
#: training chapters' seed, and those that force a BLAS kernel (``scratchformer.book.runs``
#: keys its stored runs on the same ones). A build under another value is another book.
#: Written out rather than imported, since importing the package's ``book`` takes matplotlib
#: (0.6 s) into every build; tests/test_build.py requires the two lists to agree.
OUTCOME_VARIABLES = ("SCRATCHFORMER_SEED", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "MKL_CBWR",
                     "MKL_ENABLE_INSTRUCTIONS")


def fingerprint(root: Path = ROOT, environ: dict | None = None) -> str:
    """SHA-256 over the paths and bytes of every file the executed chapters depend on, and
    over the values of :data:`OUTCOME_VARIABLES` in ``environ`` (``os.environ`` by default)."""
    digest = hashlib.sha256()
    environ = os.environ if environ is None else environ
    for name in OUTCOME_VARIABLES:
        digest.update(f"{name}={environ.get(name, '')}".encode() + b"\0")
    for entry in INPUTS:
        path = root / entry
        files = sorted(path.rglob("*")) if path.is_dir() else [path]
        for file in files:
            if not file.is_file() or "__pycache__" in file.parts or ".egg-info" in str(file):
                continue
            digest.update(str(file.relative_to(root)).encode() + b"\0")
            digest.update(file.read_bytes() + b"\0")
    return digest.hexdigest()


# A label of MyST (``(name)=``) or of a directive (``:label: name``), at the start of a line.
_LABEL = re.compile(r"^(?:\((?P<target>[^)\s]+)\)=|\s*:label:\s*(?P<name>\S+))\s*$", re.M)


def label_map(root: Path = ROOT) -> str:
    """The table of contents and, for each page of ``book/``, the labels it defines.

    When this changes (a chapter split, a section moved to another page), the Sphinx build
    starts from a fresh environment (``--all``): read again, a page that lost an exercise's
    label leaves it in sphinx-exercise's registry, and the page that gained it is reported
    as defining it a second time (splitting ``real_model.md`` in a checkout built before
    failed with two duplicate labels; a fresh clone never saw it)."""
    lines = [(root / "_toc.yml").read_text()]
    for page in sorted((root / "book").glob("*.md")):
        found = sorted(m["target"] or m["name"] for m in _LABEL.finditer(page.read_text()))
        lines.append(f"{page.name}: {' '.join(found)}")
    return "\n".join(lines) + "\n"


def chapters(root: Path = ROOT) -> list[Path]:
    """The chapters of ``_toc.yml`` that hold code cells, in the order of the table of contents
    (the walk of ``tools/notebooks.py``)."""
    from .notebooks import toc_pages

    return [path for path in toc_pages(root)
            if path.exists() and "```{code-cell}" in path.read_text()]


def _read_notebook(path: Path):
    """The notebook MyST-NB makes of a chapter, with the book's MyST settings."""
    import yaml
    from myst_nb.core.read import read_myst_markdown_notebook
    from myst_parser.config.main import MdParserConfig

    parse = yaml.safe_load((ROOT / "_config.yml").read_text()).get("parse", {})
    config = MdParserConfig(enable_extensions=set(parse.get("myst_enable_extensions", [])))
    return read_myst_markdown_notebook(path.read_text(), config=config, path=path)


def _execute(path: str, env: dict, sockets: str | None = None
             ) -> tuple[str, str | None, float, str | None, bool]:
    """Execute one chapter in a fresh kernel (in a worker process): the executed notebook as
    JSON, or None and the traceback, and whether the error is the chapter's own (a cell
    raised) rather than the kernel's.

    The kernel talks over Unix sockets, not TCP ports: two kernels started at the same moment
    by two workers cannot then pick the same port (which left one kernel silent until
    nbclient's startup timeout). A kernel that still fails to start is tried once more; if
    that fails too, the chapter is left to the Sphinx build, which runs it again and reports
    the error. The sockets go in a folder under ``sockets`` (default: the system's temporary
    folder)."""
    import traceback

    import nbformat
    from jupyter_cache.executors.utils import single_nb_execution
    from jupyter_client.manager import KernelManager

    # The kernel inherits this process's environment: exactly ``env``, so that what an earlier
    # chapter of this worker was given (BLAS on one thread, for the pooled chapters) does not
    # reach the next one (a timed chapter, which must have BLAS's default threads).
    os.environ.clear()
    os.environ.update(env)
    started = time.perf_counter()
    failure = None
    for _attempt in range(2):
        notebook = _read_notebook(Path(path))
        folder = tempfile.mkdtemp(prefix="kernel-", dir=sockets)
        manager = KernelManager(kernel_name="python3", transport="ipc",
                                ip=os.path.join(folder, "k"))
        try:
            result = single_nb_execution(notebook, cwd=str(Path(path).parent), timeout=600,
                                         allow_errors=False, meta_override=True,
                                         km=manager, startup_timeout=180)
        except Exception:  # the kernel did not start or died: not the chapter's error
            failure = traceback.format_exc()
            continue
        finally:  # nbclient leaves a kernel it was handed running
            if manager.has_kernel:
                manager.shutdown_kernel(now=True)
            shutil.rmtree(folder, ignore_errors=True)
        if result.err is not None:
            return path, None, result.time, result.exc_string, True
        return path, nbformat.writes(notebook), result.time, None, False
    return path, None, time.perf_counter() - started, failure, False


def _execute_into(connection, *args) -> None:
    """:func:`_execute` in a process of its own, its outcome sent through ``connection``."""
    connection.send(_execute(*args))
    connection.close()


def execute_missing(env: dict) -> list[tuple[str, str]]:
    """Execute the chapters the cache lacks, in parallel, and add them to the cache.

    Returns the chapters whose own code failed, each with its traceback (plain text). The
    first such failure stops the pass: the chapters running are stopped, and no further one
    is started."""
    import nbformat
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    cache = get_cache(str(CACHE))
    missing = []
    for path in chapters():
        try:
            cache.match_cache_notebook(_read_notebook(path))
        except KeyError:
            missing.append(path)
    if not missing:
        return []
    times = json.loads(TIMES.read_text()) if TIMES.exists() else {}
    seeded = chapter_needs.seeded()

    name_of = {path: str(path.relative_to(ROOT)) for path in missing}

    failed_before = set(FAILED.read_text().split()) if FAILED.exists() else set()

    def key(path: Path) -> tuple[bool, float, bool]:
        # a chapter that failed in the last pass first, so that the build says at once
        # whether it still fails; then the longest first, by the last build's times; with
        # none (a fresh clone) the chapters that train go first, so that a long run does not
        # end the pass with one worker idle. A failed chapter that reads another chapter's
        # run (AFTER) still waits for that chapter.
        name = name_of[path]
        return name not in failed_before, -times.get(name, 0.0), name not in seeded

    alone = [p for p in missing if name_of[p] in ALONE]
    pooled = sorted((p for p in missing if p not in alone), key=key)
    print(f"build_book: executing {len(pooled)} chapters, {WORKERS} at a time (the Sphinx "
          f"build then executes {len(alone)} alone)", flush=True)
    again = [name_of[p] for p in pooled if name_of[p] in failed_before]
    if again:
        print(f"build_book: first the chapters that failed in the last build: "
              f"{' '.join(again)}", flush=True)

    failed = []

    def store(path: str, notebook: str | None, seconds: float, error: str | None,
              chapter_error: bool) -> None:
        name = str(Path(path).relative_to(ROOT))
        if error is not None:
            plain = re.sub(r"\x1b\[[0-9;]*m", "", error).strip()
            last = plain.splitlines()[-1] if plain else "no message"
            if chapter_error:
                print(f"build_book: {name} failed after {seconds:.1f} s ({last})", flush=True)
                failed.append((name, plain))
            else:
                print(f"build_book: {name}: the kernel failed ({last}); the Sphinx build "
                      f"will execute the chapter again", flush=True)
            return
        cache.cache_notebook_bundle(
            CacheBundleIn(nbformat.reads(notebook, as_version=4), path,
                          data={"execution_seconds": seconds}),
            check_validity=False, overwrite=True)
        times[name] = seconds
        print(f"build_book: executed {name} in {seconds:.1f} s", flush=True)

    # a chapter that reads a run another chapter of this pass trains is started once that
    # chapter is done (AFTER), at the end of the queue
    pooled_names = {name_of[path] for path in pooled}
    held = [path for path in pooled if AFTER.get(name_of[path]) in pooled_names]
    # Each chapter in a process of its own, at most WORKERS at a time: a process that ends is
    # seen at once (its result arrives, or its end of the pipe closes), and one still running
    # after a failure is stopped, its kernel with it (ipykernel ends when its parent has).
    context = multiprocessing.get_context("spawn")
    sockets = tempfile.mkdtemp(prefix="build-kernels-")  # the kernels' Unix sockets
    waiting = [path for path in pooled if path not in held]
    running = {}  # the result's end of a chapter's pipe -> (its process, its path)
    try:
        while (waiting or running) and not failed:
            while waiting and len(running) < WORKERS:
                path = waiting.pop(0)
                reader, writer = context.Pipe(duplex=False)
                process = context.Process(target=_execute_into,
                                          args=(writer, str(path), env | ONE_THREAD, sockets))
                process.start()
                writer.close()  # the child's copy is the only one: its end closes with it
                running[reader] = (process, path)
            for reader in multiprocessing.connection.wait(list(running)):
                process, path = running.pop(reader)
                try:
                    outcome = reader.recv()
                except EOFError:  # it ended before it sent a result
                    outcome = None
                process.join()
                if outcome is None:
                    outcome = (str(path), None, 0.0, f"the process executing it ended with "
                               f"exit code {process.exitcode}", False)
                store(*outcome)
                if failed:  # fail fast: stop the others (below), start nothing more
                    break
                for later in [p for p in held if AFTER[name_of[p]] == name_of[path]]:
                    held.remove(later)
                    waiting.append(later)
    finally:
        for process, _ in running.values():
            process.kill()  # SIGKILL: a chapter's process may be blocked in sending its result
        for process, _ in running.values():
            process.join()
        shutil.rmtree(sockets, ignore_errors=True)
    TIMES.write_text(json.dumps(times, indent=1, sort_keys=True) + "\n")
    FAILED.write_text("".join(f"{name}\n" for name, _ in failed))
    return failed


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    serial = "--serial" in argv
    current = fingerprint()
    previous = FINGERPRINT.read_text().strip() if FINGERPRINT.exists() else None
    jupyter_book = Path(sys.executable).parent / "jupyter-book"  # beside this venv's python
    command = [str(jupyter_book), "build", str(ROOT),
               "--builder", "html", "-W", "-n", "--keep-going"]
    if current != previous:
        print("build_book: the package or its requirements changed since the last build: "
              "clearing the execution cache and re-executing every chapter", flush=True)
        shutil.rmtree(CACHE, ignore_errors=True)
        shutil.rmtree(RUNS, ignore_errors=True)
        command.append("--all")
    elif not LABELS.exists() or LABELS.read_text() != label_map():
        print("build_book: the table of contents or the pages' labels changed since the last "
              "build: Sphinx starts from a fresh environment", flush=True)
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
    failed = [] if serial else execute_missing(env)
    for name, traceback in failed:
        print(f"\n{name} failed:\n{traceback}\n", file=sys.stderr)
    if failed:  # Sphinx would only execute the chapter again to print the same error
        print(f"build_book: the build stops: {', '.join(name for name, _ in failed)} failed "
              f"in the parallel pass (the chapters still running were stopped, and those not "
              f"started were not executed)",
              file=sys.stderr)
    status = 1 if failed else subprocess.run(command, cwd=ROOT, env=env).returncode
    if status != 0:
        FINGERPRINT.unlink(missing_ok=True)  # the next build starts from scratch again
        print(f"build_book: the build failed (exit status {status})", file=sys.stderr)
        return status
    (BUILD / "html" / ".nojekyll").touch()  # GitHub Pages would hide the _static/ folders
    drop_unused(BUILD / "html")
    # The notebook each page offers for download, written again on every build from the
    # chapter's source and its executed outputs: plain Jupyter Markdown and an install cell, so
    # that it runs on its own (tools/downloadable.py).
    from .downloadable import rewrite_downloadable_notebooks

    rewrite_downloadable_notebooks(BUILD / "html" / "_sources", read=executed_notebook)
    FINGERPRINT.write_text(current + "\n")
    LABELS.write_text(label_map())
    return 0


# Files the theme copies into the site that no page loads: pydata-sphinx-theme 0.17 ships its
# Font Awesome script (1.5 MB, with a 1.7 MB source map), but the book theme's pages draw their
# icons with Font Awesome's web fonts (_static/vendor/fontawesome) and never load the script.
UNUSED = ("_static/scripts/fontawesome.js", "_static/scripts/fontawesome.js.map",
          "_static/scripts/fontawesome.js.LICENSE.txt")


def drop_unused(site: Path) -> None:
    """Delete ``UNUSED`` from the built site, after checking that no page refers to them (a
    theme that starts loading one fails the build here rather than the reader's page)."""
    pages = {str(page.relative_to(site)): page.read_text() for page in site.rglob("*.html")
             if "_static" not in page.parts}
    for name in UNUSED:
        file = Path(name).name
        users = [page for page, text in pages.items() if file in text]
        if users:
            raise RuntimeError(f"{name} is loaded by {users[:3]}: take it out of UNUSED")
        (site / name).unlink(missing_ok=True)


def executed_notebook(path: Path):
    """The chapter at ``path`` as MyST-NB read it, with the outputs of its execution in the
    cache, which every chapter has after a build that succeeded.

    This is the notebook MyST-NB copies into ``_sources``; it is made again here because
    MyST-NB copies it only for pages it writes, and for a page whose prose changed but not
    its code it copies it without the outputs it took from the cache (myst_nb/sphinx_.py
    writes its own ``notebook``, not the client's merged one)."""
    from jupyter_cache import get_cache

    _, merged = get_cache(str(CACHE)).merge_match_into_notebook(_read_notebook(path))
    return merged


if __name__ == "__main__":
    sys.exit(main())
