"""A decoder-only Transformer: causal self-attention blocks that predict the next token.

Token embedding, ``n_layers`` blocks whose attention lets each token see itself and the tokens
before it, and a linear head giving the logits of the next token at every position. Positions
are the sinusoidal encoding or a learned table (GPT-2's) added to the embeddings, or RoPE
(:mod:`scratchformer.rotary`) applied to every head's queries and keys. A forward may carry a
:class:`~scratchformer.KVCache`, for generation (:mod:`scratchformer.generation`); training runs
the package's backward passes, as for the encoder.
"""

from __future__ import annotations

import numpy as np

from ._validation import (
    base_above_one,
    choice,
    features,
    floating_dtype,
    generator,
    non_negative_float,
    output_gradient,
    positive_int,
    token_ids,
)
from .attention import causal_mask
from .config import FEED_FORWARDS, NORMALIZATIONS, NORMS, ConfiguredModel, DecoderOnlyConfig
from .generation import KVCache, generate
from .layers import Embedding, FeedForward, LayerNorm, Linear, RMSNorm, SwiGLU
from .module import Layer
from .multihead import AttentionHeads, merge_heads
from .positional import BASE, positional_encoding
from .rotary import rope, rope_backward

__all__ = ["CausalSelfAttention", "DecoderOnlyBlock", "DecoderModel"]


