"""Generating token by token: the KV cache, and greedy, temperature, top-k and top-p decoding.

A decoder-only model predicts the next token from the tokens so far. :func:`generate` appends
the predicted token and asks again. Without a cache every step re-reads the whole sequence;
with a :class:`KVCache` the prompt is read once (the *prefill*), every layer keeps the keys and
values of the positions seen, and each step runs the model on the one new token, whose query
attends to the cached keys (the causal mask aligned bottom-right,
:func:`scratchformer.causal_mask`). Both give the same logits, up to rounding, and the same
tokens.
"""

from __future__ import annotations

import numpy as np

from ._validation import (
    as_float_array,
    generator,
    non_negative_float,
    non_negative_int,
    positive_int,
    require_min_ndim,
    sampling_logits,
    token_ids,
)

__all__ = ["KVCache", "generate", "next_token", "nucleus_threshold"]


class KVCache:
    """The keys and values every attention layer has computed, and the position counter.

    Parameters
    ----------
    n_layers : int
        One slot per attention layer.
    max_positions : int
        Positions the cache holds; its arrays are allocated once, at the first
        :meth:`append`, with the batch and heads of the keys given.

    Attributes
    ----------
    keys : list
        Per layer, an array of shape ``(..., h, max_positions, d_k)`` (None until the layer's
        first :meth:`append`); the first ``position`` entries along the positions' axis are
        filled.
    values : list
        The same for the values.
    position : int
        The absolute position of the next token: how many tokens the model has read.

    Notes
    -----
    The model passes one cache through all its layers: each layer calls :meth:`append` with
    the keys and values of the new tokens (written from ``position`` on) and attends to
    what it returns; after the last layer the model calls :meth:`advance`.
    """

    def __init__(self, n_layers, max_positions):
        self.n_layers = positive_int(n_layers, "n_layers")
        self.max_positions = positive_int(max_positions, "max_positions")
        self.keys = [None] * self.n_layers
        self.values = [None] * self.n_layers
        self.position = 0

    def __repr__(self):
        return (f"KVCache(n_layers={self.n_layers}, max_positions={self.max_positions}, "
                f"position={self.position})")

    def append(self, layer, k, v):
        """Store the keys and values of the new tokens of ``layer``; return all so far.

        Parameters
        ----------
        layer : int
            Index of the attention layer, ``0 .. n_layers - 1``.
        k, v : ndarray, shape (..., h, n_new, d_k)
            The new tokens' keys (already rotated, for RoPE) and values.

        Returns
        -------
        keys, values : ndarray, shape (..., h, position + n_new, d_k)
            Views of the cache, the new entries last.
        """
        if not 0 <= non_negative_int(layer, "layer") < self.n_layers:
            raise ValueError(f"layer must lie in [0, {self.n_layers}), got {layer}")
        k, v = _keys_values(k, v)
        n_new = k.shape[-2]
        end = self.position + n_new
        if end > self.max_positions:
            raise ValueError(f"the cache holds {self.max_positions} positions: "
                             f"{self.position} cached and {n_new} new do not fit")
        if self.keys[layer] is None:
            shape = (*k.shape[:-2], self.max_positions, k.shape[-1])
            self.keys[layer] = np.empty(shape, k.dtype)
            self.values[layer] = np.empty((*shape[:-1], v.shape[-1]), v.dtype)
        keys, values = self.keys[layer], self.values[layer]
        if k.shape[:-2] != keys.shape[:-2] or k.shape[-1] != keys.shape[-1]:
            raise ValueError(f"keys of shape {k.shape} do not fit a cache of shape "
                             f"{keys.shape} (batch, heads and d_k are fixed at the first "
                             "append)")
        if v.shape[-1] != values.shape[-1]:
            raise ValueError(f"values of width {v.shape[-1]} do not fit a cache of shape "
                             f"{values.shape} (d_v is fixed at the first append)")
        keys[..., self.position:end, :] = k
        values[..., self.position:end, :] = v
        return keys[..., :end, :], values[..., :end, :]

    @property
    def nbytes(self):
        """Bytes the cache's arrays hold, every position allocated (0 before the first
        :meth:`append`): ``2 * n_layers * batch * h_kv * max_positions * d_k`` entries."""
        return sum(a.nbytes for a in (*self.keys, *self.values) if a is not None)

    @property
    def bytes_per_position(self):
        """:attr:`nbytes` per position: what each token read adds, ``2 n_layers h_kv d_k``
        entries per sequence of the batch (grouped-query attention shrinks ``h_kv``)."""
        return self.nbytes // self.max_positions

    def advance(self, n_new):
        """Move the position counter past ``n_new`` tokens (every layer has appended them)."""
        self.position += positive_int(n_new, "n_new")


