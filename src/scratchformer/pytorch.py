"""Every conversion between the package's layers and PyTorch's modules, in one place.

Imported only when asked for (``Layer.from_torch``, ``layer.to_torch()``, or this module
directly): ``import scratchformer`` never imports torch. The book's chapters use PyTorch as the
reference the NumPy code is checked against, to float64 precision.

The conversions are exact: the weights are copied, transposed where PyTorch stores ``W^T``
(``nn.Linear`` computes ``x @ weight.T``) and split where it packs the three input projections
of attention into one ``(3 d_model, d_model)`` matrix. One table of names per module type (the
``_*_values`` functions) serves two purposes: copying weights in (:func:`from_torch`) and
reading PyTorch's gradients in the package's layout (:func:`torch_gradients`). Copying weights
out (:func:`to_torch`) has writers of its own (the ``_write_*`` functions), and every module it
makes is read back through the tables and compared, so the two directions cannot drift apart.
Dropout is never carried over: a converted module computes its evaluation-mode function, and
modules made here have dropout 0.

PyTorch's conventions differ from the book's in ways that matter for a cross-check: its
boolean attention masks mean "blocked" (the book's mean "may attend"), and ``nn.Transformer``
adds a final layer norm even after post-LN layers; these converters build the layers alone.
"""

from __future__ import annotations

import numpy as np
import torch

from .decoder import DecoderBlock
from .encoder import EncoderBlock
from .layers import Embedding, FeedForward, LayerNorm, Linear
from .model import EncoderModel
from .multihead import MultiHeadAttention
from .positional import positional_encoding
from .seq2seq import EncoderDecoderModel

__all__ = ["from_torch", "to_torch", "torch_gradients", "TorchEncoderModel",
           "TorchEncoderDecoderModel"]


class TorchEncoderModel(torch.nn.Module):
    """The PyTorch twin of :class:`scratchformer.EncoderModel`.

    Embedding, the same sinusoidal positions, ``nn.TransformerEncoderLayer`` blocks (batch
    first), a final ``nn.LayerNorm`` for pre-LN models only, and a linear head; ``forward``
    takes a ``LongTensor`` of shape ``(..., n)`` and returns the logits.
    """

    def __init__(self, embedding, blocks, final_norm, head):
        super().__init__()
        self.embedding = embedding
        self.blocks = torch.nn.ModuleList(blocks)
        self.final_norm = final_norm
        self.head = head

    def forward(self, tokens):
        """Logits ``(..., n, n_classes)`` of a ``LongTensor`` of token ids ``(..., n)``."""
        n, d_model = tokens.shape[-1], self.embedding.embedding_dim
        pe = torch.from_numpy(positional_encoding(n, d_model))
        x = self.embedding(tokens) + pe.to(self.embedding.weight.dtype)
        for block in self.blocks:
            x = block(x)
        if self.final_norm is not None:
            x = self.final_norm(x)
        return self.head(x)


class TorchEncoderDecoderModel(torch.nn.Module):
    """The PyTorch twin of :class:`scratchformer.EncoderDecoderModel`.

    Two embeddings with the same sinusoidal positions, ``nn.TransformerEncoderLayer`` and
    ``nn.TransformerDecoderLayer`` blocks (batch first) run one by one (``nn.Transformer``
    would add final layer norms to post-LN stacks too), final ``nn.LayerNorm`` s for pre-LN
    models only, and a linear head. ``forward(source, target)`` takes ``LongTensor`` s
    ``(batch, n_s)`` and ``(batch, n_t)`` and builds PyTorch's masks, whose True means
    *blocked*: padded keys, and the future in the decoder's self-attention.
    """

    def __init__(self, source_embedding, encoder_blocks, encoder_norm, target_embedding,
                 decoder_blocks, decoder_norm, head, pad_id):
        super().__init__()
        self.source_embedding = source_embedding
        self.encoder_blocks = torch.nn.ModuleList(encoder_blocks)
        self.encoder_norm = encoder_norm
        self.target_embedding = target_embedding
        self.decoder_blocks = torch.nn.ModuleList(decoder_blocks)
        self.decoder_norm = decoder_norm
        self.head = head
        self.pad_id = pad_id

    def _embed(self, embedding, tokens):
        pe = torch.from_numpy(positional_encoding(tokens.shape[-1], embedding.embedding_dim))
        return embedding(tokens) + pe.to(embedding.weight.dtype)

    def forward(self, source, target):
        """Teacher-forced logits ``(batch, n_t, target_vocab_size)``."""
        source_pad = source == self.pad_id  # True = blocked
        target_pad = target == self.pad_id
        n_t = target.shape[-1]
        future = torch.ones(n_t, n_t, dtype=torch.bool).triu(1)  # True = blocked
        x = self._embed(self.source_embedding, source)
        for block in self.encoder_blocks:
            x = block(x, src_key_padding_mask=source_pad)
        if self.encoder_norm is not None:
            x = self.encoder_norm(x)
        y = self._embed(self.target_embedding, target)
        for block in self.decoder_blocks:
            y = block(y, x, tgt_mask=future, tgt_key_padding_mask=target_pad,
                      memory_key_padding_mask=source_pad)
        if self.decoder_norm is not None:
            y = self.decoder_norm(y)
        return self.head(y)


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
    """An ``nn.Sequential(Linear, ReLU, Linear)``, as :func:`to_torch` makes of FeedForward."""
    return (isinstance(module, torch.nn.Sequential) and len(module) == 3
            and isinstance(module[0], torch.nn.Linear) and isinstance(module[1], torch.nn.ReLU)
            and isinstance(module[2], torch.nn.Linear))


