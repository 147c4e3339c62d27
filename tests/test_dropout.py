"""Dropout: the layer, where the blocks and the translator put it, and what it must not change.

- ``Dropout(p)`` zeroes each entry with probability ``p`` and scales the rest by ``1/(1-p)``;
  the share dropped and the mean kept lie within a Hoeffding bound derived below (not a tuned
  tolerance), and the bound rejects a wrong rate.
- Backward multiplies by the saved mask: finite differences with the masks fixed (the
  generators' states restored before each forward) agree, for the layer, both blocks in both
  layouts and the encoder–decoder model; PyTorch, given the same masks, computes the same
  outputs and gradients.
- ``p = 0`` is the identity (the same array), draws nothing and adds no layer; inside
  ``inference()`` dropout is the identity too, so a model with dropout evaluates as the same
  weights without it, bit for bit.
- Bad rates get a named error; the PyTorch conversions map ``Dropout`` to ``nn.Dropout`` and
  refuse a block with dropout (no exact counterpart in training).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import scratchformer as sf
from scratchformer.gradcheck import numerical_gradient, randomize_parameters, relative_error
from scratchformer.train import book_model

torch = pytest.importorskip("torch")


def hoeffding(n, spread, delta=1e-9):
    r"""The half-width :math:`t` with :math:`P(|\bar S - \mathbb{E}\bar S| \ge t) \le \delta`
    for the mean of ``n`` independent terms each within an interval of width ``spread``:
    Hoeffding's inequality :math:`2 \exp(-2 n t^2 / \text{spread}^2) = \delta`."""
    return spread * math.sqrt(math.log(2 / delta) / (2 * n))


def generators(layer):
    """The distinct generators of the dropout layers in ``layer``'s tree."""
    found = {}
    for _, sub in layer._tree():
        if isinstance(sub, sf.Dropout):
            found[id(sub.rng)] = sub.rng
    return list(found.values())


def fixed_masks(layer):
    """A function that rewinds every dropout generator of ``layer`` to its state now, so each
    forward after it draws the same masks."""
    states = [(rng, rng.bit_generator.state) for rng in generators(layer)]
    assert states, "no dropout layer to fix"

    def rewind():
        for rng, state in states:
            rng.bit_generator.state = state
    return rewind


# ---- the layer ----------------------------------------------------------------------------

def test_the_share_dropped_and_the_mean_lie_within_the_binomial_bound():
    p, shape = 0.25, (50, 40, 50)  # n = 100 000 entries
    n = math.prod(shape)
    x = np.random.default_rng(1).uniform(-2.0, 2.0, shape)
    layer = sf.Dropout(p, rng=np.random.default_rng(2))
    y = layer.forward(x)
    dropped = y == 0
    # each entry is dropped or not (a term in [0, 1]): the share is within t of p
    t_share = hoeffding(n, 1.0)
    assert abs(dropped.mean() - p) < t_share
    # kept entries are x / (1 - p) exactly; dropped ones are 0
    np.testing.assert_array_equal(y[~dropped], x[~dropped] * (1 / (1 - p)))
    # y_i - x_i = x_i (b_i / (1 - p) - 1) lies in [-|x_i|, |x_i| p / (1 - p)], an interval of
    # width |x_i| / (1 - p) <= 2 / (1 - p): the mean of y - x is within t of 0 (E y = x)
    t_mean = hoeffding(n, 2.0 / (1 - p))
    assert abs((y - x).mean()) < t_mean
    # and the bound can fail: a rate of 0.3 drops a share outside it
    wrong = sf.Dropout(0.3, rng=np.random.default_rng(2)).forward(x) == 0
    assert abs(wrong.mean() - p) > t_share


def test_backward_uses_the_saved_mask_and_matches_finite_differences():
    rng = np.random.default_rng(3)
    layer = sf.Dropout(0.4, rng=np.random.default_rng(4))
    x, g = rng.standard_normal((3, 5, 6)), rng.standard_normal((3, 5, 6))
    rewind = fixed_masks(layer)
    rewind()
    y = layer.forward(x)
    mask = layer.mask.copy()
    assert 0 < (mask == 0).sum() < mask.size  # some dropped, some kept
    np.testing.assert_array_equal(y, x * mask)
    dx = layer.backward(g)
    np.testing.assert_array_equal(dx, g * mask)
    assert layer.grads == {}

    def loss():
        rewind()
        return float((layer.forward(x) * g).sum())

    assert relative_error(dx, numerical_gradient(loss, x)) < 1e-9


