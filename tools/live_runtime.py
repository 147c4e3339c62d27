"""The Pyodide runtime the site serves from its own origin: the code readers run in their browser.

:func:`install` writes into ``<site>/_static/live/``:

- ``pyodide/``: Pyodide's runtime from the npm package ``pyodide`` (``tools/pyodide``, which
  ``make book`` installs with ``npm ci``): ``pyodide.js``, ``pyodide.mjs``, ``pyodide.asm.js``,
  ``pyodide.asm.wasm``, ``python_stdlib.zip`` and ``pyodide-lock.json``, the lock served whole
  (Pyodide resolves every package name through it, so a name it lists but the site does not
  serve fails when it is loaded, as it would on any server without that wheel);
- beside them, Pyodide's own wheels of NumPy and matplotlib and of everything they depend on,
  the closure of ``numpy`` and ``matplotlib`` under the lock's ``depends`` (:func:`closure`),
  each under the lock's ``file_name`` and checked against the lock's ``sha256``. No NumPy
  release on PyPI carries a WebAssembly wheel: ``make book`` downloads the official Pyodide
  wheels in a PyPI wheel that bundles them (``tools/pyodide/requirements.txt``, hash-pinned,
  into ``tools/pyodide/download/``), and any file of that folder, or any member of an archive
  in it, with the right name and bytes will do (:func:`find_wheel`);
- the package itself, a pure-Python wheel built here from ``src/`` (:func:`package_wheel`),
  whose ``.py`` files are byte for byte those of ``src/scratchformer`` (the stored training runs
  are keyed by a hash of them), and ``num2words``'s wheel from PyPI, checked against its pin;
- ``manifest.json``: the Pyodide version, the ``indexURL`` to hand ``loadPyodide`` (relative to
  the manifest), the packages to load for a page that needs NumPy only and for one that plots,
  the two wheel names, every file served (by its name in ``pyodide/``) with its bytes and
  sha256, and their total.

Anything missing or not byte for byte what its pin says stops with a :class:`RuntimeError` that
names the file. Usage: ``python -m tools.live_runtime [SITE]`` (default ``_build/html``).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
import re
import shutil
import sys
import tomllib
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOOL = ROOT / "tools" / "pyodide"
NPM = TOOL / "node_modules" / "pyodide"
DOWNLOAD = TOOL / "download"  # git-ignored: what pip downloads from requirements.txt
REQUIREMENTS = TOOL / "requirements.txt"
SOURCE = ROOT / "src" / "scratchformer"
PYPROJECT = ROOT / "pyproject.toml"
LIVE = Path("_static") / "live"

#: Pyodide's files copied from the npm package (``pyodide.mjs`` where the package has it).
RUNTIME = ("pyodide.js", "pyodide.mjs", "pyodide.asm.js", "pyodide.asm.wasm",
           "python_stdlib.zip", "pyodide-lock.json")
#: What ``loadPyodide`` fetches before any package (a module worker takes ``pyodide.mjs``
#: instead of ``pyodide.js``).
STARTUP = ("pyodide.js", "pyodide.asm.js", "pyodide.asm.wasm", "python_stdlib.zip",
           "pyodide-lock.json")
#: The sets a page can load, each by the names the lock knows, closed under ``depends``.
SETS = {"numpy": ("numpy",), "matplotlib": ("numpy", "matplotlib")}
#: The translation task's data (scratchformer.translation): its wheel from PyPI. It requires
#: docopt, which only its command-line script imports (``num2words.data/scripts``); ``import
#: num2words`` works without it, so docopt is not served.
NUM2WORDS = "num2words"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def closure(packages: Mapping[str, Mapping], roots: Iterable[str]) -> list[str]:
    """The lock's packages that ``roots`` need, each after those it depends on (the order
    Pyodide can load them in): ``packages`` is ``pyodide-lock.json``'s ``packages``."""
    order: list[str] = []
    seen: set[str] = set()

    def visit(name: str, needed_by: str | None) -> None:
        if name in seen:
            return
        if name not in packages:
            by = f" (a dependency of {needed_by})" if needed_by else ""
            raise RuntimeError(f"pyodide-lock.json has no package {name!r}{by}")
        seen.add(name)
        for dependency in packages[name].get("depends", []):
            visit(dependency, name)
        order.append(name)

    for root in roots:
        visit(root, None)
    return order


def pinned_version(tool: Path = TOOL) -> str:
    """The version of ``pyodide`` that ``tools/pyodide/package.json`` pins."""
    return json.loads((tool / "package.json").read_text())["dependencies"]["pyodide"]


