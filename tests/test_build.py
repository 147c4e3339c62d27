"""The build pipeline: a change to the package must re-execute the chapters.

Jupyter Book's execution cache keys a chapter on its own code cells, so without
``tools/build_book.py`` (the recipe of ``make book``) an edit to ``src/`` would be served the
old, cached outputs. The end-to-end test builds a scratch copy of the book, breaks the package
in the copy without touching any chapter, and requires the next build to fail.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
SKIP = shutil.ignore_patterns(".venv", "_build", ".git", "__pycache__", ".pytest_cache",
                              ".hypothesis", "*.egg-info")


def load_build_module():
    from tools import build_book

    return build_book


# Pages whose figures plot measurements, which vary from run to run: peak memory traced while
# the kernel's own threads also allocate (by a few bytes), and seconds per generated token with
# and without the cache. Every other figure must be identical.
MEASURED_FIGURES = {"book/failure_cases.html", "book/kv_cache.html"}


def figures_of(site: Path) -> dict[str, list[str]]:
    """Per page, the image files it shows (an incremental build leaves old ones around)."""
    pattern = re.compile(r'src="[./]*_images/([0-9a-f]+\.png)"')
    return {str(page.relative_to(site)): pattern.findall(page.read_text())
            for page in sorted(site.rglob("*.html"))}


ENVIRONMENT_PROBE = """\
import nbformat
from tools import build_book

env = dict(build_book.os.environ)
env.pop("OPENBLAS_NUM_THREADS", None)
for given in (env | build_book.ONE_THREAD, env):  # BLAS limited, then not
    _, notebook, _, error, _ = build_book._execute({page!r}, given)
    assert error is None, error
    print(nbformat.reads(notebook, as_version=4).cells[0].outputs[0].text.strip())
