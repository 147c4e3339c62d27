"""How long the book takes to build: clean, unchanged, and after an edit to the package.

Usage: ``python benchmarks/build_timing.py`` (with the virtual environment of ``make setup``)

In a scratch copy of the repository (as ``tests/test_build.py`` makes one: no ``_build``, no
``.venv``), times ``python -m tools.build_book``, the recipe of ``make book`` without the
install step:

1. a clean build, every chapter executed;
2. a rebuild with nothing changed (every chapter served from the execution cache);
3. a rebuild after touching a file in ``src/`` (which re-executes every chapter by design).

Prints each wall-clock time against its target; the third has no target of its own and is
shown beside the clean build it repeats. Exits with status 1 when a build fails or a target is
missed. The targets: unchanged <= 10 s; clean <= 150 s for the chapters before the part on real
language, which may add at most its budgeted training run (60 s) on top, so <= 210 s for the
whole book. The clean build's own record of each chapter's execution seconds (``_build/
.execution-seconds.json``, chapters executed two at a time) splits the clean time: what the
part on real language adds is estimated as its chapters' seconds over the two workers.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SKIP = shutil.ignore_patterns(".venv", "_build", ".git", "__pycache__", ".pytest_cache",
                              ".hypothesis", "*.egg-info", "node_modules")
BEFORE_PART = 150.0  # s: a clean build of the chapters before the part on real language
PART_RUN = 60.0  # s: what the part on real language may add, its budgeted training run
PART = "Real language"  # the part's caption in _toc.yml
TARGETS = {"clean build": BEFORE_PART + PART_RUN,
           "  the chapters before the part": BEFORE_PART, "  what the part adds": PART_RUN,
           "no-change rebuild": 10.0, "rebuild after touching src/": None}


def part_chapter_seconds(repo: Path) -> tuple[float, float]:
    """(seconds of the part's chapters, of all chapters) executed by the clean build's
    parallel pass, from its record."""
    import json

    import yaml

    toc = yaml.safe_load((repo / "_toc.yml").read_text())
    part = {f"{c['file']}.md" for p in toc["parts"] if p.get("caption") == PART
            for c in p["chapters"]}
    if not part:
        sys.exit(f"no part captioned {PART!r} in _toc.yml")
    seconds = json.loads((repo / "_build" / ".execution-seconds.json").read_text())
    return sum(seconds.get(name, 0.0) for name in part), sum(seconds.values())


def timed_build(repo: Path) -> tuple[float, str]:
    """The build's wall-clock seconds and what it printed."""
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "tools.build_book"], cwd=repo,
                            capture_output=True, text=True, timeout=1800)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"the build failed:\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}")
    return elapsed, result.stdout


def main() -> int:
    # The copy leaves out every node_modules (114 MB): it links this checkout's instead, which
    # the build reads (MathJax, served from the site; the texts).
    os.environ["SCRATCHFORMER_TEXTS"] = str(ROOT / "tools" / "text")
    with tempfile.TemporaryDirectory(prefix="build-timing-") as scratch:
        repo = Path(scratch) / "repo"
        shutil.copytree(ROOT, repo, ignore=SKIP)
        for modules in ROOT.glob("tools/*/node_modules"):
            (repo / modules.relative_to(ROOT)).symlink_to(modules, target_is_directory=True)
        clean, printed = timed_build(repo)
        in_part, in_all = part_chapter_seconds(repo)
        workers = int(re.search(r"(\d+) at a time", printed)[1])  # the pass's workers
        adds = in_part / workers
        times = {"clean build": clean, "  the chapters before the part": clean - adds,
                 "  what the part adds": adds, "no-change rebuild": timed_build(repo)[0]}
        module = repo / "src" / "scratchformer" / "attention.py"
        os.utime(module)  # a touch changes no byte: the fingerprint follows content, so edit
        module.write_text(module.read_text() + "\n")
        times["rebuild after touching src/"] = timed_build(repo)[0]
    print(f"book build times, {os.cpu_count()} CPU cores (install excluded); the parallel "
          f"pass executed {in_all:.0f} chapter-seconds, {in_part:.0f} of them in the part "
          f"{PART!r}, {workers} at a time (the lines marked ~ are estimated from them)")
    missed = 0
    for name, seconds in times.items():
        target = TARGETS[name]
        verdict = "-" if target is None else ("ok" if seconds <= target else "MISSED")
        missed += verdict == "MISSED"
        goal = f"<= {target:.0f} s" if target else "(re-executes every chapter)"
        mark = "~" if name.startswith("  ") else " "
        print(f"{name:<30} {mark}{seconds:6.1f} s   target {goal:<28} {verdict}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
