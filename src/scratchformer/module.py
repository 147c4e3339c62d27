"""The contract every trainable layer follows: parameters, gradients, forward, backward.

The book's chapter "Backpropagation through attention" (``book/backpropagation.md``) derives
each layer's backward pass and checks it two ways.

- ``params``: a dict of plain arrays, read and written directly (and copied to and from PyTorch
  by the layers' ``from_torch`` and ``to_torch``).
- ``forward(x)`` computes the output and keeps what the backward pass needs (the last call's
  intermediates only: a new forward replaces them).
- ``backward(dy)`` takes the gradient of the loss with respect to the output of that forward,
  returns the gradient with respect to its input, and sets ``grads`` to a dict with the
  parameters' names and shapes. Gradients are overwritten, not accumulated; the kept
  intermediates are released, so each forward serves one backward.
- Layers made of layers list them in ``children()``; :meth:`Layer.named_parameters` walks the
  tree, which is how the optimiser and the gradient checks find every parameter.
"""

from __future__ import annotations

__all__ = ["Layer"]


class Layer:
    """Base class of the trainable layers.

    The contract: ``forward`` keeps what ``backward`` needs; ``backward(dy)`` returns the
    gradient for the input and sets ``grads``, with the names and shapes of ``params``
    (overwritten, not accumulated); each forward serves one backward. Explained in the chapter
    :doc:`Backpropagation through attention </book/backpropagation>`.

    Attributes
    ----------
    params : dict of str to ndarray
        The layer's own parameters (empty for a layer made only of other layers).
    grads : dict of str to ndarray or None
        Gradients of the loss, same keys and shapes as ``params``; None until the first
        ``backward``.
    """

    params: dict = {}
    grads: dict | None = None
    _cache = None

    def children(self) -> dict:
        """The layers this layer is made of, by name (none for a leaf layer)."""
        return {}

    def named_parameters(self, prefix=""):
        """Yield ``(name, layer, key)`` for every parameter in this layer and its children.

        ``layer.params[key]`` is the array and, after a backward pass, ``layer.grads[key]``
        its gradient. Names are dotted paths such as ``"blocks.0.attention.w_q"``.
        """
        for key in self.params:
            yield prefix + key, self, key
        for name, child in self.children().items():
            yield from child.named_parameters(f"{prefix}{name}.")

    @property
    def num_parameters(self):
        """Number of scalar parameters, children included."""
        return sum(layer.params[key].size for _, layer, key in self.named_parameters())

    def _keep(self, **intermediates):
        """Called by ``forward``: remember what ``backward`` will need."""
        self._cache = intermediates

    def _take(self):
        """Called by ``backward``: hand over (and release) what ``forward`` kept."""
        cache = self._cache
        if cache is None:
            raise RuntimeError(
                f"{type(self).__name__}.backward needs a forward pass first "
                "(each forward serves one backward)")
        self._cache = None
        return cache
