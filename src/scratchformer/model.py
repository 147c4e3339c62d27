"""A small encoder-only Transformer that labels every token, and its loss.

Token embedding, sinusoidal positional encoding, ``n_layers`` encoder blocks (post-LN or pre-LN)
and a linear output head; trained with softmax cross-entropy by ``scratchformer.train``. The
book's chapter "Training a Transformer in NumPy" (``book/training.md``) trains it and reads its
attention; "Backpropagation through attention" checks its gradients.
"""

from __future__ import annotations

import operator

import numpy as np

from .encoder import NORMS, EncoderBlock
from .layers import Embedding, LayerNorm, Linear, _generator
from .module import Layer
from .positional import positional_encoding

__all__ = ["EncoderModel", "cross_entropy"]


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
    shifted = flat - flat.max(axis=-1, keepdims=True)  # every entry <= 0
    exp = np.exp(shifted)
    total = exp.sum(axis=-1, keepdims=True)  # >= 1: the maximum contributes e^0
    rows = np.arange(n_tokens)
    loss = float(np.log(total[:, 0]).sum() - shifted[rows, labels].sum()) / n_tokens
    d_logits = exp / total  # softmax
    d_logits[rows, labels] -= 1.0
    d_logits /= float(n_tokens)  # a Python float keeps float32
    return loss, d_logits.reshape(logits.shape)


