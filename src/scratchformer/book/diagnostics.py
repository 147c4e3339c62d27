"""Look inside a model: gradient norms per parameter and per block, and the
scale of the residual stream.

The book's chapter "Post-LN versus pre-LN" (``book/post_ln_pre_ln.md``) uses
them to reproduce the analysis of Xiong et al. (2020): how large the gradients
of each block's weights are at initialisation, depending on the depth of the
model and on where its layer norms sit; the chapter "Warm-up: training post-LN
and pre-LN" (``book/warmup.md``) looks inside the models it trains with them.
(Lines stay within 79 characters: the chapter shows this code.)
"""

from __future__ import annotations

import math

import numpy as np

from .._validation import token_ids
from ..model import EncoderModel, cross_entropy
from ..positional import positional_encoding

__all__ = ["BLOCK_WEIGHTS", "gradient_norms", "block_gradient_norms",
           "stream_scales"]

#: The weights :func:`block_gradient_norms` reads by default: attention's
#: output projection and the two matrices of the feed-forward network.
BLOCK_WEIGHTS = ("attention.w_o", "ffn.w_1", "ffn.w_2")


def gradient_norms(model):
    """The Euclidean (Frobenius) norm of every parameter's gradient, by name.

    Parameters
    ----------
    model : Layer
        Any layer after a ``backward`` pass.

    Returns
    -------
    norms : dict of str to float
        ``{"blocks.0.ffn.w_1": ..., ...}``, in the order of
        ``model.named_parameters()``.

    Raises
    ------
    RuntimeError
        If a parameter has no gradient (no backward pass yet).
    """
    if not hasattr(model, "named_parameters"):
        raise TypeError("model must be a scratchformer Layer, got "
                        f"{type(model).__name__}")
    norms = {}
    for name, layer, key in model.named_parameters():
        if layer.grads is None or key not in layer.grads:
            raise RuntimeError(f"no gradient for {name}: run backward first")
        grad = layer.grads[key]
        norms[name] = math.sqrt(float(np.vdot(grad, grad)))
    return norms


def _check_batch(model, tokens, targets=None):
    """``tokens`` and ``targets`` as arrays, after checking them and model."""
    if not isinstance(model, EncoderModel):
        raise TypeError("model must be an EncoderModel, got "
                        f"{type(model).__name__}")
    tokens = token_ids(tokens, model.config.vocab_size)
    if targets is None:
        return tokens, None
    targets = np.asarray(targets)
    if targets.shape != tokens.shape:
        raise ValueError("targets must have the shape of tokens, "
                         f"{tokens.shape}, got {targets.shape}")
    return tokens, targets


def block_gradient_norms(model, tokens, targets, names=BLOCK_WEIGHTS):
    r"""Gradient norms of each block's weights for one batch.

    Parameters
    ----------
    model : EncoderModel
    tokens : ndarray of int, shape (..., n)
    targets : ndarray of int, shape (..., n)
        The label of every token; the loss is the mean cross-entropy
        (:func:`scratchformer.cross_entropy`).
    names : sequence of str, default ``BLOCK_WEIGHTS``
        Parameters of a block, as dotted names within it (``"ffn.w_2"``).

    Returns
    -------
    norms : ndarray, shape (n_layers, len(names))
        ``norms[l, j]`` is the Frobenius norm of the gradient of parameter
        ``names[j]`` of block ``l``, counted from the input.

    Notes
    -----
    One forward and one backward pass; every layer's ``grads`` stay set, as
    after any backward pass. Xiong et al. (2020) measure these norms at
    initialisation and bound the last block's: independent of the depth
    :math:`L` for post-LN, shrinking like :math:`1/\sqrt{L}` for pre-LN. The
    chapter "Post-LN versus pre-LN" measures them in the book's models.
    """
    tokens, targets = _check_batch(model, tokens, targets)
    names = tuple(names)
    if not names:
        raise ValueError("names must name at least one parameter of a block")
    in_block = [name for name, _, _ in model.blocks[0].named_parameters()]
    unknown = [name for name in names if name not in in_block]
    if unknown:
        raise ValueError(f"no block parameter named {unknown}; "
                         f"a block has {in_block}")
    _, d_logits = cross_entropy(model.forward(tokens), targets)
    model.backward(d_logits)
    norms = np.empty((len(model.blocks), len(names)))  # (n_layers, names)
    for layer, block in enumerate(model.blocks):
        by_name = gradient_norms(block)
        norms[layer] = [by_name[name] for name in names]
    return norms


def stream_scales(model, tokens):
    r"""Scale of the residual stream entering each block and leaving the last.

    Parameters
    ----------
    model : EncoderModel
    tokens : ndarray of int, shape (..., n)

    Returns
    -------
    scales : ndarray, shape (n_layers + 1,)
        ``scales[l]`` is :math:`\sqrt{\operatorname{mean}_t \sigma_t^2}` for
        the input :math:`X_l` of block ``l`` (:math:`X_0` the embeddings plus
        positions, :math:`X_L` the last block's output), with
        :math:`\sigma_t^2` the variance over the features of token :math:`t`:
        what a layer norm reading :math:`X_l` divides by.

    Notes
    -----
    A post-LN block normalises its output, so at initialisation (gains 1,
    shifts 0) ``scales[1:]`` are 1 (up to the norm's epsilon); training
    changes them. A pre-LN block adds its sub-layers' outputs to the
    stream, whose scale grows with depth, and the final norm divides the
    gradient by it.
    """
    tokens, _ = _check_batch(model, tokens)
    with model.inference():
        return _stream_scales(model, tokens)


def _stream_scales(model, tokens):
    x = model.embedding.forward(tokens)  # (..., n, d_model)
    positions = positional_encoding(tokens.shape[-1], model.d_model)
    x = x + positions.astype(x.dtype, copy=False)  # (..., n, d_model)
    scales = [math.sqrt(float(x.var(axis=-1).mean()))]
    for block in model.blocks:
        x = block.forward(x)  # (..., n, d_model)
        scales.append(math.sqrt(float(x.var(axis=-1).mean())))
    return np.array(scales)
