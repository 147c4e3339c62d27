"""A decoder-only Transformer: causal self-attention blocks that predict the next token.

Token embedding, ``n_layers`` blocks whose attention lets each token see itself and the tokens
before it, and a linear head giving the logits of the next token at every position. Positions
are either the sinusoidal encoding added to the embeddings or RoPE
(:mod:`scratchformer.rotary`) applied to every head's queries and keys. A forward may carry a
:class:`~scratchformer.KVCache`, for generation (:mod:`scratchformer.generation`); training runs
the package's backward passes, as for the encoder.
"""

from __future__ import annotations

import numpy as np

from ._validation import (
    choice,
    features,
    floating_dtype,
    generator,
    non_negative_float,
    positive_int,
    token_ids,
)
from .attention import causal_mask
from .config import NORMS, ConfiguredModel, DecoderOnlyConfig
from .generation import KVCache, generate
from .layers import Embedding, FeedForward, LayerNorm, Linear
from .module import Layer
from .multihead import MultiHeadAttention, merge_heads
from .positional import positional_encoding
from .rotary import rope, rope_backward

__all__ = ["CausalSelfAttention", "DecoderOnlyBlock", "DecoderModel"]


class CausalSelfAttention(MultiHeadAttention):
    """Multi-head self-attention under the causal mask, with RoPE if asked, and a KV cache.

    Parameters
    ----------
    d_model, n_heads : int
        As for :class:`~scratchformer.MultiHeadAttention`.
    rotary : bool, default False
        Rotate every head's queries and keys by their positions (:func:`scratchformer.rope`),
        after the projections and the split into heads, before the scores; values are not
        rotated. Needs ``d_model / n_heads`` even.
    bias : bool, default True
    rng : numpy.random.Generator, optional
    dtype : floating dtype, default float64

    Notes
    -----
    A forward that saves for backward reads a whole sequence from position 0; its backward is
    that of :class:`~scratchformer.MultiHeadAttention` with the rotation's backward (the
    inverse rotation, :func:`scratchformer.rope_backward`) applied to the queries' and keys'
    gradients. A forward with a cache runs inside :meth:`~scratchformer.Layer.inference`
    only: the new tokens sit at positions ``cache.position`` onwards.
    """

    def __init__(self, d_model, n_heads, *, rotary=False, bias=True, rng=None,
                 dtype=np.float64):
        super().__init__(d_model, n_heads, bias=bias, rng=rng, dtype=dtype)
        self.rotary = bool(rotary)
        if self.rotary and self.d_k % 2:
            raise ValueError(f"rotary positions turn pairs of features: d_model / n_heads = "
                             f"{self.d_k} must be even")

    def __repr__(self):
        return (f"CausalSelfAttention(d_model={self.d_model}, n_heads={self.n_heads}, "
                f"rotary={self.rotary}, bias={self.bias}, "
                f"dtype={self.params['w_q'].dtype})")

    def forward(self, x, *, cache=None, layer=0):
        """Causal self-attention of the tokens of ``x``.

        Parameters
        ----------
        x : array_like, shape (..., n, d_model)
        cache : KVCache, optional
            Inside ``inference()`` only: ``x`` holds the tokens at positions
            ``cache.position .. cache.position + n - 1``; their keys and values are appended to
            the cache, and their queries attend to every cached key (the causal mask aligned
            bottom-right). The caller advances the cache.
        layer : int, default 0
            This layer's slot in the cache.

        Returns
        -------
        ndarray, shape (..., n, d_model)
        """
        if cache is None:
            x = features(x, self.d_model, "x", min_ndim=2)
            return super().forward(x, mask=causal_mask(x.shape[-2]))
        if self.saves_for_backward:
            raise RuntimeError("a KV cache serves generation: run the model inside "
                               "inference() (no backward pass goes through a cache)")
        x = features(x, self.d_model, "x", min_ndim=2)
        q, k, v = super()._split_inputs(x, x)  # (..., h, n, d_k) each
        q, k = self._rotate(q, k, cache.position)
        k, v = cache.append(layer, k, v)  # (..., h, position + n, d_k)
        mask = causal_mask(q.shape[-2], k.shape[-2])  # bottom-right: after the cached prefix
        self.attention_weights = None
        return self._project_output(merge_heads(self._attend_output(q, k, v, mask)))

    def _rotate(self, q, k, start):
        """RoPE at positions ``start, start + 1, ...`` (nothing without ``rotary``)."""
        if not self.rotary:
            return q, k
        positions = start + np.arange(q.shape[-2])
        return rope(q, positions), rope(k, positions)

    def _split_inputs(self, x, context):
        # The parent's forward (a whole sequence, from position 0) calls this.
        q, k, v = super()._split_inputs(x, context)
        return (*self._rotate(q, k, 0), v)

    def _queries_keys_backward(self, d_q, d_k):
        if not self.rotary:
            return d_q, d_k
        positions = np.arange(d_q.shape[-2])
        return rope_backward(d_q, positions), rope_backward(d_k, positions)


