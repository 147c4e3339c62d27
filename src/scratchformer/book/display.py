"""Tables for the book's pages, built from arrays so that no number is typed by hand, and the
glue that hands a computed value to the page's text."""

from __future__ import annotations

import importlib.util

import numpy as np

__all__ = ["glue", "markdown_table", "weights_table"]


def glue(name: str, variable, display: bool = True) -> None:
    """Hand ``variable`` to the page's text under ``name``, where the book is built.

    In the book's build this is MyST-NB's ``myst_nb.glue``, which records the value in the
    cell's output so that ``{glue:text}`name``` in the chapter's text prints it. A chapter run
    anywhere else (a downloaded notebook, Colab) has no MyST-NB and no text to fill in, since
    its Markdown cells were written out with the values already in them: there ``glue`` only
    shows the value when ``display`` is true, as MyST-NB's does (printed, outside IPython).
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"a glued value needs a non-empty name, got {name!r}")
    if importlib.util.find_spec("myst_nb") is not None:
        from myst_nb import glue as myst_glue

        myst_glue(name, variable, display)
    elif display:
        try:
            from IPython.display import display as show
        except ModuleNotFoundError:  # a plain Python script: no notebook to show it in
            show = print
        show(variable)


def weights_table(weights, query_labels, key_labels=None, *, digits=2) -> str:
    """Format attention weights as a Markdown table, one row a query, one column a key.

    Parameters
    ----------
    weights : array_like, shape (n_q, n_k)
    query_labels : sequence of str, length n_q
    key_labels : sequence of str, length n_k, optional
        Default ``query_labels``.
    digits : int, default 2
        Decimals shown.

    Returns
    -------
    table : str
        A pipe table; the largest weights of each row are in bold (none when the row is
        uniform).
    """
    weights = np.asarray(weights, dtype=float)
    if weights.ndim != 2:
        raise ValueError(f"weights must have shape (n_q, n_k), got shape {weights.shape}")
    key_labels = query_labels if key_labels is None else key_labels
    if len(query_labels) != weights.shape[0] or len(key_labels) != weights.shape[1]:
        raise ValueError(
            f"{len(query_labels)} query and {len(key_labels)} key labels "
            f"for weights of shape {weights.shape}"
        )
    lines = ["| query \\ key | " + " | ".join(f"`{k}`" for k in key_labels) + " |",
             "|:--|" + "--:|" * len(key_labels)]
    for label, row in zip(query_labels, weights):
        best = np.isclose(row, row.max(), rtol=1e-9, atol=0.0)
        if best.all():
            best[:] = False  # a uniform row has no favourite
        cells = [f"**{w:.{digits}f}**" if b else f"{w:.{digits}f}" for w, b in zip(row, best)]
        lines.append(f"| `{label}` | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def markdown_table(rows, columns) -> str:
    """Format records as a Markdown table.

    Parameters
    ----------
    rows : sequence of dict
        One record per table row.
    columns : sequence of (str, str, str)
        ``(header, key, format)`` per column, e.g. ``("time (ms)", "t", "{:.1f}")``; the value
        ``row[key]`` is formatted with ``format.format(value)``.

    Returns
    -------
    table : str
        A pipe table, numbers right-aligned.
    """
    if not columns:
        raise ValueError("a table needs at least one column")
    lines = ["| " + " | ".join(header for header, _, _ in columns) + " |",
             "|" + "--:|" * len(columns)]
    for row in rows:
        missing = [key for _, key, _ in columns if key not in row]
        if missing:
            raise ValueError(f"row {row!r} has no {missing}")
        lines.append("| " + " | ".join(fmt.format(row[key]) for _, key, fmt in columns) + " |")
    return "\n".join(lines)
