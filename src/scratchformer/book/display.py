"""Tables for the book's pages, built from arrays so that no number is typed by hand."""

from __future__ import annotations

import numpy as np

__all__ = ["markdown_table", "weights_table"]


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
