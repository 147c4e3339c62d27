"""The package's house: what imports what, the Layer contract, and one set of argument checks.

- ``import scratchformer`` loads NumPy only (no matplotlib, no torch), and the model trains on a
  machine where matplotlib cannot be imported at all.
- The package's modules import one another without a cycle, counting the imports made inside
  functions: a base class knows nothing of its subclasses, nor of PyTorch.
- Every layer owns its parameters; sharing one array between two places is refused by name.
- ``load_parameters`` checks names, shapes and values before changing anything.
- Inside ``layer.inference()`` a forward keeps nothing (and attention forms no weights).
- ``BAD_INPUTS``: the table of bad arguments tried, each with the error it gets.
"""

from __future__ import annotations

import ast
import dataclasses
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import scratchformer as sf
from conftest import layer_classes
from scratchformer.language_model import CharTokenizer, log_probabilities
from scratchformer.pretrained import llama_options
from scratchformer.train import TrainConfig, book_model, train


def run_python(code):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=300)


# ---- what imports what -------------------------------------------------------------------

PACKAGE = Path(sf.__file__).parent


def package_modules(package=PACKAGE):
    """Each module of the package by its dotted name, and its source file."""
    modules = {}
    for path in package.rglob("*.py"):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def imports(modules):
    """``(module, line, relative, target, names)`` for every import in the modules' code
    (inside functions too), resolved to dotted names: ``from .x import a`` in
    ``scratchformer.y`` gives the target ``scratchformer.x`` and the names
    ``[scratchformer.x.a]`` (``a`` may be a name of the module rather than a module); for
    ``from . import a`` the target is None (only the names are imported, each a module)."""
    for name, path in modules.items():
        here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = here[:len(here) - node.level + 1] if node.level else []
                package = ".".join(base + ([node.module] if node.module else []))
                yield (name, node.lineno, node.level > 0, package if node.module else None,
                       [f"{package}.{alias.name}" for alias in node.names])
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    yield name, node.lineno, False, alias.name, []


def import_graph(package=PACKAGE):
    """Each module of the package and the package's modules it imports, anywhere in its code
    (inside functions too), read from the source."""
    modules = package_modules(package)
    graph = {name: set() for name in modules}
    for name, _, _, target, names in imports(modules):
        graph[name] |= {m for m in (target, *names) if m in modules and m != name}
    return graph


def cycles(graph):
    """The groups of modules that import one another in a circle (Tarjan's components)."""
    order, low, stack, groups = {}, {}, [], []

    def visit(v):
        order[v] = low[v] = len(order)
        stack.append(v)
        for w in graph[v]:
            if w not in order:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], order[w])
        if low[v] == order[v]:
            group = []
            while not group or group[-1] != v:
                group.append(stack.pop())
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(graph):
        if v not in order:
            visit(v)
    return groups


def test_every_relative_import_names_a_module_of_the_package():
    """Imports inside functions run only when called: one left pointing at a module that moved
    (``from .language_model`` in a subpackage) would fail in a reader's hands, not at import."""
    modules = package_modules()
    missing = [f"{name}:{line}" for name, line, relative, target, names in imports(modules)
               if relative and (target not in modules if target else
                                not set(names) <= modules.keys())]
    assert missing == []


def test_the_package_imports_without_a_cycle():
    graph = import_graph()
    assert {"scratchformer.module", "scratchformer.pytorch.conversions"} <= graph.keys()
    assert cycles(graph) == []
    assert not any(m.startswith("scratchformer.pytorch") for m in graph["scratchformer.module"])


def test_the_cycle_check_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_import_loads_neither_matplotlib_nor_torch():
    completed = run_python("""
        import sys
        import scratchformer
        import scratchformer.train, scratchformer.tasks, scratchformer.config
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("matplotlib", "torch"))
        print(loaded)
    """)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == "[]"


def test_the_model_trains_where_matplotlib_cannot_be_imported():
    completed = run_python("""
        import sys
        sys.modules["matplotlib"] = None  # any import of matplotlib now raises ImportError
        try:
            import scratchformer.book
        except ImportError:
            print("book tooling needs matplotlib")
        import numpy as np
        import scratchformer as sf
        from scratchformer.train import TrainConfig, book_model, train
        task = sf.LabellingTask(length=5)
        config = TrainConfig(max_steps=30, warmup_steps=5, eval_every=30, n_valid=50,
                             n_test=50, target_accuracy=None)
        result = train(book_model(task), task, config)
        assert result.steps == 30 and np.isfinite(result.history["loss"]).all()
        print("trained", result.history["loss"][0] > result.history["loss"][-1])
    """)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.split("\n")[:2] == ["book tooling needs matplotlib", "trained True"]


def test_matplotlib_is_imported_by_the_book_tooling_only():
    completed = run_python("""
        import sys
        import scratchformer.book
        print("matplotlib" in sys.modules, "torch" in sys.modules)
    """)
    assert completed.stdout.split() == ["True", "False"], completed.stderr


# ---- parameters: owned, never shared -------------------------------------------------------

def test_every_layer_owns_its_parameters():
    block, model = sf.EncoderBlock(8, 2, 16), sf.EncoderModel(
        vocab_size=5, n_classes=5, d_model=8, n_heads=2, d_ff=16, n_layers=1)
    block.params["x"] = np.zeros(3)  # a composite layer's own dict, and only its own
    names = [name for name, _, _ in model.named_parameters()]
    assert "x" not in names and "blocks.0.x" not in names
    assert sf.Layer().params == {} and sf.Layer().params is not sf.Layer().params


def test_a_shared_parameter_is_refused_by_name():
    model = sf.EncoderModel(vocab_size=6, n_classes=6, d_model=8, n_heads=2, d_ff=16,
                            n_layers=1)
    model.head.params["w"] = model.embedding.params["table"].T  # a tied head: a view
    with pytest.raises(ValueError, match="embedding.table and head.w share memory"):
        list(model.named_parameters())
    with pytest.raises(ValueError, match="share memory"):
        sf.Adam(model)


def test_a_layer_used_twice_is_refused():
    model = sf.EncoderModel(vocab_size=6, n_classes=6, d_model=8, n_heads=2, d_ff=16,
                            n_layers=2)
    model.blocks[1] = model.blocks[0]
    with pytest.raises(ValueError, match="the layer at blocks.1 appears twice"):
        _ = model.num_parameters


