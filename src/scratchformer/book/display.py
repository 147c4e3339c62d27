"""Tables for the book's pages, built from arrays so that no number is typed by hand, the
table of a training run's model and settings, and the glue that hands a computed value to the
page's text."""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import numbers

import numpy as np

from .. import precision
from ..config import ConfiguredModel, DecoderOnlyConfig, EncoderConfig
from ..seq2seq import EncoderDecoderConfig
from ..tasks import Task
from ..train import TrainConfig

__all__ = ["glue", "markdown_table", "run_settings", "weights_table"]


def glue(name: str, variable, display: bool = True) -> None:
    """Hand ``variable`` to the page's text under ``name``, where the book is built.

    In the book's build this is MyST-NB's ``myst_nb.glue``, which records the value in the
    cell's output so that ``{glue:text}`name``` in the chapter's text prints it. A chapter run
    anywhere else (a downloaded notebook, Colab) has no MyST-NB and no text to fill in, since
    its Markdown cells were written out with the values already in them: there ``glue`` only
    shows the value when ``display`` is true, as MyST-NB's does (printed, outside IPython).
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"a glued value needs a non-empty name, got {name!r}")
    if importlib.util.find_spec("myst_nb") is not None:
        from myst_nb import glue as myst_glue

        myst_glue(name, variable, display)
    elif display:
        try:
            from IPython.display import display as show
        except ModuleNotFoundError:  # a plain Python script: no notebook to show it in
            show = print
        show(variable)


def weights_table(weights, query_labels, key_labels=None, *, digits=2) -> str:
    """Format attention weights as a Markdown table, one row a query, one column a key.

    Parameters
    ----------
    weights : array_like, shape (n_q, n_k)
    query_labels : sequence of str, length n_q
    key_labels : sequence of str, length n_k, optional
        Default ``query_labels``.
    digits : int, default 2
        Decimals shown.

    Returns
    -------
    table : str
        A pipe table; the largest weights of each row are in bold (none when the row is
        uniform).
    """
    weights = np.asarray(weights, dtype=float)
    if weights.ndim != 2:
        raise ValueError(f"weights must have shape (n_q, n_k), got shape {weights.shape}")
    key_labels = query_labels if key_labels is None else key_labels
    if len(query_labels) != weights.shape[0] or len(key_labels) != weights.shape[1]:
        raise ValueError(
            f"{len(query_labels)} query and {len(key_labels)} key labels "
            f"for weights of shape {weights.shape}"
        )
    lines = ["| query \\ key | " + " | ".join(f"`{k}`" for k in key_labels) + " |",
             "|:--|" + "--:|" * len(key_labels)]
    for label, row in zip(query_labels, weights):
        best = np.isclose(row, row.max(), rtol=1e-9, atol=0.0)
        if best.all():
            best[:] = False  # a uniform row has no favourite
        cells = [f"**{w:.{digits}f}**" if b else f"{w:.{digits}f}" for w, b in zip(row, best)]
        lines.append(f"| `{label}` | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def markdown_table(rows, columns, *, align=None) -> str:
    """Format records as a Markdown table.

    Parameters
    ----------
    rows : sequence of dict
        One record per table row.
    columns : sequence of (str, str, str)
        ``(header, key, format)`` per column, e.g. ``("time (ms)", "t", "{:.1f}")``; the value
        ``row[key]`` is formatted with ``format.format(value)``.
    align : str, optional
        One letter per column, ``"l"`` (left) or ``"r"`` (right); default every column
        right-aligned, as numbers are.

    Returns
    -------
    table : str
        A pipe table.
    """
    if not columns:
        raise ValueError("a table needs at least one column")
    align = "r" * len(columns) if align is None else align
    if (not isinstance(align, str) or len(align) != len(columns)
            or set(align) - {"l", "r"}):
        raise ValueError(f"align must give 'l' or 'r' for each of the {len(columns)} "
                         f"columns, got {align!r}")
    rules = {"l": ":--|", "r": "--:|"}
    lines = ["| " + " | ".join(header for header, _, _ in columns) + " |",
             "|" + "".join(rules[a] for a in align)]
    for row in rows:
        missing = [key for _, key, _ in columns if key not in row]
        if missing:
            raise ValueError(f"row {row!r} has no {missing}")
        lines.append("| " + " | ".join(fmt.format(row[key]) for _, key, fmt in columns) + " |")
    return "\n".join(lines)


def run_settings(model, config, *, task=None) -> str:
    """The table of what a reader needs to repeat a training run: the model and the settings.

    Parameters
    ----------
    model : ConfiguredModel or sequence of ConfiguredModel
        The run's model (an :class:`~scratchformer.EncoderModel`,
        :class:`~scratchformer.EncoderDecoderModel` or :class:`~scratchformer.DecoderModel`),
        trained or not: its kind, its dimensions read from ``model.config``, and its number
        of parameters. Several models of one kind show the runs of a comparison in one table.
    config : TrainConfig or sequence of TrainConfig
        How it was trained (:class:`~scratchformer.train.TrainConfig`), or the settings of
        each run compared.
    task : Task, optional
        What it learned: the task's kind and its settings (the fields of a task that is a
        dataclass, the window of a :class:`~scratchformer.language_model.TextTask`).

    Returns
    -------
    table : str
        A Markdown table of two columns, setting and value, in groups (task, model, training)
        that each open with a row in bold. A setting on which the models, or the settings,
        differ lists their values joined by "or", in the order given. Numbers are written
        plainly (``0.002``, ``1e-5``, ``4,000``).

    Raises
    ------
    TypeError
        If ``model`` is not a model built from a configuration, ``config`` not a
        ``TrainConfig``, or ``task`` not a task.
    ValueError
        If the models compared are of different kinds, or a sequence is empty.

    Notes
    -----
    Every chapter that trains a model shows the run's table in a cell of its own after the
    training cell (``tests/test_book_sources.py`` checks that none leaves it out), so that no
    setting of a run hides behind a name such as ``tr.ADDER_TRAINING``.
    """
    models = _several(model, ConfiguredModel, "model",
                      "a model built from a configuration (EncoderModel, "
                      "EncoderDecoderModel, DecoderModel)")
    configs = _several(config, TrainConfig, "config", "a TrainConfig")
    if len({type(m) for m in models}) > 1:
        raise ValueError("the models of one table must be of one kind, got "
                         + ", ".join(sorted({type(m).__name__ for m in models})))
    if task is not None and not isinstance(task, Task):
        raise TypeError(f"task must be a Task (what a model learns), got "
                        f"{type(task).__name__}")
    rows = []
    if task is not None:
        rows.append(("**task**", f"`{type(task).__name__}`"))
        rows += _task_rows(task)
    rows.append(("**model**", f"`{type(models[0]).__name__}`"))
    rows += _merged([_model_rows(m) for m in models])
    rows.append(("**training**", ""))
    formats = any(not precision.plain(c) for c in configs)
    rows += _merged([_training_rows(c, formats) for c in configs])
    return markdown_table([{"setting": s, "value": v} for s, v in rows],
                          [("setting", "setting", "{}"), ("value", "value", "{}")],
                          align="ll")


def _several(value, kind, name, what):
    """``value`` as a non-empty list of ``kind``, or the error that says what was wanted."""
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    if not values:
        raise ValueError(f"{name} must name at least one run, got an empty sequence")
    for v in values:
        if not isinstance(v, kind):
            raise TypeError(f"{name} must be {what}, got {type(v).__name__}")
    return values


def _merged(tables):
    """One value per setting: the distinct values of the runs, in order, joined by "or"."""
    merged = []
    for i, (label, _) in enumerate(tables[0]):
        values = list(dict.fromkeys(table[i][1] for table in tables))
        merged.append((label, " or ".join(values)))
    return merged


def _plain(value):
    """A number as a reader writes it: ``4,000``, ``0.002``, ``1e-5``, never a NumPy repr."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        return str(value)
    if isinstance(value, numbers.Integral):
        return f"{int(value):,}"
    if not math.isfinite(value):
        return str(float(value))
    if float(value).is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    # the shortest digits that read back as the same number of its precision
    text = str(value) if isinstance(value, np.floating) else repr(float(value))
    if "e" in text:
        mantissa, exponent = text.split("e")
        text = f"{mantissa}e{int(exponent)}"
    return text


