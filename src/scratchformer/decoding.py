"""Decoding: turning an encoder–decoder's next-token scores into a translation.

Greedy decoding takes the most likely token at every step, for a whole batch at once, until
each sequence has produced EOS or reached the maximum length. Beam search keeps the
``beam_width`` most likely prefixes instead and returns the finished hypothesis of best score

.. math:: s(y) = \\frac{\\log P(y \\mid x)}{|y|^{\\alpha}}
          = \\frac{1}{|y|^{\\alpha}} \\sum_{t=1}^{|y|} \\log P(y_t \\mid y_{<t}, x),

where :math:`|y|` counts the generated tokens, EOS included, and :math:`\\alpha \\ge 0` is the
length normalisation (0: the plain log-probability, which favours short outputs; 1: the mean
log-probability per token, the default). Both run the model inside ``inference()``: nothing
is saved for a backward pass.
"""

from __future__ import annotations

import numpy as np

from ._validation import non_negative_float, non_negative_int, positive_int, token_ids
from .seq2seq import padding_mask

__all__ = ["greedy_decode", "beam_search", "sequence_log_probability"]


def _check(model, source, bos_id, eos_id, max_length):
    config = model.config
    source = token_ids(source, config.vocab_size, "source")
    if source.ndim not in (1, 2):
        raise ValueError(f"source must have shape (n_s,) or (batch, n_s), got {source.shape}")
    max_length = positive_int(max_length, "max_length")
    for name, value in (("bos_id", bos_id), ("eos_id", eos_id)):
        value = non_negative_int(value, name)
        if value >= config.target_vocab_size:
            raise ValueError(f"{name} must lie in [0, {config.target_vocab_size}) (the "
                             f"target vocabulary), got {value}")
    if bos_id == eos_id:
        raise ValueError(f"bos_id and eos_id must differ, got {bos_id} for both")
    return source, max_length


def _log_softmax(logits):
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def greedy_decode(model, source, *, bos_id, eos_id, max_length, prefix=None):
    """The most likely next token at every step, for a batch of sources.

    Parameters
    ----------
    model : EncoderDecoderModel
    source : ndarray of int, shape (batch, n_s) or (n_s,)
        Source ids, padded with ``model.config.pad_id``.
    bos_id, eos_id : int
        Target ids that start and end a translation.
    max_length : int
        At most this many tokens are generated (EOS included), at least 1.
    prefix : ndarray of int, shape (batch, p) or (p,), optional
        Target tokens (after BOS) taken as already generated, whatever the model would have
        chosen: decoding goes on from them. They count towards ``max_length`` (``p`` at most
        ``max_length``) and begin the returned rows; a row whose prefix holds EOS is done.

    Returns
    -------
    tokens : ndarray of int64, shape (batch, n) or (n,), n <= max_length
        The generated tokens without BOS: each row up to and including its
        EOS, then ``pad_id``; a row that reached ``max_length`` without EOS
        ends there. Generation stops once every row has produced EOS.
    """
    source, max_length = _check(model, source, bos_id, eos_id, max_length)
    single = source.ndim == 1
    source = source[None] if single else source
    pad = model.config.pad_id
    forced = _prefix(prefix, source, model.config, single, max_length)  # (batch, p)
    tokens = np.concatenate([np.full((len(source), 1), bos_id, dtype=np.int64), forced], axis=1)
    done = (forced == eos_id).any(axis=1)
    with model.inference():
        memory = model.encode(source)
        memory_mask = padding_mask(source, pad)
        for _ in range(max_length - forced.shape[1]):
            if done.all():
                break
            # (batch, n) -> (batch, n, K): the last position's scores
            logits = model.decode(tokens, memory, memory_mask)[:, -1]
            step = np.where(done, pad, logits.argmax(axis=-1))
            tokens = np.concatenate([tokens, step[:, None]], axis=1)
            done |= step == eos_id
    return tokens[0, 1:] if single else tokens[:, 1:]


def _prefix(prefix, source, config, single, max_length):
    """``prefix`` checked against the sources: (batch, p) target ids, p <= max_length."""
    if prefix is None:
        return np.zeros((len(source), 0), dtype=np.int64)
    prefix = token_ids(prefix, config.target_vocab_size, "prefix")
    if prefix.ndim != (1 if single else 2):
        raise ValueError(f"prefix must have shape (p,) for a source of shape (n_s,), or "
                         f"(batch, p) for (batch, n_s); got {prefix.shape}")
    prefix = prefix[None] if single else prefix
    if len(prefix) != len(source):
        raise ValueError(f"prefix has {len(prefix)} rows for {len(source)} sources")
    if prefix.shape[1] > max_length:
        raise ValueError(f"prefix has {prefix.shape[1]} tokens, more than max_length "
                         f"{max_length}")
    return prefix.astype(np.int64)


