"""HTML for two kinds of node that assistive technology would otherwise misread.

The accessibility check of every page (``tests/test_accessibility.py``, axe-core) found both:

- A bibliography: docutils wraps citations in ``<div role="list">`` and gives each one the
  role ``doc-biblioentry``, which DPUB-ARIA 1.1 deprecated and which does not count as an item
  of a list, so a screen reader is told of a list with no items. Each citation here is a
  ``listitem`` instead (same element, same classes, same styling).
- A hidden code cell: MyST-NB labels its ``<summary>`` "Toggle hidden content" while it shows
  "Show code cell source", so a reader who speaks the visible words to voice control is not
  understood. Here the summary is named by the words it shows.
"""

from __future__ import annotations

from html import escape

from docutils import nodes
from myst_nb.sphinx_ import HideCodeCellNode, depart_HideCellInput


def visit_citation(self, node):
    if not isinstance(node.previous_sibling(), type(node)):
        self.body.append('<div role="list" class="citation-list">\n')
    self.body.append(self.starttag(node, "div", classes=[node.tagname], role="listitem"))


def depart_citation(self, node):
    self.body.append("</div>\n")
    if not isinstance(node.next_node(descend=False, siblings=True), type(node)):
        self.body.append("</div>\n")


def visit_hidden_cell(self, node):
    classes = " ".join(node["classes"])
    self.body.append(f'<details class="admonition hide {classes}">\n<summary>\n')
    self.body.append(f'<p class="collapsed admonition-title">{escape(node["prompt_show"])}</p>\n')
    self.body.append(f'<p class="expanded admonition-title">{escape(node["prompt_hide"])}</p>\n')
    self.body.append("</summary>\n")


def share_html_handlers(app):
    """Give the single-page build (the PDF's) every HTML handler it lacks.

    Sphinx falls back to the handlers registered for "html" only while none at all are
    registered for "singlehtml"; sphinx-exercise registers some, after which every other
    extension's nodes (MyST-NB's hidden cells, sphinx-proof's theorems, ours) would have none.
    """
    handlers = app.registry.translation_handlers
    single = handlers.setdefault("singlehtml", {})
    for name, pair in handlers.get("html", {}).items():
        single.setdefault(name, pair)


def setup(app):
    app.setup_extension("myst_nb")  # its node must be registered before it is overridden
    app.add_node(nodes.citation, override=True, html=(visit_citation, depart_citation))
    app.add_node(HideCodeCellNode, override=True, html=(visit_hidden_cell, depart_HideCellInput))
    app.connect("builder-inited", share_html_handlers)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
