"""The API reference, grouped as the package is: one section per module that defines an export.

``book/api.md`` writes ``{api-groups} scratchformer``; this directive reads the package's
``__all__``, sorts every exported name under the module that defines it (``obj.__module__``),
in the order of ``MODULES`` below, and writes for each module a section titled by its
docstring's first sentence with an autodoc entry per name. A new export therefore appears
without editing the page, in its module's section; an export from a module missing from
``MODULES`` fails the build (so the order is decided, not left to chance). The documented names
stay the public ones (``scratchformer.causal_mask``), which the chapters cross-reference.
"""

from __future__ import annotations

import importlib
import inspect

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles

#: The order of the sections, by the module that defines the names.
MODULES = [
    "scratchformer.attention", "scratchformer.functional", "scratchformer.multihead",
    "scratchformer.positional", "scratchformer.rotary", "scratchformer.layers",
    "scratchformer.dropout",
    "scratchformer.encoder", "scratchformer.model", "scratchformer.decoder",
    "scratchformer.seq2seq", "scratchformer.decoding", "scratchformer.metrics",
    "scratchformer.decoder_only",
    "scratchformer.generation", "scratchformer.config", "scratchformer.module",
    "scratchformer.optim", "scratchformer.tasks", "scratchformer.translation",
    "scratchformer.addition",
    "scratchformer.train.loop", "scratchformer.train.recipes",
    "scratchformer.tokenizer.pretokenization", "scratchformer.tokenizer.bpe",
    "scratchformer.corpus",
    "scratchformer.language_model", "scratchformer.gguf", "scratchformer.pretrained",
    "scratchformer.gpt2", "scratchformer.quantize", "scratchformer.precision",
    "scratchformer.lora", "scratchformer.letters",
    "scratchformer.gradcheck",
    "scratchformer.tiled",
    "scratchformer.book.plotting", "scratchformer.book.display", "scratchformer.book.timing",
    "scratchformer.book.diagnostics", "scratchformer.book.rnn", "scratchformer.book.benchmarks",
    "scratchformer.book.runs", "scratchformer.book.diagram",
    "scratchformer.pytorch.conversions", "scratchformer.pytorch.twins",
]


def _title(module):
    """The first sentence of a module's docstring, up to a colon, without a full stop."""
    first = inspect.getdoc(module).split("\n\n")[0].replace("\n", " ")
    return first.split(": ")[0].rstrip(".")


def _doc_comment(module_name, name):
    """The ``#:`` comment above ``name`` in the module that defines it, as lines, or None.

    autodoc reads such comments from the module it is told the name lives in; for data that a
    package re-exports from one of its modules (``scratchformer.train.BOOK_MODEL``, defined in
    ``scratchformer.train.recipes``) that is the package, whose source does not hold them."""
    from sphinx.pycode import ModuleAnalyzer

    docs = ModuleAnalyzer.for_module(module_name).find_attr_docs()
    lines = docs.get(("", name))
    return [line for line in lines if line.strip()] if lines else None


def _directive(obj):
    if inspect.isclass(obj):
        if any(base.__name__ == "AttentionHeads" for base in obj.__mro__[1:]):
            # MultiHeadAttention and CausalSelfAttention: each entry shows the methods the
            # two share (backward above all), not the Layer methods every layer has
            return "autoclass", ["   :members:", "   :inherited-members: Layer"]
        return "autoclass", ["   :members:"]
    if callable(obj):
        return "autofunction", []
    return "autodata", ["   :no-value:"]


class ApiGroups(SphinxDirective):
    """``{api-groups} package``: the package's exports, a section per defining module."""

    required_arguments = 1
    has_content = False

    def run(self):
        package = importlib.import_module(self.arguments[0])
        groups = {}
        for name in package.__all__:
            obj = getattr(package, name)
            home = getattr(obj, "__module__", None) or package.__name__
            if not isinstance(home, str) or home not in MODULES:
                # data (a tuple, a dict) has no __module__: find the module that defines it
                home = next((m for m in MODULES if m.startswith(package.__name__)
                             and name in getattr(importlib.import_module(m), "__all__", ())),
                            None)
                if home is None:
                    raise self.error(f"api-groups: no module of MODULES exports {name}")
            groups.setdefault(home, []).append(name)
        unknown = sorted(set(groups) - set(MODULES))
        if unknown:
            raise self.error(f"api-groups: add {unknown} to MODULES in book/_ext/api_groups.py")
        lines = []
        for module_name in MODULES:
            if module_name not in groups:
                continue
            module = importlib.import_module(module_name)
            title = f"{_title(module)}"
            lines += [title, "-" * len(title), "",
                      f"Defined in ``{module_name}``.", ""]
            for name in groups[module_name]:
                kind, options = _directive(getattr(package, name))
                documented = f"{package.__name__}.{name}"
                comment = _doc_comment(module_name, name) if kind == "autodata" else None
                if comment is not None:  # data re-exported from another module of the package
                    lines += [f".. py:data:: {documented}", "",
                              *(f"   {line}" for line in comment), ""]
                else:
                    lines += [f".. {kind}:: {documented}", *options, ""]
        container = nodes.section()
        container.document = self.state.document
        nested_parse_with_titles(self.state, StringList(lines, source="api-groups"), container)
        return container.children


def setup(app):
    app.add_directive("api-groups", ApiGroups)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
