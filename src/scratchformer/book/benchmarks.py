"""Speed of the package's layers against PyTorch's, measured in one process.

``benchmarks/attention_speed.py`` prints these measurements as a table, and the book's appendix
"Speed" measures a smaller version at build time. Ratios, not seconds, are what carry from one
machine to another; both are reported.
"""

from __future__ import annotations

import math
import statistics

import numpy as np

from ..attention import scaled_dot_product_attention
from ..fast_attention import fast_attention_output
from ..multihead import MultiHeadAttention
from ..tiled import tiled_attention
from .timing import interleaved_times, peak_allocated

__all__ = ["attention_forward_speed", "attention_roofline", "text_step_speed",
           "tiled_attention_speed", "training_step_speed"]


def attention_forward_speed(ns=(512, 2048, 4096), *, d_model=512, n_heads=8, repeats=5,
                            seed=0):
    """Time multi-head self-attention forward passes, float32, batch 1, on the CPU.

    Candidates, all with the same weights (copied from one ``torch.nn.MultiheadAttention``):

    - ``numpy``: :meth:`MultiHeadAttention.forward` inside ``layer.inference()``, the output
      only (the analogue of PyTorch's ``need_weights=False``);
    - ``numpy+weights``: :meth:`MultiHeadAttention.forward` outside it, which also forms the
      ``(h, n, n)`` weights (and keeps what ``backward`` needs);
    - ``torch MHA``: ``nn.MultiheadAttention(..., need_weights=False)``;
    - ``torch SDPA``: the same projections around ``F.scaled_dot_product_attention``.

    Returns
    -------
    rows : list of dict
        One per ``n``: median seconds of each candidate, the fastest and slowest of its rounds
        (``"<name> min"``, ``"<name> max"``), and the ratios of the medians of the package's two
        paths to the two PyTorch ones.
    """
    import torch

    from ..pytorch import from_torch

    torch.manual_seed(seed)
    module = torch.nn.MultiheadAttention(d_model, n_heads, batch_first=True).eval()
    layer = from_torch(module, MultiHeadAttention)
    d_k = d_model // n_heads
    rows = []
    for n in ns:
        x = np.random.default_rng(seed).standard_normal((1, n, d_model)).astype(np.float32)
        x_t = torch.from_numpy(x)

        def torch_mha():
            with torch.no_grad():
                return module(x_t, x_t, x_t, need_weights=False)[0]

        def torch_sdpa():
            with torch.no_grad():
                qkv = torch.nn.functional.linear(x_t, module.in_proj_weight, module.in_proj_bias)
                # (1, n, 3 d_model) -> 3 x (1, h, n, d_k)
                q, k, v = qkv.view(1, n, 3, n_heads, d_k).permute(2, 0, 3, 1, 4)
                heads = torch.nn.functional.scaled_dot_product_attention(q, k, v)
                merged = heads.transpose(1, 2).reshape(1, n, d_model)
                return module.out_proj(merged)

        def numpy_output():
            with layer.inference():
                return layer.forward(x)

        times = interleaved_times({
            "numpy": numpy_output,
            "numpy+weights": lambda: layer.forward(x),
            "torch MHA": torch_mha,
            "torch SDPA": torch_sdpa,
        }, repeats=repeats)
        medians = {name: statistics.median(t) for name, t in times.items()}
        spread = {f"{name} {end}": f(t) for name, t in times.items()
                  for end, f in (("min", min), ("max", max))}
        rows.append({"n": n, **medians, **spread,
                     "numpy / torch MHA": medians["numpy"] / medians["torch MHA"],
                     "numpy / torch SDPA": medians["numpy"] / medians["torch SDPA"],
                     "numpy+weights / torch MHA": medians["numpy+weights"] / medians["torch MHA"]})
    return rows


