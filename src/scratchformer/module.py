"""The contract every trainable layer follows: parameters, gradients, forward, backward.

The book's chapter "Backpropagation through attention" (``book/backpropagation.md``)
derives each layer's backward pass and checks it two ways.

- ``params``: a dict of plain arrays owned by this layer (each layer has its own
  dict), read and written directly; ``load_parameters`` replaces them all after
  checking names, shapes and values.
- ``forward(...)`` returns the output array and saves what the backward pass needs
  (the last call's intermediates only: a new forward replaces them). Inside
  ``with layer.inference():`` it saves nothing, for generation and evaluation.
- ``backward(dy)`` takes the gradient of the loss with respect to the output of that
  forward and returns one gradient per array input of ``forward``, in order: ``dx``
  for a layer of one input, ``(dx, d_context)`` for attention from ``x`` to a second
  sequence. Integer token ids and masks have no gradient. It sets ``grads`` to a dict
  with the parameters' names and shapes; gradients are overwritten, not accumulated;
  the saved intermediates are released, so each forward serves one backward.
- Layers made of layers list them in ``children()``; ``named_parameters`` walks the
  tree, which is how the optimiser and the gradient checks find every parameter.
- A frozen layer (:meth:`Layer.freeze`, for fine-tuning) is not trained: its ``backward``
  still returns the gradient of its inputs, but the optimiser reads only
  ``trainable_parameters()``, which leaves it out; the layers of a Llama-style model then
  compute no gradient for their parameters at all (``grads`` stays None), which saves the
  time and memory of them.
- Sharing is forbidden: two parameters may not overlap in memory, and a layer may
  appear once in a tree. Tying two weights (an embedding and an output head, say)
  would need their gradients summed into one update; rather than do that silently
  for some optimisers and not others, ``named_parameters`` raises ``ValueError``
  naming both places.
"""

from __future__ import annotations

import contextlib

import numpy as np
from numpy.lib.array_utils import byte_bounds

__all__ = ["Layer"]


def _check_no_overlap(entries):
    """Raise ``ValueError`` if two of ``(name, array)`` share memory.

    A sweep over the arrays' byte ranges (``O(p log p)`` for ``p`` parameters, so it can
    run at every optimiser step); only ranges that overlap are compared exactly
    (``np.shares_memory``), so disjoint slices of one buffer are not refused.
    """
    spans = sorted((*byte_bounds(array), name, array) for name, array in entries
                   if array.size)
    open_spans = []  # (end, name, array) of the ranges that may still overlap
    for start, end, name, array in spans:
        open_spans = [span for span in open_spans if span[0] > start]
        for _, other, other_array in open_spans:
            if np.shares_memory(array, other_array):
                raise ValueError(
                    f"parameters {other} and {name} share memory: tied or shared "
                    "parameters are not supported (give each layer its own array)")
        open_spans.append((end, name, array))


