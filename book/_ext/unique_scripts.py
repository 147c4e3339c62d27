"""Write each script of a page once: Sphinx 7 writes twice the inline ones added late.

Jupyter Book always loads sphinx-thebe, even with ``launch_buttons: thebe: false``, and
sphinx-thebe adds its settings as an inline script (``const THEBE_JS_URL = ...``) when the
build starts reading. Sphinx 7.4 keeps a script added after the builder has started twice: as
the extension added it (no file name, ``None``) and again when it prepares to write the pages
(file name ``""``). The two compare unequal, so every page got both, and the browser refused
the second: "Identifier 'THEBE_JS_URL' has already been declared", an uncaught error on every
page. (sphinx-togglebutton's ``var togglebuttonSelector`` was doubled the same way, harmlessly.)
Sphinx 8.2 fixed this (sphinx-doc/sphinx pull request 13402), but Jupyter Book 1 requires
Sphinx 7, so here each page drops a script identical to one it already has.
"""

from __future__ import annotations


def _key(script):
    """What makes two script tags the same: file (none for inline), priority, attributes."""
    return (script.filename or "", script.priority, tuple(sorted(script.attributes.items())))


def drop_repeated_scripts(app, pagename, templatename, context, doctree):
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, unique = set(), []
    for script in scripts:
        if (key := _key(script)) not in seen:
            seen.add(key)
            unique.append(script)
    # In place: the list is the builder's, where later page-specific scripts would be added.
    scripts[:] = unique


def setup(app):
    # Late, after the extensions that add scripts for one page only have done so.
    app.connect("html-page-context", drop_repeated_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
