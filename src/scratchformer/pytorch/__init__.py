"""PyTorch, the reference the book's NumPy code is checked against: conversions and twins.

Imported only when asked for (``from scratchformer.pytorch import ...``): ``import
scratchformer`` never imports torch, and no other module of the package imports this one at
import time (``scratchformer.book.benchmarks`` imports it inside the functions that time
PyTorch). Two
jobs, one module each:

- :mod:`scratchformer.pytorch.conversions`: the package's layers to PyTorch's modules and
  back, with the exact weights (:func:`to_torch`, :func:`from_torch`), and PyTorch's gradients
  in the package's names (:func:`torch_gradients`), dispatched on the exact type;
- :mod:`scratchformer.pytorch.twins`: the book's models written again from PyTorch
  (:class:`TorchEncoderModel`, :class:`TorchEncoderDecoderModel`, :class:`TorchDecoderModel`).
"""

from __future__ import annotations

from .conversions import NO_COUNTERPART, from_torch, to_torch, torch_gradients
from .twins import TorchDecoderModel, TorchEncoderDecoderModel, TorchEncoderModel

__all__ = ["NO_COUNTERPART", "TorchDecoderModel", "TorchEncoderDecoderModel",
           "TorchEncoderModel", "from_torch", "to_torch", "torch_gradients"]
