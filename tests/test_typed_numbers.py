"""No chapter types into its prose a number that a run produces or could change.

Every number a reader sees in a chapter's text is either glued from the cell that computes it
(``{glue:text}`name```), written in math (where the text derives it from what it states), or
of a kind no run changes: the kinds are the rules of ``ALLOWED`` below, each with its reason,
and the few numbers no rule can tell from a result are listed per chapter in ``PER_FILE``, each
with its reason too. The prose is what a reader reads: the Markdown outside code cells, math,
inline code, roles (glue, cite, ref, eq, ...), directive options and labels, plus the alt text
and the caption that a code cell's metadata gives its figure (``mystnb: image: alt:`` and
``figure: caption:``), which a reader sees or hears as well.
"""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import pytest
from tools.notebooks import toc_pages

ROOT = Path(__file__).resolve().parent.parent

# A fence opens a directive or a code block (``` or :::, with a {name} or a language).
FENCE = re.compile(r"^ {0,3}(?P<mark>`{3,}|:{3,})\s*(?P<name>\{[^}]*\}|[\w-]*)\s*(?P<arg>.*)$")
OPTION = re.compile(r"^\s*:[\w-]+:")  # a directive's option line (:label:, :class:, ...)
# Directives whose body is prose (and, for some, whose argument is a title a reader sees);
# every other directive (code-cell, math, literalinclude, include, eval-rst, ...) is not.
PROSE_BODY = re.compile(r"\{(?:exercise|solution-start|solution-end|prf:\w+|admonition|note|"
                        r"warning|tip|important|hint|seealso|caution|attention|danger|"
                        r"error|margin|dropdown|figure|epigraph)\}")
TITLED = re.compile(r"\{(?:exercise|prf:\w+|admonition|dropdown|margin|figure)\}")
META_TEXT = re.compile(r"^(?P<indent>\s*)(?:alt|caption):\s*(?P<rest>.*)$")
BLOCK_SCALAR = re.compile(r"[>|][+-]?")
# Spans of a prose line that are not prose: roles, inline code, math (inline math may run
# over a line break within a paragraph), a link's target, addresses, comments.
NOT_PROSE = re.compile(
    r"\{[\w:.+-]+\}`[^`]*`"
    r"|(?P<ticks>`+).+?(?P=ticks)"
    r"|\$\$.+?\$\$"
    r"|(?<!\\)\$(?:[^$\\\n]|\\.|\n(?![ \t]*\n))+?\$"
    r"|\]\([^)]*\)"
    r"|<https?://[^>]*>|https?://\S+"
    r"|<!--.*?-->",
    re.DOTALL)


def prose_lines(text: str) -> list[str]:
    """The lines of a MyST chapter with everything but its prose blanked, line for line."""
    lines = text.splitlines()
    out = [""] * len(lines)
    i = 0
    if lines and lines[0] == "---":  # the jupytext header
        i = lines.index("---", 1) + 1
    fences: list[list[str]] = []  # the open fences: [mark, kind, state]
    display_math = False
    meta_indent = None  # in a code cell's metadata: the indent of the alt or caption key
    while i < len(lines):
        line = lines[i]
        fence = FENCE.match(line)
        top = fences[-1] if fences else None
        if (top and fence and not fence["name"] and not fence["arg"]
                and fence["mark"][0] == top[0][0] and len(fence["mark"]) >= len(top[0])):
            fences.pop()
        elif top and top[1] == "code-cell":
            state = top[2]
            if state == "start" and line.strip() == "---":
                top[2] = "metadata"
            elif state == "start" and not OPTION.match(line):
                top[2] = "code"
            elif state == "metadata" and line.strip() == "---":
                top[2], meta_indent = "code", None
            elif state == "metadata":
                key = META_TEXT.match(line)
                indent = len(line) - len(line.lstrip())
                if key:
                    meta_indent = len(key["indent"])
                    if not BLOCK_SCALAR.fullmatch(key["rest"]):
                        out[i] = " " * (len(line) - len(key["rest"])) + key["rest"]
                elif meta_indent is not None and (indent > meta_indent or not line.strip()):
                    out[i] = line
                else:
                    meta_indent = None
        elif top and top[1] == "other":
            pass
        elif fence and fence["name"]:
            name = fence["name"]
            if name == "{code-cell}":
                fences.append([fence["mark"], "code-cell", "start"])
            elif PROSE_BODY.fullmatch(name):
                fences.append([fence["mark"], "prose", ""])
                if TITLED.fullmatch(name):
                    out[i] = " " * (len(line) - len(fence["arg"])) + fence["arg"]
                while i + 1 < len(lines) and OPTION.match(lines[i + 1]):
                    i += 1
            else:
                fences.append([fence["mark"], "other", ""])
        elif fence:  # a plain code block, ```bash
            fences.append([fence["mark"], "other", ""])
        elif display_math:
            display_math = not line.rstrip().endswith("$$")
        elif line.lstrip().startswith("$$"):
            rest = line.strip()[2:]
            display_math = not rest.endswith("$$")
        elif not re.fullmatch(r"\s*\(.*\)=\s*|\s*%.*", line):  # not a label or a comment
            out[i] = line
        i += 1
    masked = NOT_PROSE.sub(lambda m: re.sub(r"[^\n]", " ", m[0]), "\n".join(out))
    return masked.split("\n")


