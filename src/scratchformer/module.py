"""The contract every trainable layer follows: parameters, gradients, forward, backward.

The book's chapter "Backpropagation through attention" (``book/backpropagation.md``) derives
each layer's backward pass and checks it two ways.

- ``params``: a dict of plain arrays owned by this layer (each layer has its own dict), read
  and written directly; :meth:`Layer.load_parameters` replaces them all after checking names,
  shapes and values.
- ``forward(...)`` returns the output array and saves what the backward pass needs (the last
  call's intermediates only: a new forward replaces them). Inside ``with layer.inference():``
  it saves nothing, for generation and evaluation.
- ``backward(dy)`` takes the gradient of the loss with respect to the output of that forward
  and returns one gradient per array input of ``forward``, in order: ``dx`` for a layer of one
  input, ``(dx, d_context)`` for attention from ``x`` to a second sequence. Integer token ids
  and masks have no gradient. It sets ``grads`` to a dict with the parameters' names and
  shapes; gradients are overwritten, not accumulated; the saved intermediates are released,
  so each forward serves one backward.
- Layers made of layers list them in ``children()``; :meth:`Layer.named_parameters` walks the
  tree, which is how the optimiser and the gradient checks find every parameter.
- Sharing is forbidden: a parameter array (or a view of one) may belong to one layer only, and
  a layer may appear once in a tree. Tying two weights (an embedding and an output head, say)
  would need their gradients summed into one update; rather than do that silently for some
  optimisers and not others, :meth:`Layer.named_parameters` raises ``ValueError`` naming both
  places.
"""

from __future__ import annotations

import contextlib

import numpy as np

__all__ = ["Layer"]


def _owner(array):
    """The array that owns the memory of ``array`` (itself, or the base of a view)."""
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array


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

    def __init__(self):
        self.params = {}
        self.grads = None
        self._saved = None  # what forward keeps for backward
        self._inference = False

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
            If one array (or views of one array) is the parameter of two places, or one layer
            appears twice: shared parameters are not supported (see the module's docstring).
        """
        owners = {}
        for path, layer in self._tree(prefix):
            for key, array in layer.params.items():
                name = path + key
                if not isinstance(array, np.ndarray):
                    raise TypeError(f"parameter {name} must be a NumPy array, got "
                                    f"{type(array).__name__}")
                root = id(_owner(array))
                if root in owners:
                    raise ValueError(
                        f"parameters {owners[root]} and {name} share memory: tied or shared "
                        "parameters are not supported (give each layer its own array)")
                owners[root] = name
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
            if not np.isfinite(value).all():
                raise ValueError(f"{name} must be finite, got NaN or infinite entries")
            new[name] = np.array(value, dtype=current.dtype, copy=True)
        for name, (layer, key) in places.items():
            layer.params[key] = new[name]
            layer.grads = None

    @classmethod
    def from_torch(cls, module):
        """A layer of this class with the exact weights of a PyTorch module.

        A thin entry point to :func:`scratchformer.pytorch.from_torch`, where every conversion
        lives (and which says which module each class takes); PyTorch is imported only now.
        """
        from .pytorch import from_torch

        return from_torch(module, cls)

    def to_torch(self):
        """The PyTorch module that computes this layer's function with these exact weights.

        A thin entry point to :func:`scratchformer.pytorch.to_torch`.
        """
        from .pytorch import to_torch

        return to_torch(self)

    @contextlib.contextmanager
    def inference(self):
        """Within this context, ``forward`` of this layer and its children saves nothing.

        For evaluation and generation: no intermediates are kept (attention's weights are not
        even formed), so memory stays that of the output; ``backward`` then raises. The
        previous mode is restored on exit, whatever happens inside.
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
