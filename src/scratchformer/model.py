"""A small encoder-only Transformer that labels every token, and its loss.

Token embedding, sinusoidal positional encoding, ``n_layers`` encoder blocks (post-LN or pre-LN)
and a linear output head; trained with softmax cross-entropy by ``scratchformer.train``. The
book's chapter "Training a Transformer in NumPy" (``book/training.md``) trains it, "What the
trained model learned" (``book/trained_attention.md``) reads its attention, and
"Backpropagation through attention" checks its gradients.
"""

from __future__ import annotations

import numpy as np

from ._validation import finite_loss, floating_dtype, generator, token_ids
from .config import ConfiguredModel, EncoderConfig
from .encoder import EncoderBlock
from .layers import Embedding, LayerNorm, Linear
from .positional import positional_encoding

__all__ = ["EncoderModel", "cross_entropy", "masked_cross_entropy"]


def cross_entropy(logits, targets):
    r"""Mean softmax cross-entropy over tokens, and its gradient.

    Parameters
    ----------
    logits : ndarray, shape (..., n_classes)
        Unnormalised scores, one row per token.
    targets : ndarray of int, shape (...)
        The correct class of each token.

    Returns
    -------
    loss : float
        :math:`-\frac{1}{T}\sum_t \log \operatorname{softmax}(z_t)_{y_t}` over the
        :math:`T` tokens.
    d_logits : ndarray, shape (..., n_classes)
        Its gradient, :math:`(\operatorname{softmax}(z_t) - e_{y_t}) / T`.

    Notes
    -----
    Computed from the log-softmax :math:`z - \max z - \log\sum e^{z - \max z}`, which neither
    overflows nor takes the log of an underflowed 0. Derived in the chapter
    :doc:`Backpropagation through attention </book/backpropagation>`.
    """
    logits = np.asarray(logits)
    targets = np.asarray(targets)
    if not np.issubdtype(logits.dtype, np.floating):
        raise TypeError(f"logits must be floating, got dtype {logits.dtype}")
    if not np.issubdtype(targets.dtype, np.integer):
        raise TypeError(f"targets must be integer class ids, got dtype {targets.dtype}")
    if logits.shape[:-1] != targets.shape or logits.ndim < 1:
        raise ValueError(f"logits of shape {logits.shape} need targets of shape "
                         f"{logits.shape[:-1]}, got {targets.shape}")
    n_classes = logits.shape[-1]
    if targets.size and (targets.min() < 0 or targets.max() >= n_classes):
        raise ValueError(f"targets must lie in [0, {n_classes}), got values from "
                         f"{targets.min()} to {targets.max()}")
    if not np.isfinite(logits).all():
        raise ValueError("logits must be finite")
    flat = logits.reshape(-1, n_classes)  # (tokens, n_classes)
    labels = targets.reshape(-1)  # (tokens,)
    n_tokens = flat.shape[0]
    if n_tokens == 0:
        raise ValueError("cross-entropy of zero tokens is undefined (0/0)")
    with np.errstate(over="ignore"):  # -inf where z - max z overflows: refused below
        shifted = flat - flat.max(axis=-1, keepdims=True)  # every entry <= 0
    exp = np.exp(shifted)
    total = exp.sum(axis=-1, keepdims=True)  # >= 1: the maximum contributes e^0
    rows = np.arange(n_tokens)
    loss = float(np.log(total[:, 0]).sum() - shifted[rows, labels].sum()) / n_tokens
    finite_loss(loss, flat.dtype)  # a target's logit that overflowed: inf
    d_logits = exp / total  # softmax
    d_logits[rows, labels] -= 1.0
    d_logits /= float(n_tokens)  # a Python float keeps float32
    return loss, d_logits.reshape(logits.shape)



def masked_cross_entropy(logits, targets, mask):
    r"""Mean softmax cross-entropy over the tokens ``mask`` selects, and its gradient:
    supervised fine-tuning's loss, on the answer's tokens and not the prompt's.

    Parameters
    ----------
    logits : ndarray, shape (..., n_classes)
    targets : ndarray of int, shape (...)
        The correct class of each token; those outside the mask are read for their shape only
        (any value in range will do).
    mask : array_like of bool, shape (...)
        True where the loss counts.

    Returns
    -------
    loss : float
        :math:`-\frac{1}{|M|}\sum_{t \in M} \log \operatorname{softmax}(z_t)_{y_t}` over the
        :math:`|M|` selected tokens.
    d_logits : ndarray, shape (..., n_classes)
        Its gradient: :func:`cross_entropy`'s on the selected rows, exactly zero on the
        others, so that nothing outside the mask reaches any parameter.

    Raises
    ------
    TypeError
        If ``mask`` is not boolean.
    ValueError
        If ``mask`` is not of ``targets``' shape, or selects no token (a batch with no answer
        to learn has no loss).
    """
    logits, targets, mask = np.asarray(logits), np.asarray(targets), np.asarray(mask)
    if mask.dtype != np.bool_:
        raise TypeError(f"mask must be boolean (True where the loss counts), got dtype "
                        f"{mask.dtype}")
    if mask.shape != targets.shape:
        raise ValueError(f"mask must have the targets' shape {targets.shape}, got "
                         f"{mask.shape}")
    if logits.shape[:-1] != targets.shape:
        raise ValueError(f"logits of shape {logits.shape} need targets of shape "
                         f"{logits.shape[:-1]}, got {targets.shape}")
    if not mask.any():
        raise ValueError("the mask selects no token: a batch with no answer to learn from "
                         "has no loss")
    loss, d_selected = cross_entropy(logits[mask], targets[mask])
    d_logits = np.zeros_like(logits)
    d_logits[mask] = d_selected
    return loss, d_logits