def read_lock(npm: Path = NPM, version: str | None = None) -> dict:
    """The npm package's ``pyodide-lock.json``, after checking the package is the pinned one."""
    version = pinned_version() if version is None else version
    if not (npm / "package.json").exists() or not (npm / "pyodide-lock.json").exists():
        raise RuntimeError(f"{npm} is missing: `make book` installs pyodide {version} from npm "
                           f"(npm ci --prefix tools/pyodide)")
    installed = json.loads((npm / "package.json").read_text())["version"]
    lock = json.loads((npm / "pyodide-lock.json").read_text())
    if installed != version or lock["info"]["version"] != version:
        raise RuntimeError(f"{npm} holds pyodide {installed} (its lock says "
                           f"{lock['info']['version']}), tools/pyodide/package.json pins "
                           f"{version}: `make book` installs it again")
    return lock


def requirements(path: Path = REQUIREMENTS) -> dict[str, tuple[str, set[str]]]:
    """``name: (version, sha256 hashes)`` of each pin of a pip requirements file."""
    pins = {}
    text = path.read_text().replace("\\\n", " ")
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        match = re.match(r"([A-Za-z0-9._-]+)==(\S+)", line)
        if match:
            name = re.sub(r"[-_.]+", "-", match[1]).lower()
            pins[name] = (match[2], set(re.findall(r"--hash=sha256:([0-9a-f]{64})", line)))
    return pins


class _Sources:
    """Files of the download folder by name: loose files anywhere in it (an unpacked release
    of Pyodide, say) first, then the members of the archives (``.whl``, ``.zip``) at its top."""

    def __init__(self, folder: Path):
        self.folder = folder
        self._members: dict[str, tuple[Path, str]] | None = None

    def members(self) -> dict[str, tuple[Path, str]]:
        if self._members is None:
            self._members = {}
            archives = sorted(self.folder.glob("*.whl")) + sorted(self.folder.glob("*.zip"))
            for archive in archives:
                try:
                    with zipfile.ZipFile(archive) as z:
                        members = z.namelist()
                except zipfile.BadZipFile:
                    raise RuntimeError(f"{archive} is no zip archive: delete it, and `make "
                                       f"book` downloads it again") from None
                for member in members:
                    name = member.rsplit("/", 1)[-1]
                    if name and name not in self._members:
                        self._members[name] = (archive, member)
        return self._members

    def read(self, name: str) -> tuple[bytes, str] | None:
        """The bytes of the file ``name`` and where they came from, or None."""
        if not self.folder.is_dir():
            return None
        loose = sorted(path for path in self.folder.rglob("*") if path.name == name)
        if loose:
            return loose[0].read_bytes(), str(loose[0])
        found = self.members().get(name)
        if found is None:
            return None
        archive, member = found
        with zipfile.ZipFile(archive) as z:
            return z.read(member), f"{archive}:{member}"


