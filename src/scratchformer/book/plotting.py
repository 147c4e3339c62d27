"""Figures drawn at build time for the book's chapters.

Every helper takes arrays and labels, draws on a new (or given) axes, and returns the matplotlib
``Figure``, so that a chapter cell ends with the figure and the tests can check what was drawn.

Figures are drawn for the page's column, about 6.7 inches wide at the book's 100 dots an inch
(``COLUMN_INCHES``): a new figure is at most that wide, so it is shown at its drawn size and its
text (at least ``MIN_FONT_POINTS``) stays legible; panels that would not fit side by side are
stacked. Curves differ by line style and marker as well as colour, and the colours are
Okabe and Ito's palette, which readers with a red-green colour vision deficiency can tell apart.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

__all__ = ["COLUMN_INCHES", "MIN_FONT_POINTS", "attention_heatmap", "attention_heads",
           "attention_layers", "curves", "matrix_heatmap"]

#: Width of the page's column in inches at the figures' 100 dpi (672 px at 1280 px).
COLUMN_INCHES = 6.7
#: The smallest text a figure of this module writes, in points.
MIN_FONT_POINTS = 10
#: Okabe and Ito's colour-blind-safe palette (black left out: it is the reference lines').
COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442")
LINE_STYLES = ("-", "--", "-.", ":")
MARKERS = ("o", "s", "^", "D", "v", "P", "X")


def attention_heatmap(weights, query_labels=None, key_labels=None, *, ax=None, title=None,
                      annotate=True, colorbar=True) -> Figure:
    """Draw attention weights as a heatmap, queries down the side and keys along the top.

    Parameters
    ----------
    weights : array_like, shape (n_q, n_k)
        Attention weights in [0, 1], e.g. the second result of
        :func:`scratchformer.scaled_dot_product_attention` for one sequence.
    query_labels : sequence of str, length n_q, optional
        Token labels for the rows.
    key_labels : sequence of str, length n_k, optional
        Token labels for the columns; default ``query_labels`` (self-attention).
    ax : matplotlib.axes.Axes, optional
        Axes to draw on; a new figure is made when omitted.
    title : str, optional
    annotate : bool, default True
        Write each weight in its cell (readable for up to ~12 tokens).
    colorbar : bool, default True
        Draw the colour bar (a grid of heatmaps shares one).

    Returns
    -------
    fig : matplotlib.figure.Figure
    """
    weights = np.asarray(weights, dtype=float)
    if weights.ndim != 2:
        raise ValueError(f"weights must have shape (n_q, n_k), got shape {weights.shape}")
    n_q, n_k = weights.shape
    if key_labels is None and query_labels is not None and n_q == n_k:
        key_labels = query_labels
    for labels, n, name in ((query_labels, n_q, "query_labels"), (key_labels, n_k, "key_labels")):
        if labels is not None and len(labels) != n:
            raise ValueError(f"{name} has {len(labels)} labels for {n} rows/columns of weights")

    if ax is None:
        width = min(COLUMN_INCHES, 0.55 * n_k + 2.2)
        fig, ax = plt.subplots(figsize=(width, 0.5 * n_q + 1.4), layout="constrained")
    fig = ax.figure
    image = ax.imshow(weights, cmap="Blues", vmin=0.0, vmax=1.0)
    if colorbar:
        fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="attention weight")
    ax.set_xticks(range(n_k), key_labels if key_labels is not None else range(n_k))
    ax.set_yticks(range(n_q), query_labels if query_labels is not None else range(n_q))
    if key_labels is not None:  # slanted words, each ending under its own column
        plt.setp(ax.get_xticklabels(), rotation=45, ha="right", rotation_mode="anchor")
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query (attending)")
    if title:
        ax.set_title(title)
    if annotate:
        for (i, j), w in np.ndenumerate(weights):
            ax.text(j, i, f"{w:.2f}", ha="center", va="center", fontsize=MIN_FONT_POINTS,
                    color="white" if w > 0.55 else "black")
    return fig


def attention_heads(weights, query_labels=None, key_labels=None, *, ncols=2, title=None,
                    annotate=False) -> Figure:
    """One heatmap per head, in a grid that shares one colour scale.

    Parameters
    ----------
    weights : array_like, shape (h, n_q, n_k)
        The weights of one sequence, e.g. ``MultiHeadAttention.forward(x)[1][0]``.
    query_labels, key_labels : sequence of str, optional
        As in :func:`attention_heatmap`.
    ncols : int, default 2
        Heads per row of the grid (two fit the column with their token labels).
    title : str, optional
        Title of the whole figure.
    annotate : bool, default False
        Write each weight in its cell.

    Returns
    -------
    fig : matplotlib.figure.Figure
        ``h`` heatmap axes titled ``head 0 .. head h-1``, then one colour-bar axes.
    """
    weights = np.asarray(weights, dtype=float)
    if weights.ndim != 3:
        raise ValueError(f"weights must have shape (h, n_q, n_k), got shape {weights.shape}")
    h, n_q, n_k = weights.shape
    ncols = min(ncols, h)
    nrows = -(-h // ncols)
    cell = min(1.0, (COLUMN_INCHES - 1.0) / (ncols * (0.32 * n_k + 1.3)))  # fit the column
    fig, axes = plt.subplots(nrows, ncols, squeeze=False, layout="constrained",
                             figsize=(cell * ncols * (0.32 * n_k + 1.3) + 1.0,
                                      cell * nrows * (0.3 * n_q + 1.3) + 0.4))
    for head, ax in enumerate(axes.flat):
        if head >= h:
            ax.set_axis_off()
            continue
        attention_heatmap(weights[head], query_labels, key_labels, ax=ax,
                          title=f"head {head}", annotate=annotate, colorbar=False)
        if head % ncols:
            ax.set_ylabel("")
        if head < h - ncols:
            ax.set_xlabel("")
    fig.colorbar(axes.flat[0].images[0], ax=axes, shrink=0.8, label="attention weight")
    if title:
        fig.suptitle(title)
    return fig


def attention_layers(weights, row_titles, query_labels=None, key_labels=None) -> Figure:
    """A grid of heatmaps: one row per layer (or model), one column per head.

    Parameters
    ----------
    weights : array_like, shape (rows, h, n_q, n_k)
        For example ``EncoderModel.attention_weights(tokens)`` averaged over the batch.
    row_titles : sequence of str, length rows
        Shown on the left of each row (e.g. ``"layer 1"``).
    query_labels, key_labels : sequence of str, optional
        As in :func:`attention_heatmap`.

    Returns
    -------
    fig : matplotlib.figure.Figure
        ``rows * h`` heatmap axes (row-major), then one colour-bar axes.
    """
    weights = np.asarray(weights, dtype=float)
    if weights.ndim != 4:
        raise ValueError(f"weights must have shape (rows, h, n_q, n_k), got {weights.shape}")
    rows, h, n_q, n_k = weights.shape
    if len(row_titles) != rows:
        raise ValueError(f"{len(row_titles)} row titles for {rows} rows of weights")
    # Square heatmaps that share the column: tick labels every other position when they crowd.
    side = min(1.6, (COLUMN_INCHES - 1.6) / h)
    fig, axes = plt.subplots(rows, h, squeeze=False, layout="constrained",
                             figsize=(h * side + 1.6, rows * side + 0.6))
    for (row, head), ax in np.ndenumerate(axes):
        attention_heatmap(weights[row, head], query_labels, key_labels, ax=ax,
                          annotate=False, colorbar=False,
                          title=f"head {head}" if row == 0 else None)
        ax.set_xlabel("key" if row == rows - 1 else "")
        ax.set_ylabel(f"{row_titles[row]}\nquery" if head == 0 else "")
        step = max(1, round(max(n_q, n_k) / (side * 4)))  # about four labels an inch
        ax.set_xticks(ax.get_xticks()[::step], [t.get_text() for t in ax.get_xticklabels()][::step])
        ax.set_yticks(ax.get_yticks()[::step], [t.get_text() for t in ax.get_yticklabels()][::step])
        ax.tick_params(axis="x", labelrotation=0)
        if head:
            ax.tick_params(labelleft=False)
        if row < rows - 1:
            ax.tick_params(labelbottom=False)
    fig.colorbar(axes.flat[0].images[0], ax=axes, shrink=0.8, label="attention weight")
    return fig


def curves(x, series, *, xlabel, ylabel, title=None, logx=False, logy=False, ax=None,
           styles=None) -> Figure:
    """Plot several named curves over one x axis.

    Parameters
    ----------
    x : array_like, shape (m,)
    series : dict of str to array_like of shape (m,)
        Legend label to y values.
    xlabel, ylabel : str
    title : str, optional
    logx, logy : bool, default False
        Logarithmic axes.
    ax : matplotlib.axes.Axes, optional
    styles : dict of str to dict, optional
        Extra keyword arguments for ``ax.plot`` per label (e.g. ``{"theory": {"ls": "--"}}``).
        Without them, the ``i``-th series gets its own colour, line style and marker, so that
        no two series differ by colour alone.

    Returns
    -------
    fig : matplotlib.figure.Figure
    """
    x = np.asarray(x, dtype=float)
    if x.ndim != 1:
        raise ValueError(f"x must be 1-D, got shape {x.shape}")
    if ax is None:
        fig, ax = plt.subplots(figsize=(6.4, 3.8), layout="constrained")
    styles = styles or {}
    for i, (label, y) in enumerate(series.items()):
        y = np.asarray(y, dtype=float)
        if y.shape != x.shape:
            raise ValueError(f"series {label!r} has shape {y.shape}, x has shape {x.shape}")
        own = {"color": COLOURS[i % len(COLOURS)], "ls": LINE_STYLES[i % len(LINE_STYLES)],
               "marker": MARKERS[i % len(MARKERS)], "ms": 4,
               "markevery": max(1, len(x) // 12)}  # markers that do not hide the line
        ax.plot(x, y, label=label, **{**own, **styles.get(label, {})})
    if logx:
        ax.set_xscale("log", base=2)
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    if len(series) > 1:
        ax.legend()
    ax.grid(True, which="major", alpha=0.3)
    return ax.figure


def matrix_heatmap(values, *, xlabel, ylabel, title=None, ax=None, label="value") -> Figure:
    """Draw a real matrix with a diverging colour map centred on zero.

    Parameters
    ----------
    values : array_like, shape (rows, columns)
    xlabel, ylabel : str
        What the columns and the rows are.
    title : str, optional
    ax : matplotlib.axes.Axes, optional
    label : str, default "value"
        Label of the colour bar.

    Returns
    -------
    fig : matplotlib.figure.Figure
    """
    values = np.asarray(values, dtype=float)
    if values.ndim != 2:
        raise ValueError(f"values must be a matrix, got shape {values.shape}")
    if ax is None:
        fig, ax = plt.subplots(figsize=(6.4, 4.2), layout="constrained")
    limit = float(np.abs(values).max()) or 1.0
    image = ax.imshow(values, cmap="RdBu_r", vmin=-limit, vmax=limit, aspect="auto",
                      interpolation="nearest")
    ax.figure.colorbar(image, ax=ax, label=label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    return ax.figure
