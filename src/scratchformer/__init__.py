"""scratchformer: the Transformer from first principles, in NumPy.

The tested package behind the book *Transformer from First Principles*. Each module tells the
chapter that derives it. Conventions used throughout:

- arrays are batch-first, ``(..., n, d)``, and leading axes broadcast;
- weights multiply from the right, ``y = x @ W + b`` with ``W`` of shape ``(d_in, d_out)``;
  PyTorch's ``nn.Linear`` stores ``weight`` as ``(d_out, d_in)`` and computes ``x @ weight.T``;
- randomness comes only from an ``rng: numpy.random.Generator`` argument.
"""

from .attention import causal_mask, scaled_dot_product_attention
from .display import markdown_table, weights_table
from .encoder import EncoderBlock
from .functional import softmax, softmax_jacobian
from .layers import FeedForward, LayerNorm, layer_norm
from .multihead import MultiHeadAttention, merge_heads, split_heads
from .plotting import attention_heads, attention_heatmap, curves, matrix_heatmap
from .positional import positional_encoding, rotation_matrix
from .rnn import rnn_influence
from .tiled import tiled_attention

__all__ = [
    "EncoderBlock",
    "FeedForward",
    "LayerNorm",
    "MultiHeadAttention",
    "attention_heads",
    "attention_heatmap",
    "causal_mask",
    "curves",
    "layer_norm",
    "markdown_table",
    "matrix_heatmap",
    "merge_heads",
    "positional_encoding",
    "rnn_influence",
    "rotation_matrix",
    "scaled_dot_product_attention",
    "softmax",
    "softmax_jacobian",
    "split_heads",
    "tiled_attention",
    "weights_table",
]
__version__ = "0.1.0"
