"""tools/live_runtime.py: the Pyodide runtime the site serves, every file checked against its pin.

Most tests build a small Pyodide of their own (a lock, its wheels in an archive, the runtime's
files) and check what :func:`live_runtime.install` makes of it, and of it tampered with. The
last ones read the real npm package and downloads that ``make book`` installs in ``tools/pyodide``
(skipped without them, failed under CI, which runs ``make book`` first).
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from tools import live_runtime

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "src" / "scratchformer"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def fake_lock(depends: dict[str, list[str]]) -> dict:
    """``pyodide-lock.json``'s ``packages`` for packages named in ``depends``."""
    return {name: {"name": name, "file_name": f"{name}-1.0-py3-none-any.whl",
                   "depends": needs, "sha256": sha(f"wheel of {name}".encode())}
            for name, needs in depends.items()}


# The shape of Pyodide 0.27.7's: matplotlib pulls in most of the rest, numpy nothing.
DEPENDS = {"numpy": [], "six": [], "python-dateutil": ["six"], "pillow": [],
           "matplotlib-pyodide": [], "matplotlib": ["numpy", "python-dateutil", "pillow",
                                                   "matplotlib-pyodide"],
           "pandas": ["numpy", "python-dateutil"], "openssl": []}


def test_the_closure_puts_each_package_after_what_it_needs():
    packages = fake_lock(DEPENDS)
    assert live_runtime.closure(packages, ["numpy"]) == ["numpy"]
    order = live_runtime.closure(packages, ["numpy", "matplotlib"])
    assert order == ["numpy", "six", "python-dateutil", "pillow", "matplotlib-pyodide",
                     "matplotlib"]
    assert live_runtime.closure(packages, ["matplotlib", "numpy"])[-1] == "matplotlib"


def test_the_closure_names_a_dependency_the_lock_lacks():
    packages = fake_lock({"matplotlib": ["kiwisolver"]})
    with pytest.raises(RuntimeError, match="no package 'kiwisolver' .a dependency of matplotlib"):
        live_runtime.closure(packages, ["matplotlib"])


@pytest.fixture
def fake(tmp_path):
    """A Pyodide of the test's own: npm's folder, the download folder with the wheels in an
    archive (as PyPI's wheel holds them) and num2words's wheel, and its requirements file."""
    npm, download = tmp_path / "npm", tmp_path / "download"
    npm.mkdir()
    download.mkdir()
    packages = fake_lock(DEPENDS)
    (npm / "package.json").write_text(json.dumps({"name": "pyodide", "version": "9.9.9"}))
    (npm / "pyodide-lock.json").write_text(json.dumps(
        {"info": {"version": "9.9.9", "python": "3.12.7"}, "packages": packages}))
    for name in live_runtime.RUNTIME[:-1]:
        (npm / name).write_bytes(f"runtime file {name}".encode())
    with zipfile.ZipFile(download / "bundle-1.0-py3-none-any.whl", "w") as bundle:
        for name, entry in packages.items():
            bundle.writestr(f"bundle/assets/pyodide/{entry['file_name']}", f"wheel of {name}")
    words = io.BytesIO()
    with zipfile.ZipFile(words, "w") as wheel:
        wheel.writestr("num2words/__init__.py", "")
    words = words.getvalue()
    (download / "num2words-0.5.14-py3-none-any.whl").write_bytes(words)
    requirements = tmp_path / "requirements.txt"
    requirements.write_text(f"# pins\nbundle==1.0 \\\n    --hash=sha256:{'0' * 64}\n"
                            f"num2words==0.5.14 \\\n    --hash=sha256:{sha(words)}\n")
    return {"npm": npm, "download": download, "requirements_file": requirements,
            "version": "9.9.9", "packages": packages, "site": tmp_path / "site"}


def install(fake):
    return live_runtime.install(fake["site"], npm=fake["npm"], download=fake["download"],
                                requirements_file=fake["requirements_file"],
                                version=fake["version"])


