"""The problems the book's models learn: data, held-out sets, loss and score, one object each.

A task is what :func:`scratchformer.train.train` needs besides a model and an optimiser: it
draws the held-out sets once, draws training batches that never contain a held-out example,
computes the loss of a batch and its gradient (running the model's forward and backward), and
scores a held-out set. Each new kind of model (an encoder–decoder that translates, a decoder
that adds) comes with its task; the training loop stays the same.

The book's chapter "Training a Transformer in NumPy" (``book/training.md``) trains on
:class:`LabellingTask` (reversal), and "What the trained model learned"
(``book/trained_attention.md``) on its sorting too.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ._validation import choice, excluded, positive_int
from .model import cross_entropy

__all__ = ["Task", "Split", "LabellingTask"]


@dataclasses.dataclass(frozen=True)
class Split:
    """The held-out examples of a task, drawn once before training.

    Attributes
    ----------
    valid : tuple
        A batch in the task's format (for :class:`LabellingTask`: ``(tokens, targets)``).
    test : tuple
        The test batch, in the same format, disjoint from ``valid``.
    exclude : numpy.ndarray
        Sorted numbers (int64) of every held-out example, which training batches never
        contain.
    """

    valid: tuple
    test: tuple
    exclude: np.ndarray


class Task:
    """What a task provides to the training loop (subclasses implement every method)."""

    #: Short name used by the command line.
    name = "task"

    def split(self, rng, n_valid, n_test) -> Split:
        """Draw the validation and test sets (distinct examples, disjoint from each other)."""
        raise NotImplementedError

    def sample(self, rng, count, exclude) -> tuple:
        """A training batch of ``count`` examples, none of them in ``exclude``."""
        raise NotImplementedError

    def loss_and_backward(self, model, batch) -> float:
        """Run ``model`` forward on ``batch``, return the loss, and run its backward."""
        raise NotImplementedError

    def evaluate(self, model, batch) -> dict:
        """Scores on a held-out batch; the key ``"accuracy"`` is the headline number."""
        raise NotImplementedError

    def parts(self, batch, count):
        """``batch`` cut into at most ``count`` batches with weights, such that the loss of
        :meth:`loss_and_backward` on ``batch``, and every gradient it leaves, is the weighted
        sum of theirs: ``[(part, weight), ...]``. None (the default) where the loss does not
        cut so; the training loop then takes the batch whole."""
        return None


def parts_by_rows(batch, count):
    """:meth:`Task.parts` of a task whose loss is the mean over rows that each count the same
    number of terms: the arrays of ``batch`` cut into ``count`` groups of rows (fewer if there
    are fewer rows), each weighted by its share of the rows."""
    rows = len(batch[0])
    count = min(positive_int(count, "count"), rows)
    bounds = np.linspace(0, rows, count + 1).round().astype(int)
    return [(tuple(array[a:b] for array in batch), (b - a) / rows)
            for a, b in zip(bounds[:-1], bounds[1:])]


LABELLINGS = ("reverse", "sort")


@dataclasses.dataclass(frozen=True)
class LabellingTask(Task):
    """Label every position of a sequence of digits: reverse it, or sort it.

    ``reverse``: label ``i`` is token ``n - 1 - i``; ``sort``: label ``i`` is the ``i``-th
    smallest token. Neither can be solved without moving information between positions, so
    neither without attention. A batch is ``(tokens, targets)``, both ``(count, length)``.

    Attributes
    ----------
    kind : str
        ``"reverse"`` (default) or ``"sort"``.
    length : int
        Tokens per sequence, at least 2.
    vocab_size : int
        Digits ``0 .. vocab_size - 1``, at least 2; the labels are digits too.
    """

    kind: str = "reverse"
    length: int = 10
    vocab_size: int = 10

    def __post_init__(self):
        choice(self.kind, LABELLINGS, "kind")
        length = positive_int(self.length, "length")
        vocab_size = positive_int(self.vocab_size, "vocab_size")
        if length < 2 or vocab_size < 2:
            raise ValueError(f"need length >= 2 and vocab_size >= 2, got {length} and "
                             f"{vocab_size}")
        if vocab_size**length >= 2**62:
            raise ValueError("vocab_size**length must stay below 2**62 (sequences are "
                             "numbered to keep the held-out sets out of training)")

    @property
    def name(self):
        return self.kind

    @property
    def n_classes(self):
        return self.vocab_size

    @property
    def n_sequences(self):
        """How many different inputs there are."""
        return self.vocab_size**self.length

    def targets(self, tokens):
        """The labels of ``tokens`` (shape (..., n)): same shape."""
        if self.kind == "reverse":
            return tokens[..., ::-1].copy()
        return np.sort(tokens, axis=-1)

    def _numbers(self, tokens):
        """Each sequence as one integer (its digits in base ``vocab_size``)."""
        powers = self.vocab_size ** np.arange(tokens.shape[-1], dtype=np.int64)
        return tokens.astype(np.int64) @ powers

    def _draw(self, rng, count, exclude):
        """``count`` uniformly random sequences outside the sorted ``exclude``."""
        tokens = rng.integers(0, self.vocab_size, size=(count, self.length))
        if exclude.size == 0:
            return tokens
        while True:
            clash = np.isin(self._numbers(tokens), exclude)
            if not clash.any():
                return tokens
            tokens[clash] = rng.integers(0, self.vocab_size,
                                         size=(int(clash.sum()), self.length))

    def _distinct(self, rng, count, exclude):
        """``count`` distinct random sequences outside ``exclude``."""
        chosen = np.empty((0, self.length), dtype=np.int64)
        while len(chosen) < count:
            more = self._draw(rng, count - len(chosen), exclude)
            chosen = np.concatenate([chosen, more])
            _, first = np.unique(self._numbers(chosen), return_index=True)
            chosen = chosen[np.sort(first)]
        return chosen

    def split(self, rng, n_valid, n_test):
        n_valid, n_test = positive_int(n_valid, "n_valid"), positive_int(n_test, "n_test")
        if n_valid + n_test > self.n_sequences // 2:
            raise ValueError(f"the held-out sets ({n_valid} + {n_test}) would take up half "
                             f"of all {self.n_sequences} sequences")
        test = self._distinct(rng, n_test, np.empty(0, dtype=np.int64))
        exclude = np.sort(self._numbers(test))
        valid = self._distinct(rng, n_valid, exclude)
        exclude = np.sort(np.concatenate([exclude, self._numbers(valid)]))
        return Split(valid=(valid, self.targets(valid)), test=(test, self.targets(test)),
                     exclude=exclude)

    def sample(self, rng, count, exclude):
        exclude = excluded(exclude, self.n_sequences, "sequence")
        tokens = self._draw(rng, positive_int(count, "count"), exclude)
        return tokens, self.targets(tokens)

    def parts(self, batch, count):
        """Rows: every sequence has ``length`` tokens, each a term of the mean."""
        return parts_by_rows(batch, count)

    def loss_and_backward(self, model, batch):
        tokens, targets = batch
        loss, d_logits = cross_entropy(model.forward(tokens), targets)
        model.backward(d_logits)
        return loss

    def evaluate(self, model, batch, batch_size=500):
        """``accuracy`` (of tokens) and ``sequence_accuracy`` (whole sequences right)."""
        tokens, targets = batch
        correct = []
        with model.inference():
            for start in range(0, len(tokens), batch_size):
                logits = model.forward(tokens[start:start + batch_size])
                correct.append(logits.argmax(axis=-1) == targets[start:start + batch_size])
        correct = np.concatenate(correct)  # (count, n) of bool
        return {"accuracy": float(correct.mean()),
                "sequence_accuracy": float(correct.all(axis=-1).mean())}
