"""The architecture diagram is read from the model, not typed in for one model."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from scratchformer import EncoderDecoderModel  # noqa: E402
from scratchformer.book.diagram import architecture, stack_layout  # noqa: E402


def model(norm="post", n_layers=2):
    return EncoderDecoderModel(vocab_size=7, target_vocab_size=9, d_model=8, n_heads=2,
                               d_ff=12, n_layers=n_layers, pad_id=0, norm=norm,
                               rng=np.random.default_rng(0))


def texts(fig):
    return [t.get_text() for t in fig.axes[0].texts]


def test_post_ln_stacks_follow_the_paper():
    layout = stack_layout(model("post"))
    encoder = [text for text, _, _ in layout["encoder"]]
    decoder = [text for text, _, _ in layout["decoder"]]
    # Figure 1 of Vaswani et al.: two sub-layers in an encoder block, three in a decoder block,
    # each followed by "Add & Norm"; no final norm after post-LN stacks.
    assert encoder == ["Source embedding + positions", "Multi-head self-attention",
                       "Add & LayerNorm", "Feed-forward", "Add & LayerNorm"]
    assert decoder == ["Target embedding + positions", "Masked multi-head self-attention",
                       "Add & LayerNorm", "Multi-head cross-attention", "Add & LayerNorm",
                       "Feed-forward", "Add & LayerNorm", "Linear, then softmax"]
    classes = {cls for stack in layout.values() for _, cls, _ in stack}
    assert {"MultiHeadAttention", "FeedForward", "LayerNorm", "Embedding", "Linear"} <= classes


def test_pre_ln_puts_the_norm_before_each_sublayer_and_adds_a_final_norm():
    layout = stack_layout(model("pre"))
    encoder = [text for text, _, _ in layout["encoder"]]
    assert encoder == ["Source embedding + positions", "LayerNorm",
                       "Multi-head self-attention", "Add", "LayerNorm", "Feed-forward", "Add",
                       "Final LayerNorm"]
    assert [text for text, _, _ in layout["decoder"]][-2:] == ["Final LayerNorm",
                                                               "Linear, then softmax"]


@pytest.mark.parametrize("n_layers", [1, 3])
def test_the_figure_names_the_number_of_blocks_and_the_memory(n_layers):
    fig = architecture(model(n_layers=n_layers))
    labels = texts(fig)
    assert labels.count(f"{n_layers} ×") == 2
    assert "memory" in labels and "encoder" in labels and "decoder" in labels
    assert "Multi-head cross-attention\nMultiHeadAttention" in labels


def test_a_decoder_only_model_is_one_stack_read_from_its_options():
    from scratchformer import DecoderModel

    llama = DecoderModel(vocab_size=5, d_model=12, n_heads=6, n_kv_heads=2, d_ff=8,
                         n_layers=3, normalization="rms", feed_forward="swiglu",
                         tie_embeddings=True, bias=False)
    (boxes,) = stack_layout(llama).values()
    names = [text for text, _, _ in boxes]
    assert names[0] == "Token embedding" and names[-2] == "Final RMSNorm"
    assert "RoPE attention, 6 q / 2 kv heads" in names
    assert ("Feed-forward", "SwiGLU", "ffn") in boxes and "tied" in boxes[-1][1]
    gpt = DecoderModel(vocab_size=5, d_model=8, n_heads=2, d_ff=8, n_layers=2,
                       positions="sinusoidal", norm="post")
    (boxes,) = stack_layout(gpt).values()
    assert boxes[0][0] == "Token embedding + positions"
    assert ("Causal attention, 2 heads", "CausalSelfAttention", "attention") in boxes
    assert boxes[-1] == ("Linear, then softmax", "Linear", "io")
    assert "3 ×" in texts(architecture(llama))


def test_architecture_refuses_a_model_without_two_stacks():
    from scratchformer import EncoderModel

    encoder_only = EncoderModel(vocab_size=5, n_classes=5, d_model=8, n_heads=2, d_ff=8,
                                n_layers=1, rng=np.random.default_rng(0))
    with pytest.raises(TypeError, match="EncoderDecoderModel or a DecoderModel"):
        architecture(encoder_only)