def test_install_serves_the_runtime_and_the_two_sets_and_nothing_else(fake):
    manifest = install(fake)
    served = fake["site"] / "_static" / "live" / "pyodide"
    assert json.loads((served.parent / "manifest.json").read_text()) == manifest
    assert manifest["indexURL"] == "pyodide/" and manifest["pyodide"] == "9.9.9"
    assert manifest["sets"]["numpy"]["files"] == ["numpy-1.0-py3-none-any.whl"]
    assert manifest["sets"]["matplotlib"]["packages"] == live_runtime.closure(
        fake["packages"], ["numpy", "matplotlib"])
    assert manifest["scratchformer"] == "scratchformer-0.1.0-py3-none-any.whl"
    assert manifest["num2words"] == "num2words-0.5.14-py3-none-any.whl"
    wheels = {name for name in manifest["files"] if name.endswith(".whl")}
    assert "pandas-1.0-py3-none-any.whl" not in wheels  # in the lock, not needed
    assert "openssl-1.0-py3-none-any.whl" not in wheels
    assert {path.name for path in served.iterdir()} == set(manifest["files"])
    # the lock is served whole: Pyodide resolves every name through it
    assert (served / "pyodide-lock.json").read_bytes() == (
        fake["npm"] / "pyodide-lock.json").read_bytes()


def test_the_manifests_sizes_and_hashes_are_the_files(fake):
    manifest = install(fake)
    served = fake["site"] / "_static" / "live" / "pyodide"
    for name, entry in manifest["files"].items():
        data = (served / name).read_bytes()
        assert (len(data), sha(data)) == (entry["bytes"], entry["sha256"]), name
    sizes = {name: entry["bytes"] for name, entry in manifest["files"].items()}
    assert manifest["bytes"] == sum(sizes.values())
    startup = sum(sizes[name] for name in manifest["startup"]) + sizes[manifest["scratchformer"]]
    for chosen in manifest["sets"].values():
        assert chosen["bytes"] == startup + sum(sizes[name] for name in chosen["files"])


def test_install_replaces_what_an_earlier_install_served(fake):
    install(fake)
    stale = fake["site"] / "_static" / "live" / "pyodide" / "pandas-0.1-py3-none-any.whl"
    stale.write_bytes(b"old")
    install(fake)
    assert not stale.exists()


def tamper(archive: Path, file_name: str):
    with zipfile.ZipFile(archive) as z:
        members = {name: z.read(name) for name in z.namelist()}
    with zipfile.ZipFile(archive, "w") as z:
        for name, data in members.items():
            z.writestr(name, data + b"!" if name.endswith("/" + file_name) else data)


def test_a_tampered_wheel_fails_naming_the_file(fake):
    tamper(fake["download"] / "bundle-1.0-py3-none-any.whl", "pillow-1.0-py3-none-any.whl")
    with pytest.raises(RuntimeError, match=r"pillow-1\.0-py3-none-any\.whl \(.*bundle-1\.0"
                                           r".*\) has sha256 [0-9a-f]{64}, not the"):
        install(fake)
    assert not (fake["site"] / "_static" / "live" / "manifest.json").exists()


def test_a_loose_copy_is_taken_and_checked_as_well(fake):
    """Wheels unpacked into the download folder (from Pyodide's release tarball, say) are
    read before any archive's, and pass the same check."""
    folder = fake["download"] / "pyodide"
    folder.mkdir()
    (folder / "six-1.0-py3-none-any.whl").write_bytes(b"wheel of six")
    assert "six-1.0-py3-none-any.whl" in install(fake)["files"]
    (folder / "six-1.0-py3-none-any.whl").write_bytes(b"another six")
    with pytest.raises(RuntimeError, match=r"six-1\.0-py3-none-any\.whl \(.*pyodide/six"):
        install(fake)


