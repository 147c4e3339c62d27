"""scratchformer: the Transformer from first principles, in NumPy.

The tested package behind the book *Transformer from First Principles*. Each module tells the
chapter that derives it. Conventions used throughout:

- arrays are batch-first, ``(..., n, d)``, and leading axes broadcast;
- weights multiply from the right, ``y = x @ W + b`` with ``W`` of shape ``(d_in, d_out)``;
  PyTorch's ``nn.Linear`` stores ``weight`` as ``(d_out, d_in)`` and computes ``x @ weight.T``;
- randomness comes only from an ``rng: numpy.random.Generator`` argument.
"""

from .attention import attention_backward, causal_mask, scaled_dot_product_attention
from .diagnostics import block_gradient_norms, gradient_norms, stream_scales
from .display import markdown_table, weights_table
from .encoder import EncoderBlock
from .functional import softmax, softmax_backward, softmax_jacobian
from .gradcheck import (gradient_pairs, numerical_gradient, randomize_parameters,
                        relative_error, torch_gradients)
from .layers import (Embedding, FeedForward, LayerNorm, Linear, layer_norm,
                     layer_norm_backward)
from .model import EncoderModel, cross_entropy
from .module import Layer
from .multihead import MultiHeadAttention, merge_heads, split_heads
from .optim import Adam, clip_grad_norm, grad_norm, warmup_cosine
from .plotting import (attention_heads, attention_heatmap, attention_layers, curves,
                       matrix_heatmap)
from .positional import positional_encoding, rotation_matrix
from .rnn import rnn_influence
from .tiled import tiled_attention

__all__ = [
    "Adam",
    "Embedding",
    "EncoderBlock",
    "EncoderModel",
    "FeedForward",
    "Layer",
    "LayerNorm",
    "Linear",
    "MultiHeadAttention",
    "attention_backward",
    "attention_heads",
    "attention_heatmap",
    "attention_layers",
    "block_gradient_norms",
    "causal_mask",
    "clip_grad_norm",
    "cross_entropy",
    "curves",
    "grad_norm",
    "gradient_norms",
    "gradient_pairs",
    "layer_norm",
    "layer_norm_backward",
    "markdown_table",
    "matrix_heatmap",
    "merge_heads",
    "numerical_gradient",
    "positional_encoding",
    "randomize_parameters",
    "relative_error",
    "rnn_influence",
    "rotation_matrix",
    "scaled_dot_product_attention",
    "softmax",
    "softmax_backward",
    "softmax_jacobian",
    "split_heads",
    "stream_scales",
    "tiled_attention",
    "torch_gradients",
    "warmup_cosine",
    "weights_table",
]
__version__ = "0.1.0"
