"""Checks of the chapters' sources that the build itself does not make."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
INCLUDE = re.compile(r"```\{literalinclude\} (?P<path>\S+)\n(?P<options>(?::[^\n]*\n)*)")
CHAPTERS = sorted((ROOT / "book").glob("*.md"))


def option(options: str, name: str) -> str | None:
    """The value of ``:name:`` among a literalinclude's options, or None."""
    found = re.search(rf"^:{name}: *(.*)$", options, re.MULTILINE)
    if not found:
        return None
    value = found[1].strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        value = value[1:-1]  # MyST reads the options as YAML: quotes are not part of them
    return value


def shown_objects():
    """(chapter, file, object name, options) for every ``literalinclude`` with
    ``:pyobject:``."""
    for chapter in CHAPTERS:
        for match in INCLUDE.finditer(chapter.read_text()):
            name = option(match["options"], "pyobject")
            if name:
                yield (chapter.name, (chapter.parent / match["path"]).resolve(), name,
                       match["options"])


SHOWN = list(shown_objects())


def shown_lines(lines: list[str], options: str) -> list[str]:
    """The lines a literalinclude shows of ``lines``, as Sphinx selects them: from the first
    line containing ``:start-at:`` to the first after it containing ``:end-at:``, each with
    ``:dedent:`` characters removed."""
    start_at, end_at = option(options, "start-at"), option(options, "end-at")
    if start_at is not None:
        first = next((i for i, line in enumerate(lines) if start_at in line), None)
        assert first is not None, f":start-at: {start_at!r} is not in the shown object"
        lines = lines[first:]
    if end_at is not None:
        last = next((i for i, line in enumerate(lines) if end_at in line), None)
        assert last is not None, f":end-at: {end_at!r} is not in the shown object"
        lines = lines[:last + 1]
    dedent = int(option(options, "dedent") or 0)
    return [line[dedent:] for line in lines]


def test_shown_lines_follow_start_end_and_dedent():
    lines = ["def f():", "    a = 1", "    b = 2", "    return a + b"]
    options = ":pyobject: f\n:start-at: a = 1\n:end-at: b = 2\n:dedent: 4\n"
    assert shown_lines(lines, options) == ["a = 1", "b = 2"]
    assert shown_lines(lines, ":pyobject: f\n") == lines


def test_chapters_show_package_code():
    assert any(name == "attention_kernel" for _, _, name, _ in SHOWN)


@pytest.mark.parametrize("chapter, path, name, options", SHOWN, ids=[s[2] for s in SHOWN])
def test_shown_code_fits_the_page(chapter, path, name, options):
    source = path.read_text()
    node = ast.parse(source)
    for part in name.split("."):  # "Class.method" as Sphinx's :pyobject: reads it
        node = next((n for n in node.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))
                     and n.name == part), None)
        if node is None:
            break
    assert node is not None, f"{chapter} shows {name}, which {path.name} does not define"
    lines = shown_lines(source.splitlines()[node.lineno - 1:node.end_lineno], options)
    too_long = [line for line in lines if len(line) > 79]
    assert too_long == [], f"{chapter} shows {name} with lines wider than the page"


def code_cell_lines(chapter: Path | str):
    """(line number, text) of the source lines of every code cell, metadata excluded; of a
    chapter's file, or of a chapter's text."""
    text = chapter.read_text() if isinstance(chapter, Path) else chapter
    in_cell = in_metadata = False
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("```{code-cell}"):
            in_cell, in_metadata, first = True, False, True
            continue
        if in_cell and line.startswith("```"):
            in_cell = False
        elif in_cell and line == "---":
            in_metadata = first or not in_metadata
        elif in_cell and not in_metadata and not line.startswith(":tags:"):
            yield number, line
        first = False


@pytest.mark.parametrize("chapter", CHAPTERS, ids=[c.name for c in CHAPTERS])
def test_code_cells_fit_the_page(chapter):
    too_long = [(n, line) for n, line in code_cell_lines(chapter) if len(line) > 79]
    assert too_long == [], f"{chapter.name}: code lines wider than the page (79)"


def fenced_code_lines(text: str):
    """(line number, text) of the lines of the plain fenced blocks of a chapter's text
    (```bash, ```text, ```: a command or an output shown as it is, not a code cell or a
    directive)."""
    fence = None  # the opening fence and its info string while inside a block
    for number, line in enumerate(text.splitlines(), start=1):
        match = re.match(r"^\s*(`{3,}|~{3,})(.*)$", line)
        if match and fence is None:
            fence = (match[1], match[2].strip())
            continue
        if match and match[1] == fence[0] and not match[2].strip():
            fence = None
            continue
        if fence is not None and re.fullmatch(r"[a-z0-9]*", fence[1]):
            yield number, line


def test_a_fenced_block_is_read_by_its_lines():
    text = "```bash\nls\n```\n\n```{code-cell} ipython3\nx = 1\n```\n~~~\ny\n~~~\n"
    assert list(fenced_code_lines(text)) == [(2, "ls"), (9, "y")]


