"""Every conversion between the package's layers and PyTorch's modules.

The conversions are exact: the weights are copied, transposed where PyTorch stores ``W^T``
(``nn.Linear`` computes ``x @ weight.T``) and split where it packs the three input projections
of attention into one ``(3 d_model, d_model)`` matrix. One table of names per module type (the
``_*_values`` functions) serves two purposes: copying weights in (:func:`from_torch`) and
reading PyTorch's gradients in the package's layout (:func:`torch_gradients`). Copying weights
out (:func:`to_torch`) has writers of its own (the ``_write_*`` functions), and every module it
makes is read back through the tables and compared, so the two directions cannot drift apart.
Dropout inside a block is never carried over: a converted module computes its evaluation-mode
function, and modules made here have dropout 0. A block or model of the package with
``dropout > 0`` is refused (PyTorch's layers drop at more places in training than the
package's blocks, so no rate maps one training function onto the other); the
:class:`~scratchformer.Dropout` layer alone converts to ``nn.Dropout`` and back, rate kept.

Both directions dispatch on the exact type: a subclass computes a function of its own (a
:class:`~scratchformer.CausalSelfAttention` with rotary positions is not an
``nn.MultiheadAttention``), so a class without an exact counterpart is refused with the reason,
never converted to its parent's module.

PyTorch's conventions differ from the book's in ways that matter for a cross-check: its
boolean attention masks mean "blocked" (the book's mean "may attend"), and ``nn.Transformer``
adds a final layer norm even after post-LN layers; these converters build the layers alone.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from ..decoder import DecoderBlock
from ..decoder_only import CausalSelfAttention, DecoderModel, DecoderOnlyBlock
from ..dropout import Dropout
from ..encoder import EncoderBlock
from ..layers import Embedding, FeedForward, LayerNorm, Linear, RMSNorm, SwiGLU
from ..lora import LoRA
from ..model import EncoderModel
from ..module import Layer
from ..multihead import MultiHeadAttention
from ..seq2seq import EncoderDecoderModel
from .twins import TorchDecoderModel, TorchEncoderDecoderModel, TorchEncoderModel

__all__ = ["NO_COUNTERPART", "from_torch", "to_torch", "torch_gradients"]


def _array(tensor):
    """A NumPy copy of a tensor (weights or gradients)."""
    return tensor.detach().cpu().numpy().copy()


def _tensor(array):
    return torch.from_numpy(np.ascontiguousarray(array))


def _weights(parameter):
    return parameter


def _gradient(parameter):
    if parameter.grad is None:
        raise ValueError("a parameter has no gradient: call backward() first")
    return parameter.grad


# --- One table of names per module type: the package's names and PyTorch's tensors. ---------

def _prefixed(prefix, values):
    return {f"{prefix}.{name}": value for name, value in values.items()}


def _linear_values(module, get):
    values = {"w": _array(get(module.weight)).T.copy()}
    if module.bias is not None:
        values["b"] = _array(get(module.bias))
    return values


def _layer_norm_values(module, get):
    return {"gamma": _array(get(module.weight)), "beta": _array(get(module.bias))}


def _embedding_values(module, get):
    return {"table": _array(get(module.weight))}


def _feed_forward_values(first, second, get):
    one, two = _linear_values(first, get), _linear_values(second, get)
    return {"w_1": one["w"], "b_1": one["b"], "w_2": two["w"], "b_2": two["b"]}


def _attention_values(module, get):
    # PyTorch packs [W_Q^T; W_K^T; W_V^T]: (3 d_model, d_model)
    w_q, w_k, w_v = np.split(_array(get(module.in_proj_weight)), 3, axis=0)
    values = {"w_q": w_q.T.copy(), "w_k": w_k.T.copy(), "w_v": w_v.T.copy(),
              "w_o": _array(get(module.out_proj.weight)).T.copy()}
    if module.in_proj_bias is not None:
        b_q, b_k, b_v = np.split(_array(get(module.in_proj_bias)), 3)
        values |= {"b_q": b_q.copy(), "b_k": b_k.copy(), "b_v": b_v.copy(),
                   "b_o": _array(get(module.out_proj.bias))}
    return values


def _encoder_layer_values(module, get):
    values = _prefixed("attention", _attention_values(module.self_attn, get))
    values |= _prefixed("ffn", _feed_forward_values(module.linear1, module.linear2, get))
    values |= _prefixed("norm1", _layer_norm_values(module.norm1, get))
    values |= _prefixed("norm2", _layer_norm_values(module.norm2, get))
    return values


def _decoder_layer_values(module, get):
    values = _prefixed("self_attention", _attention_values(module.self_attn, get))
    values |= _prefixed("cross_attention", _attention_values(module.multihead_attn, get))
    values |= _prefixed("ffn", _feed_forward_values(module.linear1, module.linear2, get))
    for name in ("norm1", "norm2", "norm3"):
        values |= _prefixed(name, _layer_norm_values(getattr(module, name), get))
    return values


def _encoder_decoder_values(module, get):
    values = _prefixed("source_embedding", _embedding_values(module.source_embedding, get))
    for i, block in enumerate(module.encoder_blocks):
        values |= _prefixed(f"encoder_blocks.{i}", _encoder_layer_values(block, get))
    if module.encoder_norm is not None:
        values |= _prefixed("encoder_norm", _layer_norm_values(module.encoder_norm, get))
    values |= _prefixed("target_embedding", _embedding_values(module.target_embedding, get))
    for i, block in enumerate(module.decoder_blocks):
        values |= _prefixed(f"decoder_blocks.{i}", _decoder_layer_values(block, get))
    if module.decoder_norm is not None:
        values |= _prefixed("decoder_norm", _layer_norm_values(module.decoder_norm, get))
    values |= _prefixed("head", _linear_values(module.head, get))
    return values


def _encoder_model_values(module, get):
    values = _prefixed("embedding", _embedding_values(module.embedding, get))
    for i, block in enumerate(module.blocks):
        values |= _prefixed(f"blocks.{i}", _encoder_layer_values(block, get))
    if module.final_norm is not None:
        values |= _prefixed("final_norm", _layer_norm_values(module.final_norm, get))
    values |= _prefixed("head", _linear_values(module.head, get))
    return values


def _is_feed_forward(module):
    """``nn.Sequential(nn.Linear, nn.ReLU, nn.Linear)``, the package's FeedForward."""
    return (type(module) is torch.nn.Sequential and len(module) == 3
            and type(module[0]) is torch.nn.Linear and type(module[1]) is torch.nn.ReLU
            and type(module[2]) is torch.nn.Linear)


