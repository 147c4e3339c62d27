"""The book's models and how the command line trains them: each recipe in one place, which the
chapters and the command line read.

A recipe is a model's dimensions (``BOOK_MODEL``, ``ADDER_MODEL``, ``TEXT_MODEL``), the
function that builds it for a task (:func:`book_model`, :func:`adder_model`,
:func:`text_model`), and the fields of :class:`~scratchformer.train.TrainConfig` its run changes
(``BOOK_TRAINING``, ``ADDER_TRAINING``, ``TRANSLATION_CONFIG``, ``TEXT_TRAINING``);
:func:`make_task` builds the command line's tasks by name. A model's weights come from the
second stream of its seed (:func:`~scratchformer.train.seed_streams`), the loop's data from the
first.
"""

from __future__ import annotations

import numpy as np

from ..addition import AdditionTask
from ..decoder_only import DecoderModel
from ..model import EncoderModel
from ..seq2seq import EncoderDecoderModel
from ..tasks import LABELLINGS, LabellingTask
from ..translation import TranslationTask
from .loop import TrainConfig, seed_streams

__all__ = ["TASKS", "BOOK_MODEL", "BOOK_TRAINING", "ADDER_MODEL", "ADDER_TRAINING",
           "TRANSLATION_CONFIG", "TEXT_MODEL", "TEXT_TRAINING", "BOOK_TEXT_TRAINING",
           "LETTERS_TRAINING", "LORA", "make_task", "book_model", "adder_model", "text_model"]

TEXT_TASK = "text"
LETTERS_TASK = "count-letters"

#: The tasks of the command line.
TASKS = (*LABELLINGS, "add", "translate", TEXT_TASK, LETTERS_TASK)

#: The dimensions of the book's model (chapter "Training a Transformer in NumPy").
BOOK_MODEL = {"d_model": 64, "n_heads": 4, "d_ff": 128, "n_layers": 2}

#: How the book trains it (fields of :class:`TrainConfig` its run changes): none, the
#: defaults of :class:`TrainConfig` are its settings. Chapters "Training a Transformer in
#: NumPy" and "What the trained model learned" share the run through it.
BOOK_TRAINING = {}

#: The settings of the command line's translation run. There are 1000 numbers in all, so
#: the held-out sets are smaller (100 to validate, 200 to test; 700 are trained on), checked
#: every 50 steps.
TRANSLATION_CONFIG = TrainConfig(n_valid=100, n_test=200, eval_every=50, max_steps=3000)


def make_task(name, **options):
    """The task of the command line called ``name``: ``reverse``, ``sort``, ``add``,
    ``translate``, ``text`` (the State of the Union addresses,
    :func:`~scratchformer.language_model.addresses_task`, whose options it takes) or
    ``count-letters`` (:class:`~scratchformer.letters.CountLettersTask`, whose options it
    takes; its tokenizer SmolLM2's unless given)."""
    if name in LABELLINGS:
        return LabellingTask(kind=name, **options)
    if name == "add":
        return AdditionTask(**options)
    if name == "translate":
        return TranslationTask(**options)
    if name == TEXT_TASK:
        from ..language_model import addresses_task

        return addresses_task(**options)[0]
    if name == LETTERS_TASK:
        from ..letters import CountLettersTask
        from ..pretrained import smollm2_path, tokenizer_from_gguf

        tokenizer = options.pop("tokenizer", None) or tokenizer_from_gguf(smollm2_path())
        return CountLettersTask(tokenizer, **options)
    raise ValueError(f"task must be one of {TASKS}, got {name!r}")


def book_model(task, *, norm="post", seed=0, dtype=np.float32, dropout=0.0, **dims):
    """The book's model (:data:`BOOK_MODEL`) for a ``task``.

    An :class:`~scratchformer.EncoderModel` for a labelling task, an
    :class:`~scratchformer.EncoderDecoderModel` (``n_layers`` blocks in each stack) for the
    :class:`~scratchformer.TranslationTask`.

    Its weights come from the second of the two streams that ``seed`` gives; :func:`train`
    draws the data from the first, so ``train(book_model(task, seed=s), task,
    TrainConfig(seed=s))`` is one reproducible run. Keyword arguments ``dims`` (``d_model``,
    ``n_heads``, ``d_ff``, ``n_layers``) replace those of :data:`BOOK_MODEL`. ``dropout``
    (default 0) is the translator's rate of dropout in training
    (:class:`~scratchformer.EncoderDecoderConfig`); the labelling model has none, and a
    ``dropout`` other than 0 for it raises ``ValueError``.
    """
    unknown = set(dims) - set(BOOK_MODEL)
    if unknown:
        raise TypeError(f"book_model takes the dimensions {sorted(BOOK_MODEL)}, got "
                        f"{sorted(unknown)}")
    if isinstance(task, TranslationTask):
        return EncoderDecoderModel(vocab_size=task.vocab_size,
                                   target_vocab_size=task.target_vocab_size,
                                   pad_id=task.pad_id, **(BOOK_MODEL | dims), norm=norm,
                                   dropout=dropout, rng=seed_streams(seed)[1], dtype=dtype)
    if dropout != 0:
        raise ValueError(f"the labelling model (EncoderModel) has no dropout; got "
                         f"dropout={dropout!r}")
    return EncoderModel(vocab_size=task.vocab_size, n_classes=task.n_classes,
                        **(BOOK_MODEL | dims), norm=norm, rng=seed_streams(seed)[1], dtype=dtype)


