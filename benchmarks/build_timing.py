"""How long the book takes to build: clean, unchanged, and after an edit to the package.

Usage: ``python benchmarks/build_timing.py`` (with the virtual environment of ``make setup``)

In a scratch copy of the repository (as ``tests/test_build.py`` makes one: no ``_build``, no
``.venv``), times ``python -m tools.build_book``, the recipe of ``make book`` without the
install step:

1. a clean build, every chapter executed;
2. a rebuild with nothing changed (every chapter served from the execution cache);
3. a rebuild after touching a file in ``src/`` (which re-executes every chapter by design).

Prints each wall-clock time against its target (clean <= 150 s, unchanged <= 10 s); the third
has no target of its own and is shown beside the clean build it repeats. Exits with status 1
when a build fails or a target is missed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SKIP = shutil.ignore_patterns(".venv", "_build", ".git", "__pycache__", ".pytest_cache",
                              ".hypothesis", "*.egg-info", "node_modules")
TARGETS = {"clean build": 150.0, "no-change rebuild": 10.0, "rebuild after touching src/": None}


def timed_build(repo: Path) -> float:
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "tools.build_book"], cwd=repo,
                            capture_output=True, text=True, timeout=1800)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"the build failed:\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}")
    return elapsed


def main() -> int:
    # The copy leaves out every node_modules (114 MB): it links this checkout's instead, which
    # the build reads (MathJax, served from the site; the texts).
    os.environ["SCRATCHFORMER_TEXTS"] = str(ROOT / "tools" / "text")
    with tempfile.TemporaryDirectory(prefix="build-timing-") as scratch:
        repo = Path(scratch) / "repo"
        shutil.copytree(ROOT, repo, ignore=SKIP)
        for modules in ROOT.glob("tools/*/node_modules"):
            (repo / modules.relative_to(ROOT)).symlink_to(modules, target_is_directory=True)
        times = {"clean build": timed_build(repo), "no-change rebuild": timed_build(repo)}
        module = repo / "src" / "scratchformer" / "attention.py"
        os.utime(module)  # a touch changes no byte: the fingerprint follows content, so edit
        module.write_text(module.read_text() + "\n")
        times["rebuild after touching src/"] = timed_build(repo)
    print(f"book build times, {os.cpu_count()} CPU cores (install excluded)")
    missed = 0
    for name, seconds in times.items():
        target = TARGETS[name]
        verdict = "-" if target is None else ("ok" if seconds <= target else "MISSED")
        missed += verdict == "MISSED"
        goal = f"<= {target:.0f} s" if target else "(re-executes every chapter)"
        print(f"{name:<30} {seconds:7.1f} s   target {goal:<28} {verdict}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