def _task_rows(task):
    if dataclasses.is_dataclass(task):
        return [(f"`{f.name}`", _plain(getattr(task, f.name)))
                for f in dataclasses.fields(task)]
    if hasattr(task, "context"):
        return [("`context` (tokens)", _plain(task.context))]
    return []


def _model_rows(model):
    c = model.config
    rows = [("blocks per stack" if isinstance(c, EncoderDecoderConfig) else "blocks",
             _plain(c.n_layers)),
            ("`d_model`", _plain(c.d_model))]
    heads = _plain(c.n_heads)
    if isinstance(c, DecoderOnlyConfig) and c.n_kv_heads != c.n_heads:
        heads += f", {_plain(c.n_kv_heads)} key/value"
    rows.append(("heads", heads))
    d_ff = _plain(c.d_ff)
    if isinstance(c, DecoderOnlyConfig) and c.feed_forward != "relu":
        d_ff += {"swiglu": ", SwiGLU", "gelu": ", GELU"}[c.feed_forward]
    rows.append(("`d_ff`", d_ff))
    if isinstance(c, EncoderDecoderConfig):
        rows += [("source vocabulary", _plain(c.vocab_size)),
                 ("target vocabulary", _plain(c.target_vocab_size))]
    else:
        vocabulary = _plain(c.vocab_size)
        if isinstance(c, DecoderOnlyConfig) and c.tie_embeddings:
            vocabulary += ", head tied"
        rows.append(("vocabulary", vocabulary))
    if isinstance(c, EncoderConfig):
        rows.append(("labels", _plain(c.n_classes)))
    if isinstance(c, DecoderOnlyConfig):
        rows += [("positions", c.positions),
                 ("longest sequence", _plain(c.max_positions))]
    norm = f"{c.norm}-LN"
    if isinstance(c, DecoderOnlyConfig) and c.normalization == "rms":
        norm = f"{c.norm}, RMS norm"
    rows.append(("norms", norm))
    if isinstance(c, EncoderDecoderConfig):
        rows.append(("dropout", _plain(c.dropout) if c.dropout else "none"))
    rows.append(("parameters", _plain(model.num_parameters)))
    return rows


