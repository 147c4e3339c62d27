"""Figures drawn at build time for the book's chapters.

Every helper takes arrays and labels, draws on a new (or given) axes, and returns the matplotlib
``Figure``, so that a chapter cell ends with the figure and the tests can check what was drawn.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

__all__ = ["attention_heatmap"]


def attention_heatmap(weights, query_labels=None, key_labels=None, *, ax=None, title=None,
                      annotate=True) -> Figure:
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
        fig, ax = plt.subplots(figsize=(0.55 * n_k + 2.2, 0.5 * n_q + 1.4), layout="constrained")
    fig = ax.figure
    image = ax.imshow(weights, cmap="Blues", vmin=0.0, vmax=1.0)
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="attention weight")
    ax.set_xticks(range(n_k), key_labels if key_labels is not None else range(n_k))
    ax.set_yticks(range(n_q), query_labels if query_labels is not None else range(n_q))
    ax.tick_params(axis="x", labelrotation=45 if key_labels is not None else 0)
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query (attending)")
    if title:
        ax.set_title(title)
    if annotate:
        for (i, j), w in np.ndenumerate(weights):
            ax.text(j, i, f"{w:.2f}", ha="center", va="center", fontsize=8,
                    color="white" if w > 0.55 else "black")
    return fig