def tiled_attention_speed(ns=(4096, 8192, 16384), *, n_heads=8, d_k=64, repeats=3,
                          untiled_max_n=16384, seed=0):
    """Time and memory of tiled attention against untiled attention, float32, batch 1.

    Candidates, on the same ``q``, ``k``, ``v`` of shape ``(1, h, n, d_k)``:

    - ``tiled``: :func:`scratchformer.tiled_attention` with its default tiles;
    - ``untiled``: :func:`scratchformer.scaled_dot_product_attention`, which stores the
      ``(h, n, n)`` weights (only for ``n <= untiled_max_n``);
    - ``blocked``: the layers' kernel :func:`scratchformer.fast_attention.fast_attention_output`
      (query blocks against all keys at once).

    Returns
    -------
    rows : list of dict
        Per ``n``: median seconds of each candidate (and the fastest and slowest round,
        ``"<name> min"``, ``"<name> max"``), the medians' ratios to ``untiled``, and the peak
        working memory of each (bytes allocated during one call beyond its output, measured
        with :mod:`tracemalloc`).
    """
    rows = []
    for n in ns:
        rng = np.random.default_rng(seed)
        q, k, v = (rng.standard_normal((1, n_heads, n, d_k)).astype(np.float32)
                   for _ in range(3))
        output_bytes = q.nbytes  # (1, h, n, d_k) float32, like q
        candidates = {"tiled": lambda: tiled_attention(q, k, v),
                      "blocked": lambda: fast_attention_output(q, k, v)}
        if n <= untiled_max_n:
            candidates["untiled"] = lambda: scaled_dot_product_attention(q, k, v)[0]
        row = {"n": n}
        for name, run in candidates.items():
            peak, _ = peak_allocated(run)
            row[f"{name} MiB"] = (peak - output_bytes) / 2**20
        times = interleaved_times(candidates, repeats=repeats)
        row |= {name: statistics.median(t) for name, t in times.items()}
        row |= {f"{name} {end}": f(t) for name, t in times.items()
                for end, f in (("min", min), ("max", max))}
        if "untiled" in candidates:
            row["tiled / untiled"] = row["tiled"] / row["untiled"]
            row["blocked / untiled"] = row["blocked"] / row["untiled"]
        rows.append(row)
    return rows


def training_step_speed(config=None, task=None, *, steps=20, repeats=5, seed=0):
    """Time training steps of the book's model in NumPy and the same model in PyTorch.

    Both start from the same float32 weights (:meth:`EncoderModel.to_torch`) and take
    ``steps`` steps on the same batch (forward, cross-entropy, backward, gradient clipping,
    AdamW with the same settings), on the CPU with the threads each library uses by default;
    rounds are interleaved.

    Parameters
    ----------
    config : scratchformer.train.TrainConfig, optional
        Batch size and optimiser settings; default ``TrainConfig()``.
    task : scratchformer.LabellingTask, optional
        Sequence length and vocabulary; default the book's reversal task.
    steps, repeats, seed : int

    Returns
    -------
    dict
        ``numpy`` and ``torch``: median seconds per step; ``numpy min``, ``numpy max``,
        ``torch min``, ``torch max``: the fastest and slowest round, per step; ``ratio``: the
        medians' numpy / torch.
    """
    import torch

    from ..optim import Adam
    from ..pytorch import to_torch
    from ..tasks import LabellingTask
    from ..train import TrainConfig, book_model, train_step

    c = TrainConfig() if config is None else config
    task = LabellingTask() if task is None else task
    rng = np.random.default_rng(seed)
    model = book_model(task, seed=seed)
    module = to_torch(model).train()  # dropout 0: the same function, autograd on
    optimiser = Adam(model, weight_decay=c.weight_decay)
    parameters = list(module.parameters())
    torch_optimiser = _torch_adamw(parameters, optimiser, c)
    batch = task.sample(rng, c.batch_size, np.empty(0, dtype=np.int64))
    tokens_t = torch.from_numpy(batch[0])
    targets_t = torch.from_numpy(batch[1]).reshape(-1)
    clip = 1.0 if c.clip_norm is None else c.clip_norm

    def numpy_steps():
        for _ in range(steps):
            train_step(model, optimiser, task, batch, c.peak_lr, clip)

    def torch_steps():
        for _ in range(steps):
            logits = module(tokens_t)  # (batch, n, n_classes)
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, task.n_classes),
                                                     targets_t)
            torch_optimiser.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(parameters, clip)
            torch_optimiser.step()

    times = interleaved_times({"numpy": numpy_steps, "torch": torch_steps}, repeats=repeats)
    return _per_step(times, steps)