def _training_rows(c, formats=False):
    if c.cpu_seconds is None:
        length = f"{_plain(c.max_steps)} steps"
    else:
        length = f"{_plain(c.cpu_seconds)} CPU-s, at most {_plain(c.max_steps)} steps"
    return [
        ("batch size", _plain(c.batch_size)),
        ("peak learning rate", _plain(c.peak_lr)),
        ("warm-up steps", _plain(c.warmup_steps)),
        ("cosine decay to", f"{_plain(c.final_lr_fraction)} × peak"),
        ("weight decay", _plain(c.weight_decay)),
        ("gradient clipping", "none" if c.clip_norm is None
         else f"at norm {_plain(c.clip_norm)}"),
        ("stops after", length),
        ("target accuracy", "none" if c.target_accuracy is None
         else f"{_plain(round(100 * c.target_accuracy, 10))} % (validation)"),
        ("evaluated every", f"{_plain(c.eval_every)} steps"),
        ("validation set", _plain(c.n_valid)),
        ("test set", _plain(c.n_test)),
        ("seed", _plain(c.seed)),
    ] + ([
        ("gradients kept in", c.gradients),
        ("loss scaling", "dynamic" if c.loss_scaling else "none"),
        ("gradients computed as one of", f"{_plain(c.micro_batches)} micro-batch"
         + ("es" if c.micro_batches != 1 else "")),
        ("weights stored in", c.weights),
    ] if formats else [])
