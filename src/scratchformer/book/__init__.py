"""The book's tooling: what the chapters use to show, time and inspect the model.

Figures (:mod:`~scratchformer.book.plotting` and the architecture diagram of
:mod:`~scratchformer.book.diagram`, the only modules of the package that import matplotlib),
tables, among them the model and settings of a training run, and the glue that hands computed
values to the text (:mod:`~scratchformer.book.display`), timing and memory measurements
(:mod:`~scratchformer.book.timing`), the speed comparisons against PyTorch
(:mod:`~scratchformer.book.benchmarks`), gradient diagnostics
(:mod:`~scratchformer.book.diagnostics`), training runs shared by the chapters of a build
(:mod:`~scratchformer.book.runs`) and the recurrent network of the first chapter
(:mod:`~scratchformer.book.rnn`). None of it is needed to build or train a model; the chapters
import it as ``from scratchformer import book as sfb``.
"""

from .diagnostics import BLOCK_WEIGHTS, block_gradient_norms, gradient_norms, stream_scales
from .diagram import architecture
from .display import glue, markdown_table, run_settings, weights_table
from .plotting import (
    attention_heads,
    attention_heatmap,
    attention_layers,
    curves,
    mask_panels,
    matrix_heatmap,
    search_tree,
)
from .rnn import rnn_influence
from .runs import book_seed, train_once
from .timing import interleaved_medians, interleaved_times, peak_allocated

__all__ = [
    "BLOCK_WEIGHTS",
    "architecture",
    "attention_heads",
    "attention_heatmap",
    "attention_layers",
    "block_gradient_norms",
    "book_seed",
    "curves",
    "glue",
    "gradient_norms",
    "interleaved_medians",
    "interleaved_times",
    "markdown_table",
    "mask_panels",
    "matrix_heatmap",
    "peak_allocated",
    "rnn_influence",
    "run_settings",
    "search_tree",
    "stream_scales",
    "train_once",
    "weights_table",
]
