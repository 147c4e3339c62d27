"""Bibliography entries labelled as the chapters cite them: "Vaswani et al., 2017".

The chapters cite by author and year (``bibtex_reference_style: author_year``), but
sphinxcontrib-bibtex's default entry style, ``alpha``, labels the list with alpha.bst's codes
("[VSP+17]"), which a reader cannot match to the citation in the text. This extension registers
the pybtex style ``author_year``: pybtex's ``alpha`` formatting (sorted by author, year, title;
DOI and arXiv identifiers as links, from the ``doi`` and ``eprint`` fields) with a label
written as the citation reads: one author "Ba, 2016", two "Kingma and Ba, 2015", three or more
"Vaswani et al., 2017", with "a", "b" after the year when two entries would share a label.
"""

from __future__ import annotations

from collections import Counter

import pybtex.plugin
from pybtex.richtext import Text
from pybtex.style.formatting.alpha import Style as AlphaStyle
from pybtex.style.labels import BaseLabelStyle


def _surname(person) -> str:
    """The person's surname as printed ("Ré" for ``R{\\'e}``), with its "von" part."""
    latex = " ".join(person.prelast_names + person.last_names)
    return Text.from_latex(latex).render_as("text")


class AuthorYearLabelStyle(BaseLabelStyle):
    """Labels "Surname, year", "Surname and Surname, year" or "Surname et al., year"."""

    def format_labels(self, sorted_entries):
        labels = [self.format_label(entry) for entry in sorted_entries]
        count, seen = Counter(labels), Counter()
        for label in labels:
            if count[label] == 1:
                yield label
            else:  # "Liu et al., 2020a", "Liu et al., 2020b"
                yield label + chr(ord("a") + seen[label])
                seen[label] += 1

    def format_label(self, entry):
        persons = entry.persons.get("author") or entry.persons.get("editor") or []
        names = [_surname(person) for person in persons]
        if not names:
            who = entry.fields.get("key") or entry.fields.get("organization") or entry.key
        elif len(names) == 1:
            who = names[0]
        elif len(names) == 2:
            who = f"{names[0]} and {names[1]}"
        else:
            who = f"{names[0]} et al."
        year = entry.fields.get("year")
        return f"{who}, {year}" if year else who


class AuthorYearStyle(AlphaStyle):
    default_label_style = "author_year"


def setup(app):
    pybtex.plugin.register_plugin("pybtex.style.labels", "author_year", AuthorYearLabelStyle)
    pybtex.plugin.register_plugin("pybtex.style.formatting", "author_year", AuthorYearStyle)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