def find_wheel(file_name: str, expected: str, sources: _Sources) -> bytes:
    """The bytes of ``file_name`` from the download folder, which must hash to ``expected``."""
    found = sources.read(file_name)
    if found is None:
        raise RuntimeError(f"{file_name} is not in {sources.folder} (nor in any archive there): "
                           f"`make book` downloads it (tools/pyodide/requirements.txt)")
    data, origin = found
    if sha256(data) != expected:
        raise RuntimeError(f"{file_name} ({origin}) has sha256 {sha256(data)}, not the "
                           f"{expected} its pin says")
    return data


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def package_wheel(source: Path = SOURCE, pyproject: Path = PYPROJECT) -> tuple[str, bytes]:
    """The package as a pure-Python wheel: every ``.py`` file under ``source`` stored as it is,
    the version and requirements of ``pyproject.toml``. The same sources give the same bytes
    (fixed dates and modes, files in sorted order)."""
    project = tomllib.loads(pyproject.read_text())["project"]
    name, version = project["name"], project["version"]
    dist = f"{name}-{version}.dist-info"
    files = [(f"{name}/{path.relative_to(source).as_posix()}", path.read_bytes())
             for path in sorted(source.rglob("*.py")) if "__pycache__" not in path.parts]
    metadata = [
        "Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}",
        f"Summary: {project['description']}",
        f"License: {project.get('license', {}).get('text', '')}",
        f"Requires-Python: {project['requires-python']}",
        *(f"Requires-Dist: {requirement}" for requirement in project.get("dependencies", [])),
    ]
    for extra, needs in project.get("optional-dependencies", {}).items():
        metadata.append(f"Provides-Extra: {extra}")
        metadata += [f'Requires-Dist: {need}; extra == "{extra}"' for need in needs]
    files.append((f"{dist}/METADATA", ("\n".join(metadata) + "\n").encode()))
    files.append((f"{dist}/WHEEL", b"Wheel-Version: 1.0\nGenerator: tools.live_runtime\n"
                                   b"Root-Is-Purelib: true\nTag: py3-none-any\n"))
    files.append((f"{dist}/top_level.txt", f"{name}\n".encode()))
    record = "".join(f"{path},{_record_hash(data)},{len(data)}\n" for path, data in files)
    files.append((f"{dist}/RECORD", (record + f"{dist}/RECORD,,\n").encode()))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as wheel:
        for path, data in files:
            info = zipfile.ZipInfo(path, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o100644 << 16
            info.create_system = 3
            wheel.writestr(info, data)
    return f"{name}-{version}-py3-none-any.whl", buffer.getvalue()


def install(site: Path, *, npm: Path = NPM, download: Path = DOWNLOAD,
            requirements_file: Path = REQUIREMENTS, source: Path = SOURCE,
            pyproject: Path = PYPROJECT, version: str | None = None) -> dict:
    """Write the runtime, the checked wheels and ``manifest.json`` into
    ``site/_static/live/`` (its ``pyodide/`` folder is replaced) and return the manifest.

    Each set's ``bytes`` counts what a page fetches to run it: ``STARTUP``, the set's wheels and
    the package's wheel (``num2words`` apart, for the pages that translate)."""
    lock = read_lock(npm, version)
    packages = lock["packages"]
    sources = _Sources(download)
    files: dict[str, bytes] = {}
    for name in RUNTIME:
        if (npm / name).exists():
            files[name] = (npm / name).read_bytes()
        elif name != "pyodide.mjs":
            raise RuntimeError(f"{npm / name} is missing: `make book` installs pyodide again")
    sets = {key: closure(packages, roots) for key, roots in SETS.items()}
    for name in dict.fromkeys(name for names in sets.values() for name in names):
        entry = packages[name]
        files[entry["file_name"]] = find_wheel(entry["file_name"], entry["sha256"], sources)

    pins = requirements(requirements_file)
    if NUM2WORDS not in pins:
        raise RuntimeError(f"{requirements_file} pins no {NUM2WORDS}")
    words_version, words_hashes = pins[NUM2WORDS]
    words_name = f"{NUM2WORDS}-{words_version}-py3-none-any.whl"
    found = sources.read(words_name)
    if found is None:
        raise RuntimeError(f"{words_name} is not in {download}: `make book` downloads it "
                           f"(tools/pyodide/requirements.txt)")
    if sha256(found[0]) not in words_hashes:
        raise RuntimeError(f"{words_name} ({found[1]}) has sha256 {sha256(found[0])}, not one "
                           f"of the hashes {requirements_file} pins")
    files[words_name] = found[0]
    package_name, files[package_name] = package_wheel(source, pyproject)

    target = site / LIVE / "pyodide"
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    for name, data in files.items():
        (target / name).write_bytes(data)

    startup = sum(len(files[name]) for name in STARTUP) + len(files[package_name])
    manifest = {
        "pyodide": lock["info"]["version"],
        "python": lock["info"]["python"],
        "indexURL": "pyodide/",
        "startup": list(STARTUP),
        "sets": {key: {"packages": names,
                       "files": [packages[name]["file_name"] for name in names],
                       "bytes": startup + sum(len(files[packages[name]["file_name"]])
                                              for name in names)}
                 for key, names in sets.items()},
        "scratchformer": package_name,
        "num2words": words_name,
        "files": {name: {"bytes": len(data), "sha256": sha256(data)}
                  for name, data in sorted(files.items())},
        "bytes": sum(len(data) for data in files.values()),
    }
    (site / LIVE / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("site", type=Path, nargs="?", default=ROOT / "_build" / "html",
                        help="the built site (default: %(default)s)")
    args = parser.parse_args(argv)
    try:
        manifest = install(args.site)
    except RuntimeError as error:
        print(f"live_runtime: {error}", file=sys.stderr)
        return 1
    sets = ", ".join(f"{key} {value['bytes'] / 1e6:.1f} MB"
                     for key, value in manifest["sets"].items())
    print(f"live_runtime: Pyodide {manifest['pyodide']} and {len(manifest['files'])} files "
          f"({manifest['bytes'] / 1e6:.1f} MB) in {args.site / LIVE}; a page fetches {sets}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