class DecoderOnlyBlock(Layer):
    r"""A decoder-only block: causal self-attention and feed-forward, pre-LN or post-LN.

    Parameters
    ----------
    d_model, n_heads, d_ff : int
    norm : {"pre", "post"}, default "pre"
        Where the layer norms sit, as in :class:`~scratchformer.EncoderBlock`.
    rotary : bool, default False
        RoPE in the attention (:class:`CausalSelfAttention`).
    eps : float, default 1e-5
    rng : numpy.random.Generator, optional
    dtype : floating dtype, default float64

    Notes
    -----
    The encoder block's arithmetic with the causal mask; the sinusoidal variant computes PyTorch's
    ``nn.TransformerEncoderLayer`` with a causal mask (``norm_first`` for pre-LN).
    """

    def __init__(self, d_model, n_heads, d_ff, *, norm="pre", rotary=False, eps=1e-5,
                 rng=None, dtype=np.float64):
        super().__init__()
        self.norm = choice(norm, NORMS, "norm")
        d_ff = positive_int(d_ff, "d_ff")
        eps = non_negative_float(eps, "eps")
        dtype, rng = floating_dtype(dtype), generator(rng)
        self.attention = CausalSelfAttention(d_model, n_heads, rotary=rotary, rng=rng,
                                             dtype=dtype)
        self.ffn = FeedForward(d_model, d_ff, rng=rng, dtype=dtype)
        self.norm1 = LayerNorm(d_model, eps=eps, dtype=dtype)
        self.norm2 = LayerNorm(d_model, eps=eps, dtype=dtype)

    @property
    def d_model(self):
        return self.attention.d_model

    def children(self):
        """The four sub-layers, by attribute name."""
        return {"attention": self.attention, "ffn": self.ffn,
                "norm1": self.norm1, "norm2": self.norm2}

    def forward(self, x, *, cache=None, layer=0):
        """(..., n, d_model) -> (..., n, d_model); ``cache`` and ``layer`` go to the attention."""
        x = features(x, self.d_model, "x", min_ndim=2)
        if self.norm == "post":
            y = self.norm1.forward(x + self.attention.forward(x, cache=cache, layer=layer))
            return self.norm2.forward(y + self.ffn.forward(y))
        attended = self.attention.forward(self.norm1.forward(x), cache=cache, layer=layer)
        y = x + attended  # the residual path is never normalised
        return y + self.ffn.forward(self.norm2.forward(y))

    def backward(self, d_z):
        """Gradient for ``x`` of the last :meth:`forward`; sets the sub-layers' ``grads``."""
        if self.norm == "post":
            d_w = self.norm2.backward(d_z)
            d_y = d_w + self.ffn.backward(d_w)
            d_u = self.norm1.backward(d_y)
            return d_u + self.attention.backward(d_u)
        d_y = d_z + self.norm2.backward(self.ffn.backward(d_z))
        return d_y + self.norm1.backward(self.attention.backward(d_y))


