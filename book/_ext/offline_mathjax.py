"""Serve MathJax 4 from the book's own site, so that math renders with no network, and let it
break a display equation wider than the column over lines.

Sphinx loads MathJax from a CDN by default. ``tools/mathjax/`` pins the npm package ``mathjax``
4 (``make book`` installs it with ``npm ci``); this extension copies what a page typeset with
``tex-chtml`` can request into ``_static/mathjax`` and points ``mathjax_path`` at it: the
combined component, the TeX extensions it may autoload, the accessibility and menu modules, the
speech engine's worker and its language maps (the speech a screen reader is given, and the menu's
languages), and the New Computer Modern font's woff2 files and dynamic ranges (the font package,
a dependency of ``mathjax``, under ``fonts/``, where the configuration below looks for it). The
copy happens after a successful build, outside the source ``_static`` folder, so Jupyter Book
does not add MathJax's many ``.js`` files to every page.

MathJax 3 cannot break lines: at 375 px 72 of the book's 149 display equations were wider than
a phone's column and scrolled sideways. MathJax 4 breaks a display equation that does not fit
its container at typeset time (``displayOverflow: linebreak``); one it cannot break (a matrix)
still scrolls in its own box with the cue that book.css draws. ``book/_static/equation-breaks.js``
typesets again when the column's width changes (a phone turned, a window resized).
"""

from __future__ import annotations

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
PACKAGES = ROOT / "tools" / "mathjax" / "node_modules"

# (source under node_modules, target under _static/mathjax)
MATHJAX_FILES = (
    ("mathjax/tex-chtml.js", "tex-chtml.js"),
    ("mathjax/input/tex/extensions", "input/tex/extensions"),
    ("mathjax/a11y", "a11y"),
    ("mathjax/ui", "ui"),
    ("mathjax/sre/speech-worker.js", "sre/speech-worker.js"),
    ("mathjax/sre/mathmaps", "sre/mathmaps"),
    ("@mathjax/mathjax-newcm-font/chtml", "fonts/mathjax-newcm-font/chtml"),
    ("mathjax/LICENSE", "LICENSE"),
)

# MathJax's settings (Sphinx writes them as window.MathJax before the script). ``fonts``: the
# font's files are served from the site, not a CDN. Display equations that do not fit break over
# lines at the container's width; inline formulas break where the line ends.
CONFIG = {
    "loader": {"paths": {"fonts": "[mathjax]/fonts"}},
    "output": {"displayOverflow": "linebreak",
               "linebreaks": {"inline": True, "width": "100%"}},
}


def mathjax_source() -> Path:
    """The installed npm packages (``tools/mathjax/node_modules``)."""
    if not (PACKAGES / "mathjax" / "tex-chtml.js").exists():
        raise RuntimeError(f"MathJax 4 is not installed in {PACKAGES}: run `make book`, which "
                           "installs it with `npm ci --prefix tools/mathjax`")
    return PACKAGES


def copy_mathjax(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    source = mathjax_source()
    target = Path(app.outdir) / "_static" / "mathjax"
    for relative_src, relative_dst in MATHJAX_FILES:
        src, dst = source / relative_src, target / relative_dst
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dst, dirs_exist_ok=True)
        else:
            shutil.copyfile(src, dst)


def merge(base: dict, extra: dict) -> dict:
    """``base`` with ``extra``'s settings added, nested dictionaries merged."""
    merged = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def configure(app, config) -> None:
    # Jupyter Book sets options.processHtmlClass; the book's settings are added to it.
    config.mathjax3_config = merge(config.mathjax3_config or {}, CONFIG)


def setup(app):
    mathjax_source()  # fail at start-up, not after the build, when the package is missing
    app.config.mathjax_path = "mathjax/tex-chtml.js"  # relative: served from _static/
    app.connect("config-inited", configure, priority=900)
    app.connect("build-finished", copy_mathjax)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
