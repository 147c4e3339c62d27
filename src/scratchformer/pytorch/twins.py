"""The book's models written again from PyTorch's modules and operations: the references the
NumPy models are checked against.

:class:`TorchEncoderModel` and :class:`TorchEncoderDecoderModel` are built from PyTorch's own
layers (``nn.TransformerEncoderLayer``, ``nn.TransformerDecoderLayer``, batch first, run one by
one); :func:`~scratchformer.pytorch.to_torch` makes them from an
:class:`~scratchformer.EncoderModel` or an :class:`~scratchformer.EncoderDecoderModel`.
PyTorch has no module for a rotary decoder-only model, so :class:`TorchDecoderModel` writes
one from PyTorch's operations (``F.linear``, ``F.layer_norm``,
``F.scaled_dot_product_attention``), with the same weights as a
:class:`~scratchformer.DecoderModel` and the same cache logic as
:func:`scratchformer.generate`: the prompt read at once, then one token per step, whose query
attends to every cached key. It is the reference that ``tests/test_pytorch_decoder_only.py``
checks the NumPy model against (logits at every step, in float64) and that
``benchmarks/generation_speed.py`` times generation against.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from ..decoder_only import DecoderModel
from ..positional import positional_encoding

__all__ = ["TorchDecoderModel", "TorchEncoderDecoderModel", "TorchEncoderModel"]


class TorchEncoderModel(torch.nn.Module):
    """The PyTorch twin of :class:`scratchformer.EncoderModel`.

    Embedding, the same sinusoidal positions, ``nn.TransformerEncoderLayer`` blocks (batch
    first), a final ``nn.LayerNorm`` for pre-LN models only, and a linear head; ``forward``
    takes a ``LongTensor`` of shape ``(..., n)`` and returns the logits.
    """

    def __init__(self, embedding, blocks, final_norm, head):
        super().__init__()
        self.embedding = embedding
        self.blocks = torch.nn.ModuleList(blocks)
        self.final_norm = final_norm
        self.head = head

    def forward(self, tokens):
        """Logits ``(..., n, n_classes)`` of a ``LongTensor`` of token ids ``(..., n)``."""
        n, d_model = tokens.shape[-1], self.embedding.embedding_dim
        pe = torch.from_numpy(positional_encoding(n, d_model))
        x = self.embedding(tokens) + pe.to(self.embedding.weight.dtype)
        for block in self.blocks:
            x = block(x)
        if self.final_norm is not None:
            x = self.final_norm(x)
        return self.head(x)


class TorchEncoderDecoderModel(torch.nn.Module):
    """The PyTorch twin of :class:`scratchformer.EncoderDecoderModel`.

    Two embeddings with the same sinusoidal positions, ``nn.TransformerEncoderLayer`` and
    ``nn.TransformerDecoderLayer`` blocks (batch first) run one by one (``nn.Transformer``
    would add final layer norms to post-LN stacks too), final ``nn.LayerNorm`` s for pre-LN
    models only, and a linear head. ``forward(source, target)`` takes ``LongTensor`` s
    ``(batch, n_s)`` and ``(batch, n_t)`` and builds PyTorch's masks, whose True means
    *blocked*: padded keys, and the future in the decoder's self-attention.
    """

    def __init__(self, source_embedding, encoder_blocks, encoder_norm, target_embedding,
                 decoder_blocks, decoder_norm, head, pad_id):
        super().__init__()
        self.source_embedding = source_embedding
        self.encoder_blocks = torch.nn.ModuleList(encoder_blocks)
        self.encoder_norm = encoder_norm
        self.target_embedding = target_embedding
        self.decoder_blocks = torch.nn.ModuleList(decoder_blocks)
        self.decoder_norm = decoder_norm
        self.head = head
        self.pad_id = pad_id

    def _embed(self, embedding, tokens):
        pe = torch.from_numpy(positional_encoding(tokens.shape[-1], embedding.embedding_dim))
        return embedding(tokens) + pe.to(embedding.weight.dtype)

    def forward(self, source, target):
        """Teacher-forced logits ``(batch, n_t, target_vocab_size)``."""
        source_pad = source == self.pad_id  # True = blocked
        target_pad = target == self.pad_id
        n_t = target.shape[-1]
        future = torch.ones(n_t, n_t, dtype=torch.bool).triu(1)  # True = blocked
        x = self._embed(self.source_embedding, source)
        for block in self.encoder_blocks:
            x = block(x, src_key_padding_mask=source_pad)
        if self.encoder_norm is not None:
            x = self.encoder_norm(x)
        y = self._embed(self.target_embedding, target)
        for block in self.decoder_blocks:
            y = block(y, x, tgt_mask=future, tgt_key_padding_mask=target_pad,
                      memory_key_padding_mask=source_pad)
        if self.decoder_norm is not None:
            y = self.decoder_norm(y)
        return self.head(y)


def _tensor(array):
    return torch.from_numpy(np.array(array, copy=True))


class TorchDecoderModel(torch.nn.Module):
    """A :class:`~scratchformer.DecoderModel` in PyTorch, weights copied from one.

    Parameters
    ----------
    model : DecoderModel
        Its weights, dtype, layout (pre-LN or post-LN), positions (rotary, sinusoidal or a
        learned table) and every option of its configuration: grouped keys and values
        (``scaled_dot_product_attention(enable_gqa=True)``), RMS norm (``F.rms_norm``),
        SwiGLU (``F.silu``), GELU's tanh approximation (``F.gelu(approximate="tanh")``),
        RoPE's base, a tied head, no biases.

    Notes
    -----
    RoPE is the interleaved convention of :func:`scratchformer.rope`: features ``2i`` and
    ``2i + 1`` of each head rotated by ``position * base**(-2i / d_k)``; the sinusoidal
    encoding puts ``sin`` and ``cos`` of ``position * 10000**(-2i / d_model)`` at features
    ``2i`` and ``2i + 1``. Both are written here from their formulas, the angles in float64.
    PyTorch's boolean masks in ``scaled_dot_product_attention`` mean "may attend", as the
    package's do; after a cached prefix the causal mask is aligned bottom-right
    (``is_causal=True`` would align it top-left).
    """

    def __init__(self, model: DecoderModel):
        super().__init__()
        if not isinstance(model, DecoderModel):
            raise TypeError(f"model must be a scratchformer.DecoderModel, got {model!r}")
        c = model.config
        self.config = c
        self.dtype = model.dtype
        params = {name: torch.nn.Parameter(_tensor(layer.params[key]), requires_grad=False)
                  for name, layer, key in model.named_parameters()}
        self.params = torch.nn.ParameterDict({name.replace(".", "/"): p
                                              for name, p in params.items()})
        self._get = lambda name: self.params[name.replace(".", "/")]
        d_k = c.d_model // c.n_heads
        self.d_k = d_k
        # base^(-2i/d_k), i = 0 .. d_k/2 - 1, written here rather than taken from the package
        self._frequencies = c.rope_base ** (
            -torch.arange(0, d_k, 2, dtype=torch.float64) / d_k)

    def _has(self, name):
        return name.replace(".", "/") in self.params

    def _linear(self, x, prefix, w="w", b="b"):
        weight = self._get(f"{prefix}.{w}")  # (d_in, d_out): x @ W, the package's layout
        flat = x.reshape(-1, x.shape[-1])
        if self._has(f"{prefix}.{b}"):
            out = torch.addmm(self._get(f"{prefix}.{b}"), flat, weight)
        else:
            out = flat @ weight
        return out.reshape(*x.shape[:-1], weight.shape[1])

    def _norm(self, x, prefix):
        if self.config.normalization == "rms":
            return F.rms_norm(x, x.shape[-1:], self._get(f"{prefix}.gamma"), self.config.eps)
        return F.layer_norm(x, x.shape[-1:], self._get(f"{prefix}.gamma"),
                            self._get(f"{prefix}.beta"), self.config.eps)

    def _rope(self, x, start):
        n = x.shape[-2]
        positions = torch.arange(start, start + n, dtype=torch.float64)
        angles = positions[:, None] * self._frequencies  # (n, d_k / 2), float64
        cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
        even, odd = x[..., 0::2], x[..., 1::2]
        out = torch.empty_like(x)
        out[..., 0::2] = even * cos - odd * sin
        out[..., 1::2] = even * sin + odd * cos
        return out

    def _attention(self, x, i, cache, start):
        c, prefix = self.config, f"blocks.{i}.attention"
        batch, n, _ = x.shape
        q, k, v = (self._linear(x, prefix, f"w_{s}", f"b_{s}") for s in "qkv")
        q = q.view(batch, n, c.n_heads, self.d_k).transpose(1, 2)  # (batch, h, n, d_k)
        k = k.view(batch, n, c.n_kv_heads, self.d_k).transpose(1, 2)  # (batch, h_kv, n, d_k)
        v = v.view(batch, n, c.n_kv_heads, self.d_k).transpose(1, 2)
        # query head i reads key/value head i // (h / h_kv), as repeat_interleave puts them
        gqa = {"enable_gqa": c.n_kv_heads != c.n_heads}
        if c.positions == "rotary":
            q, k = self._rope(q, start), self._rope(k, start)
        if cache is not None:
            keys, values = cache[i]
            keys[:, :, start:start + n] = k
            values[:, :, start:start + n] = v
            k, v = keys[:, :, :start + n], values[:, :, :start + n]
        if n == 1:  # one new token sees every key so far
            heads = F.scaled_dot_product_attention(q, k, v, **gqa)
        elif start == 0:
            heads = F.scaled_dot_product_attention(q, k, v, is_causal=True, **gqa)
        else:  # bottom-right: query t sees keys up to start + t
            mask = torch.ones(n, start + n, dtype=torch.bool).tril(diagonal=start)
            heads = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, **gqa)
        merged = heads.transpose(1, 2).reshape(batch, n, c.d_model)
        return self._linear(merged, prefix, "w_o", "b_o")

    def _ffn(self, x, i):
        prefix = f"blocks.{i}.ffn"
        if self.config.feed_forward == "swiglu":
            gate = F.silu(self._linear(x, prefix, "w_gate"))
            return self._linear(gate * self._linear(x, prefix, "w_up"), prefix, "w_down")
        hidden = self._linear(x, prefix, "w_1", "b_1")
        if self.config.feed_forward == "gelu":
            hidden = F.gelu(hidden, approximate="tanh")
        else:
            hidden = F.relu(hidden)
        return self._linear(hidden, prefix, "w_2", "b_2")

    def new_cache(self, batch):
        """Empty keys and values for every layer: ``(batch, h_kv, max_positions, d_k)`` each."""
        c = self.config
        shape = (batch, c.n_kv_heads, c.max_positions, self.d_k)
        dtype = getattr(torch, np.dtype(self.dtype).name)
        return [(torch.empty(shape, dtype=dtype), torch.empty(shape, dtype=dtype))
                for _ in range(c.n_layers)]

    def forward(self, tokens, cache=None, start=0):
        """Logits ``(batch, n, vocab_size)`` of a ``LongTensor`` ``(batch, n)`` of token ids
        that continue ``start`` tokens already in ``cache`` (from :meth:`new_cache`)."""
        c = self.config
        x = F.embedding(tokens, self._get("embedding.table"))
        if c.positions == "sinusoidal":  # sin at even features, cos at odd, in float64
            positions = torch.arange(start, start + tokens.shape[-1], dtype=torch.float64)
            angles = positions[:, None] * 10000.0 ** (
                -torch.arange(0, c.d_model, 2, dtype=torch.float64) / c.d_model)
            pe = torch.stack([angles.sin(), angles.cos()], dim=-1).reshape(len(positions), -1)
            x = x + pe.to(x.dtype)
        elif c.positions == "learned":  # rows start .. start + n - 1 of the table
            x = x + self._get("position_embedding.table")[start:start + tokens.shape[-1]]
        for i in range(c.n_layers):
            if c.norm == "post":
                y = self._norm(x + self._attention(x, i, cache, start), f"blocks.{i}.norm1")
                x = self._norm(y + self._ffn(y, i), f"blocks.{i}.norm2")
            else:
                y = x + self._attention(self._norm(x, f"blocks.{i}.norm1"), i, cache, start)
                x = y + self._ffn(self._norm(y, f"blocks.{i}.norm2"), i)
        if c.norm == "pre":
            x = self._norm(x, "final_norm")
        if c.tie_embeddings:
            return x @ self._get("embedding.table").T
        return self._linear(x, "head")

    @torch.no_grad()
    def generate(self, prompt, max_new_tokens):
        """Greedy generation with the cache, as :func:`scratchformer.generate` does it.

        Returns the tokens ``(batch, n_prompt + max_new_tokens)`` and the logits each new
        token was chosen from, ``(batch, max_new_tokens, vocab_size)``.
        """
        tokens = torch.as_tensor(np.asarray(prompt, dtype=np.int64))
        batch, n_prompt = tokens.shape
        if n_prompt + max_new_tokens > self.config.max_positions:
            raise ValueError(f"n_prompt + max_new_tokens = {n_prompt} + {max_new_tokens} "
                             f"exceeds max_positions={self.config.max_positions}")
        out = torch.empty((batch, n_prompt + max_new_tokens), dtype=torch.int64)
        out[:, :n_prompt] = tokens
        cache = self.new_cache(batch)
        chosen_from = []
        for step in range(max_new_tokens):
            end = n_prompt + step
            if step == 0:
                logits = self.forward(out[:, :end], cache, 0)[:, -1]
            else:
                logits = self.forward(out[:, end - 1:end], cache, end - 1)[:, -1]
            out[:, end] = logits.argmax(dim=-1)
            chosen_from.append(logits)
        vocab = self.config.vocab_size
        logits = (torch.stack(chosen_from, dim=1) if chosen_from
                  else torch.empty((batch, 0, vocab)))
        return out.numpy(), logits.numpy()
