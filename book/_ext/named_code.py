"""Code shown from the package says what it is: the function or class, and its module.

A chapter shows the package's code with ``literalinclude`` and ``:pyobject:``; without a caption
the reader sees an unnamed fragment. This extension gives every such include that has no caption
of its own one that names the object and the file it comes from ("Adam.step, from
src/scratchformer/optim.py"), and says when only part of it is shown (``:start-at:``,
``:lines:`` and the like).
"""

from __future__ import annotations

from sphinx.directives.code import LiteralInclude

PARTIAL = ("start-at", "start-after", "end-at", "end-before", "lines")


def caption_for(path: str, options) -> str | None:
    """The caption of an include of ``path`` with these options, or None to leave it alone."""
    if "pyobject" not in options or "caption" in options:
        return None
    source = path.split("src/", 1)[-1] if "src/" in path else path.lstrip("./")
    part = ", in part" if any(key in options for key in PARTIAL) else ""
    return f"{options['pyobject']}{part}, from src/{source}"


class NamedLiteralInclude(LiteralInclude):
    def run(self):
        caption = caption_for(self.arguments[0], self.options)
        if caption is not None:
            self.options["caption"] = caption
        return super().run()


def setup(app):
    app.add_directive("literalinclude", NamedLiteralInclude, override=True)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