#: The package's class of each PyTorch module converted, by exact type (a subclass may compute
#: another function); and the feed-forward network, recognised by its parts.
_COUNTERPARTS = {
    torch.nn.MultiheadAttention: MultiHeadAttention,
    torch.nn.TransformerEncoderLayer: EncoderBlock,
    torch.nn.TransformerDecoderLayer: DecoderBlock,
    torch.nn.LayerNorm: LayerNorm,
    torch.nn.RMSNorm: RMSNorm,
    torch.nn.Linear: Linear,
    torch.nn.Embedding: Embedding,
    TorchEncoderModel: EncoderModel,
    TorchEncoderDecoderModel: EncoderDecoderModel,
    TorchDecoderModel: DecoderModel,
    torch.nn.Dropout: Dropout,
}


def _counterpart(module):
    """The package's class that ``module`` converts to, or a TypeError naming what does."""
    cls = _COUNTERPARTS.get(type(module))
    if cls is None and _is_feed_forward(module):
        cls = FeedForward
    if cls is None:
        supported = ", ".join(sorted(t.__name__ for t in _COUNTERPARTS))
        raise TypeError(f"no conversion from {type(module).__name__} (the exact type); "
                        f"supported: {supported}, Sequential(Linear, ReLU, Linear)")
    return cls


def _rms_norm_values(module, get):
    return {"gamma": _array(get(module.weight))}


def _decoder_model_values(module, get):
    # TorchDecoderModel keeps the package's names and layouts ("/" for ".", which PyTorch's
    # ParameterDict does not allow in a key).
    return {name.replace("/", "."): _array(get(parameter))
            for name, parameter in module.params.items()}