def _values(module, get):
    """The package's names and values for ``module``'s parameters (or gradients)."""
    if isinstance(module, torch.nn.MultiheadAttention):
        return _attention_values(module, get)
    if isinstance(module, torch.nn.TransformerEncoderLayer):
        return _encoder_layer_values(module, get)
    if isinstance(module, TorchEncoderModel):
        return _encoder_model_values(module, get)
    if isinstance(module, torch.nn.TransformerDecoderLayer):
        return _decoder_layer_values(module, get)
    if isinstance(module, TorchEncoderDecoderModel):
        return _encoder_decoder_values(module, get)
    if isinstance(module, torch.nn.LayerNorm):
        return _layer_norm_values(module, get)
    if isinstance(module, torch.nn.Linear):
        return _linear_values(module, get)
    if isinstance(module, torch.nn.Embedding):
        return _embedding_values(module, get)
    if _is_feed_forward(module):
        return _feed_forward_values(module[0], module[2], get)
    raise TypeError(f"no conversion from {type(module).__name__}; supported: "
                    "MultiheadAttention, TransformerEncoderLayer, TransformerDecoderLayer, "
                    "LayerNorm, Linear, Embedding, Sequential(Linear, ReLU, Linear), "
                    "TorchEncoderModel, TorchEncoderDecoderModel")


# --- From PyTorch -------------------------------------------------------------------------

def _dtype(module):
    return next(module.parameters()).detach().numpy().dtype


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
    if not any(accepts(module) for _, accepts in _TWINS.values()):
        _values(module, _weights)  # raises the TypeError that lists what is supported
    dtype = _dtype(module)
    if isinstance(module, torch.nn.MultiheadAttention):
        _check_attention(module)
        return MultiHeadAttention(module.embed_dim, module.num_heads,
                                  bias=module.in_proj_bias is not None, dtype=dtype)
    if isinstance(module, torch.nn.TransformerEncoderLayer):
        _check_encoder_layer(module)
        return EncoderBlock(module.self_attn.embed_dim, module.self_attn.num_heads,
                            module.linear1.out_features,
                            norm="pre" if module.norm_first else "post",
                            eps=module.norm1.eps, dtype=dtype)
    if isinstance(module, torch.nn.TransformerDecoderLayer):
        _check_decoder_layer(module)
        return DecoderBlock(module.self_attn.embed_dim, module.self_attn.num_heads,
                            module.linear1.out_features,
                            norm="pre" if module.norm_first else "post",
                            eps=module.norm1.eps, dtype=dtype)
    if isinstance(module, TorchEncoderDecoderModel):
        return _empty_encoder_decoder(module, dtype)
    if isinstance(module, TorchEncoderModel):
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
    if isinstance(module, torch.nn.LayerNorm):
        if len(module.normalized_shape) != 1 or module.weight is None or module.bias is None:
            raise ValueError("only a LayerNorm over the last axis, with weight and bias, "
                             "is supported")
        return LayerNorm(module.normalized_shape[0], eps=module.eps, dtype=dtype)
    if isinstance(module, torch.nn.Linear):
        if module.bias is None:
            raise ValueError("only nn.Linear with a bias is supported")
        return Linear(module.in_features, module.out_features, dtype=dtype)
    if isinstance(module, torch.nn.Embedding):
        return Embedding(module.num_embeddings, module.embedding_dim, dtype=dtype)
    if _is_feed_forward(module):
        first, second = module[0], module[2]
        if first.bias is None or second.bias is None:
            raise ValueError("only a feed-forward network whose two nn.Linear have biases "
                             "is supported")
        if (second.in_features, second.out_features) != (first.out_features,
                                                          first.in_features):
            raise ValueError("the two nn.Linear must map d_model -> d_ff -> d_model")
        return FeedForward(first.in_features, first.out_features, dtype=dtype)
    raise AssertionError("unreachable: _TWINS and this function list the same modules")


def _block_shape(block):
    return (block.norm_first, block.self_attn.num_heads, block.linear1.out_features,
            block.norm1.eps, block.norm2.eps)


