"""The adder: minGPT's addition task, learned by a decoder-only model and solved by generation.

A problem is two ``n``-digit numbers ``a`` and ``b``; its sequence is the digits of ``a``, the
digits of ``b`` (most significant first) and the ``n + 1`` digits of ``a + b`` *reversed*,
least significant first, so that each answer digit follows the digits its carry depends on.
For ``n = 2``, ``85 + 50 = 135`` is ``8 5 5 0 5 3 1``. The model reads the sequence without its
last token and learns to predict the next one; the loss counts the answer digits only. It is
scored by generating the ``n + 1`` answer digits from the ``2n`` digits of the problem (greedy,
with a KV cache) on problems it never saw in training.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ._validation import excluded, positive_int
from .generation import generate
from .model import cross_entropy
from .tasks import Split, Task, parts_by_rows

__all__ = ["AdditionTask"]


@dataclasses.dataclass(frozen=True)
class AdditionTask(Task):
    """Add two ``n_digits``-digit numbers, the sum written least significant digit first.

    A batch is ``(prompts, answers)``: the problems' ``2 n_digits`` digits, shape
    ``(count, 2 n_digits)``, and the sums' ``n_digits + 1`` reversed digits, shape
    ``(count, n_digits + 1)``. Problems are numbered ``a * 10**n_digits + b``; the held-out
    ones never appear in a training batch.

    Attributes
    ----------
    n_digits : int
        Digits of each operand, 1 to 9 (default 2, as in minGPT).
    """

    n_digits: int = 2
    name = "add"
    vocab_size = 10

    def __post_init__(self):
        n = positive_int(self.n_digits, "n_digits")
        if n > 9:
            raise ValueError(f"n_digits must be at most 9 (problems are numbered in int64), "
                             f"got {n}")

    @property
    def n_problems(self):
        """How many different problems there are, ``10**(2 n_digits)``."""
        return 10 ** (2 * self.n_digits)

    @property
    def prompt_length(self):
        return 2 * self.n_digits

    @property
    def answer_length(self):
        return self.n_digits + 1

    @property
    def sequence_length(self):
        """The number of tokens the model reads (the problem, and the answer but its last
        digit)."""
        return self.prompt_length + self.answer_length - 1

    def digits(self, numbers, width):
        """Decimal digits of ``numbers`` (shape (...)), most significant first: (..., width)."""
        powers = 10 ** np.arange(width - 1, -1, -1, dtype=np.int64)
        return (np.asarray(numbers, np.int64)[..., None] // powers) % 10

    def problems(self, numbers):
        """The batch ``(prompts, answers)`` of the problems numbered ``numbers``."""
        numbers = np.asarray(numbers, np.int64)
        if numbers.size and (numbers.min() < 0 or numbers.max() >= self.n_problems):
            raise ValueError(f"numbers must lie in [0, {self.n_problems}) (the problems), "
                             f"got values from {numbers.min()} to {numbers.max()}")
        a, b = np.divmod(numbers, 10 ** self.n_digits)
        prompts = np.concatenate([self.digits(a, self.n_digits),
                                  self.digits(b, self.n_digits)], axis=-1)
        answers = self.digits(a + b, self.answer_length)[..., ::-1].copy()  # reversed
        return prompts, answers

    def sums(self, answers):
        """The numbers that reversed answer digits (shape (..., n_digits + 1)) write."""
        powers = 10 ** np.arange(self.answer_length, dtype=np.int64)
        return np.asarray(answers, np.int64) @ powers

    def split(self, rng, n_valid, n_test):
        n_valid, n_test = positive_int(n_valid, "n_valid"), positive_int(n_test, "n_test")
        if n_valid + n_test > self.n_problems // 2:
            raise ValueError(f"the held-out sets ({n_valid} + {n_test}) would take up half "
                             f"of all {self.n_problems} problems")
        held_out = rng.choice(self.n_problems, size=n_valid + n_test, replace=False)
        valid, test = held_out[:n_valid], held_out[n_valid:]
        return Split(valid=self.problems(valid), test=self.problems(test),
                     exclude=np.sort(held_out).astype(np.int64))

    def sample(self, rng, count, exclude):
        exclude = excluded(exclude, self.n_problems, "problem")
        numbers = rng.integers(0, self.n_problems, size=positive_int(count, "count"))
        while True:
            clash = np.isin(numbers, exclude)
            if not clash.any():
                return self.problems(numbers)
            numbers[clash] = rng.integers(0, self.n_problems, size=int(clash.sum()))

    def parts(self, batch, count):
        """Rows: every problem has as many answer digits, each a term of the mean."""
        return parts_by_rows(batch, count)

    def loss_and_backward(self, model, batch):
        """Cross-entropy of the answer digits only; the problem's digits get no loss."""
        prompts, answers = batch
        inputs = np.concatenate([prompts, answers[:, :-1]], axis=-1)  # (count, 3n)
        logits = model.forward(inputs)  # (count, 3n, 10)
        first = self.prompt_length - 1  # the position that predicts the first answer digit
        loss, d_answer = cross_entropy(logits[:, first:], answers)
        d_logits = np.zeros_like(logits)
        d_logits[:, first:] = d_answer
        model.backward(d_logits)
        return loss

    def evaluate(self, model, batch, batch_size=1000):
        """``accuracy``: answers generated exactly right (greedy, cached); ``digit_accuracy``."""
        prompts, answers = batch
        generated = [generate(model, prompts[i:i + batch_size], self.answer_length)
                     for i in range(0, len(prompts), batch_size)]
        right = np.concatenate(generated)[:, self.prompt_length:] == answers
        return {"accuracy": float(right.all(axis=-1).mean()),
                "digit_accuracy": float(right.mean())}