class CausalSelfAttention(AttentionHeads):
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
    n_kv_heads : int, optional
        Grouped-query attention, as for :class:`~scratchformer.MultiHeadAttention`; the cache
        then holds ``n_kv_heads`` heads of keys and values, ``n_heads / n_kv_heads`` times
        fewer bytes per token.
    rope_base : float, default 10000
        The base of the rotation's angles (:func:`scratchformer.rope`).
    rng : numpy.random.Generator, optional
    dtype : floating dtype, default float64

    Notes
    -----
    Not a :class:`~scratchformer.MultiHeadAttention` (it takes no mask and no context): the
    two share :class:`~scratchformer.AttentionHeads`, its projections, heads and backward.
    A forward that saves for backward reads a whole sequence from position 0; its backward is
    :meth:`AttentionHeads.backward <scratchformer.AttentionHeads.backward>` with the
    rotation's backward (the inverse rotation, :func:`scratchformer.rope_backward`) applied
    to the queries' and keys' gradients. A forward with a cache runs inside
    :meth:`~scratchformer.Layer.inference` only: the new tokens sit at positions
    ``cache.position`` onwards.
    """

    def __init__(self, d_model, n_heads, *, rotary=False, bias=True, n_kv_heads=None,
                 rope_base=BASE, rng=None, dtype=np.float64):
        super().__init__(d_model, n_heads, bias=bias, n_kv_heads=n_kv_heads, rng=rng,
                         dtype=dtype)
        self.rotary = bool(rotary)
        if self.rotary and self.d_k % 2:
            raise ValueError(f"rotary positions turn pairs of features: d_model / n_heads = "
                             f"{self.d_k} must be even")
        self.rope_base = base_above_one(rope_base, "rope_base")

    def __repr__(self):
        kv = f", n_kv_heads={self.n_kv_heads}" if self.n_kv_heads != self.n_heads else ""
        base = f", rope_base={self.rope_base:g}" if self.rope_base != BASE else ""
        return (f"CausalSelfAttention(d_model={self.d_model}, n_heads={self.n_heads}{kv}, "
                f"rotary={self.rotary}{base}, bias={self.bias}, "
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
        x = features(x, self.d_model, "x", min_ndim=2)
        if cache is None:  # the whole sequence, from position 0
            return self._multi_head(x, x, causal_mask(x.shape[-2]), cross=False)
        if not isinstance(cache, KVCache):
            raise TypeError(f"cache must be a KVCache, got {type(cache).__name__}")
        if self.saves_for_backward:
            raise RuntimeError("a KV cache serves generation: run the model inside "
                               "inference() (no backward pass goes through a cache)")
        # q: (..., h, n, d_k); k, v: (..., h_kv, n, d_k), h_kv = n_kv_heads
        q, k, v = super()._split_inputs(x, x)
        q, k = self._rotate(q, k, cache.position)
        k, v = cache.append(layer, k, v)  # (..., h_kv, position + n, d_k)
        # (..., h, position + n, d_k): each key/value head for its group
        k, v = self._share_keys_values(k), self._share_keys_values(v)
        mask = causal_mask(q.shape[-2], k.shape[-2])  # bottom-right: after the cached prefix
        self.attention_weights = None
        return self._project_output(merge_heads(self._attend_output(q, k, v, mask)))

    def _rotate(self, q, k, start):
        """RoPE at positions ``start, start + 1, ...`` (nothing without ``rotary``)."""
        if not self.rotary:
            return q, k
        positions = start + np.arange(q.shape[-2])
        return rope(q, positions, base=self.rope_base), rope(k, positions, base=self.rope_base)

    def _split_inputs(self, x, context):
        # A forward without a cache (a whole sequence, from position 0) calls this.
        q, k, v = super()._split_inputs(x, context)
        return (*self._rotate(q, k, 0), v)

    def _queries_keys_backward(self, d_q, d_k):
        if not self.rotary:
            return d_q, d_k
        positions, base = np.arange(d_q.shape[-2]), self.rope_base
        return rope_backward(d_q, positions, base=base), rope_backward(d_k, positions, base=base)


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
    n_kv_heads : int, optional
        Grouped-query attention (default ``n_heads``: none).
    normalization : {"layer", "rms"}, default "layer"
        :class:`~scratchformer.LayerNorm` or :class:`~scratchformer.RMSNorm`.
    feed_forward : {"relu", "swiglu", "gelu"}, default "relu"
        :class:`~scratchformer.FeedForward` (ReLU), :class:`~scratchformer.SwiGLU`, or
        :class:`~scratchformer.FeedForward` with GELU's tanh approximation
        (``activation="gelu"``, :func:`scratchformer.gelu`).
    rope_base : float, default 10000
    bias : bool, default True
        Biases in the attention projections and the ReLU or GELU network.
    rng : numpy.random.Generator, optional
    dtype : floating dtype, default float64

    Notes
    -----
    The encoder block's arithmetic with the causal mask; the sinusoidal variant computes PyTorch's
    ``nn.TransformerEncoderLayer`` with a causal mask (``norm_first`` for pre-LN). Pre-LN
    with ``normalization="rms"``, ``feed_forward="swiglu"``, grouped keys and values, RoPE and
    no biases is Llama's decoder layer (``transformers``' ``LlamaDecoderLayer``); pre-LN
    with layer norm, ``feed_forward="gelu"``, no rotation and biases is GPT-2's
    (``GPT2Block``, ``scratchformer.gpt2``).
    """

    def __init__(self, d_model, n_heads, d_ff, *, norm="pre", rotary=False, eps=1e-5,
                 n_kv_heads=None, normalization="layer", feed_forward="relu", rope_base=BASE,
                 bias=True, rng=None, dtype=np.float64):
        super().__init__()
        self.norm = choice(norm, NORMS, "norm")
        normalization = choice(normalization, NORMALIZATIONS, "normalization")
        feed_forward = choice(feed_forward, FEED_FORWARDS, "feed_forward")
        d_ff = positive_int(d_ff, "d_ff")
        eps = non_negative_float(eps, "eps")
        dtype, rng = floating_dtype(dtype), generator(rng)
        self.attention = CausalSelfAttention(d_model, n_heads, rotary=rotary, bias=bias,
                                             n_kv_heads=n_kv_heads, rope_base=rope_base,
                                             rng=rng, dtype=dtype)
        if feed_forward == "swiglu":
            self.ffn = SwiGLU(d_model, d_ff, rng=rng, dtype=dtype)
        else:
            activation = "gelu" if feed_forward == "gelu" else "relu"
            self.ffn = FeedForward(d_model, d_ff, bias=bias, activation=activation, rng=rng,
                                   dtype=dtype)
        norm_class = RMSNorm if normalization == "rms" else LayerNorm
        self.norm1 = norm_class(d_model, eps=eps, dtype=dtype)
        self.norm2 = norm_class(d_model, eps=eps, dtype=dtype)

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
        # The residual path is never normalised. Each sum is written into the sub-layer's
        # output, a fresh array nothing else holds (x + a and a + x are the same floats).
        y = self.attention.forward(self.norm1.forward(x), cache=cache, layer=layer)
        y += x
        z = self.ffn.forward(self.norm2.forward(y))
        z += y
        return z

    def backward(self, d_z):
        """Gradient for ``x`` of the last :meth:`forward`; sets the sub-layers' ``grads``."""
        if self.norm == "post":
            d_w = self.norm2.backward(d_z)
            d_y = d_w + self.ffn.backward(d_w)
            d_u = self.norm1.backward(d_y)
            return d_u + self.attention.backward(d_u)
        d_y = self.norm2.backward(self.ffn.backward(d_z))  # fresh, as in forward
        d_y += d_z
        d_x = self.norm1.backward(self.attention.backward(d_y))
        d_x += d_y
        return d_x