def _values(module, get):
    """The package's names and values for ``module``'s parameters (or gradients)."""
    cls = _counterpart(module)
    if cls is FeedForward:
        return _feed_forward_values(module[0], module[2], get)
    return {MultiHeadAttention: _attention_values, EncoderBlock: _encoder_layer_values,
            DecoderBlock: _decoder_layer_values, LayerNorm: _layer_norm_values,
            RMSNorm: _rms_norm_values, Linear: _linear_values, Embedding: _embedding_values,
            EncoderModel: _encoder_model_values, EncoderDecoderModel: _encoder_decoder_values,
            DecoderModel: _decoder_model_values,
            Dropout: lambda module, get: {}}[cls](module, get)


# --- From PyTorch -------------------------------------------------------------------------

def _dtype(module):
    first = next(module.parameters(), None)
    return None if first is None else first.detach().numpy().dtype


def _check_attention(module):
    if not module._qkv_same_embed_dim:
        raise ValueError("only kdim == vdim == embed_dim is supported")
    if module.bias_k is not None or module.add_zero_attn:
        raise ValueError("add_bias_kv and add_zero_attn are not supported")


def _check_encoder_layer(module):
    if module.activation_relu_or_gelu != 1:
        raise ValueError("only the ReLU activation is supported")
    if module.linear1.bias is None or module.norm1.bias is None:
        raise ValueError("only layers with biases (bias=True) are supported")
    if module.norm1.eps != module.norm2.eps:
        raise ValueError("the two layer norms must share eps")
    _check_attention(module.self_attn)


def _check_decoder_layer(module):
    relu = module.activation is torch.nn.functional.relu or isinstance(module.activation,
                                                                       torch.nn.ReLU)
    if not relu:
        raise ValueError("only the ReLU activation is supported")
    if module.linear1.bias is None or module.norm1.bias is None:
        raise ValueError("only layers with biases (bias=True) are supported")
    if not module.norm1.eps == module.norm2.eps == module.norm3.eps:
        raise ValueError("the three layer norms must share eps")
    _check_attention(module.self_attn)
    _check_attention(module.multihead_attn)


def _decoder_shape(block):
    return (block.norm_first, block.self_attn.num_heads, block.multihead_attn.num_heads,
            block.linear1.out_features, block.norm1.eps)


def _empty_encoder_decoder(module, dtype):
    encoders, decoders = list(module.encoder_blocks), list(module.decoder_blocks)
    if not encoders or len(encoders) != len(decoders):
        raise ValueError(f"an EncoderDecoderModel has as many encoder as decoder blocks, at "
                         f"least one, got {len(encoders)} and {len(decoders)}")
    for i, block in enumerate(encoders):
        _check_encoder_layer(block)
        if _block_shape(block) != _block_shape(encoders[0]):
            raise ValueError(f"encoder block {i} differs from encoder block 0")
    for i, block in enumerate(decoders):
        _check_decoder_layer(block)
        if _decoder_shape(block) != _decoder_shape(decoders[0]):
            raise ValueError(f"decoder block {i} differs from decoder block 0")
    first, last = encoders[0], decoders[0]
    if (first.norm_first, first.self_attn.num_heads, first.linear1.out_features,
            first.norm1.eps) != (last.norm_first, last.self_attn.num_heads,
                                 last.linear1.out_features, last.norm1.eps):
        raise ValueError("the encoder and decoder blocks must share (norm_first, heads, "
                         "d_ff, eps)")
    norm = "pre" if first.norm_first else "post"
    for name in ("encoder_norm", "decoder_norm"):
        if (getattr(module, name) is not None) != (norm == "pre"):
            raise ValueError(f"EncoderDecoderModel has {name} exactly when its blocks are "
                             "pre-LN")
    return EncoderDecoderModel(vocab_size=module.source_embedding.num_embeddings,
                               target_vocab_size=module.target_embedding.num_embeddings,
                               d_model=module.source_embedding.embedding_dim,
                               n_heads=first.self_attn.num_heads,
                               d_ff=first.linear1.out_features, n_layers=len(encoders),
                               pad_id=module.pad_id, norm=norm, eps=first.norm1.eps,
                               dtype=dtype)


