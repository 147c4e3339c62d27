"""The dimensions of a model, checked once: the configurations the models are built from.

A model takes its dimensions as keyword arguments (``EncoderModel(vocab_size=10, n_classes=10,
d_model=64, n_heads=4, d_ff=128, n_layers=2)``), checks them by building its configuration, and
keeps it as ``model.config``: a frozen dataclass, so ``type(model)(**dataclasses.asdict(
model.config))`` builds an untrained twin. Every model extends :class:`ModelConfig` with what
only it has (the encoder's number of output classes, for one).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ._validation import base_above_one, choice, non_negative_float, positive_int
from .module import Layer

__all__ = ["NORMS", "POSITIONS", "NORMALIZATIONS", "FEED_FORWARDS", "ModelConfig",
           "EncoderConfig", "DecoderOnlyConfig", "ConfiguredModel"]

#: Where a block's layer norms sit: after each residual addition (the original Transformer)
#: or at the input of each sub-layer.
NORMS = ("post", "pre")

#: How a decoder-only model knows where a token is: queries and keys rotated by their
#: position (RoPE), the sinusoidal encoding added to the embeddings, or a learned table of
#: one vector per position added to them (GPT-2's).
POSITIONS = ("rotary", "sinusoidal", "learned")

#: What normalises a decoder-only block's sub-layers: layer norm, or its root-mean-square
#: variant without the mean (Llama's).
NORMALIZATIONS = ("layer", "rms")

#: A decoder-only block's feed-forward network: ReLU between two affine maps (the original
#: Transformer), the gated SwiGLU (Llama's), or GELU between two affine maps in the tanh
#: approximation (GPT-2's ``gelu_new``, :func:`scratchformer.gelu`).
FEED_FORWARDS = ("relu", "swiglu", "gelu")


@dataclasses.dataclass(frozen=True, kw_only=True)
class ModelConfig:
    """What every Transformer of the package shares.

    Attributes
    ----------
    vocab_size : int
        Number of token ids the model reads.
    d_model : int
        Width of the tokens.
    n_heads : int
        Heads per attention layer, dividing ``d_model``.
    d_ff : int
        Width of the feed-forward networks.
    n_layers : int
        Number of blocks.
    norm : str
        Where the layer norms sit, ``"post"`` (default) or ``"pre"``.
    eps : float
        The layer norms' epsilon, default ``1e-5``.
    """

    vocab_size: int
    d_model: int
    n_heads: int
    d_ff: int
    n_layers: int
    norm: str = "post"
    eps: float = 1e-5

    def __post_init__(self):
        for name in ("vocab_size", "d_model", "n_heads", "d_ff", "n_layers"):
            object.__setattr__(self, name, positive_int(getattr(self, name), name))
        choice(self.norm, NORMS, "norm")
        object.__setattr__(self, "eps", non_negative_float(self.eps, "eps"))
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by "
                             f"n_heads={self.n_heads}: each head needs d_model / n_heads "
                             "features")


@dataclasses.dataclass(frozen=True, kw_only=True)
class EncoderConfig(ModelConfig):
    """An encoder that labels every token: :class:`ModelConfig` and the number of labels.

    Attributes
    ----------
    n_classes : int
        Number of labels each position is classified into.
    """

    n_classes: int

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "n_classes", positive_int(self.n_classes, "n_classes"))
        if self.d_model % 2:
            raise ValueError(f"d_model must be even (sine-cosine pairs of the positional "
                             f"encoding), got {self.d_model}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class DecoderOnlyConfig(ModelConfig):
    r"""A decoder-only (GPT-style) language model: :class:`ModelConfig`, positions and length.

    Pre-LN by default, as decoder-only models are.

    Attributes
    ----------
    positions : str
        ``"rotary"`` (default: RoPE in every attention layer), ``"sinusoidal"`` (the
        encoding added to the embeddings) or ``"learned"`` (a trained table of
        ``max_positions x d_model``, row ``t`` added to the embedding of the token at
        position ``t``: GPT-2's ``wpe``).
    max_positions : int
        The longest sequence the model reads (prompt and generated tokens together), default
        512; a KV cache holds this many positions.
    n_kv_heads : int
        Key/value heads per attention layer (grouped-query attention), dividing ``n_heads``;
        default (None) ``n_heads``, which the configuration then stores.
    normalization : str
        ``"layer"`` (default: :class:`~scratchformer.LayerNorm`) or ``"rms"``
        (:class:`~scratchformer.RMSNorm`).
    feed_forward : str
        ``"relu"`` (default: :class:`~scratchformer.FeedForward`), ``"swiglu"``
        (:class:`~scratchformer.SwiGLU`, ``d_ff`` wide) or ``"gelu"`` (a
        :class:`~scratchformer.FeedForward` with ``activation="gelu"``: GELU in the tanh
        approximation of :func:`scratchformer.gelu`, GPT-2's ``gelu_new``, not the exact
        :math:`x\,\Phi(x)` of the error function).
    rope_base : float
        The base of RoPE's angles, default 10000 (:func:`scratchformer.rope`).
    tie_embeddings : bool
        If True, the head is the embedding table transposed (logits ``x @ E^T``, no bias),
        one matrix for both; default False, a :class:`~scratchformer.Linear` head.
    bias : bool
        Whether the attention projections, the ReLU or GELU network and an untied head have
        biases (default True; SwiGLU has none).
    """

    norm: str = "pre"
    positions: str = "rotary"
    max_positions: int = 512
    n_kv_heads: int | None = None
    normalization: str = "layer"
    feed_forward: str = "relu"
    rope_base: float = 10_000.0
    tie_embeddings: bool = False
    bias: bool = True

    def __post_init__(self):
        super().__post_init__()
        choice(self.positions, POSITIONS, "positions")
        choice(self.normalization, NORMALIZATIONS, "normalization")
        choice(self.feed_forward, FEED_FORWARDS, "feed_forward")
        object.__setattr__(self, "max_positions",
                           positive_int(self.max_positions, "max_positions"))
        n_kv = self.n_heads if self.n_kv_heads is None else self.n_kv_heads
        object.__setattr__(self, "n_kv_heads", positive_int(n_kv, "n_kv_heads"))
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"n_kv_heads={self.n_kv_heads} does not divide "
                             f"n_heads={self.n_heads}: each key/value head serves a whole "
                             "group of query heads")
        object.__setattr__(self, "rope_base", base_above_one(self.rope_base, "rope_base"))
        for name in ("tie_embeddings", "bias"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise TypeError(f"{name} must be True or False, got {getattr(self, name)!r}")
            object.__setattr__(self, name, bool(getattr(self, name)))
        d_k = self.d_model // self.n_heads
        if self.positions == "rotary" and d_k % 2:
            raise ValueError(f"rotary positions turn pairs of each head's features: "
                             f"d_model / n_heads = {d_k} must be even")
        if self.positions == "sinusoidal" and self.d_model % 2:
            raise ValueError(f"d_model must be even (sine-cosine pairs of the positional "
                             f"encoding), got {self.d_model}")


class ConfiguredModel(Layer):
    """A model built from the configuration it keeps as ``config``: what every model shares.

    ``d_model`` and ``norm`` are read from the configuration, and the model prints as its
    class called with the configuration's fields, which rebuilds an untrained twin.
    """

    @property
    def d_model(self):
        return self.config.d_model

    @property
    def norm(self):
        return self.config.norm

    def __repr__(self):
        fields = ", ".join(f"{k}={v!r}" for k, v in dataclasses.asdict(self.config).items())
        return f"{type(self).__name__}({fields})"
