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
           "attention_layers", "curves", "mask_panels", "matrix_heatmap", "search_tree"]

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


def _labels(labels, n, what):
    """A panel's tick labels as a list of ``n`` strings, or a clear error."""
    labels = [str(label) for label in labels]
    if len(labels) != n:
        raise ValueError(f"{what} has {len(labels)} labels for {n} rows/columns of its mask")
    return labels


def mask_panels(masks, titles, query_labels, key_labels, *, weights=None) -> Figure:
    """Attention masks stacked one above another, each beside the weights it lets through.

    A mask's cells are drawn dark where the query may attend to the key and light, crossed,
    where it is blocked. With ``weights``, the weights computed under each mask are drawn to
    its right on one colour scale, and every blocked cell shows its weight: ``0`` when it is
    exactly zero, as a mask guarantees.

    Parameters
    ----------
    masks : sequence of array_like of bool, each of shape (n_q, n_k)
        May-attend masks, True where query ``i`` may read key ``j`` (the package's
        convention: :func:`scratchformer.causal_mask`, :func:`scratchformer.padding_mask`
        broadcast to ``(n_q, n_k)``). Each mask has its own shape.
    titles : sequence of str, one per mask
        What attends to what (e.g. ``"decoder self-attention"``).
    query_labels, key_labels : sequence of sequence of str, one per mask
        The tokens of each mask's rows (length ``n_q``) and columns (length ``n_k``).
    weights : sequence of array_like, each of shape (n_q, n_k), optional
        The attention weights of one sequence under each mask (e.g. averaged over heads).

    Returns
    -------
    fig : matplotlib.figure.Figure
        Row by row, each mask's axes (and, with ``weights``, its weights' axes), then with
        ``weights`` one colour-bar axes.

    Notes
    -----
    The chapter "The decoder" (``book/decoder.md``, section "The decoder block") draws with
    it the three masks of an encoder–decoder's attention on a batch of the translation task:
    the encoder's self-attention, the decoder's masked self-attention and the cross-attention.
    """
    masks = [np.asarray(mask) for mask in masks]
    if not masks:
        raise ValueError("mask_panels needs at least one mask")
    for what, seq in (("titles", titles), ("query_labels", query_labels),
                      ("key_labels", key_labels), ("weights", weights)):
        if (seq is not None or what != "weights") and len(seq) != len(masks):
            raise ValueError(f"{len(seq)} {what} for {len(masks)} masks")
    for i, mask in enumerate(masks):
        if mask.dtype != bool or mask.ndim != 2:
            raise ValueError(f"mask {i} must be a boolean matrix (n_q, n_k), got dtype "
                             f"{mask.dtype} and shape {mask.shape}")
    rows = [(mask, _labels(q, mask.shape[0], f"query_labels[{i}]"),
             _labels(k, mask.shape[1], f"key_labels[{i}]"))
            for i, (mask, q, k) in enumerate(zip(masks, query_labels, key_labels))]
    if weights is not None:
        weights = [np.asarray(w, dtype=float) for w in weights]
        for i, (w, mask) in enumerate(zip(weights, masks)):
            if w.shape != mask.shape:
                raise ValueError(f"weights[{i}] has shape {w.shape}, its mask {mask.shape}")

    ncols = 1 if weights is None else 2
    n_k = max(mask.shape[1] for mask in masks)
    cell = min(0.32, (COLUMN_INCHES - 2.4) / (ncols * n_k))  # inches a cell, fit the column
    heights = [mask.shape[0] * cell + 1.2 for mask in masks]  # a row: title, cells, tokens
    bar = 0.6 if weights is not None else 0.0  # the colour bar's row
    fig = plt.figure(layout="constrained", figsize=(
        min(COLUMN_INCHES, ncols * n_k * cell + 1.6 + 0.6 * (ncols - 1)), sum(heights) + bar))
    subfigures = fig.subfigures(len(masks) + (weights is not None), 1, squeeze=False,
                                height_ratios=heights + ([bar] if bar else []))[:, 0]
    may_or_not = plt.matplotlib.colors.ListedColormap(["#EEEEEE", COLOURS[0]])
    images = []  # the weights' heatmaps, which share one colour bar
    for r, ((mask, q, k), title) in enumerate(zip(rows, titles)):
        subfigure = subfigures[r]
        subfigure.suptitle(title, x=0.02, ha="left", fontsize="large")
        panels = subfigure.subplots(1, ncols, squeeze=False)[0]
        ax = panels[0]
        ax.imshow(mask, cmap=may_or_not, vmin=0, vmax=1)
        for (i, j), may in np.ndenumerate(mask):
            if not may:
                ax.text(j, i, "×", ha="center", va="center", fontsize=MIN_FONT_POINTS + 1)
        ax.set_xticks(range(len(k)), k)
        ax.set_yticks(range(len(q)), q)
        plt.setp(ax.get_xticklabels(), rotation=45, ha="right", rotation_mode="anchor")
        ax.set_title("mask (× blocked)")
        ax.set_xlabel("key")
        ax.set_ylabel("query")
        if weights is None:
            continue
        ax = panels[1]
        attention_heatmap(weights[r], q, k, ax=ax, annotate=False, colorbar=False,
                          title="weights")
        images.append(ax.images[0])
        ax.set_xlabel("key")
        ax.set_ylabel("")
        ax.tick_params(labelleft=False)
        for (i, j), may in np.ndenumerate(mask):
            if not may:
                w = weights[r][i, j]
                ax.text(j, i, "0" if w == 0.0 else f"{w:.0e}", ha="center", va="center",
                        fontsize=MIN_FONT_POINTS)
    if weights is not None:
        cax = subfigures[-1].add_subplot(subfigures[-1].add_gridspec(1, 4)[0, 1:3])
        subfigures[-1].colorbar(images[0], cax=cax, orientation="horizontal",
                                label="attention weight")
    return fig