def code_literals(text: str) -> set[float]:
    """The values of the numeric literals in the code of a chapter's code cells."""
    values = set()
    cells = re.findall(r"^```\{code-cell\}[^\n]*\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    for cell in cells:
        cell = re.sub(r"\A---\n.*?\n---\n", "", cell, flags=re.DOTALL)  # its metadata
        cell = re.sub(r"^[:%!].*$", "", cell, flags=re.MULTILINE)  # options, magics
        try:
            for token in tokenize.generate_tokens(io.StringIO(cell).readline):
                if token.type == tokenize.NUMBER:
                    try:
                        values.add(float(token.string.replace("_", "")))
                    except ValueError:  # 1j
                        pass
        except (tokenize.TokenError, IndentationError, SyntaxError):
            pass
    return values


# A number in prose: digits, with a decimal part or thousands separators ("1,200", "20 000").
NUMBER = re.compile(r"(?<![\d.,])\d{1,3}(?:(?:,| (?=\d{3}(?![\d.,]\d)))\d{3})+(?!\d)"
                    r"|(?<![\d.,])\d+(?:\.\d+)?")
# A percentage or a count of steps, epochs or seconds is what a trained run reports: no rule
# lets one through, however it is written (glue it, or derive it in math).
RESULT_UNIT = re.compile(r"\s?(?:%|percent\b|steps?\b|epochs?\b|seconds?\b|ms\b|s\b)")
# A hedged number ("about 3") is a measurement, not a setting, even where it equals one.
HEDGED = re.compile(r"(?:\babout|\baround|\broughly|\bnearly|\balmost|\bapproximately|~|≈)\s*$")

# The kinds of number a chapter may type, each a regex whose match must cover the number.
ALLOWED = {
    # A digit inside a name: models, formats, dtypes, code points, symbols (GPT-2, SmolLM2-135M,
    # float32, Q4_1, UTF-8, U+0100, W_2, top-1, log2): part of an identifier, not a quantity.
    "name": re.compile(r"(?<![\w.])[A-Za-z][A-Za-z0-9_]*(?:[-+.][A-Za-z0-9_]+)*"),
    # A number joined to a unit into an adjective: 4-bit blocks, a 16-head layer, 2048-token
    # contexts: the kind of a thing (a storage format, a shape), not something measured.
    "kind": re.compile(r"\b\d+-(?:bit|byte|head|token|layer|block|dimensional|digit)s?\b"),
    # A numbered item: a list's items and steps, a cited paper's table or theorem, the first
    # steps of an optimiser's recurrence: ordinals naming a thing, not quantities. (One digit
    # only: "at step 1,200" is a count.)
    "ordinal": re.compile(r"^\s*\d+\.\s|\b(?:Table|Theorem|Figure|Lemma|[Ss]tep) \d\b(?![.,]\d)"),
    # A release of a program or a standard (NumPy 2, Python 3.11, Unicode 15): a name.
    "version": re.compile(r"\b(?:NumPy|Python|PyTorch|Unicode|MathJax|Jupyter Book) \d+(?:\.\d+)*"),
    # A year in parentheses, as a citation gives it ("Xiong et al. (2020)"): a date.
    "year": re.compile(r"\((?:1[6-9]|20)\d\d\)"),
    # 0 and 1 standing alone: the identities of mathematics (mean 0, variance 1, probability
    # 1, an empty sum of 0, a unit norm, position 0), which no run changes.
    "zero or one": re.compile(r"(?<![\w.,/])[01](?![\w/]|[.,]\d)"),
}

# What no rule can tell from a result, per chapter, each number with its reason; "*" takes a
# whole chapter out of the check.
PARALLEL = "being edited in parallel; to be cleared"
PER_FILE: dict[str, dict[str, str]] = {
    "book/tokenization.md": {
        "150,000": "the size of Unicode's repertoire, about 150,000 characters since Unicode 15: "
                   "a fact of the standard, stated as round as the sentence needs it"},
    "book/fine_tuning.md": {
        "821": "the number of LLMs-from-scratch's issue that reported the alpha-alone bug: a "
               "name, not a result"},
}


def typed_numbers(text: str, allowed: dict[str, str] | None = None) -> list[tuple[int, str, str]]:
    """(line number, number, line) for every number in the prose of a chapter with source
    ``text`` that no rule of ``ALLOWED``, no setting of its own code and no entry of
    ``allowed`` (number -> reason) lets through."""
    allowed = allowed or {}
    if "*" in allowed:
        return []
    literals = code_literals(text)
    found = []
    for number, line in enumerate(prose_lines(text), start=1):
        covered = [match.span() for rule in ALLOWED.values() for match in rule.finditer(line)]
        for match in NUMBER.finditer(line):
            start, end = match.span()
            value = float(re.sub(r"[, ]", "", match[0]))
            if RESULT_UNIT.match(line, end):
                found.append((number, match[0], line.strip()))
            elif any(a <= start and end <= b for a, b in covered):
                continue
            # A setting the text states and a cell of the chapter uses (the gain 0.9, the 60
            # tokens of an example): a literal of the chapter's code. When the cell's setting
            # changes, the prose loses its cover and this test fails.
            elif value in literals and not HEDGED.search(line, 0, start):
                continue
            elif match[0] not in allowed:
                found.append((number, match[0], line.strip()))
    return found


CHAPTERS = [page.relative_to(ROOT).as_posix() for page in toc_pages(ROOT)]


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_no_number_a_run_produces_is_typed(chapter):
    found = typed_numbers((ROOT / chapter).read_text(), PER_FILE.get(chapter))
    report = "\n".join(f"{chapter}:{line}: {number!r} in: {text}" for line, number, text in found)
    assert not found, ("numbers typed into the prose; glue them from the cell that computes "
                       "them, or derive them in math from what the text states:\n" + report)


def test_every_per_file_exception_is_still_needed():
    for chapter, numbers in PER_FILE.items():
        assert chapter in CHAPTERS, f"{chapter} is not a page of _toc.yml"
        if "*" in numbers:
            continue
        text = (ROOT / chapter).read_text()
        unneeded = [number for number in numbers
                    if typed_numbers(text, {n: r for n, r in numbers.items() if n != number})
                    == typed_numbers(text, numbers)]
        assert not unneeded, f"{chapter}: exceptions no longer needed: {unneeded}"


CHAPTER = """\
---
jupytext:
  formats: md:myst
---

# A chapter

```{code-cell} ipython3
---
mystnb:
  image:
    alt: >-
      The loss falls to 0.02 by the end.
  figure:
    caption: >-
      The loss at gain 0.9, step by step.
---
gains = [0.5, 0.9]
accuracy = train(seed=0)
glue("accuracy", 100 * accuracy, display=False)
```

The model reaches 97.3 % after 1,200 steps.
With gain 0.9, the loss is {glue:text}`loss:.2f` and accuracy {glue:text}`accuracy:.1f` %.
Its error is $2^{-24} \\approx 6.0 \\times 10^{-8}$, as in `float32` and GPT-2's (2019) files,
with mean 0 and variance 1.
It takes 42 passes, and the gain ends at about 0.9.

```{math}
:label: eq-x
x = 123.4
```
"""


def test_the_check_finds_typed_results_and_passes_glued_and_math_ones():
    found = typed_numbers(CHAPTER)
    assert [(line, number) for line, number, _ in found] == [
        (13, "0.02"), (23, "97.3"), (23, "1,200"), (27, "42"), (27, "0.9")]
    assert "reaches 97.3 % after 1,200 steps" in found[1][2]


def test_the_check_honours_a_reasoned_exception():
    assert [number for _, number, _ in typed_numbers(CHAPTER, {"42": "a fact"})] == [
        "0.02", "97.3", "1,200", "0.9"]
    assert typed_numbers(CHAPTER, {"*": PARALLEL}) == []


def test_the_prose_excludes_code_math_roles_and_options():
    text = ("```{prf:theorem} Title 7\n:label: thm-8\n\nBody 9.\n```\n"
            "```{code-cell} ipython3\n:tags: [remove-cell]\nx = 11\n```\n"
            "(sec-12)=\n$$\n13\n$$\nSee {eq}`eq-14` and `15` and $16$ and [a](https://x/17).\n")
    lines = prose_lines(text)
    assert lines[0].strip() == "Title 7" and lines[3] == "Body 9."
    assert not any(re.search(r"\d", line) for i, line in enumerate(lines) if i not in (0, 3))
