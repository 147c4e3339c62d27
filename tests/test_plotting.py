"""Tests for scratchformer.book.plotting and scratchformer.book.display: what the figures and
tables show."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from scratchformer import book as sfb  # noqa: E402
from scratchformer.book import attention_heatmap, weights_table  # noqa: E402

TOKENS = ["the", "cat", "sat"]
WEIGHTS = np.array([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [1 / 3, 1 / 3, 1 / 3]])


def test_heatmap_draws_the_weights_with_their_labels():
    fig = attention_heatmap(WEIGHTS, TOKENS, title="demo")
    assert isinstance(fig, Figure)
    heatmap, colorbar = fig.axes  # the heatmap and its colour bar
    assert [t.get_text() for t in heatmap.get_xticklabels()] == TOKENS
    assert [t.get_text() for t in heatmap.get_yticklabels()] == TOKENS
    assert heatmap.get_title() == "demo"
    assert heatmap.get_xlabel().startswith("key") and heatmap.get_ylabel().startswith("query")
    np.testing.assert_array_equal(heatmap.images[0].get_array(), WEIGHTS)
    assert heatmap.images[0].get_clim() == (0.0, 1.0)  # weights on one fixed scale
    texts = [t.get_text() for t in heatmap.texts]
    assert texts == [f"{w:.2f}" for w in WEIGHTS.ravel()]
    assert colorbar.get_ylabel() == "attention weight"


def test_heatmap_for_cross_attention_and_without_annotations():
    fig = attention_heatmap(WEIGHTS[:2], ["a", "b"], TOKENS, annotate=False)
    (heatmap, _) = fig.axes
    assert [t.get_text() for t in heatmap.get_yticklabels()] == ["a", "b"]
    assert [t.get_text() for t in heatmap.get_xticklabels()] == TOKENS
    assert len(heatmap.texts) == 0


def test_heatmap_draws_on_given_axes():
    fig, ax = plt.subplots()
    assert attention_heatmap(WEIGHTS, ax=ax) is fig
    assert ax.images[0].get_array().shape == (3, 3)


@pytest.mark.parametrize("weights, labels, message", [
    (np.ones(3), None, r"shape \(n_q, n_k\)"),
    (WEIGHTS, ["a", "b"], "query_labels has 2 labels for 3"),
])
def test_heatmap_rejects_bad_input(weights, labels, message):
    with pytest.raises(ValueError, match=message):
        attention_heatmap(weights, labels)


def test_weights_table():
    lines = weights_table(WEIGHTS, TOKENS).splitlines()
    assert lines[0] == "| query \\ key | `the` | `cat` | `sat` |"
    assert len(lines) == 2 + 3
    assert lines[2] == "| `the` | **0.70** | 0.20 | 0.10 |"
    assert lines[3] == "| `cat` | 0.10 | **0.80** | 0.10 |"
    assert lines[4] == "| `sat` | 0.33 | 0.33 | 0.33 |"  # uniform: nothing stands out
    tied = weights_table(np.array([[0.4, 0.4, 0.2]]), ["q"], TOKENS, digits=1).splitlines()
    assert tied[2] == "| `q` | **0.4** | **0.4** | 0.2 |"


def test_weights_table_rejects_mismatched_labels():
    with pytest.raises(ValueError, match="2 query and 3 key labels"):
        weights_table(WEIGHTS, ["a", "b"], TOKENS)


def test_attention_heads_draws_one_heatmap_per_head():
    from scratchformer.book import attention_heads

    weights = np.stack([WEIGHTS, WEIGHTS.T, np.eye(3)])  # (h, n, n)
    fig = attention_heads(weights, TOKENS, ncols=2, title="three heads")
    heatmaps = [ax for ax in fig.axes if ax.images]
    assert [ax.get_title() for ax in heatmaps] == ["head 0", "head 1", "head 2"]
    for ax, w in zip(heatmaps, weights):
        np.testing.assert_array_equal(ax.images[0].get_array(), w)
    assert fig.get_suptitle() == "three heads"
    assert len(fig.axes) == 2 * 2 + 1  # a 2x2 grid (one cell unused) and one colour bar
    with pytest.raises(ValueError, match=r"\(h, n_q, n_k\)"):
        attention_heads(WEIGHTS)


def test_attention_layers_draws_rows_of_heads():
    from scratchformer.book import attention_layers

    weights = np.stack([np.stack([WEIGHTS, WEIGHTS.T]), np.stack([np.eye(3), WEIGHTS])])
    fig = attention_layers(weights, ["layer 1", "layer 2"], TOKENS)
    heatmaps = [ax for ax in fig.axes if ax.images]
    assert len(heatmaps) == 4 and len(fig.axes) == 5  # and one colour bar
    for ax, w in zip(heatmaps, weights.reshape(4, 3, 3)):
        np.testing.assert_array_equal(ax.images[0].get_array(), w)
    assert heatmaps[2].get_ylabel() == "layer 2\nquery"
    assert [ax.get_title() for ax in heatmaps] == ["head 0", "head 1", "", ""]
    with pytest.raises(ValueError, match="row titles"):
        attention_layers(weights, ["only one"])


def test_curves_draws_each_series():
    from scratchformer.book import curves

    x = np.array([1, 2, 4, 8])
    fig = curves(x, {"measured": x**2, "theory": x**2 + 1}, xlabel="d_k", ylabel="variance",
                 logx=True, logy=True, styles={"theory": {"ls": "--"}})
    (ax,) = fig.axes
    assert [line.get_label() for line in ax.lines] == ["measured", "theory"]
    np.testing.assert_array_equal(ax.lines[1].get_ydata(), x**2 + 1)
    assert ax.lines[1].get_linestyle() == "--"
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert ax.get_xlabel() == "d_k" and ax.get_legend() is not None
    with pytest.raises(ValueError, match="series 'bad'"):
        curves(x, {"bad": [1, 2]}, xlabel="x", ylabel="y")


def test_markdown_table():
    from scratchformer.book import markdown_table

    rows = [{"n": 512, "t": 0.01234}, {"n": 4096, "t": 1.5}]
    table = markdown_table(rows, [("n", "n", "{:d}"), ("time (ms)", "t", "{:.1f}")])
    assert table.splitlines() == ["| n | time (ms) |", "|--:|--:|", "| 512 | 0.0 |",
                                  "| 4096 | 1.5 |"]
    with pytest.raises(ValueError, match="has no"):
        markdown_table(rows, [("x", "x", "{}")])


def test_matrix_heatmap_is_centred_on_zero():
    from scratchformer.book import matrix_heatmap

    values = np.array([[-0.5, 2.0], [1.0, 0.0]])
    fig = matrix_heatmap(values, xlabel="dimension", ylabel="position", title="PE")
    ax, colorbar = fig.axes
    assert ax.images[0].get_clim() == (-2.0, 2.0)
    np.testing.assert_array_equal(ax.images[0].get_array(), values)
    assert (ax.get_xlabel(), ax.get_ylabel(), ax.get_title()) == ("dimension", "position", "PE")
    with pytest.raises(ValueError, match="matrix"):
        matrix_heatmap(np.ones(3), xlabel="x", ylabel="y")


CAUSAL = np.tri(3, dtype=bool)  # (n_t, n_t): a decoder's masked self-attention
SOURCE_KEEP = np.array([[True, False]] * 3)  # (n_t, n_s): cross-attention, one padded key


def test_mask_panels_draws_each_mask_beside_its_weights():
    from scratchformer.book import mask_panels

    weights = [CAUSAL / CAUSAL.sum(axis=1, keepdims=True), SOURCE_KEEP.astype(float)]
    fig = mask_panels([CAUSAL, SOURCE_KEEP], ["self", "cross"], [TOKENS, TOKENS],
                      [TOKENS, ["x", "<pad>"]], weights=weights)
    *panels, colorbar = fig.axes
    assert len(panels) == 4 and colorbar.get_xlabel() == "attention weight"
    assert [sub.get_suptitle() for sub in fig.subfigs[:2]] == ["self", "cross"]
    for row, (mask, w) in enumerate(zip([CAUSAL, SOURCE_KEEP], weights)):
        mask_ax, weights_ax = panels[2 * row:2 * row + 2]
        np.testing.assert_array_equal(mask_ax.images[0].get_array(), mask)
        np.testing.assert_array_equal(weights_ax.images[0].get_array(), w)
        assert [t.get_text() for t in mask_ax.texts] == ["×"] * int((~mask).sum())
        assert [t.get_text() for t in weights_ax.texts] == ["0"] * int((~mask).sum())
        assert [t.get_text() for t in mask_ax.get_yticklabels()] == TOKENS
    assert [t.get_text() for t in panels[2].get_xticklabels()] == ["x", "<pad>"]
    leaked = weights[1] + 0.25 * ~SOURCE_KEEP  # a blocked weight that is not zero is shown
    fig = mask_panels([SOURCE_KEEP], ["cross"], [TOKENS], [["x", "<pad>"]], weights=[leaked])
    assert {t.get_text() for t in fig.axes[1].texts} == {"2e-01"}
    assert len(mask_panels([CAUSAL], ["self"], [TOKENS], [TOKENS]).axes) == 1  # masks alone


@pytest.mark.parametrize("args, weights, message", [
    (([], [], [], []), None, "at least one mask"),
    (([CAUSAL], ["a", "b"], [TOKENS], [TOKENS]), None, "2 titles for 1 masks"),
    (([CAUSAL.astype(int)], ["a"], [TOKENS], [TOKENS]), None, "boolean matrix"),
    (([CAUSAL[0]], ["a"], [TOKENS], [TOKENS]), None, r"shape \(3,\)"),
    (([CAUSAL], ["a"], [TOKENS[:2]], [TOKENS]), None, r"query_labels\[0\] has 2 labels"),
    (([SOURCE_KEEP], ["a"], [TOKENS], [TOKENS]), None, r"key_labels\[0\] has 3 labels"),
    (([CAUSAL], ["a"], [TOKENS], [TOKENS]), [np.ones((3, 2))], r"weights\[0\] has shape"),
    (([CAUSAL], ["a"], [TOKENS], [TOKENS]), [], "0 weights for 1 masks"),
])
def test_mask_panels_rejects_bad_input(args, weights, message):
    from scratchformer.book import mask_panels

    with pytest.raises(ValueError, match=message):
        mask_panels(*args, weights=weights)


TREE = {("a",): 0.5, ("a", "a"): 0.15, ("a", "c"): 0.2, ("b",): 0.4, ("b", "a"): 0.36,
        ("b", "b"): 0.02, ("c",): 0.1, ("c", "a"): 0.04}
BEAM = {("a",), ("b",), ("a", "c"), ("b", "a")}


def test_search_tree_shows_probabilities_the_beam_and_greedy_path():
    from scratchformer.book import search_tree

    fig = search_tree(TREE, kept=BEAM, greedy=("a", "c"), notes={("b", "a"): "best"})
    (ax,) = fig.axes
    nodes = {t.get_text(): t for t in ax.texts if t.get_bbox_patch() is not None}
    assert set(nodes) == {"BOS", "a: 0.50", "a a: 0.15", "a c: 0.20", "b: 0.40",
                          "b a: 0.36", "b b: 0.02", "c: 0.10", "c a: 0.04"}
    styles = {text: node.get_bbox_patch().get_linestyle() for text, node in nodes.items()}
    assert styles["b a: 0.36"] == "-" and styles["a a: 0.15"] == "--"  # kept, pruned
    assert styles["c: 0.10"] == "--" and styles["c a: 0.04"] == ":"  # pruned, never reached
    texts = [t.get_text() for t in ax.texts]
    assert "step 1\nkeeps 2 of 3" in texts and "step 2\nkeeps 2 of 4" in texts
    assert "best" in texts
    thick = [line for line in ax.lines if line.get_linewidth() > 3]  # greedy's path
    path = [nodes[name].get_position() for name in ("BOS", "a: 0.50", "a c: 0.20")]
    assert [list(zip(line.get_xdata(), line.get_ydata())) for line in thick] == [
        path[:2], path[1:]]
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == ["kept by the beam", "pruned by the beam", "never reached",
                      "greedy's path"]


@pytest.mark.parametrize("kwargs, error, message", [
    ({"probabilities": {}}, TypeError, "non-empty dict"),
    ({"probabilities": {"a": 0.5}}, TypeError, "tuples of tokens"),
    ({"probabilities": {("a",): 1.5}}, ValueError, "not a probability"),
    ({"probabilities": {("a", "b"): 0.5}}, ValueError, "has no parent"),
    ({"probabilities": TREE, "kept": {("b", "b")}}, ValueError, "but not its parent"),
    ({"probabilities": TREE, "greedy": ("a", "b")}, ValueError, "greedy's path names"),
    ({"probabilities": TREE, "notes": {("d",): "x"}}, ValueError, "notes names"),
])
def test_search_tree_rejects_bad_input(kwargs, error, message):
    from scratchformer.book import search_tree

    with pytest.raises(error, match=message):
        search_tree(**kwargs)


def all_texts(fig):
    """Every piece of text the figure draws: titles, labels, tick labels, legends, cells."""
    fig.canvas.draw()  # tick labels get their text when drawn
    return [t for t in fig.findobj(matplotlib.text.Text) if t.get_visible() and t.get_text()]


def figures_for_the_book():
    from scratchformer.book import (
        attention_heads,
        attention_layers,
        curves,
        mask_panels,
        matrix_heatmap,
        search_tree,
    )

    rng = np.random.default_rng(0)
    tokens = "the cat chased a mouse until it hid".split()
    x = np.arange(1, 65)
    return {
        "heatmap": attention_heatmap(rng.dirichlet(np.ones(8), size=8), tokens),
        "heads": attention_heads(rng.dirichlet(np.ones(8), size=(4, 8)), tokens),
        "layers": attention_layers(rng.dirichlet(np.ones(10), size=(4, 4, 10)),
                                   [f"layer {i}" for i in range(4)]),
        "curves": curves(x, {f"series {i}": x**0.5 * i for i in range(5)}, xlabel="x",
                         ylabel="y"),
        "matrix": matrix_heatmap(rng.normal(size=(128, 64)), xlabel="d", ylabel="position"),
        "masks": mask_panels([np.tri(6, dtype=bool), np.ones((6, 5), dtype=bool)],
                             ["decoder masked self-attention", "cross-attention"],
                             [tokens[:6]] * 2, [tokens[:6], tokens[:5]],
                             weights=[np.tri(6) / np.arange(1, 7)[:, None],
                                      np.full((6, 5), 0.2)]),
        "tree": search_tree(TREE, kept=BEAM, greedy=("a", "c"),
                            notes={("a", "c"): "greedy's answer", ("b", "a"): "beam's answer"}),
    }


@pytest.mark.parametrize("name", ["heatmap", "heads", "layers", "curves", "matrix", "masks",
                                  "tree"])
def test_figures_fit_the_column_with_legible_text(name):
    """Drawn no wider than the page's column, so shown at full size; no text below 10 pt."""
    from scratchformer.book.plotting import COLUMN_INCHES, MIN_FONT_POINTS

    fig = figures_for_the_book()[name]
    width, _ = fig.get_size_inches()
    assert width <= COLUMN_INCHES
    texts = all_texts(fig)
    assert len(texts) >= 5
    small = [(t.get_text(), t.get_fontsize()) for t in texts
             if t.get_fontsize() < MIN_FONT_POINTS]
    assert small == []