@pytest.mark.parametrize("chapter", CHAPTERS, ids=[c.name for c in CHAPTERS])
def test_commands_shown_fit_the_page(chapter):
    """A command in a plain block scrolls on the page like code does (a line of 97
    characters was 133 px wider than its box at 1280 px): break it with a backslash."""
    too_long = [(n, line) for n, line in fenced_code_lines(chapter.read_text())
                if len(line) > 79]
    assert too_long == [], f"{chapter.name}: lines wider than the page (79)"


# A call that trains a model: the training loop (``tr.train``, or ``train`` imported from
# ``scratchformer.train``) or a run shared by the chapters (``sfb.train_once``); not a
# method called ``train`` (PyTorch's ``module.train()``, ``tk.BPE.train``).
TRAINS = re.compile(r"(?<![\w.])(?:(?:tr|sfb)\.)?(?:train|train_once)\(")
SHOWS_SETTINGS = re.compile(r"\brun_settings\(")
LABEL = re.compile(r"^\((?P<label>[\w-]+)\)=[ \t]*$", re.MULTILINE)
REFERENCE = re.compile(r"\{ref\}`[^`]*<(?P<label>[\w-]+)>`")


def runs_without_settings(chapters: dict[str, str]) -> list[str]:
    """The chapters (of ``{name: text}``) whose code trains a model and shows no table of
    the run's model and settings (``sfb.run_settings``): neither in a cell of their own, nor
    by a link to the section of another chapter that shows that run's table (a chapter
    reading a run trained by another, as decoding reads the translator). A section runs
    from its label to the next label."""
    tabled = set()  # labels whose section has a code cell calling run_settings
    for text in chapters.values():
        starts = [(text.count("\n", 0, m.start()) + 1, m["label"])
                  for m in LABEL.finditer(text)]
        shown = [n for n, line in code_cell_lines(text) if SHOWS_SETTINGS.search(line)]
        for (start, label), (end, _) in zip(starts, starts[1:] + [(float("inf"), "")]):
            if any(start < n < end for n in shown):
                tabled.add(label)
    missing = []
    for name, text in chapters.items():
        code = [line for _, line in code_cell_lines(text)]
        if not any(TRAINS.search(line) for line in code):
            continue
        if any(SHOWS_SETTINGS.search(line) for line in code):
            continue
        if {m["label"] for m in REFERENCE.finditer(text)} & tabled:
            continue
        missing.append(name)
    return missing


def test_every_training_run_shows_its_model_and_settings():
    chapters = {chapter.name: chapter.read_text() for chapter in CHAPTERS}
    trains = {name for name, text in chapters.items()
              if any(TRAINS.search(line) for _, line in code_cell_lines(text))}
    # the check sees the chapters that train (a pattern gone stale would see none)
    assert {"training.md", "trained_attention.md", "warmup.md", "translation.md",
            "trained_translator.md", "decoding.md", "decoding_translator.md", "decoder_only.md",
            "rotary_adder.md", "language_modelling.md"} <= trains
    assert runs_without_settings(chapters) == [], (
        "these chapters train a model without showing its settings: add a cell "
        "Markdown(sfb.run_settings(model, config, task=task)) after the training cell")


def test_the_settings_check_can_fail():
    def cell(code):
        return "```{code-cell} ipython3\n" + code + "\n```\n"

    trains = cell("result = sfb.train_once(model, task, config)")
    table = cell("Markdown(sfb.run_settings(result.model, config, task=task))")
    chapters = {
        "forgets.md": "# Training\n" + trains,
        "shows.md": "(sec-shows-run)=\n## Training\n" + trains + table
                    + "(sec-shows-next)=\n## Next\n",
        "loop.md": cell("result = tr.train(model, task, config)"),
        "imported.md": cell("runs = [train(model, task, config)]"),
        "links.md": trains + "Its settings are in {ref}`the run <sec-shows-run>`.\n",
        "links_elsewhere.md": trains + "See {ref}`the next section <sec-shows-next>`.\n",
        "says.md": trains + "We would call `run_settings(model, config)` here.\n",
        "not_training.md": cell("module = to_torch(block).train()\n"
                                "bpe = tk.BPE.train(text, 300)"),
    }
    assert sorted(runs_without_settings(chapters)) == [
        "forgets.md", "imported.md", "links_elsewhere.md", "loop.md", "says.md"]


def test_every_chapter_has_two_exercises():
    """The house's rule: a chapter ends with at least two exercises (each with a solution
    whose cell runs at build time). The package's reference page is not a chapter."""
    from tools.chapters import chapter_names

    few = {name: text.count("```{exercise}") for name in chapter_names()
           if name != "book/api.md"
           and (text := (ROOT / name).read_text()).count("```{exercise}") < 2}
    assert few == {}, f"chapters with fewer than two exercises: {few}"