def test_pytorch_with_the_same_mask_gives_the_same_output_and_gradient():
    rng = np.random.default_rng(5)
    layer = sf.Dropout(0.3, rng=np.random.default_rng(6))
    x, g = rng.standard_normal((4, 7)), rng.standard_normal((4, 7))
    y = layer.forward(x)
    mask = layer.mask
    dx = layer.backward(g)
    xt = torch.tensor(x, requires_grad=True)
    yt = xt * torch.from_numpy(mask)  # torch ops, our mask
    yt.backward(torch.from_numpy(g))
    np.testing.assert_array_equal(yt.detach().numpy(), y)
    np.testing.assert_array_equal(xt.grad.numpy(), dx)


def test_rate_zero_is_the_identity_and_draws_nothing():
    rng = np.random.default_rng(7)
    state = rng.bit_generator.state
    layer = sf.Dropout(0.0, rng=rng)
    x, dy = np.random.default_rng(8).standard_normal((2, 3, 4)), np.ones((2, 3, 4))
    assert layer.forward(x) is x
    assert layer.backward(dy) is dy
    assert rng.bit_generator.state == state


def test_inference_is_the_identity_and_draws_nothing():
    rng = np.random.default_rng(9)
    layer = sf.Dropout(0.5, rng=rng)
    x = np.random.default_rng(10).standard_normal((6, 4)).astype(np.float32)
    state = rng.bit_generator.state
    with layer.inference():
        assert layer.forward(x) is x
        with pytest.raises(RuntimeError, match="outside inference"):
            layer.backward(np.ones_like(x))
    assert rng.bit_generator.state == state
    y = layer.forward(x)  # training again: drops, in x's dtype
    assert y.dtype == np.float32 and (y == 0).any()


def test_the_masks_are_reproducible_by_seed():
    x = np.ones((8, 8))
    first = sf.Dropout(0.5, rng=np.random.default_rng(11)).forward(x)
    again = sf.Dropout(0.5, rng=np.random.default_rng(11)).forward(x)
    other = sf.Dropout(0.5, rng=np.random.default_rng(12)).forward(x)
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other)


@pytest.mark.parametrize("p, error, message", [
    (1.0, ValueError, r"p must lie in \[0, 1\), got 1.0"),
    (-0.1, ValueError, r"p must lie in \[0, 1\), got -0.1"),
    (float("nan"), ValueError, r"p must lie in \[0, 1\), got nan"),
    ("0.1", TypeError, "p must be a real number in"),
    (True, TypeError, "p must be a real number in"),
])
def test_a_bad_rate_gets_a_named_error(p, error, message):
    with pytest.raises(error, match=message):
        sf.Dropout(p)


def test_bad_arguments_elsewhere_get_named_errors():
    with pytest.raises(TypeError, match="rng must be a numpy.random.Generator"):
        sf.Dropout(0.1, rng=0)
    with pytest.raises(ValueError, match=r"dropout must lie in \[0, 1\), got 1"):
        sf.EncoderBlock(8, 2, 16, dropout=1)
    with pytest.raises(ValueError, match=r"dropout must lie in \[0, 1\), got 1.5"):
        sf.DecoderBlock(8, 2, 16, dropout=1.5)
    with pytest.raises(ValueError, match=r"dropout must lie in \[0, 1\)"):
        sf.EncoderDecoderConfig(vocab_size=5, target_vocab_size=5, d_model=8, n_heads=2,
                                d_ff=8, n_layers=1, dropout=-0.5)
    with pytest.raises(ValueError, match="the labelling model"):
        book_model(sf.LabellingTask(kind="sort"), dropout=0.1)
    with pytest.raises(ValueError, match="x must be finite"):
        sf.Dropout(0.1).forward(np.array([np.nan]))
    with pytest.raises(RuntimeError, match="needs a forward pass first"):
        sf.Dropout(0.1).backward(np.ones(3))


# ---- in the blocks and the model ----------------------------------------------------------

def close(analytic, numeric, tol=1e-6):
    """Relative error below ``tol``, or an absolute one below ``tol / 100`` for a gradient that
    is zero in exact arithmetic (the keys' bias: softmax ignores a shift of every score)."""
    error = np.linalg.norm(analytic - numeric)
    return error <= tol * max(np.linalg.norm(analytic), np.linalg.norm(numeric), 1e-2)


