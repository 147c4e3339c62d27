"""The site's root page, ``index.html``: a redirect to the book's first page, with its
language, its title and an empty icon.

sphinx-external-toc writes the root as one ``<meta http-equiv="Refresh">`` line when the
table of contents' root is not ``index``. A page without an icon link makes Chromium ask the
origin for ``/favicon.ico``, which this site does not have: a 404 in the console of a reader who
opens the book's address, seen by the browser sweep once pages were opened one after another
in one context (tests/test_site.py). The icon is an empty ``data:`` URL, which asks no server:
the book's own icon, requested by a page that leaves at once, was a request the redirect
cancelled. This page is written on every build, before sphinx-external-toc's turn (which then
finds it and writes nothing).
"""

from __future__ import annotations

import html
from pathlib import Path

PAGE = """<!DOCTYPE html>
<html lang="{language}">
<head>
<meta charset="utf-8">
<title>{title}</title>
<link rel="icon" href="data:,">
<meta http-equiv="Refresh" content="0; url={first}">
</head>
<body><p><a href="{first}">{title}</a></p></body>
</html>
"""


def write_root_page(app, exception):
    if exception is not None or app.builder.format != "html" or app.config.root_doc == "index":
        return
    first = f"{app.config.root_doc}.html"
    (Path(app.outdir) / "index.html").write_text(PAGE.format(
        language=html.escape(app.config.language or "en"),
        title=html.escape(app.config.html_title or app.config.project), first=first),
        encoding="utf-8")


def setup(app):
    # before sphinx-external-toc's ensure_index_file (priority 500)
    app.connect("build-finished", write_root_page, priority=400)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