def test_a_missing_wheel_fails_naming_the_file(fake):
    (fake["download"] / "bundle-1.0-py3-none-any.whl").unlink()
    with pytest.raises(RuntimeError, match=r"numpy-1\.0-py3-none-any\.whl is not in .*"
                                           r"`make book` downloads it"):
        install(fake)


def test_num2words_is_checked_against_its_pin(fake):
    with zipfile.ZipFile(fake["download"] / "num2words-0.5.14-py3-none-any.whl", "w") as wheel:
        wheel.writestr("num2words/__init__.py", "# another")
    with pytest.raises(RuntimeError, match=r"num2words-0\.5\.14-py3-none-any\.whl .*sha256"):
        install(fake)
    (fake["download"] / "num2words-0.5.14-py3-none-any.whl").unlink()
    with pytest.raises(RuntimeError, match=r"num2words-0\.5\.14-py3-none-any\.whl is not in"):
        install(fake)


def test_a_broken_download_is_named(fake):
    (fake["download"] / "bundle-1.0-py3-none-any.whl").write_bytes(b"half a download")
    with pytest.raises(RuntimeError, match=r"bundle-1\.0-py3-none-any\.whl is no zip archive"):
        install(fake)


def test_a_missing_or_other_npm_package_says_make_book_installs_it(fake):
    with pytest.raises(RuntimeError, match=r"is missing: `make book` installs pyodide 9\.9\.9"):
        live_runtime.install(fake["site"], npm=fake["npm"] / "nowhere", version="9.9.9")
    with pytest.raises(RuntimeError, match=r"holds pyodide 9\.9\.9 .* pins 1\.0\.0: `make book`"):
        live_runtime.install(fake["site"], npm=fake["npm"], version="1.0.0")
    (fake["npm"] / "pyodide.asm.wasm").unlink()
    with pytest.raises(RuntimeError, match=r"pyodide\.asm\.wasm is missing"):
        install(fake)


def test_requirements_are_read_with_their_hashes(tmp_path):
    path = tmp_path / "requirements.txt"
    path.write_text("# a comment==1.0\nSome_Package==2.0 \\\n  --hash=sha256:" + "a" * 64
                    + " \\\n  --hash=sha256:" + "b" * 64 + "  # why\nother==1 --hash=sha256:"
                    + "c" * 64 + "\n")
    assert live_runtime.requirements(path) == {"some-package": ("2.0", {"a" * 64, "b" * 64}),
                                               "other": ("1", {"c" * 64})}


# ---- the package's wheel -------------------------------------------------------------------

def test_the_package_wheel_holds_every_source_file_byte_for_byte():
    """The stored training runs are keyed by a hash of the package's ``.py`` files and their
    paths (scratchformer.book.runs): the wheel must hold exactly those, as they are."""
    name, data = live_runtime.package_wheel()
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert name == f"scratchformer-{version}-py3-none-any.whl"
    sources = {f"scratchformer/{path.relative_to(SOURCE).as_posix()}": path.read_bytes()
               for path in SOURCE.rglob("*.py") if "__pycache__" not in path.parts}
    assert {"scratchformer/__init__.py", "scratchformer/book/runs.py",
            "scratchformer/pytorch/__init__.py"} <= sources.keys()
    with zipfile.ZipFile(io.BytesIO(data)) as wheel:
        names = wheel.namelist()
        assert {n for n in names if n.endswith(".py")} == sources.keys()
        assert all(wheel.read(path) == content for path, content in sources.items())
        dist = f"scratchformer-{version}.dist-info"
        assert {n for n in names if not n.endswith(".py")} == {
            f"{dist}/{n}" for n in ("METADATA", "WHEEL", "RECORD", "top_level.txt")}
        metadata = wheel.read(f"{dist}/METADATA").decode()
        assert f"\nVersion: {version}\n" in metadata and "Requires-Dist: numpy" in metadata
        assert "Root-Is-Purelib: true\nTag: py3-none-any\n" in wheel.read(f"{dist}/WHEEL").decode()
        record = [line.split(",") for line in wheel.read(f"{dist}/RECORD").decode().splitlines()]
        assert sorted(row[0] for row in record) == sorted(names)
        for path, digest, size in record:
            if path != f"{dist}/RECORD":
                content = wheel.read(path)
                expected = base64.urlsafe_b64encode(hashlib.sha256(content).digest())
                assert (digest, int(size)) == ("sha256=" + expected.rstrip(b"=").decode(),
                                               len(content)), path
    assert live_runtime.package_wheel()[1] == data  # the same sources, the same bytes