def _empty_layer(module):
    """A layer of the package's class for ``module``, of its sizes and dtype."""
    cls = _counterpart(module)
    dtype = _dtype(module)
    if cls is MultiHeadAttention:
        _check_attention(module)
        return MultiHeadAttention(module.embed_dim, module.num_heads,
                                  bias=module.in_proj_bias is not None, dtype=dtype)
    if cls is EncoderBlock:
        _check_encoder_layer(module)
        return EncoderBlock(module.self_attn.embed_dim, module.self_attn.num_heads,
                            module.linear1.out_features,
                            norm="pre" if module.norm_first else "post",
                            eps=module.norm1.eps, dtype=dtype)
    if cls is DecoderBlock:
        _check_decoder_layer(module)
        return DecoderBlock(module.self_attn.embed_dim, module.self_attn.num_heads,
                            module.linear1.out_features,
                            norm="pre" if module.norm_first else "post",
                            eps=module.norm1.eps, dtype=dtype)
    if cls is EncoderDecoderModel:
        return _empty_encoder_decoder(module, dtype)
    if cls is EncoderModel:
        blocks = list(module.blocks)
        if not blocks:
            raise ValueError("the model has no blocks")
        first = blocks[0]
        for i, block in enumerate(blocks):
            _check_encoder_layer(block)
            if _block_shape(block) != _block_shape(first):
                raise ValueError(f"block {i} differs from block 0 in {_block_shape(block)} "
                                 f"against {_block_shape(first)}: an EncoderModel's blocks "
                                 "share (norm_first, heads, d_ff, eps)")
        norm = "pre" if first.norm_first else "post"
        if (module.final_norm is not None) != (norm == "pre"):
            raise ValueError("EncoderModel has a final norm exactly when its blocks are pre-LN")
        return EncoderModel(vocab_size=module.embedding.num_embeddings,
                            n_classes=module.head.out_features,
                            d_model=module.embedding.embedding_dim,
                            n_heads=first.self_attn.num_heads,
                            d_ff=first.linear1.out_features, n_layers=len(blocks), norm=norm,
                            eps=first.norm1.eps, dtype=dtype)
    if cls is LayerNorm:
        if len(module.normalized_shape) != 1 or module.weight is None or module.bias is None:
            raise ValueError("only a LayerNorm over the last axis, with weight and bias, "
                             "is supported")
        return LayerNorm(module.normalized_shape[0], eps=module.eps, dtype=dtype)
    if cls is Linear:
        if module.bias is None:
            raise ValueError("only nn.Linear with a bias is supported")
        return Linear(module.in_features, module.out_features, dtype=dtype)
    if cls is Embedding:
        return Embedding(module.num_embeddings, module.embedding_dim, dtype=dtype)
    if cls is FeedForward:
        first, second = module[0], module[2]
        if first.bias is None or second.bias is None:
            raise ValueError("only a feed-forward network whose two nn.Linear have biases "
                             "is supported")
        if (second.in_features, second.out_features) != (first.out_features,
                                                          first.in_features):
            raise ValueError("the two nn.Linear must map d_model -> d_ff -> d_model")
        return FeedForward(first.in_features, first.out_features, dtype=dtype)
    if cls is RMSNorm:
        if len(module.normalized_shape) != 1 or module.weight is None:
            raise ValueError("only an RMSNorm over the last axis, with a weight, is supported")
        if module.eps is None:
            raise ValueError("RMSNorm(eps=None) takes its eps from the input's dtype; give "
                             "it one (the package's RMSNorm keeps its own)")
        return RMSNorm(module.normalized_shape[0], eps=module.eps, dtype=dtype)
    if cls is DecoderModel:
        config = dataclasses.asdict(module.config)
        return DecoderModel(**config, dtype=module.dtype)
    if cls is Dropout:
        return Dropout(module.p)
    raise AssertionError(f"unreachable: no empty layer for {cls.__name__}")


def _block_shape(block):
    return (block.norm_first, block.self_attn.num_heads, block.linear1.out_features,
            block.norm1.eps, block.norm2.eps)