class EncoderModel(Layer):
    r"""Embedding, positional encoding, encoder blocks and an output head: a label per token.

    Parameters
    ----------
    vocab_size : int
        Number of token ids (inputs).
    n_classes : int
        Number of labels each position is classified into (outputs).
    d_model, n_heads, d_ff, n_layers : int
        Width, heads per block, feed-forward width, number of blocks.
    norm : {"post", "pre"}, default "post"
        The blocks' layout; a pre-LN model also normalises the last block's output, as
        pre-LN models do (the residual stream is never normalised inside the blocks).
    rng : numpy.random.Generator, optional
        Source of every initial weight; default seeded with 0.
    dtype : floating dtype, default float64

    Attributes
    ----------
    embedding : Embedding
    blocks : list of EncoderBlock
    final_norm : LayerNorm or None
        Present for ``norm="pre"`` only.
    head : Linear

    Notes
    -----
    .. math:: X_0 = E[\text{tokens}] + P, \qquad X_\ell = \operatorname{Block}_\ell(X_{\ell-1}),
              \qquad \text{logits} = X_L W + b

    with :math:`P` the sinusoidal encoding of the positions (chapter
    :doc:`Positional encoding </book/positional_encoding>`). Trained in the chapter
    :doc:`Training a Transformer in NumPy </book/training>`.
    """

    def __init__(self, vocab_size, n_classes, d_model, n_heads, d_ff, n_layers, *,
                 norm="post", rng=None, dtype=np.float64):
        if norm not in NORMS:
            raise ValueError(f'norm must be "post" or "pre", got {norm!r}')
        n_layers = operator.index(n_layers)
        if n_layers < 1:
            raise ValueError(f"n_layers must be at least 1, got {n_layers}")
        if d_model % 2:
            raise ValueError(f"d_model must be even (sine-cosine pairs of the positional "
                             f"encoding), got {d_model}")
        rng = _generator(rng)
        self.norm = norm
        self.embedding = Embedding(vocab_size, d_model, rng=rng, dtype=dtype)
        self.blocks = [EncoderBlock(d_model, n_heads, d_ff, norm=norm, rng=rng, dtype=dtype)
                       for _ in range(n_layers)]
        self.final_norm = LayerNorm(d_model, dtype=dtype) if norm == "pre" else None
        self.head = Linear(d_model, n_classes, rng=rng, dtype=dtype)

    @property
    def d_model(self):
        return self.embedding.params["table"].shape[1]

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
        logits, _ = self._run(tokens)
        return logits

    def attention_weights(self, tokens):
        """Run the model; return every block's attention weights.

        Returns
        -------
        weights : ndarray, shape (n_layers, ..., n_heads, n, n)
        """
        _, weights = self._run(tokens)
        return np.stack(weights)

    def _run(self, tokens):
        tokens = np.asarray(tokens)
        if tokens.ndim < 1:
            raise ValueError("tokens must have shape (..., n)")
        x = self.embedding.forward(tokens)  # (..., n, d_model)
        n = tokens.shape[-1]
        pe = positional_encoding(n, self.d_model)  # (n, d_model)
        x += pe.astype(x.dtype, copy=False)
        weights = []
        for block in self.blocks:
            x, w = block.forward(x)  # (..., n, d_model), (..., h, n, n)
            weights.append(w)
        if self.final_norm is not None:
            x = self.final_norm.forward(x)
        return self.head.forward(x), weights

    def backward(self, d_logits):
        """Backpropagate the gradient of the logits of the last forward; sets every layer's
        ``grads``. Returns None: token ids have no gradient."""
        d_x = self.head.backward(d_logits)
        if self.final_norm is not None:
            d_x = self.final_norm.backward(d_x)
        for block in reversed(self.blocks):
            d_x = block.backward(d_x)
        self.embedding.backward(d_x)  # the positional encoding is fixed: no gradient

    @classmethod
    def from_torch(cls, module):
        """Copy a model made by :meth:`to_torch` (or one with its layout), exactly."""
        from ._torch_model import TorchEncoderModel

        if not isinstance(module, TorchEncoderModel):
            raise TypeError(f"expected the module to_torch makes, got {type(module).__name__}")

        def array(tensor):
            return tensor.detach().cpu().numpy().copy()

        model = cls.__new__(cls)
        model.embedding = Embedding.__new__(Embedding)
        model.embedding.params = {"table": array(module.embedding.weight)}
        model.blocks = [EncoderBlock.from_torch(layer) for layer in module.blocks]
        model.norm = model.blocks[0].norm
        model.final_norm = None
        if module.final_norm is not None:
            model.final_norm = LayerNorm.__new__(LayerNorm)
            model.final_norm.eps = float(module.final_norm.eps)
            model.final_norm.params = {"gamma": array(module.final_norm.weight),
                                       "beta": array(module.final_norm.bias)}
        model.head = Linear.__new__(Linear)
        model.head.params = {"w": array(module.head.weight).T.copy(),
                             "b": array(module.head.bias)}
        return model

    def to_torch(self):
        """The same model as a ``torch.nn.Module`` with these exact weights.

        Its ``forward(tokens)`` takes a ``LongTensor`` of shape ``(..., n)``; its blocks are
        ``nn.TransformerEncoderLayer`` (batch-first, dropout 0), its ``state_dict`` mirrors
        ``named_parameters()`` in PyTorch's layouts. For the gradient checks and the
        training-speed benchmark.
        """
        import torch

        from ._torch_model import TorchEncoderModel

        def tensor(array):
            return torch.from_numpy(np.ascontiguousarray(array))

        table = self.embedding.params["table"]
        embedding = torch.nn.Embedding(*table.shape, dtype=tensor(table).dtype)
        head = torch.nn.Linear(*self.head.params["w"].shape, dtype=tensor(table).dtype)
        with torch.no_grad():
            embedding.weight.copy_(tensor(table))
            head.weight.copy_(tensor(self.head.params["w"].T))
            head.bias.copy_(tensor(self.head.params["b"]))
        final_norm = None
        if self.final_norm is not None:
            final_norm = torch.nn.LayerNorm(self.d_model, eps=self.final_norm.eps,
                                            dtype=tensor(table).dtype)
            with torch.no_grad():
                final_norm.weight.copy_(tensor(self.final_norm.params["gamma"]))
                final_norm.bias.copy_(tensor(self.final_norm.params["beta"]))
        blocks = [block.to_torch().train() for block in self.blocks]
        return TorchEncoderModel(embedding, blocks, final_norm, head)
