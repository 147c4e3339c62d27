"""Train the book's models in NumPy: the loop, the recipes, the command line.

Three modules, one job each: :mod:`~scratchformer.train.loop` (:func:`train`, which takes any
model, a task and a :class:`TrainConfig`, and knows none of the book's models),
:mod:`~scratchformer.train.recipes` (the book's models and their settings, which the chapters
and the command line read) and :mod:`~scratchformer.train.cli` (``python -m
scratchformer.train``). The names of the first two are here. A seed fixes the initial weights,
the held-out sets and every batch, so a run repeats exactly on one machine with the same BLAS
library, kernel and number of threads; another of these rounds the matrix products
differently, and over hundreds of steps the differences grow into another trained model, as
another seed would (the book asserts only what holds over seeds, ``tests/test_seeds.py``).

The book's chapter "Training a Transformer in NumPy" (``book/training.md``) runs it;
"What the trained model learned" (``book/trained_attention.md``) reads the run.
"""

from __future__ import annotations

from .loop import TrainConfig, TrainResult, seed_streams, train, train_step
from .recipes import (
    ADDER_MODEL,
    ADDER_TRAINING,
    BOOK_MODEL,
    BOOK_TEXT_TRAINING,
    BOOK_TRAINING,
    TASKS,
    TEXT_MODEL,
    TEXT_TRAINING,
    TRANSLATION_CONFIG,
    adder_model,
    book_model,
    make_task,
    text_model,
)

__all__ = ["TASKS", "BOOK_MODEL", "BOOK_TRAINING", "ADDER_MODEL", "ADDER_TRAINING",
           "TRANSLATION_CONFIG", "TEXT_MODEL", "TEXT_TRAINING", "BOOK_TEXT_TRAINING",
           "TrainConfig", "TrainResult", "make_task", "book_model", "adder_model",
           "text_model", "seed_streams", "train_step", "train"]