def test_sharing_is_decided_by_memory_not_by_whose_view_an_array_is():
    layer = sf.MultiHeadAttention(4, 2)
    big = np.random.default_rng(0).standard_normal((4, 4, 4))
    # disjoint slices of one buffer: no memory shared, so allowed
    for name, part in zip(("w_q", "w_k", "w_v", "w_o"), big):
        layer.params[name] = part
    assert len(list(layer.named_parameters())) == 8
    # aliases that are no ndarray view of each other are still caught
    buffer = bytearray(np.zeros(16).tobytes())
    layer.params["w_q"] = np.frombuffer(buffer).reshape(4, 4)
    layer.params["w_k"] = np.frombuffer(buffer).reshape(4, 4)
    with pytest.raises(ValueError, match="(w_q and w_k|w_k and w_q) share memory"):
        list(layer.named_parameters())
    layer.params["w_k"] = np.lib.stride_tricks.as_strided(layer.params["w_o"])
    with pytest.raises(ValueError, match="w_k and w_o share memory|w_o and w_k share memory"):
        list(layer.named_parameters())
    # a column slice overlaps the bounds of another but shares no element: allowed
    wide = np.zeros((4, 8))
    layer.params["w_k"], layer.params["w_v"] = wide[:, :4], wide[:, 4:]
    layer.params["w_q"], layer.params["w_o"] = np.zeros((4, 4)), np.zeros((4, 4))
    assert len(list(layer.named_parameters())) == 8


def test_the_sharing_check_runs_before_anything_is_touched():
    model = sf.EncoderModel(vocab_size=6, n_classes=6, d_model=8, n_heads=2, d_ff=16,
                            n_layers=1)
    model.head.params["w"] = model.embedding.params["table"].T
    before = model.embedding.params["table"].copy()
    with pytest.raises(ValueError, match="share memory"):
        sf.randomize_parameters(model, np.random.default_rng(0))
    np.testing.assert_array_equal(model.embedding.params["table"], before)


def test_load_parameters_checks_everything_before_changing_anything():
    layer = sf.Linear(3, 2)
    before = {k: v.copy() for k, v in layer.params.items()}
    good = {"w": np.ones((3, 2)), "b": np.arange(2)}
    for values, error, message in [
        ({"w": np.ones((3, 2))}, ValueError, r"missing \['b'\]"),
        (good | {"c": 1.0}, ValueError, r"unexpected \['c'\]"),
        (good | {"w": np.ones((2, 3))}, ValueError, r"w must have shape \(3, 2\)"),
        (good | {"b": [0.0, np.nan]}, ValueError, "b must be finite"),
        (good | {"b": np.array(["a", "b"])}, TypeError, "b must be real"),
    ]:
        with pytest.raises(error, match=message):
            layer.load_parameters(values)
        assert all(np.array_equal(layer.params[k], before[k]) for k in before)
    layer.forward(np.ones((1, 3)))
    layer.backward(np.ones((1, 2)))
    assert layer.grads is not None
    layer.load_parameters(good)
    assert layer.grads is None  # gradients of the old values are gone
    assert layer.params["b"].dtype == np.float64 and layer.params["b"].tolist() == [0.0, 1.0]
    assert not np.shares_memory(layer.params["w"], good["w"])  # a copy


# ---- inference mode ---------------------------------------------------------------------

def test_inference_keeps_nothing_and_computes_the_same_function():
    rng = np.random.default_rng(0)
    model = sf.EncoderModel(vocab_size=7, n_classes=3, d_model=8, n_heads=2, d_ff=16,
                            n_layers=2, norm="pre", rng=rng)
    tokens = rng.integers(0, 7, (4, 9))
    logits = model.forward(tokens)
    with model.inference() as same:
        assert same is model
        np.testing.assert_allclose(model.forward(tokens), logits, rtol=0, atol=1e-12)
        assert all(layer._saved is None for _, layer in model._tree())
        assert model.blocks[0].attention.attention_weights is None
        with pytest.raises(RuntimeError, match="outside inference"):
            model.backward(np.zeros_like(logits))
    model.forward(tokens)  # saving again after the block
    model.backward(np.zeros_like(logits))


def test_inference_mode_is_restored_when_the_block_raises():
    layer = sf.FeedForward(4, 8)
    with pytest.raises(ValueError), layer.inference():
        layer.forward(np.zeros((2, 5)))  # the wrong width
    assert layer.saves_for_backward
    layer.forward(np.zeros((2, 4)))
    layer.backward(np.ones((2, 4)))


def test_long_sequences_in_inference_never_form_the_weights(monkeypatch):
    import scratchformer.multihead as multihead

    layer = sf.MultiHeadAttention(16, 2, rng=np.random.default_rng(1))
    x = np.random.default_rng(2).standard_normal((1, 80, 16))  # 80 * 80 > the short path
    with_weights = layer.forward(x, mask=sf.causal_mask(80))
    assert layer.attention_weights.shape == (1, 2, 80, 80)

    def refuse(*args, **kwargs):
        raise AssertionError("a kernel that forms the weights was called")

    monkeypatch.setattr(multihead, "fast_attention", refuse)
    monkeypatch.setattr(multihead, "attention_kernel", refuse)
    with layer.inference():
        without = layer.forward(x, mask=sf.causal_mask(80))
        assert layer.attention_weights is None
    np.testing.assert_allclose(without, with_weights, rtol=0, atol=1e-12)


def test_inference_contexts_nest():
    layer = sf.Linear(2, 2)
    with layer.inference():
        with layer.inference():
            assert not layer.saves_for_backward
        assert not layer.saves_for_backward  # the outer block is still inferring
    assert layer.saves_for_backward


# ---- a subclass keeps its base's contract ------------------------------------------------

def contract_faults(sub, base, methods=("forward", "backward")):
    """Where ``sub`` cannot stand in for ``base``: a parameter of the base's method that the
    subclass's lacks, takes in another way (positional, keyword-only) or with another
    default, or a new parameter that a caller of the base could not leave out."""
    import inspect

    faults = []
    for method in methods:
        if not (hasattr(base, method) and hasattr(sub, method)):
            continue
        theirs = inspect.signature(getattr(base, method)).parameters
        ours = inspect.signature(getattr(sub, method)).parameters
        for name, given in theirs.items():
            mine = ours.get(name)
            if mine is None or mine.kind != given.kind or mine.default != given.default:
                faults.append(f"{sub.__name__}.{method}: {name} ({given} in "
                              f"{base.__name__}, {mine} here)")
        faults += [f"{sub.__name__}.{method}: a new parameter {name} without a default"
                   for name, mine in ours.items()
                   if name not in theirs and mine.default is mine.empty
                   and mine.kind not in (mine.VAR_POSITIONAL, mine.VAR_KEYWORD)]
    return faults


def test_every_layer_that_subclasses_a_layer_keeps_its_call():
    """A subclass is used where its base is expected (``isinstance``): a ``forward`` that
    drops the base's arguments (``CausalSelfAttention`` was a ``MultiHeadAttention`` whose
    ``forward`` took no mask and no context) breaks the code that trusts the base. Bases
    that are not layers one calls (``AttentionHeads``, ``ConfiguredModel``) define no
    ``forward`` and so bind nothing."""
    pairs = [(sub, base) for sub in layer_classes() for base in sub.__mro__[1:]
             if base is not sf.Layer and issubclass(base, sf.Layer)
             and "forward" in {name for cls in base.__mro__ if cls is not sf.Layer
                               for name in vars(cls)}]
    assert [fault for sub, base in pairs for fault in contract_faults(sub, base)] == []
    assert not issubclass(sf.CausalSelfAttention, sf.MultiHeadAttention)
    assert "forward" not in vars(sf.AttentionHeads)


