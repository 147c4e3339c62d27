r"""GPT-2 as a :class:`~scratchformer.DecoderModel`: the weights of ``transformers``' GPT-2.

GPT-2 (Radford et al., 2019) is the book's decoder-only model with four choices made:

- **pre-LN** blocks with :class:`~scratchformer.LayerNorm` (scale and shift), the residual
  path never normalised, and a final layer norm ``ln_f`` after the last block
  (``norm="pre"``, ``normalization="layer"``: the model's ``final_norm``);
- **learned absolute positions**: a table ``wpe`` of ``n_positions x n_embd`` whose row
  ``t`` is added to the embedding of the token at position ``t`` (``positions="learned"``,
  the model's ``position_embedding``), no rotation in the attention;
- **GELU in its tanh approximation** between the two affine maps of the feed-forward
  network, :math:`\tfrac12 a (1 + \tanh(\sqrt{2/\pi}(a + 0.044715 a^3)))`, called
  ``gelu_new`` in ``transformers`` (``feed_forward="gelu"``, :func:`scratchformer.gelu`);
  *not* the exact :math:`a\,\Phi(a)` (``activation_function="gelu"``), which is refused;
- a **tied head**: the logits are :math:`x E^\top` with :math:`E` the token embedding
  ``wte`` (``tie_embeddings=True``), and **biases** in every projection
  (``bias=True``).

The weights are read from a ``state_dict`` by GPT-2's names (with or without the
``transformer.`` prefix of ``GPT2LMHeadModel``):

========================================  ==============================================
GPT-2                                     :class:`~scratchformer.DecoderModel`
========================================  ==============================================
``wte.weight`` (vocab, d)                 ``embedding.table``; also the head, transposed
``wpe.weight`` (n_positions, d)           ``position_embedding.table``
``h.{i}.ln_1.weight``, ``.bias``          ``blocks.{i}.norm1.gamma``, ``.beta``
``h.{i}.attn.c_attn.weight`` (d, 3d)      ``w_q``, ``w_k``, ``w_v``: its column thirds
``h.{i}.attn.c_attn.bias`` (3d,)          ``b_q``, ``b_k``, ``b_v``: its thirds
``h.{i}.attn.c_proj.weight``, ``.bias``   ``blocks.{i}.attention.w_o``, ``b_o``
``h.{i}.ln_2.weight``, ``.bias``          ``blocks.{i}.norm2.gamma``, ``.beta``
``h.{i}.mlp.c_fc.weight``, ``.bias``      ``blocks.{i}.ffn.w_1``, ``b_1`` (d, d_ff)
``h.{i}.mlp.c_proj.weight``, ``.bias``    ``blocks.{i}.ffn.w_2``, ``b_2`` (d_ff, d)
``ln_f.weight``, ``.bias``                ``final_norm.gamma``, ``.beta``
``lm_head.weight`` (vocab, d)             none: it must equal ``wte.weight`` (tied)
========================================  ==============================================

GPT-2's projections are ``Conv1D`` modules (a name kept from OpenAI's code; they are affine
maps of each token), which compute ``x @ weight + bias`` with ``weight`` stored
**(in, out)**: the package's layout, so no matrix is transposed, unlike ``nn.Linear``'s
(out, in). The fused ``c_attn`` computes queries, keys and values in one product; its
columns are ``[q | k | v]``, each ``n_embd`` wide, and within each, head ``j`` owns columns
``j d_k .. (j + 1) d_k - 1``, as :func:`scratchformer.split_heads` cuts them. Scores are
divided by :math:`\sqrt{d_k}` (``scale_attn_weights``). The hyper-parameters map as
``n_embd -> d_model``, ``n_head -> n_heads``, ``n_layer -> n_layers``, ``n_inner`` (None:
``4 n_embd``) ``-> d_ff``, ``n_positions -> max_positions``, ``layer_norm_epsilon -> eps``.
Dropout (``*_pdrop``) is a training device; the converted model computes GPT-2 in
evaluation mode.

Imports NumPy only: tensors are read through ``.detach().cpu().numpy()``, so torch is needed
only by whoever made them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np

from ._validation import floating_dtype
from .decoder_only import DecoderModel

__all__ = ["GPT2_ACTIVATIONS", "gpt2_options", "from_gpt2"]

#: ``activation_function`` values that name GELU's tanh approximation, which the converted
#: model computes: ``transformers``' own ``gelu_new`` (GPT-2's) and PyTorch's
#: ``F.gelu(approximate="tanh")``, the same formula.
GPT2_ACTIVATIONS = ("gelu_new", "gelu_pytorch_tanh")

#: Buffers of older checkpoints (``h.{i}.attn.bias``, the causal mask, and
#: ``h.{i}.attn.masked_bias``, its fill value), not weights.
_BUFFERS = re.compile(r"h\.\d+\.attn\.(masked_)?bias")


def _get(config, name, default=None):
    if isinstance(config, Mapping):
        return config.get(name, default)
    return getattr(config, name, default)


def gpt2_options(config):
    """The :class:`~scratchformer.DecoderModel` keyword arguments of a GPT-2 configuration.

    Parameters
    ----------
    config : transformers.GPT2Config or mapping
        Read by GPT-2's names (``vocab_size``, ``n_embd``, ``n_head``, ``n_layer``,
        ``n_inner``, ``n_positions``, ``layer_norm_epsilon``, ...), as attributes or keys
        (``GPT2Config.to_dict()``).

    Returns
    -------
    dict
        Every argument of ``DecoderModel`` but ``rng`` and ``dtype``.

    Raises
    ------
    ValueError
        For what the package's model does not compute: another ``model_type``, an
        ``activation_function`` other than GELU's tanh approximation (``"gelu"``, the exact
        erf form, included), ``scale_attn_weights=False``,
        ``scale_attn_by_inverse_layer_idx``, ``reorder_and_upcast_attn``,
        ``add_cross_attention``, or an untied head (``tie_word_embeddings=False``).
    """
    model_type = _get(config, "model_type", "gpt2")
    if model_type != "gpt2":
        raise ValueError(f"not a GPT-2 configuration: model_type={model_type!r}")
    activation = _get(config, "activation_function", "gelu_new")
    if activation not in GPT2_ACTIVATIONS:
        extra = ""
        if activation == "gelu":
            extra = ("; 'gelu' is the exact x * Phi(x) of the error function (erf), which "
                     "differs from the tanh form by up to 4.7e-4 per activation")
        raise ValueError(f"activation_function={activation!r} is not supported: the converted "
                         f"model computes GELU's tanh approximation, 'gelu_new'{extra}")
    refused = {
        "scale_attn_weights": (False, "scores not divided by sqrt(d_k)"),
        "scale_attn_by_inverse_layer_idx": (True, "scores divided by the layer's index + 1"),
        "reorder_and_upcast_attn": (True, "scores computed in float32 whatever the dtype"),
        "add_cross_attention": (True, "cross-attention to an encoder"),
    }
    for name, (bad, what) in refused.items():
        default = name == "scale_attn_weights"  # True; the others default to False
        if bool(_get(config, name, default)) == bad:
            raise ValueError(f"{name}={bad} is not supported ({what}): the package's "
                             "attention divides the scores of every layer by sqrt(d_k)")
    if not _get(config, "tie_word_embeddings", True):
        raise ValueError("tie_word_embeddings=False is not supported: GPT-2's head is the "
                         "token embedding transposed (tie_embeddings=True)")
    d_model = _get(config, "n_embd")
    inner = _get(config, "n_inner")
    missing = [name for name in ("vocab_size", "n_embd", "n_head", "n_layer", "n_positions")
               if _get(config, name) is None]
    if missing:
        raise ValueError(f"the GPT-2 configuration has no {', '.join(missing)}")
    return {
        "vocab_size": _get(config, "vocab_size"),
        "d_model": d_model,
        "n_heads": _get(config, "n_head"),
        "d_ff": 4 * d_model if inner is None else inner,
        "n_layers": _get(config, "n_layer"),
        "positions": "learned",
        "norm": "pre",
        "max_positions": _get(config, "n_positions"),
        "eps": _get(config, "layer_norm_epsilon", 1e-5),
        "normalization": "layer",
        "feed_forward": "gelu",
        "tie_embeddings": True,
        "bias": True,
    }


def _array(value, name):
    """A NumPy array of a tensor (any device, requiring grad or not) or of an array."""
    if hasattr(value, "detach"):  # a torch tensor, read without importing torch here
        value = value.detach().cpu()
        if str(value.dtype) == "torch.bfloat16":  # NumPy has no bfloat16
            value = value.float()
        value = value.numpy()
    value = np.asarray(value)
    if not (np.issubdtype(value.dtype, np.floating) or np.issubdtype(value.dtype, np.integer)):
        raise TypeError(f"{name} must be a real array, got dtype {value.dtype}")
    return value


def from_gpt2(source, config=None, *, dtype=np.float64):
    """A :class:`~scratchformer.DecoderModel` computing a GPT-2 model's logits.

    Parameters
    ----------
    source : GPT2LMHeadModel, GPT2Model or dict
        A ``transformers`` model (its ``state_dict()`` and ``config`` are read), or a
        ``state_dict`` (a mapping of names to arrays) by GPT-2's names, with or without the
        ``transformer.`` prefix; values torch tensors or NumPy arrays.
    config : GPT2Config or dict, optional
        Needed with a ``state_dict``; default ``source.config``.
    dtype : floating dtype, default float64
        The converted model's.

    Returns
    -------
    DecoderModel
        ``positions="learned"``, ``feed_forward="gelu"``, ``tie_embeddings=True``, pre-LN
        with layer norm and biases (see the module's docstring for each convention).

    Raises
    ------
    ValueError
        For a configuration the package cannot represent (:func:`gpt2_options`); for
        missing or unexpected weights, or weights of the wrong shape; for an ``lm_head``
        that is not ``wte`` (an untied head).
    TypeError
        For a ``source`` that is neither a model nor a mapping, or a non-real weight.
    """
    dtype = floating_dtype(dtype)
    if config is None:
        config = getattr(source, "config", None)
        if config is None:
            raise TypeError("from_gpt2 needs a config with a state_dict (or a "
                            f"GPT2LMHeadModel, which carries one), got {type(source).__name__}")
    options = gpt2_options(config)
    if hasattr(source, "state_dict") and callable(source.state_dict):
        source = source.state_dict()
    if not isinstance(source, Mapping):
        raise TypeError(f"source must be a GPT-2 model or its state_dict, got "
                        f"{type(source).__name__}")
    weights, head = {}, None
    for name, value in source.items():
        if name == "lm_head.weight":
            head = _array(value, name)
            continue
        short = name.removeprefix("transformer.")
        if _BUFFERS.fullmatch(short):
            continue
        weights[short] = value
    model = DecoderModel(**options, dtype=dtype)
    values = _rename(weights, options["n_layers"])
    model.load_parameters(values)  # checks every name, shape and value
    if head is not None and not np.array_equal(head, _array(weights["wte.weight"],
                                                            "wte.weight")):
        raise ValueError("lm_head.weight differs from transformer.wte.weight: an untied head "
                         "is not supported (GPT-2 ties them)")
    return model


def _rename(weights, n_layers):
    """The package's names for GPT-2's weights; ``ValueError`` for a missing or unknown one."""
    names = {"wte.weight": "embedding.table", "wpe.weight": "position_embedding.table",
             "ln_f.weight": "final_norm.gamma", "ln_f.bias": "final_norm.beta"}
    for i in range(n_layers):
        block = f"blocks.{i}."
        names |= {f"h.{i}.ln_1.weight": block + "norm1.gamma",
                  f"h.{i}.ln_1.bias": block + "norm1.beta",
                  f"h.{i}.ln_2.weight": block + "norm2.gamma",
                  f"h.{i}.ln_2.bias": block + "norm2.beta",
                  f"h.{i}.attn.c_proj.weight": block + "attention.w_o",
                  f"h.{i}.attn.c_proj.bias": block + "attention.b_o",
                  f"h.{i}.mlp.c_fc.weight": block + "ffn.w_1",
                  f"h.{i}.mlp.c_fc.bias": block + "ffn.b_1",
                  f"h.{i}.mlp.c_proj.weight": block + "ffn.w_2",
                  f"h.{i}.mlp.c_proj.bias": block + "ffn.b_2"}
    fused = {f"h.{i}.attn.c_attn.{kind}": (f"blocks.{i}.attention.", kind)
             for i in range(n_layers) for kind in ("weight", "bias")}
    missing = sorted((set(names) | set(fused)) - set(weights))
    unexpected = sorted(set(weights) - set(names) - set(fused))
    if missing or unexpected:
        raise ValueError(f"not the weights of this GPT-2 configuration: missing {missing}, "
                         f"unexpected {unexpected}")
    values = {ours: _array(weights[theirs], theirs) for theirs, ours in names.items()}
    for theirs, (prefix, kind) in fused.items():
        value = _array(weights[theirs], theirs)  # (d, 3d) or (3d,): [q | k | v] columns
        if value.shape[-1] % 3:
            raise ValueError(f"{theirs} must have 3 * n_embd columns, got shape {value.shape}")
        letter = "w" if kind == "weight" else "b"
        for part, piece in zip("qkv", np.split(value, 3, axis=-1)):
            values[f"{prefix}{letter}_{part}"] = piece
    return values