class DecoderModel(ConfiguredModel):
    r"""A decoder-only language model: the logits of the next token at every position.

    Parameters
    ----------
    vocab_size, d_model, n_heads, d_ff, n_layers : int
        Keyword-only, as every dimension of :class:`~scratchformer.DecoderOnlyConfig`.
    positions : {"rotary", "sinusoidal", "learned"}, default "rotary"
        RoPE in every attention layer, or the sinusoidal encoding added to the embeddings, or
        a learned table of ``max_positions`` vectors added to them (GPT-2's ``wpe``).
    norm : {"pre", "post"}, default "pre"
        The blocks' layout; a pre-LN model normalises the last block's output.
    max_positions : int, default 512
        The longest sequence read, generated tokens included.
    eps : float, default 1e-5
    n_kv_heads, normalization, feed_forward, rope_base, tie_embeddings, bias
        What a Llama-style model changes (:class:`~scratchformer.DecoderOnlyConfig`); the
        defaults give the book's model.
    rng : numpy.random.Generator, optional
        Source of every initial weight; default seeded with 0.
    dtype : floating dtype, default float64

    Attributes
    ----------
    config : DecoderOnlyConfig
    embedding : Embedding
    position_embedding : Embedding or None
        For ``positions="learned"`` only: ``max_positions x d_model``, row ``t`` for the
        token at position ``t`` (its gradient summed over the batch).
    blocks : list of DecoderOnlyBlock
    final_norm : LayerNorm, RMSNorm or None
        For ``norm="pre"`` only.
    head : Linear or None
        ``d_model -> vocab_size``; None with ``tie_embeddings``, where the logits are
        ``x @ embedding.params["table"].T``.

    Notes
    -----
    .. math:: X_0 &= E[\text{tokens}] \;(+\, P), \\
              X_\ell &= \operatorname{Block}_\ell(X_{\ell-1}), \\
              \text{logits} &= X_L W + b \quad (\text{tied: } X_L E^\top),

    with :math:`P` the sinusoidal encoding (``positions="sinusoidal"``) or the learned table's
    first rows (``positions="learned"``; after a cached prefix, rows ``cache.position``
    onwards); logits at position :math:`t` depend on tokens :math:`0 .. t` only. Pre-LN,
    layer norm, learned positions, ``feed_forward="gelu"`` and a tied head are GPT-2
    (:func:`scratchformer.gpt2.from_gpt2`). A tied head's gradient adds to the
    embedding's: the table is read twice, once per token in, once per logit out.
    """

    def __init__(self, *, vocab_size, d_model, n_heads, d_ff, n_layers, positions="rotary",
                 norm="pre", max_positions=512, eps=1e-5, n_kv_heads=None,
                 normalization="layer", feed_forward="relu", rope_base=BASE,
                 tie_embeddings=False, bias=True, rng=None, dtype=np.float64):
        super().__init__()
        c = DecoderOnlyConfig(vocab_size=vocab_size, d_model=d_model, n_heads=n_heads,
                              d_ff=d_ff, n_layers=n_layers, positions=positions, norm=norm,
                              max_positions=max_positions, eps=eps, n_kv_heads=n_kv_heads,
                              normalization=normalization, feed_forward=feed_forward,
                              rope_base=rope_base, tie_embeddings=tie_embeddings, bias=bias)
        dtype, rng = floating_dtype(dtype), generator(rng)
        self.config = c
        self.embedding = Embedding(c.vocab_size, c.d_model, rng=rng, dtype=dtype)
        self.position_embedding = None
        if c.positions == "learned":
            self.position_embedding = Embedding(c.max_positions, c.d_model, rng=rng,
                                                dtype=dtype)
        self.blocks = [DecoderOnlyBlock(c.d_model, c.n_heads, c.d_ff, norm=c.norm,
                                        rotary=c.positions == "rotary", eps=c.eps,
                                        n_kv_heads=c.n_kv_heads,
                                        normalization=c.normalization,
                                        feed_forward=c.feed_forward, rope_base=c.rope_base,
                                        bias=c.bias, rng=rng, dtype=dtype)
                       for _ in range(c.n_layers)]
        self.final_norm = None
        if c.norm == "pre":
            norm_class = RMSNorm if c.normalization == "rms" else LayerNorm
            self.final_norm = norm_class(c.d_model, eps=c.eps, dtype=dtype)
        self.head = None
        if not c.tie_embeddings:
            self.head = Linear(c.d_model, c.vocab_size, bias=c.bias, rng=rng, dtype=dtype)

    def children(self):
        layers = {"embedding": self.embedding}
        if self.position_embedding is not None:
            layers["position_embedding"] = self.position_embedding
        layers |= {f"blocks.{i}": block for i, block in enumerate(self.blocks)}
        if self.final_norm is not None:
            layers["final_norm"] = self.final_norm
        if self.head is not None:
            layers["head"] = self.head
        return layers

    @property
    def dtype(self):
        """The dtype of the parameters."""
        return self.embedding.params["table"].dtype

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
        elif c.positions == "learned":  # rows start .. start + n - 1 of the table
            x += self.position_embedding.forward(np.arange(start, start + n))
        for i, block in enumerate(self.blocks):
            x = block.forward(x, cache=cache, layer=i)
        if cache is not None:
            cache.advance(n)
        if self.final_norm is not None:
            x = self.final_norm.forward(x)
        if self.head is not None:
            return self.head.forward(x)
        self._save(x=x)
        # (..., n, d_model) @ (d_model, vocab_size) -> (..., n, vocab_size)
        return x @ self.embedding.params["table"].T

    def backward(self, d_logits):
        """Backpropagate the logits' gradient of the last forward; sets every ``grads``.
        Returns None: token ids have no gradient."""
        if self.head is not None:
            d_x = self.head.backward(d_logits)
        else:
            x = self._saved_for_backward()["x"]
            table = self.embedding.params["table"]
            d_logits = output_gradient(d_logits, (*x.shape[:-1], table.shape[0]), "d_logits")
            d_x = d_logits @ table  # (..., n, vocab_size) @ (vocab_size, d_model)
            if not self.embedding.frozen:
                # (vocab_size, tokens) @ (tokens, d_model): the head's share of the table's
                # gradient
                d_table = (d_logits.reshape(-1, table.shape[0]).T
                           @ x.reshape(-1, table.shape[1]))
        if self.final_norm is not None:
            d_x = self.final_norm.backward(d_x)
        for block in reversed(self.blocks):
            d_x = block.backward(d_x)
        self.embedding.backward(d_x)
        if self.position_embedding is not None:  # each row is read by every sequence
            d_x = d_x.reshape(-1, *d_x.shape[-2:]).sum(axis=0)  # (n, d_model)
            self.position_embedding.backward(d_x)
        if self.head is None and not self.embedding.frozen:
            self.embedding.grads["table"] += d_table

    def generate(self, prompt, max_new_tokens, *, use_cache=True, temperature=0.0,
                 top_k=None, top_p=None, rng=None, return_logits=False):
        """The prompt followed by ``max_new_tokens`` generated tokens; see
        :func:`scratchformer.generate`, which this calls."""
        return generate(self, prompt, max_new_tokens, use_cache=use_cache,
                        temperature=temperature, top_k=top_k, top_p=top_p, rng=rng,
                        return_logits=return_logits)