def from_torch(module, cls=None):
    """The package's layer computing ``module``'s function, with its exact weights.

    Parameters
    ----------
    module : torch.nn.Module
        ``nn.MultiheadAttention`` (``kdim == vdim == embed_dim``, no ``add_bias_kv`` or
        ``add_zero_attn``; ``batch_first`` does not affect the weights) gives
        :class:`~scratchformer.MultiHeadAttention`; ``nn.TransformerEncoderLayer`` (ReLU,
        with biases; ``norm_first`` gives ``norm``) an :class:`~scratchformer.EncoderBlock`;
        ``nn.TransformerDecoderLayer`` (the same) a :class:`~scratchformer.DecoderBlock`;
        ``nn.LayerNorm``, ``nn.Linear``, ``nn.Embedding`` and ``nn.Sequential(Linear, ReLU,
        Linear)`` their counterparts; :class:`TorchEncoderModel` an
        :class:`~scratchformer.EncoderModel`, :class:`TorchEncoderDecoderModel` an
        :class:`~scratchformer.EncoderDecoderModel`, ``nn.RMSNorm`` (with an ``eps``) an
        :class:`~scratchformer.RMSNorm`, :class:`TorchDecoderModel` a
        :class:`~scratchformer.DecoderModel` and ``nn.Dropout`` a
        :class:`~scratchformer.Dropout` of its rate. The dropout of PyTorch's layers is not
        carried over (the blocks made have none: their evaluation function is PyTorch's).
        The exact type decides (a subclass is refused).
    cls : type, optional
        The class expected: a ``TypeError`` if ``module`` converts to another.

    Returns
    -------
    Layer
    """
    if cls is not None:
        sources = [f"torch.nn.{t.__name__}" if t.__module__.startswith("torch.") else t.__name__
                   for t, ours in _COUNTERPARTS.items() if ours is cls]
        if cls is FeedForward:
            sources = ["torch.nn.Sequential(Linear, ReLU, Linear)"]
        if not sources:
            raise TypeError(f"no PyTorch module converts to {cls.__name__}"
                            + (f": {NO_COUNTERPART[cls]}" if cls in NO_COUNTERPART else ""))
        if _counterpart(module) is not cls:
            raise TypeError(f"{cls.__name__} is converted from {sources[0]}, got "
                            f"{type(module).__name__} (which converts to "
                            f"{_counterpart(module).__name__})")
    layer = _empty_layer(module)
    layer.load_parameters(_values(module, _weights))
    return layer


def torch_gradients(module):
    """PyTorch's gradients of ``module``, in the package's names and layouts.

    Parameters
    ----------
    module : torch.nn.Module
        One that :func:`from_torch` converts, after ``backward()``: every parameter has a
        ``.grad``.

    Returns
    -------
    dict of str to ndarray
        Keyed like ``named_parameters()`` of ``from_torch(module)``: the splits and transposes
        that convert the weights convert the gradients.
    """
    return _values(module, _gradient)


# --- To PyTorch ---------------------------------------------------------------------------

def _set(parameter, array):
    parameter.copy_(_tensor(array))


def _write_linear(linear, w, b):
    _set(linear.weight, w.T)  # nn.Linear stores W^T
    _set(linear.bias, b)


def _write_norm(module, norm):
    _set(module.weight, norm.params["gamma"])
    _set(module.bias, norm.params["beta"])


def _write_attention(module, attention):
    p = attention.params
    # (3 d_model, d_model): [W_Q^T; W_K^T; W_V^T]
    _set(module.in_proj_weight, np.concatenate([p["w_q"].T, p["w_k"].T, p["w_v"].T]))
    _set(module.out_proj.weight, p["w_o"].T)
    if attention.bias:
        _set(module.in_proj_bias, np.concatenate([p["b_q"], p["b_k"], p["b_v"]]))
        _set(module.out_proj.bias, p["b_o"])


def _write_feed_forward(first, second, ffn):
    p = ffn.params
    _write_linear(first, p["w_1"], p["b_1"])
    _write_linear(second, p["w_2"], p["b_2"])


def _refuse_dropout(layer):
    """A block or model of the package with dropout > 0 has no exact PyTorch counterpart."""
    if getattr(layer, "dropout", 0.0) or getattr(getattr(layer, "config", None), "dropout", 0.0):
        raise ValueError(
            f"to_torch converts blocks and models without dropout only; this "
            f"{type(layer).__name__} has dropout > 0. PyTorch's layers drop at four places "
            "in training (the attention weights and the feed-forward network's hidden units "
            "too), the package's blocks at the sub-layers' outputs only, so no rate maps one "
            "training function onto the other. Their evaluation functions are equal: build "
            "the layer with dropout=0, load_parameters, and convert that")


def _encoder_layer(block, dtype):
    _refuse_dropout(block)
    module = torch.nn.TransformerEncoderLayer(
        block.d_model, block.attention.n_heads, block.ffn.params["w_1"].shape[1],
        dropout=0.0, activation="relu", layer_norm_eps=block.norm1.eps, batch_first=True,
        norm_first=block.norm == "pre", dtype=dtype)
    _write_attention(module.self_attn, block.attention)
    _write_feed_forward(module.linear1, module.linear2, block.ffn)
    _write_norm(module.norm1, block.norm1)
    _write_norm(module.norm2, block.norm2)
    return module


