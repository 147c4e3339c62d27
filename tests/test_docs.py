"""The repository's own documents: the README stays short, its example runs, and every relative
link of the README, CONTRIBUTING.md, LICENSE-text.md and benchmarks/README.md leads to a file
(and a heading) that exists."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = ["README.md", "CONTRIBUTING.md", "LICENSE-text.md", "benchmarks/README.md"]
#: What a newcomer reads in five minutes.
README_WORDS = 1000

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def links(text: str) -> list[str]:
    """The targets of a Markdown text's inline links, code blocks left out."""
    return LINK.findall(FENCE.sub("", text))


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces made hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    return {anchor(line.lstrip("#")) for line in FENCE.sub("", text).splitlines()
            if line.startswith("#")}


def test_the_link_finder_finds_links_and_anchors():
    text = "See [a](b.md#c-d) and [e](https://x.org).\n```\n[f](g.md)\n```\n## C, d\n"
    assert links(text) == ["b.md#c-d", "https://x.org"]
    assert anchors(text) == {"c-d"}
    assert anchor("Where the site's Python comes from") == "where-the-sites-python-comes-from"


def test_the_readme_is_short():
    words = len((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert words <= README_WORDS, f"README.md has {words} words (at most {README_WORDS})"


@pytest.mark.slow
def test_the_readmes_example_runs():
    """The README's one Python block trains the reversal model and reverses ten digits."""
    from conftest import training_environment

    (example,) = re.findall(r"^```python\n(.*?)^```", (ROOT / "README.md").read_text(
        encoding="utf-8"), re.S | re.M)
    run = subprocess.run([sys.executable, "-c", example], capture_output=True, text=True,
                         timeout=600, env=training_environment())
    assert run.returncode == 0, run.stderr[-3000:]
    accuracy, reversed_digits = run.stdout.strip().splitlines()
    # the loop stops at 99.5 % on the validation problems
    assert float(accuracy.split()[2]) >= 0.99
    # the example's digits, reversed, as the README says it prints them
    assert reversed_digits == "[[3 5 6 2 9 5 1 4 1 3]]", reversed_digits


@pytest.mark.parametrize("name", DOCUMENTS)
def test_every_relative_link_leads_somewhere(name):
    document = ROOT / name
    broken = []
    for target in links(document.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        path, _, fragment = target.partition("#")
        file = (document.parent / path).resolve() if path else document
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif fragment and fragment not in anchors(file.read_text(encoding="utf-8")):
            broken.append(f"{target}: no such heading")
    assert broken == [], f"{name}: " + "; ".join(broken)