@pytest.mark.parametrize("styles", [None, "no markers"])
def test_curves_differ_by_more_than_colour(styles):
    """Each series has its own line style or marker, so no two differ by colour alone."""
    from scratchformer.book import curves

    x = np.arange(20)
    series = {f"series {i}": x + i for i in range(4)}
    if styles == "no markers":  # as chapters ask for plain lines
        styles = {label: {"marker": ""} for label in series}
    fig = curves(x, series, xlabel="x", ylabel="y", styles=styles)
    looks = [(line.get_linestyle(), line.get_marker()) for line in fig.axes[0].lines]
    assert len(set(looks)) == len(series), looks
    colours = [line.get_color() for line in fig.axes[0].lines]
    assert len(set(colours)) == len(series)


def test_glue_hands_the_value_to_myst_nb_where_the_book_is_built(monkeypatch):
    import myst_nb

    calls = []
    monkeypatch.setattr(myst_nb, "glue", lambda *args: calls.append(args))
    sfb.glue("ratio", 3.5, display=False)
    assert calls == [("ratio", 3.5, False)]


def test_glue_only_shows_the_value_without_myst_nb(monkeypatch, capsys):
    """A downloaded notebook runs without MyST-NB: its text is written out already."""
    import importlib.util

    import IPython.display

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "myst_nb" else find_spec(name, *a))
    shown = []
    monkeypatch.setattr(IPython.display, "display", shown.append)
    sfb.glue("ratio", 3.5, display=False)
    sfb.glue("table", "| a |", display=True)
    assert shown == ["| a |"]
    with pytest.raises(ValueError, match="non-empty name"):
        sfb.glue("", 1)