def test_the_contract_check_finds_a_dropped_argument():
    class Asks(sf.Layer):
        def forward(self, x, mask=None, context=None):
            return x

    class Drops(Asks):
        def forward(self, x, *, cache=None, layer=0):
            return x

    class Keeps(Asks):
        def forward(self, x, mask=None, context=None, *, cache=None):
            return x

    class Needs(Asks):
        def forward(self, x, mask=None, context=None, *, cache):
            return x

    assert len(contract_faults(Drops, Asks)) == 2  # mask and context
    assert contract_faults(Keeps, Asks) == []
    assert contract_faults(Needs, Asks) == ["Needs.forward: a new parameter cache without a "
                                            "default"]


# ---- configurations ----------------------------------------------------------------------

def test_the_model_keeps_its_configuration_frozen_and_can_be_rebuilt_from_it():
    model = book_model(sf.LabellingTask(kind="sort"), norm="pre", n_layers=3)
    assert model.config == sf.EncoderConfig(vocab_size=10, n_classes=10, d_model=64,
                                            n_heads=4, d_ff=128, n_layers=3, norm="pre")
    with pytest.raises(dataclasses.FrozenInstanceError):
        model.config.d_model = 32
    twin = sf.EncoderModel(**dataclasses.asdict(model.config))
    assert twin.num_parameters == model.num_parameters
    assert repr(model) == ("EncoderModel(vocab_size=10, d_model=64, n_heads=4, d_ff=128, "
                           "n_layers=3, norm='pre', eps=1e-05, n_classes=10)")
    with pytest.raises(TypeError):
        sf.EncoderModel(10, 10, 64, 4, 128, 2)  # dimensions are keyword-only


def test_the_training_loop_is_the_same_for_any_model_and_task():
    task = sf.LabellingTask(length=4, vocab_size=5)
    config = TrainConfig(max_steps=20, warmup_steps=2, eval_every=10, n_valid=20, n_test=20,
                         target_accuracy=None)
    model = sf.EncoderModel(vocab_size=5, n_classes=5, d_model=8, n_heads=1, d_ff=8,
                            n_layers=1)
    assert train(model, task, config).steps == 20


# ---- one set of argument checks: the table of bad inputs -----------------------------------

def _backward_of(layer, x, d_out):
    layer.forward(x)
    return layer.backward(d_out)


def _decoder():
    return sf.DecoderModel(vocab_size=7, d_model=8, n_heads=2, d_ff=8, n_layers=1,
                           max_positions=8)


def _mha_forward(x, **kwargs):
    return lambda: sf.MultiHeadAttention(8, 2).forward(x, **kwargs)


_LOGITS = np.array([[0.0, 5.0, 10.0]])


def _rng():
    return np.random.default_rng(0)


def _append_twice(k, v):
    cache = sf.KVCache(1, 4)
    cache.append(0, np.zeros((1, 1, 3)), np.zeros((1, 1, 3)))
    return cache.append(0, k, v)


def _cached_forward(cache):
    attention = sf.CausalSelfAttention(8, 2)
    with attention.inference():
        return attention.forward(np.ones((3, 8)), cache=cache)


def _adam_step(lr, bad_gradient=None):
    model = sf.Linear(2, 2)
    optimiser = sf.Adam(model)
    model.forward(np.ones((1, 2)))
    model.backward(np.ones((1, 2)))
    if bad_gradient is not None:
        model.grads["w"][0, 1] = bad_gradient
    return optimiser.step(lr)


def _attention_backward(d_out):
    q, k, v = np.ones((3, 4)), np.ones((5, 4)), np.ones((5, 2))
    _, weights = sf.scaled_dot_product_attention(q, k, v)
    return sf.attention_backward(d_out, q, k, v, weights)


def _translator():
    return sf.EncoderDecoderModel(vocab_size=6, target_vocab_size=7, d_model=8, n_heads=2,
                                  d_ff=8, n_layers=1)


_LLAMA = {"general.architecture": "llama", "llama.embedding_length": 8,
          "llama.attention.head_count": 2, "llama.block_count": 1,
          "llama.feed_forward_length": 16, "llama.attention.layer_norm_rms_epsilon": 1e-5,
          "llama.context_length": 32, "llama.vocab_size": 10}


