"""Code shown from the package says what it is: the function or class, and its module.

A chapter shows the package's code with ``literalinclude`` and ``:pyobject:``; without a caption
the reader sees an unnamed fragment. This extension gives every such include that has no caption
of its own one that names the object and the file it comes from ("Adam.step, from
src/scratchformer/optim.py"), and says when only part of it is shown (``:start-at:``,
``:lines:`` and the like).

The docstrings such code carries are reStructuredText, written for the API reference; in a
listing their markup would stand as typed (````x````, ``:func:`softmax```). :func:`plain_markup`
writes them the way a docstring reads in an editor: ````x```` as ```x```, a role as the name it
shows (``:func:`~scratchformer.softmax``` as ```softmax```).
"""

from __future__ import annotations

import re

from docutils import nodes
from sphinx.directives.code import LiteralInclude

#: ``:role:`target``` (also ``:py:func:``), ``:role:`~a.b.c``` and ``:role:`text <target>```.
ROLE = re.compile(r":(?:[a-z]+:)?[a-z]+:`(?P<tilde>~?)(?P<body>[^`<]*?)\s*(?:<[^`>]*>)?`")
LITERAL = re.compile(r"``(?P<body>[^`\n]+?)``")

PARTIAL = ("start-at", "start-after", "end-at", "end-before", "lines")


def caption_for(path: str, options) -> str | None:
    """The caption of an include of ``path`` with these options, or None to leave it alone."""
    if "pyobject" not in options or "caption" in options:
        return None
    source = path.split("src/", 1)[-1] if "src/" in path else path.lstrip("./")
    part = ", in part" if any(key in options for key in PARTIAL) else ""
    return f"{options['pyobject']}{part}, from src/{source}"


def plain_markup(code: str) -> str:
    """Python source with its docstrings' reST roles and double-backtick literals written
    plainly (in Python code itself neither occurs outside a string)."""
    def role(match):
        body = match["body"]
        return f"`{body.rsplit('.', 1)[-1] if match['tilde'] else body}`"

    return LITERAL.sub(r"`\g<body>`", ROLE.sub(role, code))


class NamedLiteralInclude(LiteralInclude):
    def run(self):
        caption = caption_for(self.arguments[0], self.options)
        if caption is not None:
            self.options["caption"] = caption
        result = super().run()
        if "pyobject" in self.options:
            for block in (found for node in result for found in node.findall(nodes.literal_block)):
                typed = block.astext()
                if (plain := plain_markup(typed)) != typed:
                    block.rawsource = plain
                    block.children = [nodes.Text(plain)]
        return result


def setup(app):
    app.add_directive("literalinclude", NamedLiteralInclude, override=True)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