class DecoderModel(ConfiguredModel):
    r"""A decoder-only language model: the logits of the next token at every position.

    Parameters
    ----------
    vocab_size, d_model, n_heads, d_ff, n_layers : int
        Keyword-only, as every dimension of :class:`~scratchformer.DecoderOnlyConfig`.
    positions : {"rotary", "sinusoidal"}, default "rotary"
        RoPE in every attention layer, or the sinusoidal encoding added to the embeddings.
    norm : {"pre", "post"}, default "pre"
        The blocks' layout; a pre-LN model normalises the last block's output.
    max_positions : int, default 512
        The longest sequence read, generated tokens included.
    eps : float, default 1e-5
    rng : numpy.random.Generator, optional
        Source of every initial weight; default seeded with 0.
    dtype : floating dtype, default float64

    Attributes
    ----------
    config : DecoderOnlyConfig
    embedding : Embedding
    blocks : list of DecoderOnlyBlock
    final_norm : LayerNorm or None
        For ``norm="pre"`` only.
    head : Linear
        ``d_model -> vocab_size``.

    Notes
    -----
    .. math:: X_0 &= E[\text{tokens}] \;(+\, P), \\
              X_\ell &= \operatorname{Block}_\ell(X_{\ell-1}), \\
              \text{logits} &= X_L W + b,

    with :math:`P` the sinusoidal encoding (``positions="sinusoidal"``); logits at position
    :math:`t` depend on tokens :math:`0 .. t` only.
    """

    def __init__(self, *, vocab_size, d_model, n_heads, d_ff, n_layers, positions="rotary",
                 norm="pre", max_positions=512, eps=1e-5, rng=None, dtype=np.float64):
        super().__init__()
        c = DecoderOnlyConfig(vocab_size=vocab_size, d_model=d_model, n_heads=n_heads,
                              d_ff=d_ff, n_layers=n_layers, positions=positions, norm=norm,
                              max_positions=max_positions, eps=eps)
        dtype, rng = floating_dtype(dtype), generator(rng)
        self.config = c
        self.embedding = Embedding(c.vocab_size, c.d_model, rng=rng, dtype=dtype)
        self.blocks = [DecoderOnlyBlock(c.d_model, c.n_heads, c.d_ff, norm=c.norm,
                                        rotary=c.positions == "rotary", eps=c.eps, rng=rng,
                                        dtype=dtype)
                       for _ in range(c.n_layers)]
        self.final_norm = None
        if c.norm == "pre":
            self.final_norm = LayerNorm(c.d_model, eps=c.eps, dtype=dtype)
        self.head = Linear(c.d_model, c.vocab_size, rng=rng, dtype=dtype)

    def children(self):
        layers = {"embedding": self.embedding}
        layers |= {f"blocks.{i}": block for i, block in enumerate(self.blocks)}
        if self.final_norm is not None:
            layers["final_norm"] = self.final_norm
        layers["head"] = self.head
        return layers

    def new_cache(self):
        """An empty :class:`~scratchformer.KVCache` for this model."""
        return KVCache(self.config.n_layers, self.config.max_positions)

    def forward(self, tokens, *, cache=None):
        """Logits of the next token at every position.

        Parameters
        ----------
        tokens : array_like of int, shape (..., n)
        cache : KVCache, optional
            Inside ``inference()`` only: ``tokens`` continue the ``cache.position`` tokens read
            before; the cache is filled and advanced by ``n``.

        Returns
        -------
        logits : ndarray, shape (..., n, vocab_size)
        """
        c = self.config
        tokens = token_ids(tokens, c.vocab_size)
        start = 0
        if cache is not None:
            if not isinstance(cache, KVCache) or cache.n_layers != c.n_layers:
                raise TypeError(f"cache must be a KVCache of {c.n_layers} layers "
                                f"(model.new_cache()), got {cache!r}")
            if self.saves_for_backward:
                raise RuntimeError("a KV cache serves generation: run the model inside "
                                   "inference() (no backward pass goes through a cache)")
            start = cache.position
        n = tokens.shape[-1]
        if start + n > c.max_positions:
            raise ValueError(f"{start} + {n} tokens exceed the model's "
                             f"max_positions={c.max_positions}")
        x = self.embedding.forward(tokens)  # (..., n, d_model)
        if c.positions == "sinusoidal":
            pe = positional_encoding(start + n, c.d_model)[start:]  # (n, d_model)
            x += pe.astype(x.dtype, copy=False)
        for i, block in enumerate(self.blocks):
            x = block.forward(x, cache=cache, layer=i)
        if cache is not None:
            cache.advance(n)
        if self.final_norm is not None:
            x = self.final_norm.forward(x)
        return self.head.forward(x)

    def backward(self, d_logits):
        """Backpropagate the logits' gradient of the last forward; sets every ``grads``.
        Returns None: token ids have no gradient."""
        d_x = self.head.backward(d_logits)
        if self.final_norm is not None:
            d_x = self.final_norm.backward(d_x)
        for block in reversed(self.blocks):
            d_x = block.backward(d_x)
        self.embedding.backward(d_x)

    def generate(self, prompt, max_new_tokens, *, use_cache=True, temperature=0.0,
                 top_k=None, top_p=None, rng=None, return_logits=False):
        """The prompt followed by ``max_new_tokens`` generated tokens; see
        :func:`scratchformer.generate`, which this calls."""
        return generate(self, prompt, max_new_tokens, use_cache=use_cache,
                        temperature=temperature, top_k=top_k, top_p=top_p, rng=rng,
                        return_logits=return_logits)