"""


def test_each_chapter_gets_exactly_its_environment(tmp_path):
    # The build executes several chapters in one worker process: what one chapter was given
    # must not reach the next one.
    page = tmp_path / "page.md"
    page.write_text("---\njupytext:\n  text_representation:\n    format_name: myst\n"
                    "kernelspec:\n  display_name: Python 3\n  language: python\n"
                    "  name: python3\n---\n\n```{code-cell} ipython3\nimport os\n"
                    "print(os.environ.get('OPENBLAS_NUM_THREADS'))\n```\n")
    probe = ENVIRONMENT_PROBE.format(page=str(page))
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=300, cwd=ROOT)  # python -c: the root's tools importable
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["1", "None"]


def test_each_held_chapter_reads_a_run_its_trainer_trains():
    """build_book.AFTER holds a chapter back until the chapter that trains a run it reads is
    done. Each pair must be chapters of the parallel pass that train through the same recipe
    of ``scratchformer.train`` (``tr.<NAME>_TRAINING``, or ``tr.TRANSLATION_CONFIG``), or the
    entry is stale."""
    build_book = load_build_module()
    pooled = {str(path.relative_to(ROOT)) for path in build_book.chapters()}
    pooled -= set(build_book.ALONE)
    recipe = re.compile(r"\btr\.([A-Z_]+_(?:TRAINING|CONFIG))\b")
    assert build_book.AFTER
    for held, trainer in build_book.AFTER.items():
        assert {held, trainer} <= pooled, (held, trainer)
        shared = (set(recipe.findall((ROOT / held).read_text()))
                  & set(recipe.findall((ROOT / trainer).read_text())))
        assert shared, f"{held} and {trainer} train through no common recipe"


def test_fingerprint_follows_the_package_the_seed_and_the_kernel_and_nothing_else(tmp_path):
    build = load_build_module()
    repo = tmp_path / "repo"
    shutil.copytree(ROOT, repo, ignore=SKIP)
    before = build.fingerprint(repo)
    assert build.fingerprint(repo) == before

    (repo / "src" / "scratchformer" / "__pycache__").mkdir()
    (repo / "src" / "scratchformer" / "__pycache__" / "x.pyc").write_bytes(b"compiled")
    (repo / "book" / "intro.md").write_text("chapters are cached on their own cells\n")
    assert build.fingerprint(repo) == before

    module = repo / "src" / "scratchformer" / "attention.py"
    module.write_text(module.read_text() + "\n# an edit\n")
    after_edit = build.fingerprint(repo)
    assert after_edit != before
    (repo / "src" / "scratchformer" / "new_module.py").write_text("")
    assert build.fingerprint(repo) != after_edit
    (repo / "requirements.txt").write_text("numpy\n")
    last = build.fingerprint(repo)
    assert last not in (before, after_edit)

    # Another seed or a forced BLAS kernel prints another book: the cache must not serve it.
    quiet = {name: value for name, value in build.os.environ.items()
             if name not in build.OUTCOME_VARIABLES}
    assert build.fingerprint(repo, quiet) == build.fingerprint(repo, quiet | {"PATH": "/x"})
    seeded = build.fingerprint(repo, quiet | {"SCRATCHFORMER_SEED": "3"})
    kernel = build.fingerprint(repo, quiet | {"OPENBLAS_CORETYPE": "Haswell"})
    assert len({build.fingerprint(repo, quiet), seeded, kernel}) == 3


def test_the_build_fingerprints_the_variables_its_runs_are_keyed_on():
    from scratchformer.book import runs

    assert set(load_build_module().OUTCOME_VARIABLES) == {runs.SEED_VARIABLE,
                                                          *runs._BLAS_VARIABLES}


def test_a_label_moved_to_another_page_or_a_new_page_starts_sphinx_afresh(tmp_path):
    """build_book passes --all (a fresh Sphinx environment) when label_map changes."""
    label_map = load_build_module().label_map
    (tmp_path / "book").mkdir()
    (tmp_path / "_toc.yml").write_text("root: book/a\n")
    (tmp_path / "book" / "a.md").write_text("(sec-a)=\n# A\n```{exercise}\n:label: ex-a\n```\n")
    (tmp_path / "book" / "b.md").write_text("# B\n")
    before = label_map(tmp_path)
    assert "a.md: ex-a sec-a" in before
    (tmp_path / "book" / "a.md").write_text("(sec-a)=\n# A, edited\n```{exercise}\n"
                                            ":label: ex-a\n```\n")
    assert label_map(tmp_path) == before  # prose edited: the environment is kept
    (tmp_path / "book" / "a.md").write_text("(sec-a)=\n# A\n")
    (tmp_path / "book" / "b.md").write_text("# B\n```{exercise}\n:label: ex-a\n```\n")
    moved = label_map(tmp_path)
    assert moved != before and "b.md: ex-a" in moved
    (tmp_path / "_toc.yml").write_text("root: book/b\n")
    assert label_map(tmp_path) != moved


@pytest.mark.build
def test_breaking_the_package_fails_the_next_build(tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(ROOT, repo, ignore=SKIP)
    ours = ROOT / "_build" / "html"
    recorded = ROOT / "_build" / ".inputs-fingerprint"
    built_here = (recorded.exists() and (ROOT / "_build" / ".runs").is_dir()
                  and recorded.read_text().strip() == load_build_module().fingerprint(repo))
    if built_here:
        # The checkout's build executed these very sources: the scratch build starts from its
        # stored training runs (and the fingerprint that keeps the build from clearing them),
        # so it executes every chapter again without training every model again. That a run
        # trained in another process comes out bit for bit the same is tested on its own
        # (tests/test_runs.py: two hash seeds, every kind of model the book trains).
        (repo / "_build").mkdir()
        shutil.copytree(ROOT / "_build" / ".runs", repo / "_build" / ".runs",
                        ignore=shutil.ignore_patterns("*.lock", "*.partial"))
        shutil.copy(recorded, repo / "_build" / ".inputs-fingerprint")

    def build():
        return subprocess.run([sys.executable, "-m", "tools.build_book"], cwd=repo,
                              capture_output=True, text=True, timeout=1800)

    def executed(run):  # by the parallel pass or by Sphinx
        log = run.stdout + run.stderr
        return "build_book: executing" in log or "Executing notebook" in log

    first = build()
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    # Every chapter but those that time code with every core was executed by the parallel
    # pass and stored as MyST-NB stores it: Sphinx found each in the cache, and executed
    # only the others, once the pass was over.
    assert "build_book: executing" in first.stdout
    by_sphinx = re.findall(r"(book/\w+\.md): Executing notebook", first.stdout + first.stderr)
    assert sorted(by_sphinx) == sorted(load_build_module().ALONE)
    assert (repo / "_build" / "html" / ".nojekyll").exists()
    # Reproducible: a second execution of every chapter draws byte-identical figures (their
    # file names are hashes of their bytes), when this checkout's own build is there to
    # compare with.
    if built_here:
        theirs, mine = figures_of(repo / "_build" / "html"), figures_of(ours)
        assert theirs.keys() == mine.keys()
        for page in theirs.keys() - MEASURED_FIGURES:
            assert theirs[page] == mine[page], f"{page}: figures differ between clean builds"
    cached = build()  # nothing changed: served from the cache, nothing executed
    assert cached.returncode == 0 and not executed(cached)

    # Prose edited, code not: the page is rebuilt from the cache, and the notebook offered
    # for download still carries the outputs.
    chapter = repo / "book" / "transformer_block.md"
    chapter.write_text(chapter.read_text() + "\nOne more sentence of prose.\n")
    prose = build()
    assert prose.returncode == 0 and not executed(prose)
    download = repo / "_build" / "html" / "_sources" / "book" / "transformer_block.ipynb"
    # the note on the build's numbers, the install cell, then the chapter's cells
    note, install, *rest = nbformat.read(download, as_version=4).cells
    assert note.cell_type == "markdown"
    assert "importlib.util.find_spec(name) is None" in install.source
    cells = [c for c in rest if c.cell_type == "code"]
    assert cells and all(c.execution_count for c in cells)
    assert any(c.outputs for c in cells)

    # A plausible bug: forget the 1/sqrt(d_k). No chapter file changes.
    module = repo / "src" / "scratchformer" / "attention.py"
    source = module.read_text()
    assert "scale = 1.0 / math.sqrt(d_k)" in source
    module.write_text(source.replace("scale = 1.0 / math.sqrt(d_k)", "scale = 1.0"))

    broken = build()
    log = broken.stdout + broken.stderr
    assert "re-executing every chapter" in log
    assert broken.returncode != 0, "a broken package built a book from stale outputs"
    assert "AssertionError" in log  # a claim of the chapter caught the bug
    # It failed fast: in the parallel pass, with the chapter's traceback, and Sphinx never ran
    # (it would have executed the failed chapter again). The chapters still running were
    # stopped: none finished after the failure.
    assert "build_book: the build stops:" in log
    assert "Executing notebook" not in log and "Running Sphinx" not in log
    failed = re.search(r"build_book: (book/\w+\.md) failed after", broken.stdout)
    assert failed and "build_book: executed" not in broken.stdout[failed.end():]
    # The next build starts with the chapter that failed, so it says soon that the bug is
    # still there. (Which chapter reports it first is a race: the chapter started beside it
    # may meet the same bug sooner; once one fails, the build stops.)
    again = build()
    assert again.returncode != 0
    first = re.search(r"build_book: first the chapters that failed in the last build: (.*)",
                      again.stdout)
    assert first and first[1].split() == [failed[1]]
    assert "build_book: the build stops:" in again.stdout + again.stderr
