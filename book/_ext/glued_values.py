"""Keep a glued value on the line of the symbol it is the value of: "$n =$ {glue:text}`n`".

A sentence such as "for $n =$ 4096 heads" is a formula that ends in a relation, a space, and a
value pasted from a cell (MyST-NB's ``glue:text``, a ``span.pasted-text``). On a phone the line
could break after the formula, leaving "n =" at the end of one line and "4096" at the start of
the next. A no-break space does not help: the browser may break on either side of a formula,
which it draws as one box. So each such formula, its space and its value are wrapped in one
``span.keep-together``, which ``book.css`` keeps on one line (``white-space: nowrap``); the
line may still break before the formula or after the value.
"""

from __future__ import annotations

import re

from docutils import nodes
from sphinx.transforms.post_transforms import SphinxPostTransform

# A formula that ends in one of these asks for the value written after it.
RELATION = re.compile(r"(=|\\approx|\\le|\\ge|\\leq|\\geq|<|>|\\sim)\s*$")


def asks_for_a_value(node) -> bool:
    return isinstance(node, nodes.math) and bool(RELATION.search(node.astext()))


def is_glued_value(node) -> bool:
    return isinstance(node, nodes.inline) and "pasted-text" in node.get("classes", [])


class KeepGluedValues(SphinxPostTransform):
    """Wrap formula, space and glued value in one inline node of class ``keep-together``."""

    default_priority = 20  # after MyST-NB has put the glued values in (priority 5)

    def run(self, **kwargs):
        for formula in list(self.document.findall(nodes.math)):
            if not asks_for_a_value(formula):
                continue
            parent = formula.parent
            index = parent.index(formula)
            following = parent.children[index + 1:index + 3]
            if (len(following) == 2 and isinstance(following[0], nodes.Text)
                    and following[0].astext().isspace() and is_glued_value(following[1])):
                space, value = following
                together = nodes.inline(classes=["keep-together"])
                parent.replace(formula, together)
                parent.remove(space)
                parent.remove(value)
                together += [formula, nodes.Text(" "), value]


def setup(app):
    app.add_post_transform(KeepGluedValues)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