def test_pip_installs_the_package_wheel(tmp_path):
    """pip, which checks the name, the tags and RECORD, installs the wheel, and the package
    imports from where it put it."""
    name, data = live_runtime.package_wheel()
    (tmp_path / name).write_bytes(data)
    installed = tmp_path / "target"
    result = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                             "--no-index", "--target", str(installed), str(tmp_path / name)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    check = subprocess.run(
        [sys.executable, "-I", "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
         "import scratchformer as sf; print(sf.__file__)", str(installed)],
        capture_output=True, text=True, timeout=300)
    assert check.returncode == 0, check.stderr
    assert Path(check.stdout.strip()).parent == installed / "scratchformer"


# ---- the real thing: what `make book` installs in tools/pyodide ---------------------------

def installed_or_skip():
    pins = live_runtime.requirements()
    missing = [path for path in (live_runtime.NPM / "pyodide-lock.json",
                                 *(live_runtime.DOWNLOAD / f"{re.sub('-', '_', name)}-{version}"
                                   "-py3-none-any.whl" for name, (version, _) in pins.items()))
               if not path.exists()]
    if missing:
        reason = f"{missing[0]} missing: `make book` installs it"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)


def test_the_pins_are_exact_and_hashed():
    package = json.loads((ROOT / "tools" / "pyodide" / "package.json").read_text())
    lock = json.loads((ROOT / "tools" / "pyodide" / "package-lock.json").read_text())
    assert re.fullmatch(r"\d+\.\d+\.\d+", package["dependencies"]["pyodide"])
    assert lock["packages"]["node_modules/pyodide"]["version"] == package["dependencies"][
        "pyodide"]
    pins = live_runtime.requirements()
    assert "num2words" in pins and all(len(hashes) == 1 for _, hashes in pins.values())
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^book: .*\$\(PYODIDE\)", makefile, re.M)
    assert "--require-hashes" in makefile and "tools/pyodide/node_modules" in makefile


def test_the_real_runtime_is_served_checked(tmp_path):
    installed_or_skip()
    manifest = live_runtime.install(tmp_path)
    lock = json.loads((live_runtime.NPM / "pyodide-lock.json").read_text())["packages"]
    assert manifest["pyodide"] == live_runtime.pinned_version()
    matplotlib = manifest["sets"]["matplotlib"]["packages"]
    assert matplotlib[-1] == "matplotlib" and "matplotlib-pyodide" in matplotlib
    assert not {"pandas", "pyarrow", "openssl", "ipython", "micropip"} & set(matplotlib)
    for name in matplotlib:
        assert manifest["files"][lock[name]["file_name"]]["sha256"] == lock[name]["sha256"]
    assert {"pyodide.js", "pyodide.asm.wasm", "python_stdlib.zip"} <= manifest["files"].keys()


def test_num2words_imports_without_docopt():
    """num2words requires docopt for its command-line script only: the library imports, and
    works, without it (so the site serves no docopt)."""
    installed_or_skip()
    wheel = live_runtime.DOWNLOAD / f"num2words-{live_runtime.requirements()['num2words'][0]}" \
        "-py3-none-any.whl"
    result = subprocess.run(
        [sys.executable, "-I", "-c", "import sys; sys.modules['docopt'] = None; "
         "sys.path.insert(0, sys.argv[1]); import num2words; print(num2words.num2words(42))",
         str(wheel)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "forty-two"