def _keys_values(k, v):
    """``k`` and ``v`` as floating arrays of shape (..., n_new, d_k) and (..., n_new, d_v):
    a value for every key."""
    k, v = as_float_array(k, "k"), as_float_array(v, "v")
    require_min_ndim(k, 2, "k", "(..., h, n_new, d_k)")
    require_min_ndim(v, 2, "v", "(..., h, n_new, d_v)")
    if v.shape[:-1] != k.shape[:-1]:
        raise ValueError(f"v must have the shape of k but its last axis, {k.shape[:-1]}, "
                         f"got {v.shape[:-1]} (k of shape {k.shape}, v of shape {v.shape})")
    return k, v


def next_token(logits, *, temperature=0.0, top_k=None, top_p=None, rng=None):
    """Choose one token per row of ``logits``.

    Parameters
    ----------
    logits : ndarray, shape (batch, vocab_size)
        The model's scores for the next token.
    temperature : float, default 0
        0 takes the most likely token (greedy; the first of equal ones); above 0 samples from
        ``softmax(logits / temperature)``.
    top_k : int, optional
        Sample among the ``top_k`` most likely tokens only (with any tied with the ``k``-th).
    top_p : float, optional
        In (0, 1]: sample among the fewest most likely tokens whose probabilities (after the
        temperature and ``top_k``) add up to at least ``top_p`` (with any tied with the last
        of them): nucleus sampling. 1 keeps every token.
    rng : numpy.random.Generator
        Needed to sample; one uniform number is drawn per row.

    Returns
    -------
    ndarray of int64, shape (batch,)
    """
    logits = sampling_logits(logits, temperature, top_k, top_p, rng)
    if temperature == 0:
        return logits.argmax(axis=-1).astype(np.int64)
    z = logits - logits.max(axis=-1, keepdims=True)  # <= 0, the maximum exactly 0
    if top_k is not None and top_k < z.shape[-1]:
        kth = np.partition(z, -top_k, axis=-1)[:, -top_k, None]  # (batch, 1)
        z = np.where(z >= kth, z, -np.inf)
    with np.errstate(over="ignore", under="ignore"):
        # a tiny temperature sends everything but the maximum to -inf: never NaN
        weights = np.exp(z / temperature)  # the maximum's weight is exactly 1
    if top_p is not None and top_p < 1:
        kept = weights >= nucleus_threshold(weights, top_p)
        weights = np.where(kept, weights, 0.0)
    cdf = np.cumsum(weights, axis=-1)  # (batch, vocab)
    u = rng.random((len(cdf), 1)) * cdf[:, -1:]  # uniform on [0, total)
    chosen = (cdf <= u).sum(axis=-1)
    return np.minimum(chosen, cdf.shape[-1] - 1).astype(np.int64)


def nucleus_threshold(weights, top_p):
    """The smallest weight of each row's nucleus: (batch, 1).

    ``weights`` (batch, vocab) are non-negative, unnormalised probabilities. Sorted from the
    largest, the nucleus ends at the first weight at which the running sum reaches ``top_p``
    of the row's total; every weight at least the returned one is kept.
    """
    ordered = -np.sort(-weights, axis=-1)  # largest first
    running = np.cumsum(ordered, axis=-1)
    # the first position whose running sum reaches the share; rounding can leave the last
    # sum a hair below top_p * total, so the index is capped at the last weight
    reached = running >= top_p * running[:, -1:]
    last = np.minimum(reached.argmax(axis=-1), ordered.shape[-1] - 1)
    last = np.where(reached.any(axis=-1), last, ordered.shape[-1] - 1)
    return np.take_along_axis(ordered, last[:, None], axis=-1)