class Layer:
    """Base class of the trainable layers.

    The contract: ``forward`` returns the output and saves what ``backward`` needs;
    ``backward(dy)`` returns one gradient per array input of ``forward`` (``dx``, or
    ``(dx, d_context)`` for cross-attention) and sets ``grads``, with the names and shapes of
    ``params`` (overwritten, not accumulated); each forward serves one backward. Explained in
    the chapter :doc:`Backpropagation through attention </book/backpropagation>`.

    Attributes
    ----------
    params : dict of str to ndarray
        The layer's own parameters (empty for a layer made only of other layers); every
        instance owns its dict.
    grads : dict of str to ndarray or None
        Gradients of the loss, same keys and shapes as ``params``; None until the first
        ``backward``.
    """

    # Defaults for a subclass that forgets super().__init__() (params must be its own).
    grads = None
    frozen = False  # True: not trained (freeze())
    _saved = None  # what forward keeps for backward
    _inference = False

    def __init__(self):
        self.params = {}
        self.grads = None
        self.frozen = False
        self._saved = None
        self._inference = False

    def freeze(self, frozen=True):
        """Mark this layer and every layer below it as not trained (``frozen=False``: as
        trained again); returns the layer.

        Their ``backward`` still passes the gradient on to the layers before them, but
        :meth:`trainable_parameters`, which the optimiser reads, leaves their parameters out.
        A layer added below later (a LoRA adapter, :func:`~scratchformer.add_lora`) is trained
        unless frozen in turn.
        """
        for _, layer in self._tree():
            layer.frozen = bool(frozen)
            layer.grads = None
        return self

    def children(self) -> dict:
        """The layers this layer is made of, by name (none for a leaf layer)."""
        return {}

    def _tree(self, prefix=""):
        """Yield ``(prefix, layer)`` for this layer and every layer below it."""
        yield prefix, self
        for name, child in self.children().items():
            yield from child._tree(f"{prefix}{name}.")

    def named_parameters(self, prefix=""):
        """Yield ``(name, layer, key)`` for every parameter in this layer and its children.

        ``layer.params[key]`` is the array and, after a backward pass, ``layer.grads[key]``
        its gradient. Names are dotted paths such as ``"blocks.0.attention.w_q"``.

        Raises
        ------
        ValueError
            If two parameters overlap in memory, or one layer appears twice: shared
            parameters are not supported (see the module's docstring). Checked before
            anything is yielded.
        """
        found, seen = [], set()
        for path, layer in self._tree(prefix):
            if id(layer) in seen:
                raise ValueError(f"the layer at {path.rstrip('.')} appears twice in the "
                                 "tree: shared layers (and their parameters) are not "
                                 "supported")
            seen.add(id(layer))
            for key, array in layer.params.items():
                if not isinstance(array, np.ndarray):
                    raise TypeError(f"parameter {path + key} must be a NumPy array, got "
                                    f"{type(array).__name__}")
                found.append((path + key, layer, key))
        _check_no_overlap((name, layer.params[key]) for name, layer, key in found)
        yield from found

    def trainable_parameters(self, prefix=""):
        """:meth:`named_parameters` without those of frozen layers (:meth:`freeze`): what the
        optimiser trains and the gradient's norm is taken over."""
        for name, layer, key in self.named_parameters(prefix):
            if not layer.frozen:
                yield name, layer, key

    @property
    def num_parameters(self):
        """Number of scalar parameters, children included."""
        return sum(layer.params[key].size for _, layer, key in self.named_parameters())

    def load_parameters(self, values):
        """Replace every parameter by a copy of ``values[name]``, after checking them all.

        Parameters
        ----------
        values : dict of str to array_like
            One entry per name of :meth:`named_parameters`, of that parameter's shape, real and
            finite; each is copied and cast to the parameter's dtype.

        Raises
        ------
        ValueError
            For a missing or unexpected name, a wrong shape, or a NaN or infinity; nothing is
            changed then.
        TypeError
            For a value that is not real (complex, object, string).
        """
        places = {name: (layer, key) for name, layer, key in self.named_parameters()}
        missing = sorted(set(places) - set(values))
        unexpected = sorted(set(values) - set(places))
        if missing or unexpected:
            raise ValueError(f"load_parameters needs exactly the names of named_parameters(): "
                             f"missing {missing}, unexpected {unexpected}")
        new = {}
        for name, (layer, key) in places.items():
            value = np.asarray(values[name])
            current = layer.params[key]
            if value.dtype == np.bool_ or not (np.issubdtype(value.dtype, np.floating)
                                               or np.issubdtype(value.dtype, np.integer)):
                raise TypeError(f"{name} must be real, got dtype {value.dtype}")
            if value.shape != current.shape:
                raise ValueError(f"{name} must have shape {current.shape}, got {value.shape}")
            converted = np.array(value, dtype=current.dtype, copy=True)
            if not (np.isfinite(value).all() and np.isfinite(converted).all()):
                raise ValueError(f"{name} must be finite (also in {current.dtype}), got NaN "
                                 "or infinite entries")
            new[name] = converted
        for name, (layer, key) in places.items():
            layer.params[key] = new[name]
            layer.grads = None

    @contextlib.contextmanager
    def inference(self):
        """Within this context, ``forward`` of this layer and its children saves nothing.

        For evaluation and generation: no intermediates are kept (attention's weights are not
        even formed), so memory stays that of the output; ``backward`` then raises. Entering
        releases what an earlier forward saved (a backward after the block needs a new
        forward). The previous mode is restored on exit, whatever happens inside, so the
        contexts nest.
        """
        layers = [layer for _, layer in self._tree()]
        previous = [layer._inference for layer in layers]
        for layer in layers:
            layer._inference = True
            layer._saved = None
        try:
            yield self
        finally:
            for layer, mode in zip(layers, previous):
                layer._inference = mode

    @property
    def saves_for_backward(self):
        """False inside :meth:`inference`, where ``forward`` keeps nothing."""
        return not self._inference

    def _save(self, **intermediates):
        """Called by ``forward``: remember what ``backward`` will need (unless inferring)."""
        if not self._inference:
            self._saved = intermediates

    def _saved_for_backward(self):
        """Called by ``backward``: hand over (and release) what ``forward`` saved."""
        saved = self._saved
        if saved is None:
            raise RuntimeError(
                f"{type(self).__name__}.backward needs a forward pass first, outside "
                "inference() (each forward serves one backward)")
        self._saved = None
        return saved