def _gradcheck(layer, forward, inputs, rng, tol=1e-6):
    """Every parameter's and input's gradient of ``<forward(), g>`` against finite differences,
    with the dropout masks fixed; returns the dropped share (to show masks were in play)."""
    rewind = fixed_masks(layer)
    rewind()
    out = forward()
    g = rng.standard_normal(np.shape(out))
    d_inputs = layer.backward(g)
    d_inputs = d_inputs if isinstance(d_inputs, tuple) else (d_inputs,)

    def loss():
        rewind()
        return float((forward() * g).sum())

    for name, array, analytic in zip(["x", "memory"], inputs, d_inputs):
        assert close(analytic, numerical_gradient(loss, array), tol), name
    analytic = {name: owner.grads[key].copy() for name, owner, key in layer.named_parameters()}
    for name, owner, key in layer.named_parameters():
        numeric = numerical_gradient(loss, owner.params[key])
        assert close(analytic[name], numeric, tol), name
    masks = [sub.mask for _, sub in layer._tree() if isinstance(sub, sf.Dropout)]
    return np.mean([(m == 0).mean() for m in masks])


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_the_encoder_block_backward_with_dropout_matches_finite_differences(norm):
    rng = np.random.default_rng(13)
    block = sf.EncoderBlock(8, 2, 12, norm=norm, dropout=0.3, rng=rng)
    randomize_parameters(block, rng)
    x = rng.standard_normal((2, 5, 8))
    mask = rng.random((2, 1, 5, 5)) < 0.8
    mask[..., 0] = True
    share = _gradcheck(block, lambda: block.forward(x, mask=mask), [x], rng)
    assert 0.1 < share < 0.5


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_the_decoder_block_backward_with_dropout_matches_finite_differences(norm):
    rng = np.random.default_rng(14)
    block = sf.DecoderBlock(8, 2, 12, norm=norm, dropout=0.3, rng=rng)
    randomize_parameters(block, rng)
    x, memory = rng.standard_normal((2, 4, 8)), rng.standard_normal((2, 6, 8))
    share = _gradcheck(block, lambda: block.forward(x, memory, mask=sf.causal_mask(4)),
                       [x, memory], rng)
    assert 0.1 < share < 0.5


def test_the_translator_backward_with_dropout_matches_finite_differences():
    rng = np.random.default_rng(15)
    model = sf.EncoderDecoderModel(vocab_size=7, target_vocab_size=6, d_model=8, n_heads=2,
                                   d_ff=8, n_layers=1, dropout=0.3, rng=rng)
    randomize_parameters(model, rng)
    source = np.array([[3, 4, 5, 0], [6, 2, 0, 0]])
    target = np.array([[1, 3, 2], [1, 4, 5]])
    assert model.source_dropout is not None and model.target_dropout is not None
    share = _gradcheck(model, lambda: model.forward(source, target), [], rng)
    assert 0.1 < share < 0.5


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_pytorch_with_the_same_masks_computes_the_encoder_block(norm):
    """PyTorch's own dropout draws its masks from its own generator, so its layer with
    ``dropout=p`` cannot be compared in training. Its layer with dropout 0 and our masks
    applied by torch ops at the same places computes our block's output and gradients."""
    from scratchformer.pytorch import to_torch, torch_gradients

    rng = np.random.default_rng(16)
    block = sf.EncoderBlock(8, 2, 12, norm=norm, dropout=0.25, rng=rng)
    randomize_parameters(block, rng)
    twin = sf.EncoderBlock(8, 2, 12, norm=norm)  # no dropout: convertible
    twin.load_parameters({name: owner.params[key]
                          for name, owner, key in block.named_parameters()})
    module = to_torch(twin).train()  # autograd (dropout 0: train mode drops nothing)
    x, g = rng.standard_normal((3, 5, 8)), rng.standard_normal((3, 5, 8))
    z = block.forward(x)
    d_x = block.backward(g)
    m1, m2 = (torch.from_numpy(block.dropout1.mask), torch.from_numpy(block.dropout2.mask))
    xt = torch.tensor(x, requires_grad=True)

    def attend(u):
        return module.self_attn(u, u, u, need_weights=False)[0]

    def ffn(u):
        return module.linear2(torch.relu(module.linear1(u)))

    if norm == "post":
        y = module.norm1(xt + m1 * attend(xt))
        zt = module.norm2(y + m2 * ffn(y))
    else:
        y = xt + m1 * attend(module.norm1(xt))
        zt = y + m2 * ffn(module.norm2(y))
    zt.backward(torch.from_numpy(g))
    np.testing.assert_allclose(z, zt.detach().numpy(), rtol=0, atol=1e-12)
    np.testing.assert_allclose(d_x, xt.grad.numpy(), rtol=0, atol=1e-12)
    theirs = torch_gradients(module)
    for name, owner, key in block.named_parameters():
        np.testing.assert_allclose(owner.grads[key], theirs[name], rtol=0, atol=1e-12,
                                   err_msg=name)