def generate(model, prompt, max_new_tokens, *, use_cache=True, temperature=0.0, top_k=None,
             top_p=None, rng=None, return_logits=False):
    """Continue each prompt by ``max_new_tokens`` tokens, one at a time.

    Parameters
    ----------
    model : DecoderModel
        Any model with a ``config`` (``vocab_size``, ``n_layers``, ``max_positions``) whose
        ``forward(tokens, cache=...)`` returns logits ``(batch, n, vocab_size)``.
    prompt : array_like of int, shape (batch, n_prompt)
        Token ids, at least one per sequence.
    max_new_tokens : int
        How many tokens to add, >= 0 (0 returns the prompt); ``n_prompt + max_new_tokens``
        may not exceed ``model.config.max_positions``.
    use_cache : bool, default True
        Read the prompt once and then one token per step, keeping keys and values in a
        :class:`KVCache`; False re-reads the whole sequence at every step.
    temperature : float, default 0
        0 is greedy (argmax); above 0 samples (see :func:`next_token`).
    top_k : int, optional
        At least 1: sample among the ``top_k`` most likely tokens only.
    top_p : float, optional
        In (0, 1]: sample from the nucleus of the ``top_p`` most likely probability mass
        only (see :func:`next_token`).
    rng : numpy.random.Generator, optional
        The only source of randomness; required when ``temperature > 0``.
    return_logits : bool, default False
        Also return the logits each new token was chosen from.

    Returns
    -------
    tokens : ndarray of int64, shape (batch, n_prompt + max_new_tokens)
        The prompt followed by the new tokens.
    logits : ndarray, shape (batch, max_new_tokens, vocab_size)
        With ``return_logits=True`` only.

    Notes
    -----
    The model runs inside :meth:`~scratchformer.Layer.inference`: nothing is saved for a
    backward pass. Cached and uncached generation compute the same logits up to rounding
    (about 1e-15 in float64), so they choose the same tokens, sampled ones included: each step
    draws one uniform number per sequence from ``rng`` either way.
    """
    config = model.config
    prompt = token_ids(prompt, config.vocab_size, "prompt", min_ndim=2)
    if prompt.ndim != 2:
        raise ValueError(f"prompt must have shape (batch, n_prompt), got {prompt.shape}")
    if prompt.shape[0] == 0:
        raise ValueError(f"prompt must hold at least one sequence, got shape {prompt.shape}")
    max_new_tokens = non_negative_int(max_new_tokens, "max_new_tokens")
    temperature = non_negative_float(temperature, "temperature")
    if top_k is not None:
        top_k = positive_int(top_k, "top_k")
    if top_p is not None:
        top_p = non_negative_float(top_p, "top_p")
        if not 0 < top_p <= 1:
            raise ValueError(f"top_p must lie in (0, 1], got {top_p}")
    if temperature > 0 and rng is None:
        raise ValueError("sampling (temperature > 0) draws from rng: pass a "
                         "numpy.random.Generator")
    if rng is not None:
        rng = generator(rng)
    batch, n_prompt = prompt.shape
    if n_prompt > config.max_positions:
        raise ValueError(f"the prompt of {n_prompt} tokens is longer than the "
                         f"model's max_positions={config.max_positions}")
    if n_prompt + max_new_tokens > config.max_positions:
        raise ValueError(f"n_prompt + max_new_tokens = {n_prompt} + {max_new_tokens} "
                         f"exceeds the model's max_positions={config.max_positions}")
    tokens = np.empty((batch, n_prompt + max_new_tokens), np.int64)
    tokens[:, :n_prompt] = prompt
    chosen_from = []
    choose = {"temperature": temperature, "top_k": top_k, "top_p": top_p, "rng": rng}
    with model.inference():
        cache = None
        for step in range(max_new_tokens):
            end = n_prompt + step  # tokens so far
            if not use_cache:
                logits = model.forward(tokens[:, :end])[:, -1]
            elif cache is None:  # the prefill: the whole prompt at once
                cache = KVCache(config.n_layers, config.max_positions)
                logits = model.forward(tokens[:, :end], cache=cache)[:, -1]
            else:  # the last token only; its query sees every cached key
                logits = model.forward(tokens[:, end - 1:end], cache=cache)[:, -1]
            tokens[:, end] = next_token(logits, **choose)
            chosen_from.append(logits)
    if not return_logits:
        return tokens
    vocab = config.vocab_size
    logits = np.stack(chosen_from, axis=1) if chosen_from else np.empty((batch, 0, vocab))
    return tokens, logits