def _decoder_layer(block, dtype):
    _refuse_dropout(block)
    module = torch.nn.TransformerDecoderLayer(
        block.d_model, block.n_heads, block.ffn.params["w_1"].shape[1], dropout=0.0,
        activation="relu", layer_norm_eps=block.norm1.eps, batch_first=True,
        norm_first=block.norm == "pre", dtype=dtype)
    _write_attention(module.self_attn, block.self_attention)
    _write_attention(module.multihead_attn, block.cross_attention)
    _write_feed_forward(module.linear1, module.linear2, block.ffn)
    for name in ("norm1", "norm2", "norm3"):
        _write_norm(getattr(module, name), getattr(block, name))
    return module


def _norm_module(norm, dtype):
    if norm is None:
        return None
    module = torch.nn.LayerNorm(norm.params["gamma"].shape[0], eps=norm.eps, dtype=dtype)
    _write_norm(module, norm)
    return module


def _embedding_module(embedding, dtype):
    module = torch.nn.Embedding(*embedding.params["table"].shape, dtype=dtype)
    _set(module.weight, embedding.params["table"])
    return module


def _encoder_decoder(model, dtype):
    _refuse_dropout(model)
    c = model.config
    head = torch.nn.Linear(c.d_model, c.target_vocab_size, dtype=dtype)
    _write_linear(head, model.head.params["w"], model.head.params["b"])
    return TorchEncoderDecoderModel(
        _embedding_module(model.source_embedding, dtype),
        [_encoder_layer(block, dtype) for block in model.encoder_blocks],
        _norm_module(model.encoder_norm, dtype),
        _embedding_module(model.target_embedding, dtype),
        [_decoder_layer(block, dtype) for block in model.decoder_blocks],
        _norm_module(model.decoder_norm, dtype), head, c.pad_id)


#: The layers with no exact PyTorch counterpart, and why: converting them to their parent's module
#: would compute another function silently.
NO_COUNTERPART = {
    CausalSelfAttention: "nn.MultiheadAttention has no rotary positions, no grouped keys and "
                         "values and no cache; the decoder-only model's twin is "
                         "TorchDecoderModel (to_torch of a DecoderModel)",
    DecoderOnlyBlock: "PyTorch's layers have no decoder-only block (nn.TransformerDecoderLayer "
                      "attends to an encoder too); see TorchDecoderModel",
    SwiGLU: "PyTorch has no SwiGLU module (TorchDecoderModel computes it with F.silu)",
    LoRA: "PyTorch has no LoRA module (the PEFT library adds one); merge_lora folds the "
          "adapters into the projections, which convert",
}


