"""The adder: minGPT's addition task, its held-out problems, its loss, and the trained model."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import scratchformer as sf
from conftest import training_environment


def test_a_problem_is_written_as_in_mingpt():
    task = sf.AdditionTask(n_digits=2)
    prompts, answers = task.problems([85 * 100 + 50])  # 85 + 50 = 135, reversed: 5 3 1
    assert prompts.tolist() == [[8, 5, 5, 0]] and answers.tolist() == [[5, 3, 1]]
    assert task.sequence_length == 6 and task.vocab_size == 10


def test_the_answers_are_the_sums():
    task = sf.AdditionTask(n_digits=3)
    rng = np.random.default_rng(0)
    numbers = rng.integers(0, task.n_problems, 200)
    prompts, answers = task.problems(numbers)
    for row, answer in zip(prompts, answers):
        a = int("".join(map(str, row[:3])))
        b = int("".join(map(str, row[3:])))
        assert int("".join(map(str, answer[::-1]))) == a + b  # Python's own arithmetic
    assert np.array_equal(task.sums(answers), numbers // 1000 + numbers % 1000)


def test_held_out_problems_never_reach_training():
    task = sf.AdditionTask()
    rng = np.random.default_rng(1)
    split = task.split(rng, 300, 400)
    held = {tuple(row) for row in np.concatenate([split.valid[0], split.test[0]])}
    assert len(held) == 700  # distinct, valid and test disjoint
    for _ in range(20):
        prompts, _ = task.sample(rng, 256, split.exclude)
        assert not held & {tuple(row) for row in prompts}


class Spy(sf.Layer):
    """Records what the task feeds it; logits of zeros."""

    def forward(self, tokens):
        self.tokens = np.asarray(tokens)
        return np.zeros((*self.tokens.shape, 10))

    def backward(self, d_logits):
        self.d_logits = d_logits


def test_the_loss_counts_the_answer_digits_only():
    task, spy = sf.AdditionTask(), Spy()
    batch = task.problems([1234, 9999])
    loss = task.loss_and_backward(spy, batch)
    assert spy.tokens.tolist() == [[1, 2, 3, 4, 6, 4], [9, 9, 9, 9, 8, 9]]  # no last digit
    assert abs(loss - np.log(10)) < 1e-12  # uniform logits: log 10 per answer digit
    assert not spy.d_logits[:, :3].any()  # positions that predict the problem's digits
    assert np.all(spy.d_logits[:, 3:].any(axis=-1))


#: The exact match the decoder-only chapter asserts of the same run (book/decoder_only.md):
#: 0.97, not 0.99, since the seed sweep (seeds 0 to 4, tools/seed_sweep.py) under OpenBLAS's
#: SkylakeX and Haswell kernels. With seed 0 and BLAS on one thread the adder answers 100.0 % of
#: its test problems under SkylakeX and 98.8 % under Haswell: the kernel decides the rounding,
#: and the rounding the trained model. The command trains the chapter's run (its model, its
#: settings, seed 0), so it is held to the chapter's threshold, the one the sweep found to hold
#: on both kernels; the test asked 0.99 until a machine forcing the Haswell kernel failed it.
ADDER_EXACT_MATCH = 0.97


@pytest.mark.slow
def test_the_command_line_trains_the_adder_to_the_chapters_accuracy_on_held_out_problems():
    completed = subprocess.run([sys.executable, "-m", "scratchformer.train", "--task", "add",
                                "--quiet"], capture_output=True, text=True, timeout=1200,
                               env=training_environment())
    assert completed.returncode == 0, completed.stderr
    last = completed.stdout.strip().split("\n")[-1]
    accuracy, seconds = last.split()
    assert seconds.startswith("seconds=") and float(seconds.split("=")[1]) > 0
    assert accuracy.startswith("accuracy=")
    assert float(accuracy.split("=")[1]) >= ADDER_EXACT_MATCH