#: The PyTorch module each class converts from, and how to recognise it.
_TWINS = {
    MultiHeadAttention: ("torch.nn.MultiheadAttention",
                         lambda m: isinstance(m, torch.nn.MultiheadAttention)),
    EncoderBlock: ("torch.nn.TransformerEncoderLayer",
                   lambda m: isinstance(m, torch.nn.TransformerEncoderLayer)),
    EncoderModel: ("the TorchEncoderModel that EncoderModel.to_torch makes",
                   lambda m: isinstance(m, TorchEncoderModel)),
    DecoderBlock: ("torch.nn.TransformerDecoderLayer",
                   lambda m: isinstance(m, torch.nn.TransformerDecoderLayer)),
    EncoderDecoderModel: ("the TorchEncoderDecoderModel that EncoderDecoderModel.to_torch "
                          "makes", lambda m: isinstance(m, TorchEncoderDecoderModel)),
    LayerNorm: ("torch.nn.LayerNorm", lambda m: isinstance(m, torch.nn.LayerNorm)),
    Linear: ("torch.nn.Linear", lambda m: isinstance(m, torch.nn.Linear)),
    Embedding: ("torch.nn.Embedding", lambda m: isinstance(m, torch.nn.Embedding)),
    FeedForward: ("torch.nn.Sequential(Linear, ReLU, Linear)", _is_feed_forward),
}


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
        :class:`~scratchformer.EncoderModel` and :class:`TorchEncoderDecoderModel` an
        :class:`~scratchformer.EncoderDecoderModel`.
    cls : type, optional
        The class expected (``EncoderBlock.from_torch`` passes its own): a ``TypeError`` if
        ``module`` converts to another.

    Returns
    -------
    Layer
    """
    if cls is not None and cls in _TWINS:
        twin, accepts = _TWINS[cls]
        if not accepts(module):
            raise TypeError(f"{cls.__name__}.from_torch expects {twin}, got "
                            f"{type(module).__name__}")
    layer = _empty_layer(module)
    if cls is not None and not isinstance(layer, cls):
        raise TypeError(f"{cls.__name__}.from_torch cannot take a {type(module).__name__} "
                        f"(it converts to {type(layer).__name__})")
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


def _encoder_layer(block, dtype):
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


def _module(layer, dtype):
    """A PyTorch module of ``layer``'s type and sizes, holding its weights."""
    if isinstance(layer, MultiHeadAttention):
        if layer.n_kv_heads != layer.n_heads:
            raise ValueError(f"torch.nn.MultiheadAttention has no grouped-query attention: "
                             f"{layer!r} has n_kv_heads={layer.n_kv_heads} for "
                             f"n_heads={layer.n_heads}")
        module = torch.nn.MultiheadAttention(layer.d_model, layer.n_heads, bias=layer.bias,
                                             batch_first=True, dtype=dtype)
        _write_attention(module, layer)
        return module
    if isinstance(layer, EncoderBlock):
        return _encoder_layer(layer, dtype)
    if isinstance(layer, DecoderBlock):
        return _decoder_layer(layer, dtype)
    if isinstance(layer, EncoderDecoderModel):
        return _encoder_decoder(layer, dtype)
    if isinstance(layer, EncoderModel):
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
    if isinstance(layer, LayerNorm):
        module = torch.nn.LayerNorm(layer.params["gamma"].shape[0], eps=layer.eps, dtype=dtype)
        _write_norm(module, layer)
        return module
    if isinstance(layer, (Linear, FeedForward)) and not any(k.startswith("b") for k in
                                                            layer.params):
        raise ValueError(f"to_torch converts {type(layer).__name__} with biases only; this "
                         "one has none")
    if isinstance(layer, Linear):
        module = torch.nn.Linear(*layer.params["w"].shape, dtype=dtype)
        _write_linear(module, layer.params["w"], layer.params["b"])
        return module
    if isinstance(layer, Embedding):
        module = torch.nn.Embedding(*layer.params["table"].shape, dtype=dtype)
        _set(module.weight, layer.params["table"])
        return module
    if isinstance(layer, FeedForward):
        if layer.activation != "relu":
            raise ValueError(f"to_torch converts the ReLU network only (Sequential(Linear, "
                             f"ReLU, Linear)); this FeedForward uses {layer.activation!r}")
        d_model, d_ff = layer.params["w_1"].shape
        module = torch.nn.Sequential(torch.nn.Linear(d_model, d_ff, dtype=dtype),
                                     torch.nn.ReLU(),
                                     torch.nn.Linear(d_ff, d_model, dtype=dtype))
        _write_feed_forward(module[0], module[2], layer)
        return module
    raise TypeError(f"no PyTorch counterpart for {type(layer).__name__}")


def to_torch(layer):
    """The PyTorch module computing ``layer``'s function, with its exact weights.

    Batch-first wherever PyTorch asks, dropout 0, in evaluation mode (call ``.train()`` for
    autograd through ``nn.TransformerEncoderLayer``, whose evaluation fast path skips it). The
    inverse of :func:`from_torch`: ``from_torch(to_torch(layer))`` has the same parameters.
    """
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