def beam_search(model, source, *, bos_id, eos_id, max_length, beam_width, alpha=1.0):
    """The best-scoring translation of each source found by a beam of ``beam_width``.

    At each step every live prefix is extended by every token; the ``beam_width`` extensions
    of highest log-probability are kept, those ending in EOS as finished hypotheses, the others
    as the live beams of the next step (so the beam narrows as hypotheses finish). Finished
    hypotheses are kept, scored by :math:`s(y)` of the module docstring, until no live beam can
    beat the best of them: a live prefix of log-probability :math:`\\ell \\le 0` can reach at
    best :math:`\\ell / L^{\\alpha}` with ``L = max_length`` (log-probabilities only fall as
    tokens are added), so the search stops when the best finished score is at least that for
    every live beam, when no beam is live, or at ``max_length``, where the live beams are
    scored as they stand. With ``beam_width=1`` this is exactly :func:`greedy_decode`.

    Parameters
    ----------
    model, source, bos_id, eos_id, max_length
        As for :func:`greedy_decode`.
    beam_width : int
        Extensions kept per step, at least 1.
    alpha : float, default 1.0
        The length normalisation :math:`\\alpha \\ge 0`.

    Returns
    -------
    tokens : ndarray of int64, shape (batch, n) or (n,)
        Each source's best hypothesis without BOS, EOS included, padded with ``pad_id``.
    scores : ndarray of float64, shape (batch,) or ()
        Their scores :math:`s(y)`.
    """
    source, max_length = _check(model, source, bos_id, eos_id, max_length)
    beam_width = positive_int(beam_width, "beam_width")
    alpha = non_negative_float(alpha, "alpha")
    try:  # the largest length penalty, L ** alpha, as _beam computes it
        max_length**alpha
    except OverflowError:
        raise ValueError(f"alpha={alpha!r} is too large for max_length={max_length}: "
                         f"max_length ** alpha overflows float64") from None
    single = source.ndim == 1
    source = source[None] if single else source
    best = []
    with model.inference():
        for row in source:
            best.append(_beam(model, row[None], bos_id, eos_id, max_length, beam_width,
                              alpha))
    width = max((len(tokens) for _, tokens in best), default=0)  # 0 for no source
    out = np.full((len(best), width), model.config.pad_id, dtype=np.int64)
    for i, (_, tokens) in enumerate(best):
        out[i, :len(tokens)] = tokens
    scores = np.array([score for score, _ in best], dtype=np.float64)
    return (out[0], scores[0]) if single else (out, scores)


def sequence_log_probability(model, source, tokens, *, bos_id):
    """The model's log-probability of each row of ``tokens``, teacher-forced.

    Parameters
    ----------
    model : EncoderDecoderModel
    source : ndarray of int, shape (batch, n_s)
    tokens : ndarray of int, shape (batch, n)
        Outputs without BOS, as :func:`greedy_decode` and :func:`beam_search` return them:
        the tokens up to and including EOS, then ``pad_id``, which counts for nothing.
    bos_id : int

    Returns
    -------
    log_p : ndarray of float64, shape (batch,)
        :math:`\\sum_t \\log P(y_t \\mid y_{<t}, x)` over the non-pad tokens, from one
        parallel pass (chapter "The decoder": it computes what the decoding steps computed).
    """
    source = token_ids(source, model.config.vocab_size, "source")
    tokens = token_ids(tokens, model.config.target_vocab_size, "tokens")
    if source.ndim != 2 or tokens.ndim != 2 or len(source) != len(tokens):
        raise ValueError(f"source and tokens must have shapes (batch, n_s) and (batch, n) "
                         f"with one batch, got {source.shape} and {tokens.shape}")
    bos_id = non_negative_int(bos_id, "bos_id")
    if bos_id >= model.config.target_vocab_size:
        raise ValueError(f"bos_id must lie in [0, {model.config.target_vocab_size}) (the "
                         f"target vocabulary), got {bos_id}")
    bos = np.full((len(tokens), 1), bos_id, dtype=np.int64)
    inputs = np.concatenate([bos, tokens[:, :-1]], axis=1)  # (batch, n): BOS y_1 ...
    with model.inference():
        logits = model.forward(source, inputs).astype(np.float64)  # (batch, n, K)
    picked = np.take_along_axis(_log_softmax(logits), tokens[..., None], axis=-1)[..., 0]
    return np.where(tokens != model.config.pad_id, picked, 0.0).sum(axis=-1)


def _beam(model, source, bos_id, eos_id, max_length, beam_width, alpha):
    """(score, tokens) of the best hypothesis for a source (1, n_s)."""
    memory = model.encode(source)  # (1, n_s, d_model): broadcasts over beams
    memory_mask = padding_mask(source, model.config.pad_id)
    live_tokens = np.array([[bos_id]], dtype=np.int64)  # (beams, t + 1)
    live_logp = np.zeros(1)  # log P of each live prefix
    finished = []  # (score, tokens without BOS)
    for t in range(1, max_length + 1):
        # (beams, t) -> (beams, K): the scores after each live prefix
        logits = model.decode(live_tokens, memory, memory_mask)[:, -1]
        log_p = _log_softmax(logits.astype(np.float64))
        total = (live_logp[:, None] + log_p).reshape(-1)  # (beams * K,)
        # the beam_width best extensions; ties: the lower index
        top = np.argsort(-total, kind="stable")[:beam_width]
        beams, words = np.divmod(top, logits.shape[-1])
        extended = np.concatenate([live_tokens[beams], words[:, None]], axis=1)
        ends = words == eos_id
        for tokens, logp in zip(extended[ends], total[top][ends]):
            finished.append((float(logp) / t**alpha, tokens[1:]))
        live_tokens, live_logp = extended[~ends], total[top][~ends]
        if len(live_logp) == 0:
            break
        if t == max_length:  # out of room: score the live beams as they are
            finished += [(float(lp) / t**alpha, tokens[1:])
                         for tokens, lp in zip(live_tokens, live_logp)]
            break
        # the best score a live beam can still reach
        bound = float(live_logp.max()) / max_length**alpha
        if finished and max(score for score, _ in finished) >= bound:
            break
    return max(finished, key=lambda item: item[0])  # the first of equal scores