def text_step_speed(vocab_size=90, *, context=128, batch_size=32, threads=None, steps=5,
                    repeats=5, seed=0):
    """Time training steps of the language model (:func:`scratchformer.train.text_model`)
    in NumPy and the same model in PyTorch (:class:`~scratchformer.pytorch.
    TorchDecoderModel`, autograd on).

    Both start from the same float32 weights and take ``steps`` steps on the same batch of
    windows (forward, cross-entropy of every next token, backward, gradient clipping, AdamW),
    rounds interleaved. ``threads`` sets both libraries' threads for the measurement (BLAS's
    for NumPy, ``torch.set_num_threads`` for PyTorch); None leaves each at its default.

    Returns
    -------
    dict
        As :func:`training_step_speed`: ``numpy``, ``torch`` (median seconds per step), the
        rounds' ``min`` and ``max``, and ``ratio``.
    """
    import contextlib

    import torch

    from .._threads import blas_threads
    from ..language_model import TextTask
    from ..optim import Adam
    from ..pytorch import TorchDecoderModel
    from ..train import TrainConfig, text_model, train_step

    c = TrainConfig(batch_size=batch_size)
    rng = np.random.default_rng(seed)
    stream = rng.integers(0, vocab_size, size=max(10 * context, 1000))
    task = TextTask(stream, stream, vocab_size=vocab_size, context=context,
                    characters=np.ones(vocab_size, np.int64))
    model = text_model(task, seed=seed)
    twin = TorchDecoderModel(model).train()
    parameters = list(twin.parameters())
    for parameter in parameters:
        parameter.requires_grad_(True)
    optimiser = Adam(model, weight_decay=c.weight_decay)
    torch_optimiser = _torch_adamw(parameters, optimiser, c)
    batch = task.sample(rng, batch_size)
    inputs_t = torch.from_numpy(batch[0][:, :-1].copy())
    targets_t = torch.from_numpy(batch[0][:, 1:].reshape(-1).copy())

    def numpy_steps():
        for _ in range(steps):
            train_step(model, optimiser, task, batch, c.peak_lr, c.clip_norm)

    def torch_steps():
        for _ in range(steps):
            logits = twin(inputs_t)  # (batch, context, vocab)
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab_size), targets_t)
            torch_optimiser.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(parameters, c.clip_norm)
            torch_optimiser.step()

    before = torch.get_num_threads()
    scope = contextlib.nullcontext() if threads is None else blas_threads(threads)
    try:
        if threads is not None:
            torch.set_num_threads(threads)
        with scope:
            times = interleaved_times({"numpy": numpy_steps, "torch": torch_steps},
                                      repeats=repeats)
    finally:
        torch.set_num_threads(before)
    return _per_step(times, steps)


def _torch_adamw(parameters, optimiser, c):
    """PyTorch's AdamW with the package's settings: ``optimiser``'s betas and eps, ``c``'s
    rate and weight decay, and no decay of vectors (biases, norms), as :class:`Adam`."""
    import torch

    decayed = [p for p in parameters if p.ndim >= 2]
    others = [p for p in parameters if p.ndim < 2]
    return torch.optim.AdamW(
        [{"params": decayed, "weight_decay": c.weight_decay},
         {"params": others, "weight_decay": 0.0}],
        lr=c.peak_lr, betas=optimiser.betas, eps=optimiser.eps)


