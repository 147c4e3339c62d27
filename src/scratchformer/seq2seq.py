"""The whole Transformer: an encoder–decoder model, its masks and its loss.

Source and target embeddings with sinusoidal positions, a stack of encoder blocks, a stack of
decoder blocks that read the encoder's output (the memory), and a linear head over the target
vocabulary (Vaswani et al., 2017). Trained with teacher forcing: the decoder reads the target
shifted right by one (``BOS y_1 ... y_{n-1}``) and predicts ``y_1 ... y_n``; the loss
(:func:`sequence_cross_entropy`) counts the non-pad tokens only, with label smoothing.
Translating a new source is :mod:`scratchformer.decoding`'s work.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ._validation import (
    finite_loss,
    floating_dtype,
    generator,
    non_negative_float,
    non_negative_int,
    positive_int,
    token_ids,
)
from .attention import causal_mask
from .config import ConfiguredModel, ModelConfig
from .decoder import DecoderBlock
from .dropout import Dropout, dropout_rate, spawn_generator
from .encoder import EncoderBlock
from .layers import Embedding, LayerNorm, Linear
from .positional import positional_encoding

__all__ = ["EncoderDecoderConfig", "EncoderDecoderModel", "padding_mask", "target_mask",
           "sequence_cross_entropy"]


def _token_rows(tokens, min_length):
    """``tokens`` as an array of shape (..., n) with ``n >= min_length``: the masks' input."""
    tokens = np.asarray(tokens)
    if tokens.ndim < 1 or tokens.shape[-1] < min_length:
        raise ValueError(f"tokens must have shape (..., n) with n >= {min_length}, got shape "
                         f"{tokens.shape}")
    return tokens


def padding_mask(tokens, pad_id):
    """May-attend mask of the keys that are not padding: shape ``(..., 1, 1, n)``.

    Broadcasts over heads and queries; True where ``tokens != pad_id``. A query row whose keys
    are all padding is fully masked, and attention defines its output as 0 (never NaN).
    """
    tokens = _token_rows(tokens, min_length=0)
    return (tokens != pad_id)[..., None, None, :]


def target_mask(tokens, pad_id):
    """The decoder's self-attention mask: causal, no padded keys.

    Shape ``(..., 1, n, n)``: query ``i`` may attend to key ``j`` when
    ``j <= i`` and token ``j`` is not padding. The first token (BOS) is
    never padding, so every row keeps at least one key; pad queries (after
    the end) attend to the real tokens before them, and the loss ignores
    their outputs.
    """
    tokens = _token_rows(tokens, min_length=1)
    return causal_mask(tokens.shape[-1]) & padding_mask(tokens, pad_id)