BAD_INPUTS = [
    # (what, call, error, message)
    ("Linear: a float size", lambda: sf.Linear(4.0, 3), TypeError,
     "d_in must be a positive integer, got 4.0"),
    ("Linear: a bool size", lambda: sf.Linear(True, 3), TypeError,
     "d_in must be a positive integer, got the bool True"),
    ("Linear: size 0", lambda: sf.Linear(4, 0), ValueError,
     "d_out must be a positive integer, got 0"),
    ("Linear: integer weights", lambda: sf.Linear(4, 3, dtype=np.int32), TypeError,
     "dtype must be a floating dtype.*got int32"),
    ("FeedForward: integer weights", lambda: sf.FeedForward(4, 8, dtype=np.int32),
     TypeError, "dtype must be a floating dtype"),
    ("FeedForward: negative width", lambda: sf.FeedForward(4, -8), ValueError,
     "d_ff must be a positive integer, got -8"),
    ("LayerNorm: width 0", lambda: sf.LayerNorm(0), ValueError,
     "d_model must be a positive integer, got 0"),
    ("LayerNorm: a float width", lambda: sf.LayerNorm(4.0), TypeError,
     "d_model must be a positive integer, got 4.0"),
    ("LayerNorm: a negative eps", lambda: sf.LayerNorm(4, eps=-1e-5), ValueError,
     "eps must be finite and non-negative"),
    ("Embedding: a float vocabulary", lambda: sf.Embedding(5.5, 4), TypeError,
     "vocab_size must be a positive integer"),
    ("Embedding: a string dtype", lambda: sf.Embedding(5, 4, dtype="U3"), TypeError,
     "dtype must be a floating dtype"),
    ("MultiHeadAttention: heads do not divide", lambda: sf.MultiHeadAttention(10, 3),
     ValueError, "d_model=10 is not divisible by n_heads=3"),
    ("MultiHeadAttention: integer weights", lambda: sf.MultiHeadAttention(8, 2,
                                                                         dtype=int),
     TypeError, "dtype must be a floating dtype"),
    ("MultiHeadAttention: rng a seed", lambda: sf.MultiHeadAttention(8, 2, rng=0),
     TypeError, "rng must be a numpy.random.Generator, got int"),
    ("EncoderBlock: a float d_ff", lambda: sf.EncoderBlock(8, 2, 16.0), TypeError,
     "d_ff must be a positive integer, got 16.0"),
    ("EncoderBlock: unknown norm", lambda: sf.EncoderBlock(8, 2, 16, norm="mid"),
     ValueError, "norm must be 'post' or 'pre', got 'mid'"),
    ("EncoderModel: 0 layers", lambda: sf.EncoderModel(
        vocab_size=5, n_classes=5, d_model=8, n_heads=2, d_ff=8, n_layers=0), ValueError,
     "n_layers must be a positive integer, got 0"),
    ("EncoderModel: odd width", lambda: sf.EncoderModel(
        vocab_size=5, n_classes=5, d_model=9, n_heads=3, d_ff=8, n_layers=1), ValueError,
     "d_model must be even"),
    ("EncoderModel: a missing dimension", lambda: sf.EncoderModel(
        vocab_size=5, d_model=8, n_heads=2, d_ff=8, n_layers=1), TypeError,
     "n_classes"),
    ("Linear.forward: wrong width", lambda: sf.Linear(4, 3).forward(np.zeros((2, 5))),
     ValueError, r"x must have shape \(\.\.\., 4\), got shape \(2, 5\)"),
    ("LayerNorm.forward: NaN", lambda: sf.LayerNorm(3).forward([[0.0, np.nan, 1.0]]),
     ValueError, "x must be finite, but 1 of its entries are NaN or infinite"),
    ("FeedForward.forward: complex", lambda: sf.FeedForward(2, 2).forward(np.ones(2, complex)),
     TypeError, "x must have a real floating or integer dtype, got dtype complex128"),
    ("MultiHeadAttention.forward: one axis", _mha_forward(np.zeros(8)), ValueError,
     r"x must have shape \(\.\.\., n_q, 8\), got shape \(8,\)"),
    ("MultiHeadAttention.forward: context width", _mha_forward(
        np.zeros((3, 8)), context=np.zeros((4, 6))), ValueError,
     r"context must have shape \(\.\.\., n_k, 8\), got shape \(4, 6\)"),
    ("MultiHeadAttention.forward: mask shape", _mha_forward(
        np.zeros((3, 8)), mask=np.ones((3, 4), bool)), ValueError,
     r"mask of shape \(3, 4\) does not broadcast"),
    ("Embedding.forward: float ids", lambda: sf.Embedding(5, 4).forward([1.0, 2.0]),
     TypeError, "tokens must be integer token ids, got dtype float64"),
    ("Embedding.forward: bool ids", lambda: sf.Embedding(5, 4).forward([True]),
     TypeError, "tokens must be integer token ids, got dtype bool"),
    ("Embedding.forward: id outside", lambda: sf.Embedding(5, 4).forward([0, 5]),
     ValueError, r"tokens must lie in \[0, 5\) \(the vocabulary\), got values from 0 to 5"),
    ("EncoderModel.forward: negative id", lambda: book_model(sf.LabellingTask()).forward(
        [[0, -1]]), ValueError, r"tokens must lie in \[0, 10\)"),
    ("EncoderModel.forward: empty sequence", lambda: book_model(sf.LabellingTask()).forward(
        np.zeros((2, 0), int)), ValueError, "at least one token per sequence"),
    ("EncoderModel.forward: a scalar", lambda: book_model(sf.LabellingTask()).forward(3),
     ValueError, "tokens must have at least 1 axes"),
    ("causal_mask: fewer keys than queries", lambda: sf.causal_mask(4, 3), ValueError,
     "n_k=3 keys cannot follow n_q=4 queries"),
    ("causal_mask: a float", lambda: sf.causal_mask(2.0), TypeError,
     "n_q must be a positive integer, got 2.0"),
    ("LabellingTask: unknown kind", lambda: sf.LabellingTask(kind="copy"), ValueError,
     "kind must be 'reverse' or 'sort', got 'copy'"),
    ("TrainConfig: float batch", lambda: TrainConfig(batch_size=6.4), TypeError,
     "batch_size must be a positive integer, got 6.4"),
    ("train: not a model", lambda: train("model", sf.LabellingTask()), TypeError,
     "model must be a scratchformer Layer"),
    ("MultiHeadAttention.backward: d_out of another shape", lambda: _backward_of(
        sf.MultiHeadAttention(4, 2), np.zeros((2, 3, 4)), np.ones((3, 4))), ValueError,
     r"d_out must have the output's shape \(2, 3, 4\), got \(3, 4\)"),
    ("generate: negative max_new_tokens", lambda: _decoder().generate([[1]], -1), ValueError,
     "max_new_tokens must be a non-negative integer, got -1"),
    ("generate: negative temperature", lambda: _decoder().generate([[1]], 2, temperature=-0.5),
     ValueError, "temperature must be finite and non-negative, got -0.5"),
    ("generate: top_k 0", lambda: _decoder().generate([[1]], 2, temperature=1.0, top_k=0,
                                                      rng=np.random.default_rng(0)),
     ValueError, "top_k must be a positive integer, got 0"),
    ("generate: an id outside the vocabulary", lambda: _decoder().generate([[1, 7]], 2),
     ValueError, r"prompt must lie in \[0, 7\) \(the vocabulary\), got values from 1 to 7"),
    ("generate: a float prompt", lambda: _decoder().generate([[1.0, 2.0]], 2), TypeError,
     "prompt must be integer token ids, got dtype float64"),
    ("generate: an empty prompt", lambda: _decoder().generate(np.zeros((2, 0), int), 2),
     ValueError, "prompt must hold at least one token per sequence"),
    ("generate: a prompt of one axis", lambda: _decoder().generate([1, 2], 2), ValueError,
     "prompt must have at least 2 axes"),
    ("generate: a prompt longer than the positions", lambda: _decoder().generate(
        np.zeros((1, 9), int), 0), ValueError,
     "the prompt of 9 tokens is longer than the model's max_positions=8"),
    ("generate: more tokens than the positions", lambda: _decoder().generate(
        np.zeros((1, 5), int), 4), ValueError,
     "n_prompt \\+ max_new_tokens = 5 \\+ 4 exceeds the model's max_positions=8"),
    ("generate: sampling without rng", lambda: _decoder().generate([[1]], 2, temperature=1.0),
     ValueError, "sampling \\(temperature > 0\\) draws from rng"),
    ("DecoderModel: odd heads for rotary", lambda: sf.DecoderModel(
        vocab_size=5, d_model=6, n_heads=2, d_ff=8, n_layers=1), ValueError,
     "d_model / n_heads = 3 must be even"),
    ("DecoderModel: unknown positions", lambda: sf.DecoderModel(
        vocab_size=5, d_model=8, n_heads=2, d_ff=8, n_layers=1, positions="alibi"),
     ValueError, "positions must be 'rotary' or 'sinusoidal' or 'learned', got 'alibi'"),
    ("DecoderModel.forward: longer than the positions", lambda: _decoder().forward(
        np.zeros((1, 9), int)), ValueError, "0 \\+ 9 tokens exceed the model's max_positions=8"),
    ("AdditionTask: ten digits", lambda: sf.AdditionTask(n_digits=10), ValueError,
     "n_digits must be at most 9"),
    ("load_parameters: a wrong shape", lambda: sf.LayerNorm(3).load_parameters(
        {"gamma": np.ones(4), "beta": np.zeros(3)}), ValueError,
     r"gamma must have shape \(3,\), got \(4,\)"),
    # next_token checks what generate checks, and its logits
    ("next_token: negative temperature", lambda: sf.next_token(
        _LOGITS, temperature=-1.0, rng=_rng()), ValueError,
     "temperature must be finite and non-negative, got -1.0"),
    ("next_token: NaN temperature", lambda: sf.next_token(
        _LOGITS, temperature=np.nan, rng=_rng()), ValueError,
     "temperature must be finite and non-negative, got nan"),
    ("next_token: top_k 0", lambda: sf.next_token(
        _LOGITS, temperature=1.0, top_k=0, rng=_rng()), ValueError,
     "top_k must be a positive integer, got 0"),
    ("next_token: a float top_k", lambda: sf.next_token(
        _LOGITS, temperature=1.0, top_k=1.5, rng=_rng()), TypeError,
     "top_k must be a positive integer, got 1.5"),
    ("next_token: NaN top_p", lambda: sf.next_token(
        _LOGITS, temperature=1.0, top_p=np.nan, rng=_rng()), ValueError,
     r"top_p must lie in \(0, 1\], got nan"),
    ("next_token: top_p 0", lambda: sf.next_token(
        _LOGITS, temperature=1.0, top_p=0.0, rng=_rng()), ValueError,
     r"top_p must lie in \(0, 1\], got 0.0"),
    ("next_token: top_p above 1", lambda: sf.next_token(
        _LOGITS, temperature=1.0, top_p=2, rng=_rng()), ValueError,
     r"top_p must lie in \(0, 1\], got 2"),
    ("next_token: NaN logits", lambda: sf.next_token(np.array([[np.nan, 1.0, 2.0]])),
     ValueError, "logits must be finite, but 1 of its entries are NaN or infinite"),
    ("next_token: sampling without rng", lambda: sf.next_token(_LOGITS, temperature=1.0),
     ValueError, "sampling \\(temperature > 0\\) draws from rng"),
    ("next_token: logits of one axis", lambda: sf.next_token(
        _LOGITS[0], temperature=1.0, rng=_rng()), ValueError,
     r"logits must have shape \(batch, vocab_size\), got shape \(3,\)"),
    # norms: eps = 0 stays allowed (the book checks layer norm's invariance with it), but a
    # token it cannot normalise is refused, as is a variance that overflows
    ("LayerNorm(eps=0): a constant token", lambda: sf.LayerNorm(4, eps=0.0).forward(
        np.ones((1, 4))), ValueError, "cannot be normalised with eps=0"),
    ("RMSNorm(eps=0): a zero token", lambda: sf.RMSNorm(4, eps=0.0).forward(
        np.zeros((1, 4))), ValueError, "cannot be normalised with eps=0"),
    ("layer_norm(eps=0): a constant token", lambda: sf.layer_norm(
        np.ones((1, 4)), np.ones(4), np.zeros(4), eps=0.0), ValueError,
     "cannot be normalised with eps=0"),
    ("layer_norm: the variance overflows", lambda: sf.layer_norm(
        np.array([[1e200, -1e200, 0, 0]]), np.ones(4), np.zeros(4)), ValueError,
     "the variance of a token overflowed float64"),
    ("rms_norm: the mean square overflows", lambda: sf.rms_norm(
        np.array([[1e200, -1e200, 0, 0]]), np.ones(4)), ValueError,
     "the variance of a token overflowed float64"),
    ("layer_norm: an infinite eps", lambda: sf.layer_norm(
        np.ones((1, 4)), np.ones(4), np.zeros(4), eps=np.inf), ValueError,
     "eps must be finite and non-negative, got inf"),
    ("layer_norm: a string eps", lambda: sf.layer_norm(
        np.ones((1, 4)), np.ones(4), np.zeros(4), eps="1e-5"), TypeError,
     "eps must be a real number, got '1e-5'"),
    ("layer_norm: NaN in gamma", lambda: sf.layer_norm(
        np.ones((1, 4)), [np.nan, 1, 1, 1], np.zeros(4)), ValueError,
     "gamma must be finite, but 1 of its entries are NaN or infinite"),
    ("rms_norm: inf in gamma", lambda: sf.rms_norm(np.ones((1, 4)), [np.inf, 1, 1, 1]),
     ValueError, "gamma must be finite, but 1 of its entries are NaN or infinite"),
    # the KV cache
    ("KVCache.append: v of fewer positions than k", lambda: sf.KVCache(1, 4).append(
        0, np.zeros((2, 2, 3)), np.zeros((2, 1, 3))), ValueError,
     r"v must have the shape of k but its last axis, \(2, 2\), got \(2, 1\)"),
    ("KVCache.append: v of more heads than k", lambda: sf.KVCache(1, 4).append(
        0, np.zeros((2, 2, 3)), np.zeros((3, 2, 3))), ValueError,
     r"v must have the shape of k but its last axis, \(2, 2\), got \(3, 2\)"),
    ("KVCache.append: v of another width than cached", lambda: _append_twice(
        np.zeros((1, 1, 3)), np.zeros((1, 1, 2))), ValueError,
     "values of width 2 do not fit a cache of shape"),
    ("KVCache.append: a float layer", lambda: sf.KVCache(1, 4).append(
        0.5, np.zeros((1, 1, 1)), np.zeros((1, 1, 1))), TypeError,
     "layer must be a non-negative integer, got 0.5"),
    ("KVCache.append: k of one axis", lambda: sf.KVCache(1, 4).append(
        0, np.zeros(3), np.zeros(3)), ValueError, "k must have at least 2 axes"),
    # rotary positions may not add axes to x
    ("rope: positions of more axes", lambda: sf.rope(np.ones((3, 4)), np.zeros((2, 3))),
     ValueError, r"positions of shape \(2, 3\) do not broadcast to the tokens' axes \(3,\)"),
    ("rope: positions (5, 1)", lambda: sf.rope(np.ones((3, 4)), np.arange(5)[:, None]),
     ValueError, r"positions of shape \(5, 1\) do not broadcast"),
    ("rope_half_split: positions of more axes", lambda: sf.rope_half_split(
        np.ones((3, 4)), np.zeros((2, 3))), ValueError, "do not broadcast to the tokens"),
    # bits per character
    ("log_probabilities: a negative target", lambda: log_probabilities(
        np.zeros((1, 3)), [-1]), ValueError, r"targets must lie in \[0, 3\), got values "
     "from -1 to -1"),
    ("log_probabilities: a target outside", lambda: log_probabilities(np.zeros((1, 3)), [3]),
     ValueError, r"targets must lie in \[0, 3\)"),
    ("log_probabilities: float targets", lambda: log_probabilities(np.zeros((1, 3)), [1.0]),
     TypeError, "targets must be integer class ids, got dtype float64"),
    ("log_probabilities: more targets than rows", lambda: log_probabilities(
        np.zeros((1, 3)), [0, 1]), ValueError,
     r"logits of shape \(1, 3\) need targets of shape \(1,\), got \(2,\)"),
    ("log_probabilities: NaN logits", lambda: log_probabilities(
        [[np.nan, 0.0, 0.0]], [1]), ValueError, "logits must be finite"),
    ("log_probabilities: inf logits", lambda: log_probabilities(
        [[np.inf, 0.0, 0.0]], [0]), ValueError, "logits must be finite"),
    # the learning-rate schedule
    ("warmup_cosine: a negative step", lambda: sf.warmup_cosine(
        -5, peak=1.0, warmup=10, total=100), ValueError,
     "step must be a non-negative integer, got -5"),
    ("warmup_cosine: step -1 without warm-up", lambda: sf.warmup_cosine(
        -1, peak=1.0, warmup=0, total=100), ValueError,
     "step must be a non-negative integer, got -1"),
    ("warmup_cosine: a NaN step", lambda: sf.warmup_cosine(
        np.nan, peak=1.0, warmup=10, total=100), TypeError,
     "step must be a non-negative integer, got nan"),
    ("warmup_cosine: a NaN warm-up", lambda: sf.warmup_cosine(
        50, peak=1.0, warmup=np.nan, total=100), TypeError,
     "warmup must be a non-negative integer, got nan"),
    ("warmup_cosine: a string warm-up", lambda: sf.warmup_cosine(
        5, peak=1.0, warmup="10", total=100), TypeError,
     "warmup must be a non-negative integer, got '10'"),
    ("warmup_cosine: a NaN peak", lambda: sf.warmup_cosine(
        50, peak=np.nan, warmup=10, total=100), ValueError,
     "peak must be finite and positive, got nan"),
    ("warmup_cosine: a negative peak", lambda: sf.warmup_cosine(
        50, peak=-1.0, warmup=10, total=100), ValueError,
     "peak must be finite and positive, got -1.0"),
    ("warmup_cosine: final above 1", lambda: sf.warmup_cosine(
        200, peak=1.0, warmup=10, total=100, final=5.0), ValueError,
     r"final must lie in \[0, 1\], got 5.0"),
    ("warmup_cosine: a negative final", lambda: sf.warmup_cosine(
        200, peak=1.0, warmup=10, total=100, final=-1.0), ValueError,
     r"final must lie in \[0, 1\], got -1.0"),
    # Adam writes nothing non-finite into the model
    ("Adam.step: a NaN rate", lambda: _adam_step(np.nan), ValueError,
     "lr must be finite and non-negative, got nan"),
    ("Adam.step: an infinite rate", lambda: _adam_step(np.inf), ValueError,
     "lr must be finite and non-negative, got inf"),
    ("Adam.step: NaN gradients", lambda: _adam_step(0.1, bad_gradient=np.nan),
     ValueError, r"the gradient for w is not finite \(NaN or inf\)"),
    ("Adam.step: infinite gradients", lambda: _adam_step(0.1, bad_gradient=np.inf),
     ValueError, r"the gradient for w is not finite \(NaN or inf\)"),
    # TrainConfig
    ("TrainConfig: an infinite peak_lr", lambda: TrainConfig(peak_lr=np.inf), ValueError,
     "peak_lr must be finite and positive, got inf"),
    ("TrainConfig: a NaN final_lr_fraction", lambda: TrainConfig(final_lr_fraction=np.nan),
     ValueError, r"final_lr_fraction must lie in \[0, 1\], got nan"),
    ("TrainConfig: a negative final_lr_fraction", lambda: TrainConfig(
        final_lr_fraction=-2.0), ValueError, r"final_lr_fraction must lie in \[0, 1\]"),
    ("TrainConfig: a negative seed", lambda: TrainConfig(seed=-1), ValueError,
     "seed must be a non-negative integer, got -1"),
    ("TrainConfig: a string target_accuracy", lambda: TrainConfig(target_accuracy="x"),
     TypeError, "target_accuracy must be a real number, got 'x'"),
    ("TrainConfig: a negative clip_norm", lambda: TrainConfig(clip_norm=-1.0), ValueError,
     "clip_norm must be finite and positive, got -1.0"),
    ("TrainConfig: a float warmup_steps", lambda: TrainConfig(warmup_steps=2.5), TypeError,
     "warmup_steps must be a non-negative integer, got 2.5"),
    ("TrainConfig: an infinite weight_decay", lambda: TrainConfig(weight_decay=np.inf),
     ValueError, "weight_decay must be finite and non-negative, got inf"),
    ("TrainConfig: an infinite budget", lambda: TrainConfig(cpu_seconds=np.inf), ValueError,
     "cpu_seconds must be positive \\(and finite\\) or None, got inf"),
    # sampling that could never end
    ("LabellingTask.sample: exclude covers everything", lambda: sf.LabellingTask(
        length=2, vocab_size=2).sample(_rng(), 3, np.arange(4)), ValueError,
     "exclude covers all 4 sequences: there is none left to sample"),
    ("AdditionTask.sample: exclude covers everything", lambda: sf.AdditionTask(
        n_digits=1).sample(_rng(), 3, np.arange(100)), ValueError,
     "exclude covers all 100 problems: there is none left to sample"),
    ("TranslationTask.sample: exclude covers everything", lambda: sf.TranslationTask(
        ).sample(_rng(), 2, np.arange(1000)), ValueError, "exclude covers all 1000 numbers"),
    ("LabellingTask.sample: exclude None", lambda: sf.LabellingTask().sample(
        _rng(), 3, None), TypeError, "exclude must hold integer sequence numbers"),
    # the character tokenizer
    ("CharTokenizer.token_bytes: -1", lambda: CharTokenizer.train(
        "abc", ["<eot>"]).token_bytes(-1), ValueError,
     "token must be a non-negative integer, got -1"),
    ("CharTokenizer.token_bytes: past the vocabulary", lambda: CharTokenizer.train(
        "abc", ["<eot>"]).token_bytes(99), ValueError, "token must be an id from 0 to 3, got 99"),
    ("CharTokenizer.token_bytes: a float", lambda: CharTokenizer.train(
        "abc", ["<eot>"]).token_bytes(1.0), TypeError,
     "token must be a non-negative integer, got 1.0"),
    # attention of nothing
    ("scaled_dot_product_attention: d_k 0", lambda: sf.scaled_dot_product_attention(
        np.ones((3, 0)), np.ones((5, 0)), np.ones((5, 2))), ValueError,
     "attention needs at least one key and d_k >= 1"),
    ("scaled_dot_product_attention: no keys", lambda: sf.scaled_dot_product_attention(
        np.ones((3, 4)), np.ones((0, 4)), np.ones((0, 2))), ValueError,
     "attention needs at least one key and d_k >= 1"),
    ("tiled_attention: no keys", lambda: sf.tiled_attention(
        np.ones((3, 4)), np.ones((0, 4)), np.ones((0, 2))), ValueError,
     "attention needs at least one key"),
    ("MultiHeadAttention.forward: an empty context", _mha_forward(
        np.ones((3, 8)), context=np.zeros((0, 8))), ValueError,
     "attention needs at least one query and one key"),
    ("MultiHeadAttention.forward: no tokens", _mha_forward(np.zeros((0, 8))), ValueError,
     "attention needs at least one query and one key"),
    ("CausalSelfAttention.forward: a cache that is not one", lambda: _cached_forward("abc"),
     TypeError, "cache must be a KVCache, got str"),
    # the activations
    ("silu: NaN", lambda: sf.silu([np.nan, 1.0]), ValueError, "x must be finite"),
    ("gelu: -inf", lambda: sf.gelu([-np.inf]), ValueError, "x must be finite"),
    # sizes
    ("half_split_permutation: a float", lambda: sf.half_split_permutation(4.7), TypeError,
     "d must be a positive integer, got 4.7"),
    ("half_split_permutation: a string", lambda: sf.half_split_permutation("6"), TypeError,
     "d must be a positive integer, got '6'"),
    ("AdditionTask.problems: numbers outside", lambda: sf.AdditionTask(
        n_digits=1).problems([100, -1]), ValueError,
     r"numbers must lie in \[0, 100\) \(the problems\), got values from -1 to 100"),
    # Adam's settings
    ("Adam: an infinite weight_decay", lambda: sf.Adam(sf.Linear(2, 2), weight_decay=np.inf),
     ValueError, "weight_decay must be finite and non-negative, got inf"),
    ("Adam: an infinite eps", lambda: sf.Adam(sf.Linear(2, 2), eps=np.inf), ValueError,
     "eps must be finite and positive, got inf"),
    ("Adam: one beta", lambda: sf.Adam(sf.Linear(2, 2), betas=0.9), TypeError,
     r"betas must be a pair \(beta1, beta2\), got 0.9"),
    ("Adam: a pair too short", lambda: sf.Adam(sf.Linear(2, 2), betas=(0.9,)), TypeError,
     r"betas must be a pair \(beta1, beta2\)"),
    ("Adam: not a model", lambda: sf.Adam("model"), TypeError,
     "model must be a scratchformer Layer, got str"),
    # the exported backward functions check their arguments
    ("attention_backward: d_out of another width", lambda: _attention_backward(
        np.ones((3, 7))), ValueError,
     r"d_out must have the output's shape \(\.\.\., n_q, d_v\) = \(\.\.\., 3, 2\), got "
     r"\(3, 7\)"),
    ("attention_backward: NaN in d_out", lambda: _attention_backward(
        [[1.0, np.nan]] * 3), ValueError, "d_out must be finite"),
    ("attention_backward: weights of another shape", lambda: sf.attention_backward(
        np.ones((3, 2)), np.ones((3, 4)), np.ones((5, 4)), np.ones((5, 2)), np.ones((3, 4))),
     ValueError, r"weights must have shape \(\.\.\., n_q, n_k\) = \(\.\.\., 3, 5\)"),
    ("softmax_backward: shapes differ", lambda: sf.softmax_backward(
        np.ones((2, 3)) / 3, np.ones((2, 4))), ValueError,
     r"d_weights must have the shape of weights \(2, 3\), got \(2, 4\)"),
    ("softmax_backward: NaN", lambda: sf.softmax_backward(
        np.array([[0.5, 0.5]]), np.array([[np.nan, 2.0]])), ValueError,
     "d_weights must be finite, but 1 of its entries are NaN or infinite"),
    ("layer_norm_backward: d_y of another shape", lambda: sf.layer_norm_backward(
        np.ones((2, 3)), np.ones((2, 4)), np.ones((2, 1)), np.ones(4)), ValueError,
     r"d_y must have the shape of x_hat \(2, 4\), got \(2, 3\)"),
    ("rms_norm_backward: gamma of another width", lambda: sf.rms_norm_backward(
        np.ones((2, 4)), np.ones((2, 4)), np.ones((2, 1)), np.ones(3)), ValueError,
     r"gamma must have shape \(4,\) to match x_hat of shape \(2, 4\), got \(3,\)"),
    ("rms_norm_backward: inf in inv_rms", lambda: sf.rms_norm_backward(
        np.ones((2, 4)), np.ones((2, 4)), [[1.0], [np.inf]], np.ones(4)), ValueError,
     "inv_rms must be finite"),
    # every layer's backward checks the gradient's shape against its output's
    ("Linear.backward: d_y of another width", lambda: _backward_of(
        sf.Linear(2, 2), np.ones((3, 2)), np.ones((3, 5))), ValueError,
     r"d_y must have the output's shape \(3, 2\), got \(3, 5\)"),
    ("Linear.backward: d_y of more tokens", lambda: _backward_of(
        sf.Linear(2, 2), np.ones((3, 2)), np.ones((4, 2))), ValueError,
     r"d_y must have the output's shape \(3, 2\), got \(4, 2\)"),
    ("FeedForward.backward: d_y of another width", lambda: _backward_of(
        sf.FeedForward(2, 4), np.ones((3, 2)), np.ones((3, 5))), ValueError,
     r"d_y must have the output's shape \(3, 2\), got \(3, 5\)"),
    ("SwiGLU.backward: d_y of another width", lambda: _backward_of(
        sf.SwiGLU(2, 4), np.ones((3, 2)), np.ones((3, 5))), ValueError,
     r"d_y must have the output's shape \(3, 2\), got \(3, 5\)"),
    ("LayerNorm.backward: d_y of another width", lambda: _backward_of(
        sf.LayerNorm(2), np.ones((3, 2)) + np.arange(2), np.ones((3, 5))), ValueError,
     r"d_y must have the output's shape \(3, 2\), got \(3, 5\)"),
    ("RMSNorm.backward: d_y of another width", lambda: _backward_of(
        sf.RMSNorm(2), np.ones((3, 2)), np.ones((3, 5))), ValueError,
     r"d_y must have the output's shape \(3, 2\), got \(3, 5\)"),
    ("Embedding.backward: d_y of more tokens", lambda: _backward_of(
        sf.Embedding(5, 4), [1, 2], np.ones((3, 4))), ValueError,
     r"d_y must have the output's shape \(2, 4\), got \(3, 4\)"),
    ("Dropout.backward: dy of another shape", lambda: _backward_of(
        sf.Dropout(0.5, rng=_rng()), np.ones(3), np.ones(4)), ValueError,
     r"dy must have the output's shape \(3,\), got \(4,\)"),
    ("Dropout(p=0).backward: dy of another shape", lambda: _backward_of(
        sf.Dropout(0.0), np.ones(3), np.ones(4)), ValueError,
     r"dy must have the output's shape \(3,\), got \(4,\)"),
    ("DecoderModel.backward (tied head): d_logits of another width", lambda: _backward_of(
        sf.DecoderModel(vocab_size=7, d_model=8, n_heads=2, d_ff=8, n_layers=1,
                        max_positions=8, tie_embeddings=True), [[1, 2]], np.ones((1, 2, 5))),
     ValueError, r"d_logits must have the output's shape \(1, 2, 7\), got \(1, 2, 5\)"),
    # decoding
    ("beam_search: an alpha whose length penalty overflows", lambda: sf.beam_search(
        _translator(), [[1, 2, 3]], bos_id=1, eos_id=2, max_length=3, beam_width=2,
        alpha=1e3), ValueError,
     "alpha=1000.0 is too large for max_length=3: max_length \\*\\* alpha overflows"),
    ("sequence_log_probability: bos_id outside", lambda: sf.sequence_log_probability(
        _translator(), [[1, 2, 3]], [[2, 3]], bos_id=99), ValueError,
     r"bos_id must lie in \[0, 7\) \(the target vocabulary\), got 99"),
    # the Llama reader's metadata
    ("llama_options: 0 heads", lambda: llama_options(
        _LLAMA | {"llama.attention.head_count": 0}), ValueError,
     "llama.attention.head_count must be a positive integer, got 0"),
    ("llama_options: a string head count", lambda: llama_options(
        _LLAMA | {"llama.attention.head_count": "two"}), TypeError,
     "llama.attention.head_count must be a positive integer, got 'two'"),
    ("llama_options: a float width", lambda: llama_options(
        _LLAMA | {"llama.embedding_length": 8.9}), TypeError,
     "llama.embedding_length must be a positive integer, got 8.9"),
    ("llama_options: tokens that are not a list", lambda: llama_options(
        {k: v for k, v in _LLAMA.items() if k != "llama.vocab_size"}
        | {"tokenizer.ggml.tokens": 5}), TypeError,
     "tokenizer.ggml.tokens must be a list of tokens, got int"),
    # chrF's beta
    ("chrf: an infinite beta", lambda: sf.chrf("abc", "abd", beta=np.inf), ValueError,
     "beta must be finite and positive, got inf"),
    ("chrf: a beta whose square overflows", lambda: sf.chrf("abc", "abd", beta=1e200),
     ValueError, "beta must be at most about 1e154, so that its square is finite"),
    # a cross-entropy that overflows the logits' dtype
    ("cross_entropy: float16 logits 120000 apart", lambda: sf.cross_entropy(
        np.array([[60000.0, -60000.0]], np.float16), np.array([1])), ValueError,
     "the cross-entropy overflowed float16"),
    ("sequence_cross_entropy: float16 logits 120000 apart", lambda: sf.sequence_cross_entropy(
        np.array([[60000.0, -60000.0]], np.float16), np.array([1])), ValueError,
     "the cross-entropy overflowed float16"),
    ("sequence_cross_entropy: float64 logits 2e308 apart", lambda: sf.sequence_cross_entropy(
        np.array([[1e308, -1e308]]), np.array([1])), ValueError,
     "the cross-entropy overflowed float64"),
    # the gradient checker
    ("numerical_gradient: eps 0", lambda: sf.numerical_gradient(
        lambda: 1.0, np.zeros(2), eps=0), ValueError, "eps must be finite and positive, got 0"),
    ("numerical_gradient: NaN eps", lambda: sf.numerical_gradient(
        lambda: 1.0, np.zeros(2), eps=np.nan), ValueError,
     "eps must be finite and positive, got nan"),
    ("randomize_parameters: NaN scale", lambda: sf.randomize_parameters(
        sf.Linear(2, 2), _rng(), scale=np.nan), ValueError,
     "scale must be finite and non-negative, got nan"),
    ("randomize_parameters: no rng", lambda: sf.randomize_parameters(sf.Linear(2, 2), None),
     TypeError, "rng must be a numpy.random.Generator, got NoneType"),
    # heads and masks
    ("split_heads: one axis", lambda: sf.split_heads(np.zeros(8), 2), ValueError,
     r"x must have at least 2 axes with shape \(\.\.\., n, d_model\), got shape \(8,\)"),
    ("merge_heads: two axes", lambda: sf.merge_heads(np.zeros((3, 4))), ValueError,
     r"x must have at least 3 axes with shape \(\.\.\., h, n, d_k\), got shape \(3, 4\)"),
    ("padding_mask: a scalar", lambda: sf.padding_mask(np.array(3), 0), ValueError,
     r"tokens must have shape \(\.\.\., n\) with n >= 0, got shape \(\)"),
    ("target_mask: a scalar", lambda: sf.target_mask(np.array(3), 0), ValueError,
     r"tokens must have shape \(\.\.\., n\) with n >= 1, got shape \(\)"),
    ("target_mask: no tokens", lambda: sf.target_mask(np.zeros((1, 0), int), 0), ValueError,
     r"tokens must have shape \(\.\.\., n\) with n >= 1, got shape \(1, 0\)"),
    # the shift of rotation_matrix
    ("rotation_matrix: a string shift", lambda: sf.rotation_matrix("abc", 4), TypeError,
     "the shift k must be a real number, got 'abc'"),
    ("rotation_matrix: an array shift", lambda: sf.rotation_matrix(np.array([1.0, 2.0]), 4),
     TypeError, "the shift k must be a real number"),
    ("rotation_matrix: a bool shift", lambda: sf.rotation_matrix(True, 4), TypeError,
     "the shift k must be a real number, got True"),
]


@pytest.mark.parametrize("call, error, message", [row[1:] for row in BAD_INPUTS],
                         ids=[row[0] for row in BAD_INPUTS])
def test_bad_input_gets_a_clear_error(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_the_checks_keep_what_is_documented():
    """What the table's checks still allow: a top_k above the vocabulary keeps every token,
    and an exclude that leaves one sequence draws that one."""
    rows = np.tile([[0.0, 1.0, 2.0]], (200, 1))
    assert (sf.next_token(rows, temperature=1.0, top_k=10, rng=_rng()) ==
            sf.next_token(rows, temperature=1.0, rng=_rng())).all()
    tokens, _ = sf.LabellingTask(length=2, vocab_size=2).sample(_rng(), 3, [0, 1, 2])
    assert tokens.tolist() == [[1, 1]] * 3
    prompts, _ = sf.AdditionTask(n_digits=1).sample(_rng(), 2, np.arange(99))
    assert prompts.tolist() == [[9, 9]] * 2