#: The dimensions of the adder, a decoder-only model.
ADDER_MODEL = {"d_model": 64, "n_heads": 4, "d_ff": 128, "n_layers": 2,
               "positions": "sinusoidal"}

#: How the command line trains the adder (fields of :class:`TrainConfig` it changes).
ADDER_TRAINING = {"batch_size": 128, "max_steps": 3000, "peak_lr": 6e-3, "warmup_steps": 100,
                  "eval_every": 100, "n_valid": 500, "n_test": 1000,
                  "target_accuracy": 0.995}


def adder_model(task, *, norm="pre", seed=0, dtype=np.float32, **dims):
    """The adder, a :class:`~scratchformer.DecoderModel` (:data:`ADDER_MODEL`) for an
    :class:`~scratchformer.AdditionTask`.

    Seeded as :func:`book_model`; ``dims`` replace entries of :data:`ADDER_MODEL`
    (``positions`` among them).
    """
    unknown = set(dims) - set(ADDER_MODEL)
    if unknown:
        raise TypeError(f"adder_model takes {sorted(ADDER_MODEL)}, got {sorted(unknown)}")
    return DecoderModel(vocab_size=task.vocab_size, **(ADDER_MODEL | dims),
                        max_positions=task.prompt_length + task.answer_length, norm=norm,
                        rng=seed_streams(seed)[1], dtype=dtype)


#: The dimensions of the language model of the addresses (a pre-LN, rotary
#: :class:`~scratchformer.DecoderModel`; chapter "Language modelling on real text").
TEXT_MODEL = {"d_model": 128, "n_heads": 4, "d_ff": 512, "n_layers": 4}

#: How the command line trains it (fields of :class:`TrainConfig` it changes): windows of
#: 128 tokens, a budget of CPU-seconds rather than of steps.
TEXT_TRAINING = {"batch_size": 32, "max_steps": 1_000_000, "peak_lr": 2e-3,
                 "warmup_steps": 100, "eval_every": 250, "n_valid": 64, "n_test": 2048,
                 "target_accuracy": None, "cpu_seconds": 600.0}

#: The book's run of it (chapters "Language modelling on real text" and "Sampling from a
#: language model", which share it): 120 steps at a high peak rate, not a budget of
#: CPU-seconds, so that the run is the same on any machine; the parameters kept at every
#: evaluation, to sample from the model partway.
BOOK_TEXT_TRAINING = TEXT_TRAINING | {
    "max_steps": 120, "warmup_steps": 30, "peak_lr": 6e-3, "eval_every": 20, "n_test": 1024,
    "cpu_seconds": None, "keep_parameters": True}


#: How the command line fine-tunes SmolLM2-135M to count letters
#: (:class:`~scratchformer.letters.CountLettersTask`), full or with LoRA: a budget of
#: CPU-seconds, batches of 8 questions, a validation set of 40 questions checked every 25 steps
#: and a test set of 500 (on held-out words), the learning rate of each method in
#: ``LETTERS_LR``.
LETTERS_TRAINING = {"batch_size": 8, "max_steps": 1_000_000, "warmup_steps": 10,
                    "eval_every": 25, "n_valid": 40, "n_test": 500, "target_accuracy": None,
                    "weight_decay": 0.0, "cpu_seconds": 1800.0}
#: The peak learning rate of each method of fine-tuning.
LETTERS_LR = {"full": 1.5e-4, "lora": 1e-3}
#: The adapters of LoRA fine-tuning (:func:`scratchformer.add_lora`).
LORA = {"rank": 8, "alpha": 16.0, "targets": ("q", "v")}


def text_model(task, *, seed=0, dtype=np.float32, **dims):
    """The language model (:data:`TEXT_MODEL`) for a
    :class:`~scratchformer.language_model.TextTask`: pre-LN, RoPE, positions up to the
    task's context. Seeded as :func:`book_model`; ``dims`` replace entries of
    :data:`TEXT_MODEL`."""
    unknown = set(dims) - set(TEXT_MODEL)
    if unknown:
        raise TypeError(f"text_model takes {sorted(TEXT_MODEL)}, got {sorted(unknown)}")
    return DecoderModel(vocab_size=task.vocab_size, **(TEXT_MODEL | dims), positions="rotary",
                        norm="pre", max_positions=task.context, rng=seed_streams(seed)[1],
                        dtype=dtype)