def sequence_cross_entropy(logits, targets, *, pad_id=None, label_smoothing=0.0):
    r"""Mean cross-entropy over the non-pad tokens, with label smoothing, and its gradient.

    Parameters
    ----------
    logits : ndarray, shape (..., K)
    targets : ndarray of int, shape (...)
    pad_id : int, optional
        Targets equal to it count for nothing (PyTorch's ``ignore_index``); None counts all.
    label_smoothing : float, default 0
        :math:`\varepsilon \in [0, 1]`: the target distribution is
        :math:`q = (1 - \varepsilon)\, e_y + \varepsilon / K` over all :math:`K` classes, the
        correct one included (PyTorch's convention in ``F.cross_entropy``).

    Returns
    -------
    loss : float
        The mean of :math:`\ell_t` over the :math:`T` non-pad tokens, with
        :math:`\ell_t = -\sum_k q_{t,k} \log p_{t,k}` and
        :math:`p_t = \operatorname{softmax}(z_t)`.
    d_logits : ndarray, shape (..., K)
        :math:`(\operatorname{softmax}(z_t) - q_t) / T` for a non-pad token, 0 for a pad one.

    Raises
    ------
    ValueError
        For shapes that do not match, targets outside ``[0, K)``, non-finite logits, or no
        non-pad token at all (0/0).
    """
    logits, targets = np.asarray(logits), np.asarray(targets)
    if not np.issubdtype(logits.dtype, np.floating):
        raise TypeError(f"logits must be floating, got dtype {logits.dtype}")
    if targets.dtype == np.bool_ or not np.issubdtype(targets.dtype, np.integer):
        raise TypeError(f"targets must be integer class ids, got dtype {targets.dtype}")
    if logits.ndim < 1 or logits.shape[:-1] != targets.shape:
        raise ValueError(f"logits of shape {logits.shape} need targets of shape "
                         f"{logits.shape[:-1]}, got {targets.shape}")
    eps = non_negative_float(label_smoothing, "label_smoothing")
    if eps > 1:
        raise ValueError(f"label_smoothing must lie in [0, 1], got {eps}")
    n_classes = logits.shape[-1]
    if targets.size and (targets.min() < 0 or targets.max() >= n_classes):
        raise ValueError(f"targets must lie in [0, {n_classes}), got values from "
                         f"{targets.min()} to {targets.max()}")
    if not np.isfinite(logits).all():
        raise ValueError("logits must be finite")
    flat = logits.reshape(-1, n_classes)
    labels = targets.reshape(-1)
    keep = np.ones(labels.shape, bool) if pad_id is None else labels != pad_id
    n_tokens = int(keep.sum())
    if n_tokens == 0:
        raise ValueError("no token is left after removing the padding: the mean loss of "
                         "zero tokens is undefined (0/0)")
    with np.errstate(over="ignore"):  # -inf where z - max z overflows: refused below
        shifted = flat[keep] - flat[keep].max(axis=-1, keepdims=True)  # (T, K), entries <= 0
    exp = np.exp(shifted)
    total = exp.sum(axis=-1, keepdims=True)
    log_probs = shifted - np.log(total)  # (T, K)
    rows, kept = np.arange(n_tokens), labels[keep]
    nll = -log_probs[rows, kept].sum()
    summed = nll
    if eps:  # the smoothing's term, -sum_k log p_k / K per token: not computed without
        # smoothing, where a logit that overflowed below the others makes it inf (0 * inf: NaN)
        summed = (1.0 - eps) * nll + eps * -log_probs.mean(axis=-1).sum()
    loss = float(summed) / n_tokens
    finite_loss(loss, flat.dtype)  # a target's logit that overflowed, or eps > 0 on one
    d_kept = exp / total - eps / n_classes  # softmax - q, the one-hot part below
    d_kept[rows, kept] -= 1.0 - eps
    d_flat = np.zeros_like(flat)
    d_flat[keep] = d_kept / float(n_tokens)
    return loss, d_flat.reshape(logits.shape)


@dataclasses.dataclass(frozen=True, kw_only=True)
class EncoderDecoderConfig(ModelConfig):
    """An encoder–decoder: :class:`~scratchformer.ModelConfig` for both stacks, and more.

    ``vocab_size`` is the source vocabulary's size and ``n_layers`` the number of blocks of
    each stack.

    Attributes
    ----------
    target_vocab_size : int
        Token ids the decoder reads and the head scores.
    pad_id : int
        The padding id of both vocabularies, default 0.
    dropout : float
        The rate of dropout in training, in ``[0, 1)``: on every sub-layer's output and on
        the sums of the embeddings and the positional encoding (Vaswani et al., 2017, section
        5.4); default 0, none.
    """

    target_vocab_size: int
    pad_id: int = 0
    dropout: float = 0.0

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "dropout", dropout_rate(self.dropout))
        object.__setattr__(self, "target_vocab_size",
                           positive_int(self.target_vocab_size, "target_vocab_size"))
        object.__setattr__(self, "pad_id", non_negative_int(self.pad_id, "pad_id"))
        if self.pad_id >= min(self.vocab_size, self.target_vocab_size):
            raise ValueError(f"pad_id={self.pad_id} must be an id of both vocabularies "
                             f"({self.vocab_size} and {self.target_vocab_size} ids)")
        if self.d_model % 2:
            raise ValueError(f"d_model must be even (sine-cosine pairs of the positional "
                             f"encoding), got {self.d_model}")


def _back_through(dropout, dy):
    """The gradient ``dy`` back through a dropout layer, or ``dy`` where there is none."""
    return dy if dropout is None else dropout.backward(dy)


