"""The Transformer's architecture, drawn from a model object at build time.

:func:`architecture` reads an :class:`~scratchformer.EncoderDecoderModel`: the sub-layers of
its first encoder block and first decoder block (in the order their ``forward`` applies them),
the number of blocks in each stack and where the layer norm sits (``model.config.norm``), and
draws the two stacks side by side, as Figure 1 of the original paper does, with each box named
by the package's class that computes it. A change to the model's configuration changes the
drawing; nothing in it is typed in for one model.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

__all__ = ["architecture", "stack_layout"]

_FILL = {"attention": "#dbe8f6", "ffn": "#e3f1dc", "norm": "#fbeccd", "io": "#eeeeee"}
_HATCH = {"attention": "", "ffn": "..", "norm": "//", "io": ""}  # not by colour alone


def stack_layout(model) -> dict[str, list[tuple[str, str, str]]]:
    """The boxes of each stack, bottom to top: ``(text, class name, kind)`` per box.

    ``kind`` is ``"attention"``, ``"ffn"``, ``"norm"`` or ``"io"``. Read from ``model`` (an
    :class:`~scratchformer.EncoderDecoderModel`, or a :class:`~scratchformer.DecoderModel`,
    one stack): its blocks' sub-layers and its norm.
    """
    from ..decoder_only import DecoderModel

    if isinstance(model, DecoderModel):
        return {"decoder-only": _decoder_only_layout(model)}
    for name in ("encoder_blocks", "decoder_blocks", "config"):
        if not hasattr(model, name):
            raise TypeError(f"architecture draws an EncoderDecoderModel or a DecoderModel; "
                            f"{type(model).__name__} has no {name!r}")
    norm = model.config.norm
    enc, dec = model.encoder_blocks[0], model.decoder_blocks[0]
    encoder_sublayers = [("Multi-head self-attention", enc.attention, "attention"),
                         ("Feed-forward", enc.ffn, "ffn")]
    decoder_sublayers = [("Masked multi-head self-attention", dec.self_attention, "attention"),
                         ("Multi-head cross-attention", dec.cross_attention, "attention"),
                         ("Feed-forward", dec.ffn, "ffn")]

    final = [("Final LayerNorm", "LayerNorm", "norm")] if norm == "pre" else []
    return {
        "encoder": [("Source embedding + positions", "Embedding", "io"),
                    *_block(encoder_sublayers, norm), *final],
        "decoder": [("Target embedding + positions", "Embedding", "io"),
                    *_block(decoder_sublayers, norm), *final,
                    ("Linear, then softmax", type(model.head).__name__, "io")],
    }


def _block(sublayers, norm, norm_class="LayerNorm"):
    """One block's boxes: each sub-layer with its norm before it (pre-LN) or after its
    residual addition (post-LN)."""
    boxes = []
    for text, layer, kind in sublayers:
        if norm == "pre":
            boxes.append((norm_class, norm_class, "norm"))
        boxes.append((text, type(layer).__name__, kind))
        boxes.append(("Add" if norm == "pre" else f"Add & {norm_class}",
                      "residual" if norm == "pre" else norm_class, "norm"))
    return boxes


def _decoder_only_layout(model):
    """The boxes of a decoder-only model's stack, bottom to top (see :func:`stack_layout`)."""
    c, block = model.config, model.blocks[0]
    norm = type(block.norm1).__name__
    attention = block.attention
    heads = (f"{attention.n_heads} heads" if attention.n_kv_heads == attention.n_heads
             else f"{attention.n_heads} q / {attention.n_kv_heads} kv heads")
    kind = "RoPE attention" if attention.rotary else "Causal attention"
    sublayers = [(f"{kind}, {heads}", attention, "attention"),
                 ("Feed-forward", block.ffn, "ffn")]
    boxes = [("Token embedding" + (" + positions" if c.positions != "rotary" else ""),
              "Embedding", "io"), *_block(sublayers, c.norm, norm)]
    if c.norm == "pre":
        boxes.append((f"Final {norm}", norm, "norm"))
    if model.head is None:
        boxes.append(("Head: embedding transposed,\nthen softmax", "tied", "io"))
    else:
        boxes.append(("Linear, then softmax", type(model.head).__name__, "io"))
    return boxes