def _per_step(times, steps):
    """Interleaved rounds of ``steps`` steps -> median, fastest and slowest seconds per step
    of each candidate, and the medians' numpy / torch ``ratio``."""
    result = {name: statistics.median(t) / steps for name, t in times.items()}
    result |= {f"{name} {end}": f(t) / steps for name, t in times.items()
               for end, f in (("min", min), ("max", max))}
    result["ratio"] = result["numpy"] / result["torch"]
    return result


_SQUARE = 2048  # the machine's matrix-product rate: a (_SQUARE, _SQUARE) float32 product


def attention_roofline(n=4096, *, d_model=512, n_heads=8, repeats=3, seed=0):
    """Where the time of a multi-head self-attention forward goes, against the machine's rates.

    Measured in one run, interleaved, float32, batch 1; the machine's rates from the fastest
    of the rounds (what it can do), everything else from the median round:

    - the machine: the rate of a large ``(2048, 2048)`` matrix product on one core (BLAS on
      one thread) and on all cores;
    - one head's attention on one core, phase by phase, each phase alone over all the head's
      blocks, with the kernel's block sizes (``block_q`` queries by
      ``fast_attention._KEY_BLOCK`` keys): the scores ``q k^T``, their exponentials (which
      are the core's rate for ``np.exp`` on blocks that stay in its cache), the weighted sums
      ``p [v | 1]``; and the whole kernel for one head on one core;
    - the whole layer (inside ``layer.inference()``, all cores) and PyTorch's SDPA version.

    Returns
    -------
    dict
        ``core_gflops``, ``gemm_gflops`` (all cores), ``exp_ns`` (the exponentials' cost per
        element, one core),
        ``cores``, ``n``, ``square`` (the large product's size), and ``phases``: dicts
        with ``phase``, ``kind`` (``"gemm"``, ``"exp"``, ``"layer"``), ``work`` (GFLOP or
        millions of exponentials), ``seconds``, ``rate`` (GFLOP/s, or G exponentials per
        second) and ``fraction`` of the machine's rate for that work (one core for one head's
        products, all cores for the layer's; None for the exponentials).
    """
    import torch

    from .. import fast_attention as fa
    from .._threads import blas_threads, cores
    from ..multihead import merge_heads
    from ..pytorch import from_torch

    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    module = torch.nn.MultiheadAttention(d_model, n_heads, batch_first=True).eval()
    layer = from_torch(module, MultiHeadAttention)
    d_k = d_model // n_heads
    x = rng.standard_normal((1, n, d_model)).astype(np.float32)
    all_q, all_k, all_v = (a[0] for a in layer._split_inputs(x, x))  # (h, n, d_k) each
    q, k, v = (np.ascontiguousarray(a[0]) for a in (all_q, all_k, all_v))  # head 0
    merged = merge_heads(fa.fast_attention_output(all_q, all_k, all_v)[None])
    bq, bk = max(1, min(fa._BLOCK_ELEMS // n, n)), max(1, min(fa._KEY_BLOCK, n))
    k_t = (k * (1.0 / math.sqrt(d_k))).T  # (d_k, n)
    v_ones = np.concatenate([v, np.ones((n, 1), np.float32)], axis=-1)
    blocks = [(i0, min(bq, n - i0), j0, min(bk, n - j0))
              for i0 in range(0, n, bq) for j0 in range(0, n, bk)]
    p = rng.standard_normal((bq, bk)).astype(np.float32)
    s_blk = np.empty_like(p)
    o = np.empty((bq, d_k + 1), np.float32)
    big = rng.standard_normal((_SQUARE, _SQUARE)).astype(np.float32)
    x_t = torch.from_numpy(x)

    def one_core(run):
        def timed():
            with blas_threads(1):
                return run()
        return timed

    def scores():
        for i0, r, j0, c in blocks:
            np.matmul(q[i0:i0 + r], k_t[:, j0:j0 + c], out=s_blk[:r, :c])

    def exponentials():  # of the last block of scores, as often as there are blocks
        for _, r, _, c in blocks:
            np.exp(s_blk[:r, :c], out=p[:r, :c])

    def weighted_sums():
        for _, r, j0, c in blocks:
            np.matmul(p[:r, :c], v_ones[j0:j0 + c], out=o[:r])

    def whole():
        with layer.inference():
            return layer.forward(x)

    def torch_sdpa():
        with torch.no_grad():
            qkv = torch.nn.functional.linear(x_t, module.in_proj_weight, module.in_proj_bias)
            q_t, k_t_, v_t = qkv.view(1, n, 3, n_heads, d_k).permute(2, 0, 3, 1, 4)
            out = torch.nn.functional.scaled_dot_product_attention(q_t, k_t_, v_t)
            return module.out_proj(out.transpose(1, 2).reshape(1, n, d_model))

    scores()  # s_blk: a block of real scores, for exponentials()
    rounds = interleaved_times({
        "core gemm": one_core(lambda: big @ big),
        "gemm": lambda: big @ big,
        "scores": one_core(scores),
        "exponentials": one_core(exponentials),
        "weighted sums": one_core(weighted_sums),
        "head": one_core(lambda: fa.fast_attention_output(q, k, v)),
        "projections": lambda: layer._split_inputs(x, x),
        "kernel": lambda: fa.fast_attention_output(all_q, all_k, all_v),
        "output projection": lambda: layer._project_output(merged),
        "whole": whole,
        "torch SDPA": torch_sdpa,
    }, repeats=repeats)
    # The machine's rates: its fastest round (what it can do); the phases: the median round.
    machine = ("core gemm", "gemm")
    times = {name: min(t) if name in machine else statistics.median(t)
             for name, t in rounds.items()}
    core_gflops = 2 * _SQUARE**3 / times["core gemm"] / 1e9
    gemm_gflops = 2 * _SQUARE**3 / times["gemm"] / 1e9
    exp_ns = times["exponentials"] / (n * n) * 1e9  # exp is itself the core's rate for exp
    scores_flop = 2 * n * n * d_k
    sums_flop = 2 * n * n * (d_k + 1)
    kernel_flop = n_heads * (scores_flop + sums_flop)
    layer_flop = kernel_flop + 2 * n * d_model * 4 * d_model
    rows = [
        ("one head: Q Kᵀ", "gemm", scores_flop / 1e9, times["scores"], core_gflops),
        ("one head: exp", "exp", n * n / 1e6, times["exponentials"], None),
        ("one head: P [V 1]", "gemm", sums_flop / 1e9, times["weighted sums"],
         core_gflops),
        ("one head: kernel", "gemm", (scores_flop + sums_flop) / 1e9,
         times["head"], core_gflops),
        ("all cores: Q, K, V projection", "layer", 6 * n * d_model**2 / 1e9,
         times["projections"], gemm_gflops),
        ("all cores: kernel, all heads", "layer", kernel_flop / 1e9, times["kernel"],
         gemm_gflops),
        ("all cores: output projection", "layer", 2 * n * d_model**2 / 1e9,
         times["output projection"], gemm_gflops),
        ("layer (numpy)", "layer", layer_flop / 1e9, times["whole"],
         gemm_gflops),
        ("layer (torch SDPA)", "layer", layer_flop / 1e9,
         times["torch SDPA"], gemm_gflops),
    ]
    phases = []
    for phase, kind, work, seconds, peak in rows:
        rate = work / seconds / (1e3 if kind == "exp" else 1)  # GFLOP/s; G exp per second
        phases.append({"phase": phase, "kind": kind, "work": work, "seconds": seconds,
                       "rate": rate, "fraction": None if peak is None else rate / peak})
    return {"core_gflops": core_gflops, "gemm_gflops": gemm_gflops, "exp_ns": exp_ns,
            "cores": cores(), "n": n, "square": _SQUARE, "phases": phases}