def _module(layer, dtype):
    """A PyTorch module of ``layer``'s exact type and sizes, holding its weights."""
    kind = type(layer)
    if kind in NO_COUNTERPART:
        raise TypeError(f"no PyTorch module computes a {kind.__name__}: "
                        f"{NO_COUNTERPART[kind]}")
    if kind is MultiHeadAttention:
        if layer.n_kv_heads != layer.n_heads:
            raise ValueError(f"torch.nn.MultiheadAttention has no grouped-query attention: "
                             f"{layer!r} has n_kv_heads={layer.n_kv_heads} for "
                             f"n_heads={layer.n_heads}")
        module = torch.nn.MultiheadAttention(layer.d_model, layer.n_heads, bias=layer.bias,
                                             batch_first=True, dtype=dtype)
        _write_attention(module, layer)
        return module
    if kind is EncoderBlock:
        return _encoder_layer(layer, dtype)
    if kind is DecoderBlock:
        return _decoder_layer(layer, dtype)
    if kind is EncoderDecoderModel:
        return _encoder_decoder(layer, dtype)
    if kind is EncoderModel:
        c = layer.config
        embedding = torch.nn.Embedding(c.vocab_size, c.d_model, dtype=dtype)
        _set(embedding.weight, layer.embedding.params["table"])
        blocks = [_encoder_layer(block, dtype) for block in layer.blocks]
        final_norm = None
        if layer.final_norm is not None:
            final_norm = torch.nn.LayerNorm(c.d_model, eps=layer.final_norm.eps, dtype=dtype)
            _write_norm(final_norm, layer.final_norm)
        head = torch.nn.Linear(c.d_model, c.n_classes, dtype=dtype)
        _write_linear(head, layer.head.params["w"], layer.head.params["b"])
        return TorchEncoderModel(embedding, blocks, final_norm, head)
    if kind is LayerNorm:
        module = torch.nn.LayerNorm(layer.params["gamma"].shape[0], eps=layer.eps, dtype=dtype)
        _write_norm(module, layer)
        return module
    if kind in (Linear, FeedForward) and not any(k.startswith("b") for k in
                                                            layer.params):
        raise ValueError(f"to_torch converts {type(layer).__name__} with biases only; this "
                         "one has none")
    if kind is Linear:
        module = torch.nn.Linear(*layer.params["w"].shape, dtype=dtype)
        _write_linear(module, layer.params["w"], layer.params["b"])
        return module
    if kind is Embedding:
        module = torch.nn.Embedding(*layer.params["table"].shape, dtype=dtype)
        _set(module.weight, layer.params["table"])
        return module
    if kind is FeedForward:
        if layer.activation != "relu":
            raise ValueError(f"to_torch converts the ReLU network only (Sequential(Linear, "
                             f"ReLU, Linear)); this FeedForward uses {layer.activation!r}")
        d_model, d_ff = layer.params["w_1"].shape
        module = torch.nn.Sequential(torch.nn.Linear(d_model, d_ff, dtype=dtype),
                                     torch.nn.ReLU(),
                                     torch.nn.Linear(d_ff, d_model, dtype=dtype))
        _write_feed_forward(module[0], module[2], layer)
        return module
    if kind is RMSNorm:
        module = torch.nn.RMSNorm(layer.params["gamma"].shape[0], eps=layer.eps, dtype=dtype)
        _set(module.weight, layer.params["gamma"])
        return module
    if kind is DecoderModel:
        return TorchDecoderModel(layer)
    raise TypeError(f"no PyTorch counterpart for {kind.__name__} (the exact type: a "
                    "subclass computes a function of its own)")


def to_torch(layer):
    """The PyTorch module computing ``layer``'s function, with its exact weights.

    Batch-first wherever PyTorch asks, dropout 0, in evaluation mode (call ``.train()`` for
    autograd through ``nn.TransformerEncoderLayer``, whose evaluation fast path skips it). The
    inverse of :func:`from_torch`: ``from_torch(to_torch(layer))`` has the same parameters.

    The exact type decides: :class:`~scratchformer.MultiHeadAttention` gives
    ``nn.MultiheadAttention``, :class:`~scratchformer.EncoderBlock` and
    :class:`~scratchformer.DecoderBlock` PyTorch's encoder and decoder layers,
    :class:`~scratchformer.LayerNorm`, :class:`~scratchformer.RMSNorm`,
    :class:`~scratchformer.Linear`, :class:`~scratchformer.Embedding` and the ReLU
    :class:`~scratchformer.FeedForward` their modules, :class:`~scratchformer.Dropout`
    ``nn.Dropout`` of its rate, and the three models their twins
    (``scratchformer.pytorch.twins``). A block or model with ``dropout > 0`` raises a
    ``ValueError`` (see the module's docstring). A layer in :data:`NO_COUNTERPART` (or a subclass of
    any of these) raises a ``TypeError`` that says why.
    """
    if not isinstance(layer, Layer):
        raise TypeError(f"to_torch converts the package's layers, got {type(layer).__name__}")
    if type(layer) is Dropout:
        return torch.nn.Dropout(layer.p).eval()
    values = {name: owner.params[key] for name, owner, key in layer.named_parameters()}
    if not values:
        raise TypeError(f"no PyTorch counterpart for {type(layer).__name__} (no parameters)")
    dtype = _tensor(next(iter(values.values()))).dtype
    with torch.no_grad():
        module = _module(layer, dtype)
    # The writers above and the tables of from_torch must agree, name for name.
    back = _values(module, _weights)
    if back.keys() != values.keys() or not all(
            np.array_equal(back[name], values[name]) for name in values):
        raise RuntimeError(f"the conversion of {type(layer).__name__} does not round-trip")
    return module.eval()