def architecture(model, *, ax=None) -> Figure:
    """Draw ``model``'s encoder and decoder stacks side by side (see the module docstring).

    Returns the ``Figure``. The encoder's output (the memory) is drawn as an arrow into every
    cross-attention box, each residual connection as a path around its sub-layer into its
    addition; each stack's block is framed and marked with its number of blocks.
    """
    layout = stack_layout(model)
    if "decoder-only" in layout:
        counts = {"decoder-only": len(model.blocks)}
        centres = {"decoder-only": 1.9}
    else:
        counts = {"encoder": len(model.encoder_blocks), "decoder": len(model.decoder_blocks)}
        centres = {"encoder": 1.55, "decoder": 4.75}
    rows = max(len(boxes) for boxes in layout.values())
    if ax is None:
        size = (6.4 if len(layout) == 2 else 4.2, 0.62 * rows + 1.2)
        fig, ax = plt.subplots(figsize=size, layout="constrained")
    fig = ax.figure
    width, height, gap = 2.7, 0.46, 0.16
    cross_boxes, tops = [], {}
    for stack, boxes in layout.items():
        x = centres[stack]
        for row, (text, cls, kind) in enumerate(boxes):
            y = 0.55 + row * (height + gap)
            ax.add_patch(FancyBboxPatch((x - width / 2, y), width, height,
                                        boxstyle="round,pad=0.02,rounding_size=0.08",
                                        facecolor=_FILL[kind], hatch=_HATCH[kind],
                                        edgecolor="#333333", linewidth=1.0))
            label = (text if cls in ("residual", "tied") or cls in text
                     else f"{text}\n{cls}")
            ax.text(x, y + height / 2, label, ha="center", va="center", fontsize=9.5,
                    color="black", bbox={"facecolor": "white", "edgecolor": "none",
                                         "alpha": 0.75, "pad": 0.6})
            if row:
                ax.add_patch(FancyArrowPatch((x, y - gap), (x, y), arrowstyle="-|>",
                                             mutation_scale=9, color="#333333"))
            if "cross-attention" in text:
                cross_boxes.append(y + height / 2)
        # Residual paths: from the input of each sub-layer group around it to its Add box.
        side = -1 if stack == "encoder" else 1
        edge, lane = x + side * width / 2, x + side * (width / 2 + 0.08)
        start = 1
        for row, (text, _, _) in enumerate(boxes):
            if not text.startswith("Add"):
                continue
            y_from = 0.55 + start * (height + gap) - gap / 2
            y_to = 0.55 + row * (height + gap) + height / 2
            ax.plot([x, lane, lane], [y_from, y_from, y_to], color="#333333", linewidth=1.0)
            ax.add_patch(FancyArrowPatch((lane, y_to), (edge, y_to), arrowstyle="-|>",
                                         mutation_scale=8, color="#333333"))
            start = row + 1
        tops[stack] = 0.55 + len(boxes) * (height + gap)
        # The repeated block: everything between the embedding and the final norm / output.
        first = 1
        last = len(boxes) - 1 - (stack != "encoder") - (model.config.norm == "pre")
        y0 = 0.55 + first * (height + gap) - gap / 2
        y1 = 0.55 + last * (height + gap) + height + gap / 2
        ax.add_patch(FancyBboxPatch((x - width / 2 - 0.12, y0), width + 0.24, y1 - y0,
                                    boxstyle="round,pad=0.02,rounding_size=0.12",
                                    facecolor="none", edgecolor="#555555", linestyle="--"))
        ax.text(x + side * (width / 2 + 0.24), (y0 + y1) / 2, f"{counts[stack]} ×",
                ha="right" if side < 0 else "left", va="center", fontsize=11,
                fontweight="bold")
        ax.text(x, 0.2, stack, ha="center", va="center", fontsize=11, fontweight="bold")
    # The memory: the encoder's last output into each decoder block's cross-attention.
    if "encoder" not in tops:
        ax.set_xlim(-0.1, 4.1)
        ax.set_ylim(0.05, max(tops.values()))
        ax.set_aspect("equal")
        ax.axis("off")
        return fig
    top = tops["encoder"] - gap
    for y in cross_boxes:
        ax.add_patch(FancyArrowPatch((centres["encoder"] + width / 2, top - height / 2),
                                     (centres["decoder"] - width / 2, y),
                                     connectionstyle="arc3,rad=-0.15", arrowstyle="-|>",
                                     mutation_scale=11, color="#1f4e8c", linewidth=1.6))
    ax.text(centres["encoder"] + width / 2 - 0.05, top + 0.1, "memory", ha="left",
            va="bottom", fontsize=10, color="#1f4e8c", style="italic")
    ax.set_xlim(-0.1, 6.4 if len(layout) == 2 else 4.1)
    ax.set_ylim(0.05, max(tops.values()))
    ax.set_aspect("equal")
    ax.axis("off")
    return fig