def _prefix(key, what):
    """A prefix as a tuple of str, or a clear error."""
    if not isinstance(key, tuple) or not all(isinstance(token, str) for token in key):
        raise TypeError(f"{what} must be tuples of tokens (str), got {key!r}")
    return key


def search_tree(probabilities, *, kept=(), greedy=(), notes=None) -> Figure:
    """A search tree of prefixes, left to right: each with its probability, greedy search's
    path, and what a beam kept and pruned at each step.

    Parameters
    ----------
    probabilities : dict of tuple of str to float
        ``P(prefix)`` of every prefix drawn, keyed by its tokens (without BOS); the parent of
        each (the prefix one token shorter) is a key too, but for the empty prefix, the
        root, which is drawn as ``BOS`` and may be left out. Children are drawn in the
        order of the keys.
    kept : collection of tuple of str, optional
        The prefixes a beam kept at their step. A prefix whose parent is the root or was
        kept, and is not kept itself, was pruned; one whose parent was not kept was never
        reached. A kept prefix's parent must be kept too (a beam extends only what it kept).
    greedy : tuple of str, optional
        Greedy search's tokens: the path through their prefixes is drawn thick.
    notes : dict of tuple of str to str, optional
        Text written to the right of a prefix's node (e.g. ``"greedy's answer"``).

    Returns
    -------
    fig : matplotlib.figure.Figure
        One axes (without axis lines) holding the tree, its step headers and a legend.

    Notes
    -----
    The chapter "Decoding" (``book/decoding.md``, section "A distribution where greedy search
    misses") draws with it the tree of its table, where greedy search takes the most probable
    first token and a beam of two finds the more probable sequence.
    """
    if not isinstance(probabilities, dict) or not probabilities:
        raise TypeError("probabilities must be a non-empty dict of prefix (tuple) to float")
    p = {(): 1.0}
    for key, value in probabilities.items():
        value = float(value)
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"P{key!r} = {value} is not a probability in [0, 1]")
        p[_prefix(key, "the keys of probabilities")] = value
    orphans = [key for key in p if key and key[:-1] not in p]
    if orphans:
        raise ValueError(f"the prefix {orphans[0]!r} has no parent {orphans[0][:-1]!r} in "
                         "probabilities")
    kept = {_prefix(key, "kept prefixes") for key in kept}
    greedy = _prefix(tuple(greedy), "greedy")
    notes = {_prefix(key, "the keys of notes"): str(text) for key, text in (notes or {}).items()}
    for what, keys in (("kept", kept), ("greedy's path", [greedy[:t + 1] for t in
                                                         range(len(greedy))]),
                       ("notes", notes)):
        missing = [key for key in keys if key not in p]
        if missing:
            raise ValueError(f"{what} names the prefix {missing[0]!r}, not in probabilities")
    stray = [key for key in kept if key[:-1] and key[:-1] not in kept]
    if stray:
        raise ValueError(f"the beam kept {stray[0]!r} but not its parent {stray[0][:-1]!r}")

    def status(key):
        if not key:
            return "root"
        if key in kept:
            return "kept"
        return "pruned" if not key[:-1] or key[:-1] in kept else "never reached"

    # Leaves one under another in depth-first order; a parent midway between its children.
    children = {key: [child for child in p if child[:-1] == key and child] for key in p}
    y, leaves = {}, 0

    def place(key):
        nonlocal leaves
        if children[key]:
            for child in children[key]:
                place(child)
            y[key] = np.mean([y[child] for child in children[key]])
        else:
            y[key], leaves = -leaves, leaves + 1

    place(())
    depth = max(len(key) for key in p)
    fig, ax = plt.subplots(layout="constrained",
                           figsize=(COLUMN_INCHES, 0.42 * leaves + 1.7))
    looks = {  # node face, edge colour, edge style, text colour
        "root": ("white", "black", "-", "black"),
        "kept": (COLOURS[4], "black", "-", "black"),
        "pruned": ("white", "black", "--", "black"),
        "never reached": ("white", "#767676", ":", "#595959"),
    }
    on_path = {greedy[:t] for t in range(len(greedy) + 1)}
    for key in p:
        if not key:
            continue
        parent, (_, edge, style, _) = key[:-1], looks[status(key)]
        if key in on_path and parent in on_path:
            ax.plot([len(parent), len(key)], [y[parent], y[key]], color=COLOURS[1], lw=6,
                    solid_capstyle="round", zorder=1)
        ax.plot([len(parent), len(key)], [y[parent], y[key]], color=edge, ls=style, lw=1.2,
                zorder=2)
    for key, prob in p.items():
        face, edge, style, colour = looks[status(key)]
        label = "BOS" if not key else f"{' '.join(key)}: {prob:.2f}"
        ax.text(len(key), y[key], label, ha="center", va="center", color=colour,
                fontsize=MIN_FONT_POINTS + 1, zorder=3,
                bbox={"boxstyle": "round,pad=0.35", "facecolor": face, "edgecolor": edge,
                      "linestyle": style})
        if key in notes:
            ax.text(len(key) + 0.33, y[key], notes[key], ha="left", va="center",
                    fontsize=MIN_FONT_POINTS + 1)
    for d in range(1, depth + 1):
        candidates = [key for key in p if len(key) == d and status(key) in ("kept", "pruned")]
        n_kept = sum(key in kept for key in candidates)
        ax.text(d, 0.9, f"step {d}\nkeeps {n_kept} of {len(candidates)}", ha="center",
                va="bottom", fontsize=MIN_FONT_POINTS + 1)
    ax.set_xlim(-0.35, depth + (1.3 if notes else 0.4))
    ax.set_ylim(-leaves + 0.4, 2.0)
    ax.set_axis_off()
    handles = [
        plt.matplotlib.patches.Patch(facecolor=COLOURS[4], edgecolor="black",
                                     label="kept by the beam"),
        plt.matplotlib.patches.Patch(facecolor="white", edgecolor="black", ls="--",
                                     label="pruned by the beam"),
        plt.matplotlib.patches.Patch(facecolor="white", edgecolor="#767676", ls=":",
                                     label="never reached"),
        plt.matplotlib.lines.Line2D([], [], color=COLOURS[1], lw=6, label="greedy's path"),
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=2, frameon=False)
    return fig