class EncoderDecoderModel(ConfiguredModel):
    r"""The Transformer of Vaswani et al. (2017): encoder, decoder, output head.

    Parameters
    ----------
    vocab_size, target_vocab_size, d_model, n_heads, d_ff, n_layers : int
        Keyword-only, as every dimension of :class:`EncoderDecoderConfig`: source and target
        vocabularies, width, heads, feed-forward width, blocks per stack.
    pad_id : int, default 0
        Padding in both vocabularies: masked as a key everywhere, ignored by the loss.
    norm : {"post", "pre"}, default "post"
        The blocks' layout; a pre-LN model also normalises each stack's output.
    eps : float, default 1e-5
    dropout : float, default 0
        Rate of dropout in training (see :class:`EncoderDecoderConfig`); each stack's input
        and every block's sub-layers. Off inside ``inference()``, so decoding never drops.
    rng : numpy.random.Generator, optional
        Source of every initial weight; default seeded with 0. The dropout masks come from
        children of it (``rng.spawn``), which draw nothing from it: the initial weights are
        the same at any ``dropout``.
    dtype : floating dtype, default float64

    Attributes
    ----------
    config : EncoderDecoderConfig
    source_embedding : Embedding
    target_embedding : Embedding
    encoder_blocks : list of EncoderBlock
    decoder_blocks : list of DecoderBlock
    encoder_norm : LayerNorm or None
        Normalises the memory; present for ``norm="pre"`` only.
    decoder_norm : LayerNorm or None
        Normalises the decoder's output; present for ``norm="pre"`` only.
    head : Linear
    source_dropout : Dropout or None
        On the sum of the source embeddings and the positional encoding; None for
        ``dropout=0``.
    target_dropout : Dropout or None
        On the same sum for the target; None for ``dropout=0``.

    Notes
    -----
    .. math:: M &= \operatorname{Enc}(E_s[x] + P), \\
              \text{logits} &= \operatorname{Dec}(E_t[y_{<}] + P,\; M)\, W + b

    The encoder's self-attention masks padded source keys; the decoder's self-attention is
    causal and masks padded target keys; its cross-attention masks padded source keys. Every
    decoder block reads the same memory :math:`M`, so the memory's gradient is the sum of
    the blocks' (the backward pass adds them before running the encoder backward).
    """

    def __init__(self, *, vocab_size, target_vocab_size, d_model, n_heads, d_ff, n_layers,
                 pad_id=0, norm="post", eps=1e-5, dropout=0.0, rng=None, dtype=np.float64):
        super().__init__()
        c = EncoderDecoderConfig(vocab_size=vocab_size, target_vocab_size=target_vocab_size,
                                 d_model=d_model, n_heads=n_heads, d_ff=d_ff,
                                 n_layers=n_layers, pad_id=pad_id, norm=norm, eps=eps,
                                 dropout=dropout)
        dtype, rng = floating_dtype(dtype), generator(rng)
        self.config = c
        self.source_embedding = Embedding(c.vocab_size, c.d_model, rng=rng, dtype=dtype)
        self.target_embedding = Embedding(c.target_vocab_size, c.d_model, rng=rng,
                                          dtype=dtype)
        dims = (c.d_model, c.n_heads, c.d_ff)
        self.encoder_blocks = [EncoderBlock(*dims, norm=c.norm, eps=c.eps, dropout=c.dropout,
                                            rng=rng, dtype=dtype) for _ in range(c.n_layers)]
        self.decoder_blocks = [DecoderBlock(*dims, norm=c.norm, eps=c.eps, dropout=c.dropout,
                                            rng=rng, dtype=dtype) for _ in range(c.n_layers)]
        self.encoder_norm = self.decoder_norm = None
        if c.norm == "pre":
            self.encoder_norm = LayerNorm(c.d_model, eps=c.eps, dtype=dtype)
            self.decoder_norm = LayerNorm(c.d_model, eps=c.eps, dtype=dtype)
        self.head = Linear(c.d_model, c.target_vocab_size, rng=rng, dtype=dtype)
        self.source_dropout = self.target_dropout = None
        if c.dropout:
            masks = spawn_generator(rng)
            self.source_dropout = Dropout(c.dropout, rng=masks)
            self.target_dropout = Dropout(c.dropout, rng=masks)

    def children(self):
        layers = {"source_embedding": self.source_embedding}
        if self.source_dropout is not None:
            layers["source_dropout"] = self.source_dropout
        layers |= {f"encoder_blocks.{i}": b for i, b in enumerate(self.encoder_blocks)}
        if self.encoder_norm is not None:
            layers["encoder_norm"] = self.encoder_norm
        layers["target_embedding"] = self.target_embedding
        if self.target_dropout is not None:
            layers["target_dropout"] = self.target_dropout
        layers |= {f"decoder_blocks.{i}": b for i, b in enumerate(self.decoder_blocks)}
        if self.decoder_norm is not None:
            layers["decoder_norm"] = self.decoder_norm
        layers["head"] = self.head
        return layers

    def _embed(self, embedding, tokens, dropout):
        x = embedding.forward(tokens)  # (..., n, d_model)
        pe = positional_encoding(tokens.shape[-1], self.d_model)
        x = x + pe.astype(x.dtype, copy=False)
        return x if dropout is None else dropout.forward(x)

    def encode(self, source):
        """The memory of source ids ``(..., n_s)``: shape ``(..., n_s, d_model)``.

        Padded source positions are masked as keys; their own rows are computed (and
        ignored downstream, where they are masked too).
        """
        source = token_ids(source, self.config.vocab_size, "source")
        mask = padding_mask(source, self.config.pad_id)  # (..., 1, 1, n_s)
        x = self._embed(self.source_embedding, source, self.source_dropout)
        for block in self.encoder_blocks:
            x = block.forward(x, mask=mask)
        if self.encoder_norm is not None:
            x = self.encoder_norm.forward(x)
        return x

    def decode(self, target, memory, memory_mask=None):
        """Logits of the next token after each target prefix: ``(..., n_t, K)``.

        Parameters
        ----------
        target : ndarray of int, shape (..., n_t)
            The decoder's input (``BOS`` first): position ``i`` predicts token ``i + 1``.
        memory : ndarray, shape (..., n_s, d_model)
            From :meth:`encode`; leading axes broadcast against ``target``'s.
        memory_mask : ndarray of bool, optional
            ``padding_mask(source, pad_id)``, broadcasting to ``(..., h, n_t, n_s)``.
        """
        target = token_ids(target, self.config.target_vocab_size, "target")
        mask = target_mask(target, self.config.pad_id)  # (..., 1, n_t, n_t)
        y = self._embed(self.target_embedding, target, self.target_dropout)
        for block in self.decoder_blocks:
            y = block.forward(y, memory, mask=mask, memory_mask=memory_mask)
        if self.decoder_norm is not None:
            y = self.decoder_norm.forward(y)
        return self.head.forward(y)

    def forward(self, source, target):
        """Teacher-forced logits: ``source (..., n_s)``, ``target (..., n_t)`` (the decoder's
        input, ``BOS`` first) give ``(..., n_t, target_vocab_size)``."""
        source = token_ids(source, self.config.vocab_size, "source")
        target = token_ids(target, self.config.target_vocab_size, "target")
        if source.shape[:-1] != target.shape[:-1]:
            raise ValueError(f"source {source.shape} and target {target.shape} must have "
                             "the same leading (batch) axes")
        memory = self.encode(source)
        return self.decode(target, memory, padding_mask(source, self.config.pad_id))

    def backward(self, d_logits):
        """Backpropagate the logits' gradient of the last :meth:`forward`.

        Sets every layer's ``grads``; returns None (token ids have no
        gradient). Every decoder block reads the same memory, so their
        memory gradients are summed before the encoder's backward pass.
        """
        d_y = self.head.backward(d_logits)
        if self.decoder_norm is not None:
            d_y = self.decoder_norm.backward(d_y)
        d_memory = 0.0
        for block in reversed(self.decoder_blocks):
            d_y, d_m = block.backward(d_y)
            d_memory = d_memory + d_m  # one memory, read by every block
        self.target_embedding.backward(_back_through(self.target_dropout, d_y))
        if self.encoder_norm is not None:
            d_memory = self.encoder_norm.backward(d_memory)
        for block in reversed(self.encoder_blocks):
            d_memory = block.backward(d_memory)
        self.source_embedding.backward(_back_through(self.source_dropout, d_memory))
