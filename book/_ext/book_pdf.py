"""A link to the whole book as one PDF in the download menu of every page.

``make pdf`` (``tools/build_pdf.py``) prints the book into ``_build/html/<PDF_NAME>``, beside
the pages, so the published site serves it. The book theme's download menu offers only the
page itself (its ``.md``, its ``.ipynb``, and printing it); this extension adds the book to
that menu, and gives the pages that have no menu (the indexes, search) a menu with the book.
"""

from __future__ import annotations

PDF_NAME = "transformer-from-first-principles.pdf"
TOOLTIP = "Download the book as PDF"
#: The two PDF entries of a page's download menu, in words that tell them apart (the theme's
#: own entry, printing the page, reads ".pdf", as a second entry of ours would).
BOOK_TEXT = "whole book .pdf"
PAGE_TEXT = "this page .pdf"


def book_pdf_button(pathto) -> dict:
    """The menu entry, linking to the PDF at the root of the site from the current page."""
    return {
        "type": "link",
        "url": pathto(PDF_NAME, 1),
        "text": BOOK_TEXT,
        "tooltip": TOOLTIP,
        "icon": "fas fa-book",  # the page's own .pdf (printing it) has fa-file-pdf
        "label": "download-book-pdf-button",
    }


def add_book_pdf_button(app, pagename, templatename, context, doctree):
    buttons = context.get("header_buttons")
    if buttons is None or "pathto" not in context:
        return
    button = book_pdf_button(context["pathto"])
    groups = [b for b in buttons if b.get("label") == "download-buttons"]
    if groups:
        for entry in groups[0]["buttons"]:
            if entry.get("label") == "download-pdf-button":  # the theme's: print the page
                entry["text"] = PAGE_TEXT
        groups[0]["buttons"].insert(0, button)
        return
    group = {"type": "group", "tooltip": "Download", "icon": "fas fa-download",
             "buttons": [button], "label": "download-buttons"}
    after = [i for i, b in enumerate(buttons)
             if b.get("label") in ("launch-buttons", "source-buttons")]
    buttons.insert(after[-1] + 1 if after else 0, group)


def setup(app):
    # After the book theme has made its buttons (it does so at priority 501).
    app.connect("html-page-context", add_book_pdf_button, priority=600)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