def test_rate_zero_adds_no_layer_and_draws_nothing():
    rng = np.random.default_rng(17)
    state = rng.bit_generator.state
    weights_rng = np.random.default_rng(17)
    block = sf.EncoderBlock(8, 2, 16, dropout=0.0, rng=rng)
    assert block.dropout1 is None and list(block.children()) == ["attention", "ffn", "norm1",
                                                                "norm2"]
    assert rng.bit_generator.state != state  # the weights were drawn ...
    plain = sf.EncoderBlock(8, 2, 16, rng=weights_rng)  # ... exactly as without the argument
    assert rng.bit_generator.state == weights_rng.bit_generator.state
    decoder = sf.DecoderBlock(8, 2, 16, dropout=0.0)
    assert len(decoder.children()) == 6 and repr(decoder).endswith("norm='post')")
    model = sf.EncoderDecoderModel(vocab_size=5, target_vocab_size=6, d_model=8, n_heads=2,
                                   d_ff=8, n_layers=1)
    assert not any(isinstance(layer, sf.Dropout) for _, layer in model._tree())
    x = np.random.default_rng(18).standard_normal((2, 3, 8))
    g = np.random.default_rng(19).standard_normal((2, 3, 8))
    z, z_plain = block.forward(x), plain.forward(x)
    np.testing.assert_array_equal(z, z_plain)
    np.testing.assert_array_equal(block.backward(g), plain.backward(g))


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_a_model_with_dropout_evaluates_as_its_weights_without_it(norm):
    """The masks come from a child generator (``spawn``), so the initial weights are the
    same at any rate; inside ``inference()`` dropout is the identity, so the logits are equal
    bit for bit; in training they differ (the masks are in play)."""
    dims = dict(vocab_size=9, target_vocab_size=7, d_model=8, n_heads=2, d_ff=16, n_layers=2,
                norm=norm)
    plain = sf.EncoderDecoderModel(**dims, rng=np.random.default_rng(20))
    dropped = sf.EncoderDecoderModel(**dims, dropout=0.2, rng=np.random.default_rng(20))
    names = [name for name, _, _ in plain.named_parameters()]
    assert names == [name for name, _, _ in dropped.named_parameters()]
    for (name, a, ka), (_, b, kb) in zip(plain.named_parameters(), dropped.named_parameters()):
        np.testing.assert_array_equal(a.params[ka], b.params[kb], err_msg=name)
    source = np.array([[3, 4, 5, 0], [6, 2, 8, 1]])
    target = np.array([[1, 3, 2], [1, 4, 5]])
    with plain.inference(), dropped.inference():
        np.testing.assert_array_equal(plain.forward(source, target),
                                      dropped.forward(source, target))
    assert not np.array_equal(plain.forward(source, target), dropped.forward(source, target))
    assert dropped.config.dropout == 0.2
    assert repr(dropped).endswith("pad_id=0, dropout=0.2)")


def test_the_replicas_of_parallel_training_draw_masks_of_their_own():
    """The loop runs parts of a batch on replicas of the model (BLAS on several threads); a
    replica copied with the model's generator would repeat its masks on every part."""
    from scratchformer.train import loop

    model = sf.EncoderDecoderModel(vocab_size=5, target_vocab_size=6, d_model=8, n_heads=2,
                                   d_ff=8, n_layers=1, dropout=0.5)
    (replica,) = loop._replicas(model, 1)
    x = np.ones((4, 8))
    ours = model.encoder_blocks[0].dropout1.forward(x)
    theirs = replica.encoder_blocks[0].dropout1.forward(x)
    assert not np.array_equal(ours, theirs)


# ---- PyTorch ------------------------------------------------------------------------------

def test_dropout_converts_to_nn_dropout_and_back():
    from scratchformer.pytorch import from_torch, to_torch

    module = to_torch(sf.Dropout(0.3))
    assert type(module) is torch.nn.Dropout and module.p == 0.3 and not module.training
    back = from_torch(torch.nn.Dropout(0.15), sf.Dropout)
    assert type(back) is sf.Dropout and back.p == 0.15


def test_a_block_or_model_with_dropout_is_refused_by_to_torch():
    from scratchformer.pytorch import to_torch

    for layer in (sf.EncoderBlock(8, 2, 16, dropout=0.1),
                  sf.DecoderBlock(8, 2, 16, dropout=0.1),
                  sf.EncoderDecoderModel(vocab_size=5, target_vocab_size=6, d_model=8,
                                         n_heads=2, d_ff=8, n_layers=1, dropout=0.1)):
        with pytest.raises(ValueError, match="without dropout only"):
            to_torch(layer)
    to_torch(sf.EncoderBlock(8, 2, 16, dropout=0.0))  # no dropout: converted
