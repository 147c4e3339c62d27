"""``make test`` runs pytest-xdist with ``--dist loadgroup`` so that the tests of one
``xdist_group`` share a worker, and with it their session fixture: the seed sweep
(tests/test_seeds.py) executes every training chapter five times in that fixture. If the
grouping silently stopped working (as it did under pytest 9 with xdist 3.8.0), each worker
would run the fixture again: the whole sweep twice. This test runs a small suite the way
``make test`` does and requires one worker and one fixture for the group."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

SUITE = '''
import os
import pytest

pytestmark = [pytest.mark.xdist_group("shared")]


def worker():
    return os.environ.get("PYTEST_XDIST_WORKER", "none")


@pytest.fixture(scope="session")
def expensive():
    with open("log", "a") as log:
        log.write("fixture " + worker() + "\\n")


@pytest.mark.parametrize("i", range(12))
def test_grouped(expensive, i):
    with open("log", "a") as log:
        log.write("grouped " + worker() + "\\n")
'''

OTHERS = '''
import pytest


@pytest.mark.parametrize("i", range(12))
def test_other(i):
    pass
'''


def test_a_group_runs_on_one_worker_with_one_fixture(tmp_path):
    (tmp_path / "test_grouped.py").write_text(SUITE)
    (tmp_path / "test_others.py").write_text(OTHERS)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadgroup",
                          "-p", "no:cacheprovider", "."], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    lines = Counter((tmp_path / "log").read_text().split("\n")[:-1])
    fixtures = [line for line in lines if line.startswith("fixture")]
    grouped = {line: n for line, n in lines.items() if line.startswith("grouped")}
    assert len(fixtures) == 1 and lines[fixtures[0]] == 1, lines
    assert len(grouped) == 1 and sum(grouped.values()) == 12, lines
    assert fixtures[0].split()[1] == next(iter(grouped)).split()[1] != "none"
