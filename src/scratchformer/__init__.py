"""scratchformer: the Transformer from first principles, in NumPy.

The tested package behind the book *Transformer from First Principles*. Each module tells the
chapter that derives it. The package has two homes:

- ``scratchformer`` itself, imported here: the model and what trains it (attention, layers,
  blocks, models and their configurations, losses, optimiser, tasks, gradient checks), and the
  training loop in ``scratchformer.train`` (imported on its own). It imports NumPy only.
- ``scratchformer.book``: the book's tooling (figures, tables, timing, benchmarks,
  diagnostics, the recurrent-network demonstration), the only place matplotlib is imported.

``scratchformer.pytorch`` holds everything PyTorch: the conversions to and from it and the
twin models written with it; it is imported only when asked for (``from scratchformer.pytorch
import to_torch``), so ``import scratchformer`` never imports torch. Conventions used throughout:

- arrays are batch-first, ``(..., n, d)``, and leading axes broadcast;
- weights multiply from the right, ``y = x @ W + b`` with ``W`` of shape ``(d_in, d_out)``;
  PyTorch's ``nn.Linear`` stores ``weight`` as ``(d_out, d_in)`` and computes ``x @ weight.T``;
- randomness comes only from an ``rng: numpy.random.Generator`` argument.
"""

from .addition import AdditionTask
from .attention import attention_backward, causal_mask, scaled_dot_product_attention
from .config import DecoderOnlyConfig, EncoderConfig, ModelConfig
from .decoder import DecoderBlock
from .decoder_only import CausalSelfAttention, DecoderModel, DecoderOnlyBlock
from .decoding import beam_search, greedy_decode, sequence_log_probability
from .dropout import Dropout
from .encoder import EncoderBlock
from .functional import softmax, softmax_backward, softmax_jacobian
from .generation import KVCache, generate, next_token
from .gradcheck import gradient_pairs, numerical_gradient, randomize_parameters, relative_error
from .layers import (
    Embedding,
    FeedForward,
    LayerNorm,
    Linear,
    RMSNorm,
    SwiGLU,
    gelu,
    layer_norm,
    layer_norm_backward,
    rms_norm,
    rms_norm_backward,
    silu,
)
from .lora import LoRA, add_lora, lora_adapters, merge_lora
from .metrics import chrf, corpus_chrf
from .model import EncoderModel, cross_entropy, masked_cross_entropy
from .module import Layer
from .multihead import AttentionHeads, MultiHeadAttention, merge_heads, split_heads
from .optim import Adam, clip_grad_norm, grad_norm, gradients, warmup_cosine
from .positional import frequencies, positional_encoding, rotation_matrix
from .rotary import half_split_permutation, rope, rope_backward, rope_half_split
from .seq2seq import (
    EncoderDecoderConfig,
    EncoderDecoderModel,
    padding_mask,
    sequence_cross_entropy,
    target_mask,
)
from .tasks import LabellingTask, Split, Task
from .tiled import tiled_attention
from .translation import TranslationTask, split_german

__all__ = [
    "Adam",
    "AdditionTask",
    "CausalSelfAttention",
    "DecoderBlock",
    "DecoderModel",
    "DecoderOnlyBlock",
    "DecoderOnlyConfig",
    "Dropout",
    "Embedding",
    "EncoderBlock",
    "EncoderConfig",
    "EncoderDecoderConfig",
    "EncoderDecoderModel",
    "EncoderModel",
    "FeedForward",
    "KVCache",
    "LabellingTask",
    "Layer",
    "LayerNorm",
    "Linear",
    "ModelConfig",
    "AttentionHeads",
    "MultiHeadAttention",
    "RMSNorm",
    "Split",
    "SwiGLU",
    "Task",
    "TranslationTask",
    "attention_backward",
    "beam_search",
    "causal_mask",
    "chrf",
    "clip_grad_norm",
    "corpus_chrf",
    "cross_entropy",
    "add_lora",
    "lora_adapters",
    "masked_cross_entropy",
    "merge_lora",
    "LoRA",
    "gelu",
    "frequencies",
    "generate",
    "grad_norm",
    "gradients",
    "gradient_pairs",
    "greedy_decode",
    "half_split_permutation",
    "layer_norm",
    "layer_norm_backward",
    "merge_heads",
    "next_token",
    "numerical_gradient",
    "padding_mask",
    "positional_encoding",
    "randomize_parameters",
    "relative_error",
    "rms_norm",
    "rms_norm_backward",
    "rope",
    "rope_backward",
    "rope_half_split",
    "rotation_matrix",
    "scaled_dot_product_attention",
    "sequence_cross_entropy",
    "sequence_log_probability",
    "silu",
    "softmax",
    "softmax_backward",
    "softmax_jacobian",
    "split_german",
    "split_heads",
    "target_mask",
    "tiled_attention",
    "warmup_cosine",
]
__version__ = "0.1.0"