class EncoderModel(ConfiguredModel):
    r"""Embedding, positional encoding, encoder blocks and an output head: a label per token.

    Parameters
    ----------
    vocab_size, n_classes, d_model, n_heads, d_ff, n_layers : int
        Keyword-only, as every dimension of :class:`EncoderConfig`: token ids in, labels out,
        width, heads per block, feed-forward width, number of blocks.
    norm : {"post", "pre"}, default "post"
        The blocks' layout; a pre-LN model also normalises the last block's output, as
        pre-LN models do (the residual stream is never normalised inside the blocks).
    eps : float, default 1e-5
        The layer norms' epsilon.
    rng : numpy.random.Generator, optional
        Source of every initial weight; default seeded with 0.
    dtype : floating dtype, default float64

    Attributes
    ----------
    config : EncoderConfig
        The dimensions, checked and frozen.
    embedding : Embedding
    blocks : list of EncoderBlock
    final_norm : LayerNorm or None
        Present for ``norm="pre"`` only.
    head : Linear

    Notes
    -----
    .. math:: X_0 &= E[\text{tokens}] + P, \\
              X_\ell &= \operatorname{Block}_\ell(X_{\ell-1}), \\
              \text{logits} &= X_L W + b

    with :math:`P` the sinusoidal encoding of the positions (chapter
    :doc:`Positional encoding </book/positional_encoding>`). Trained in the chapter
    :doc:`Training a Transformer in NumPy </book/training>`, read in
    :doc:`What the trained model learned </book/trained_attention>`.
    """

    def __init__(self, *, vocab_size, n_classes, d_model, n_heads, d_ff, n_layers,
                 norm="post", eps=1e-5, rng=None, dtype=np.float64):
        super().__init__()
        c = EncoderConfig(vocab_size=vocab_size, n_classes=n_classes, d_model=d_model,
                          n_heads=n_heads, d_ff=d_ff, n_layers=n_layers, norm=norm, eps=eps)
        dtype, rng = floating_dtype(dtype), generator(rng)
        self.config = c
        self.embedding = Embedding(c.vocab_size, c.d_model, rng=rng, dtype=dtype)
        self.blocks = [EncoderBlock(c.d_model, c.n_heads, c.d_ff, norm=c.norm, eps=c.eps,
                                    rng=rng, dtype=dtype)
                       for _ in range(c.n_layers)]
        self.final_norm = None
        if c.norm == "pre":
            self.final_norm = LayerNorm(c.d_model, eps=c.eps, dtype=dtype)
        self.head = Linear(c.d_model, c.n_classes, rng=rng, dtype=dtype)

    def children(self):
        layers = {"embedding": self.embedding}
        layers |= {f"blocks.{i}": block for i, block in enumerate(self.blocks)}
        if self.final_norm is not None:
            layers["final_norm"] = self.final_norm
        layers["head"] = self.head
        return layers

    def forward(self, tokens):
        """Label scores for every token.

        Parameters
        ----------
        tokens : ndarray of int, shape (..., n)

        Returns
        -------
        logits : ndarray, shape (..., n, n_classes)
        """
        tokens = token_ids(tokens, self.config.vocab_size)
        x = self.embedding.forward(tokens)  # (..., n, d_model)
        n = tokens.shape[-1]
        pe = positional_encoding(n, self.d_model)  # (n, d_model)
        x += pe.astype(x.dtype, copy=False)
        for block in self.blocks:
            x = block.forward(x)  # (..., n, d_model)
        if self.final_norm is not None:
            x = self.final_norm.forward(x)
        return self.head.forward(x)

    def attention_weights(self, tokens):
        """Run the model (saving for backward); return every block's attention weights.

        A method, since it runs the model; each block's ``MultiHeadAttention`` then holds
        its own as the attribute ``attention_weights``.

        Returns
        -------
        weights : ndarray, shape (n_layers, ..., n_heads, n, n)
        """
        if not self.saves_for_backward:
            raise RuntimeError("attention_weights runs the model outside inference(): "
                               "inside it, attention forms no weights")
        self.forward(tokens)
        return np.stack([block.attention.attention_weights for block in self.blocks])

    def backward(self, d_logits):
        """Backpropagate the gradient of the logits of the last forward; sets every layer's
        ``grads``. Returns None: token ids have no gradient."""
        d_x = self.head.backward(d_logits)
        if self.final_norm is not None:
            d_x = self.final_norm.backward(d_x)
        for block in reversed(self.blocks):
            d_x = block.backward(d_x)
        self.embedding.backward(d_x)  # the positional encoding is fixed: no gradient
