"""The hand-written backward passes of attention, the layer norm, the feed-forward network,
``Linear``, the encoder blocks and the encoder model, checked two independent ways (the other
layers' are checked beside their modules' tests: CONTRIBUTING.md lists where).

1. Central finite differences in float64 on shapes chosen by Hypothesis: the relative error of
   every gradient (input and each parameter) must be below 1e-6. Finite differences know
   nothing about the derivation, so a wrong formula cannot pass.
2. PyTorch autograd on the same weights (``scratchformer.pytorch.to_torch``): gradients equal
   to 1e-10.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st

import scratchformer as sf
from conftest import examples
from scratchformer.attention import attention_backward, attention_kernel
from scratchformer.pytorch import to_torch, torch_gradients

FD_TOLERANCE = 1e-6
# The rounding noise of central differences at eps = 1e-5: about 1e-11 times the loss an
# entry; an absolute error below this is all a finite difference can resolve.
FD_NOISE = 1e-8


def assert_gradients_match(pairs, zero=()):
    """Relative error below FD_TOLERANCE for every gradient, or (for a small gradient, whose
    relative error the finite differences' rounding dominates) every entry within FD_NOISE of
    the numeric one, as for the tiny gradients below; ``zero`` names must vanish.

    A gradient of norm 1.3e-3 of a tied model showed a relative error of 2.4e-6 at eps = 1e-5,
    3.0e-7 at 1e-4 and 2.6e-5 at 1e-6: rounding (growing as eps shrinks), not the backward
    pass, whose entries were within 1e-9 of the numeric ones."""
    assert pairs
    for name, (analytic, numeric) in pairs.items():
        assert analytic.shape == numeric.shape, name
        if name in zero:  # exactly zero in theory: compare with the rounding noise of both
            assert np.abs(analytic).max() < 1e-12, name
            assert np.abs(numeric).max() < 1e-7, name
            continue
        if not numeric.any():  # e.g. every ReLU of a 1-unit layer off: nothing flows back,
            # and what the backward pass computes is zero up to rounding (a sum of products
            # that cancel, such as 1e-17 when a query's one visible key makes its softmax 1)
            assert np.abs(analytic).max() < 1e-12, name
            continue
        error = sf.relative_error(analytic, numeric)
        worst = np.abs(analytic - numeric).max()
        assert error < FD_TOLERANCE or worst < FD_NOISE, (
            f"{name}: relative error {error:.2e}, largest difference {worst:.1e}")


def assert_tiny_gradients_match(pairs, zero=()):
    """Compare (and remove from ``pairs``) the gradients of norm below 1e-3, absolutely.

    Such a gradient (a ReLU of ``d_ff = 2`` barely on, say) is within reach of the rounding
    noise of finite differences, about 1e-11 times the loss an entry, where a relative error
    says nothing; an absolute error below FD_NOISE is asked instead.
    """
    tiny = [name for name, (_, numeric) in pairs.items()
            if 0 < np.linalg.norm(numeric) < 1e-3 and name not in zero]
    for name in tiny:
        analytic, numeric = pairs.pop(name)
        assert np.abs(analytic - numeric).max() < FD_NOISE, name


# d_model = n_heads * d_k >= 4: layer norm over 2 features maps every token to about
# (+-1, -+1), a nearly constant function whose tiny gradients finite differences cannot
# resolve (and over 1 feature to exactly 0).
def relu_kink_gap(layer, x):
    """Smallest |pre-activation| of the layer's ReLUs on ``x`` (inf without a ReLU).

    Finite differences that step across a kink of the ReLU measure neither one-sided slope:
    such draws are not evidence either way, and the tests set them aside. GELU networks are
    smooth, and have no kink to report.
    """
    layer.forward(x)
    gaps = [np.inf]
    stack = [layer]
    while stack:
        node = stack.pop()
        stack += node.children().values()
        if isinstance(node, sf.FeedForward) and node.activation == "relu":
            saved = node._saved
            pre = saved["x"] @ node.params["w_1"] + node.params.get("b_1", 0.0)
            gaps.append(float(np.abs(pre).min()))
    return min(gaps)


shapes = st.fixed_dictionaries({
    "batch": st.lists(st.integers(1, 2), max_size=1),
    "n": st.integers(1, 4),
    "n_heads": st.integers(2, 3),
    "d_k": st.integers(2, 3),
    "d_ff": st.integers(1, 5),
    "seed": st.integers(0, 2**16),
})


@examples(20)
@given(shapes)
def test_softmax_backward_is_the_jacobian_transposed_times_g(s):
    rng = np.random.default_rng(s["seed"])
    x = rng.standard_normal((*s["batch"], s["n"] + 1))
    g = rng.standard_normal(x.shape)
    a = sf.softmax(x)
    expected = np.einsum("...ij,...i->...j", sf.softmax_jacobian(a), g)
    np.testing.assert_allclose(sf.softmax_backward(a, g), expected, atol=1e-14)
    numeric = sf.numerical_gradient(lambda: float(np.vdot(sf.softmax(x), g)), x)
    assert sf.relative_error(sf.softmax_backward(a, g), numeric) < FD_TOLERANCE


@examples(25)
@given(shapes, st.sampled_from(["none", "causal", "bool", "float"]))
def test_attention_backward_against_finite_differences(s, mask_kind):
    rng = np.random.default_rng(s["seed"])
    n_q, n_k, d_k = s["n"], s["n"] + 1, s["d_k"]
    q = rng.standard_normal((*s["batch"], n_q, d_k))
    k = rng.standard_normal((*s["batch"], n_k, d_k))
    v = rng.standard_normal((*s["batch"], n_k, d_k + 1))
    mask = {"none": None, "causal": np.tri(n_q, n_k, dtype=bool),
            "bool": rng.random((n_q, n_k)) < 0.6,
            "float": np.where(rng.random((n_q, n_k)) < 0.6, 0.0, -np.inf)}[mask_kind]
    out, weights = attention_kernel(q, k, v, mask)
    g = rng.standard_normal(out.shape)
    grads = attention_backward(g, q, k, v, weights)

    def loss():
        return float(np.vdot(attention_kernel(q, k, v, mask)[0], g))

    for name, array, analytic in zip("qkv", (q, k, v), grads):
        numeric = sf.numerical_gradient(loss, array)
        if not np.any(numeric):  # e.g. every key masked: nothing depends on this input
            assert not np.any(analytic), name
            continue
        assert sf.relative_error(analytic, numeric) < FD_TOLERANCE, name


def test_attention_backward_refuses_broadcast_batch_axes():
    rng = np.random.default_rng(0)
    q, k, v = rng.standard_normal((2, 5, 4)), rng.standard_normal((6, 4)), \
        rng.standard_normal((6, 3))
    out, weights = attention_kernel(q, k, v)  # the forward broadcasts k and v
    with pytest.raises(ValueError, match="same leading axes"):
        attention_backward(np.ones_like(out), q, k, v, weights)


def test_fully_masked_rows_get_zero_gradient_not_nan():
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((3, 2)) for _ in range(3))
    mask = np.array([[True, False, True], [False, False, False], [True, False, True]])
    out, weights = attention_kernel(q, k, v, mask)
    d_q, d_k, d_v = attention_backward(np.ones_like(out), q, k, v, weights)
    assert np.all(np.isfinite(d_q)) and not d_q[1].any()  # the query that sees nothing
    assert not d_k[1].any() and not d_v[1].any()  # the key no query may see


def _layers(s, rng):
    d_model = s["n_heads"] * s["d_k"]
    yield "LayerNorm", sf.LayerNorm(d_model), ()
    yield "FeedForward", sf.FeedForward(d_model, s["d_ff"], rng=rng), ()
    yield "Linear", sf.Linear(d_model, s["d_ff"], rng=rng), ()
    # The key bias shifts every score of a query by the same amount, which the softmax
    # ignores: its gradient is exactly zero (see the chapter "Backpropagation through
    # attention").
    yield "MultiHeadAttention", sf.MultiHeadAttention(d_model, s["n_heads"], rng=rng), \
        ("b_k",)
    for norm in ("post", "pre"):
        yield (f"EncoderBlock-{norm}",
               sf.EncoderBlock(d_model, s["n_heads"], s["d_ff"], norm=norm, rng=rng),
               ("attention.b_k",))


@examples(12)
@given(shapes)
def test_every_layer_against_finite_differences(s):
    rng = np.random.default_rng(s["seed"])
    for _, layer, zero in _layers(s, rng):
        sf.randomize_parameters(layer, rng)
        d_model = s["n_heads"] * s["d_k"]
        x = rng.standard_normal((*s["batch"], s["n"], d_model))
        assume(relu_kink_gap(layer, x) > 1e-3)
        assert_gradients_match(sf.gradient_pairs(layer, x, rng), zero)


@examples(6)
@given(shapes, st.sampled_from(["post", "pre"]))
def test_the_model_against_finite_differences(s, norm):
    rng = np.random.default_rng(s["seed"])
    d_model = 2 * s["d_k"]  # even, for the positional encoding
    model = sf.EncoderModel(vocab_size=5, n_classes=3, d_model=d_model, n_heads=2, d_ff=s["d_ff"],
                            n_layers=2, norm=norm, rng=rng)
    sf.randomize_parameters(model, rng)
    tokens = rng.integers(0, 5, (*s["batch"], s["n"]))
    assume(relu_kink_gap(model, tokens) > 1e-3)
    # Rows of the embedding no token uses get no gradient: compare those as zero.
    pairs = sf.gradient_pairs(model, tokens, rng)
    analytic, numeric = pairs.pop("embedding.table")
    unused = np.setdiff1d(np.arange(5), tokens)
    assert not analytic[unused].any() and np.abs(numeric[unused]).max(initial=0) < 1e-7
    pairs["embedding.table"] = (np.delete(analytic, unused, 0),
                                np.delete(numeric, unused, 0))
    zero = tuple(f"blocks.{i}.attention.b_k" for i in range(2))
    assert_tiny_gradients_match(pairs, zero)
    assert_gradients_match(pairs, zero)


def test_cross_entropy_against_finite_differences():
    rng = np.random.default_rng(3)
    logits = rng.standard_normal((2, 4, 5)) * 3
    targets = rng.integers(0, 5, (2, 4))
    loss, d_logits = sf.cross_entropy(logits, targets)
    numeric = sf.numerical_gradient(lambda: sf.cross_entropy(logits, targets)[0], logits)
    assert sf.relative_error(d_logits, numeric) < FD_TOLERANCE
    # and the value: -mean log softmax, computed the naive way (safe at this scale)
    probs = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    expected = -np.mean(np.log(np.take_along_axis(probs, targets[..., None], -1)))
    assert loss == pytest.approx(expected, rel=1e-12)


# ---- PyTorch autograd on the same weights ---------------------------------------------

def named_grads(layer):
    return {name: owner.grads[key] for name, owner, key in layer.named_parameters()}


@pytest.mark.parametrize("mask_kind", ["none", "causal", "with an empty row"])
def test_attention_backward_against_torch_autograd(mask_kind):
    rng = np.random.default_rng(11)
    q = rng.standard_normal((2, 3, 5, 4))  # (batch, h, n_q, d_k)
    k = rng.standard_normal((2, 3, 6, 4))
    v = rng.standard_normal((2, 3, 6, 7))
    mask = None if mask_kind == "none" else np.tri(5, 6, dtype=bool)
    if mask_kind == "with an empty row":
        mask[0] = False
    out, weights = attention_kernel(q, k, v, mask)
    g = rng.standard_normal(out.shape)
    ours = attention_backward(g, q, k, v, weights)

    tensors = [torch.tensor(a, requires_grad=True) for a in (q, k, v)]
    # Reference arithmetic in autograd (PyTorch's SDPA gives NaN for an empty row):
    scores = tensors[0] @ tensors[1].transpose(-1, -2) / 2.0  # sqrt(d_k) = 2
    if mask is not None:
        scores = scores.masked_fill(~torch.from_numpy(mask), -torch.inf)
    reference_weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    (reference_weights @ tensors[2] * torch.from_numpy(g)).sum().backward()
    for name, mine, tensor in zip("qkv", ours, tensors):
        np.testing.assert_allclose(mine, tensor.grad.numpy(), atol=1e-12, err_msg=name)


def test_layer_norm_backward_against_torch_autograd():
    rng = np.random.default_rng(12)
    x = rng.standard_normal((3, 4, 6)) * 3 + 1
    gamma, beta = rng.standard_normal(6), rng.standard_normal(6)
    g = rng.standard_normal(x.shape)
    norm = sf.LayerNorm(6)
    norm.params = {"gamma": gamma.copy(), "beta": beta.copy()}
    norm.forward(x)
    d_x = norm.backward(g)
    tensors = [torch.tensor(a, requires_grad=True) for a in (x, gamma, beta)]
    y = torch.nn.functional.layer_norm(tensors[0], (6,), tensors[1], tensors[2], eps=1e-5)
    (y * torch.from_numpy(g)).sum().backward()
    for mine, tensor in zip((d_x, norm.grads["gamma"], norm.grads["beta"]), tensors):
        np.testing.assert_allclose(mine, tensor.grad.numpy(), atol=1e-12)


@pytest.mark.parametrize("norm", ["post", "pre"])
@pytest.mark.parametrize("masked", [False, True])
def test_encoder_block_against_torch_autograd(norm, masked):
    rng = np.random.default_rng(5)
    block = sf.EncoderBlock(12, 3, 20, norm=norm, rng=rng)
    sf.randomize_parameters(block, rng)
    x = rng.standard_normal((2, 6, 12))
    mask = sf.causal_mask(6) if masked else None
    g = rng.standard_normal(x.shape)
    block.forward(x, mask=mask)
    d_x = block.backward(g)

    layer = to_torch(block).train()
    x_t = torch.tensor(x, requires_grad=True)
    mask_t = None if mask is None else torch.from_numpy(~mask)  # torch: True = blocked
    (layer(x_t, src_mask=mask_t) * torch.from_numpy(g)).sum().backward()
    expected = torch_gradients(layer)
    for name, grad in named_grads(block).items():
        np.testing.assert_allclose(grad, expected[name], atol=1e-10, err_msg=name)
    np.testing.assert_allclose(d_x, x_t.grad.numpy(), atol=1e-10)


def test_multihead_attention_against_torch_autograd():
    rng = np.random.default_rng(6)
    layer = sf.MultiHeadAttention(8, 2, rng=rng)
    sf.randomize_parameters(layer, rng)
    x = rng.standard_normal((3, 5, 8))
    g = rng.standard_normal(x.shape)
    layer.forward(x)
    d_x = layer.backward(g)
    module = to_torch(layer)
    x_t = torch.tensor(x, requires_grad=True)
    out, _ = module(x_t, x_t, x_t, need_weights=False)
    (out * torch.from_numpy(g)).sum().backward()
    expected = torch_gradients(module)
    for name, grad in named_grads(layer).items():
        np.testing.assert_allclose(grad, expected[name], atol=1e-10, err_msg=name)
    np.testing.assert_allclose(d_x, x_t.grad.numpy(), atol=1e-10)


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_model_and_loss_against_torch_autograd(norm):
    rng = np.random.default_rng(7)
    model = sf.EncoderModel(vocab_size=7, n_classes=4, d_model=8, n_heads=2, d_ff=16, n_layers=3,
                            norm=norm, rng=rng)
    sf.randomize_parameters(model, rng)
    tokens = rng.integers(0, 7, (4, 6))
    targets = rng.integers(0, 4, (4, 6))
    loss, d_logits = sf.cross_entropy(model.forward(tokens), targets)
    model.backward(d_logits)

    module = to_torch(model)
    logits_t = module(torch.from_numpy(tokens))
    loss_t = torch.nn.functional.cross_entropy(logits_t.reshape(-1, 4),
                                               torch.from_numpy(targets).reshape(-1))
    loss_t.backward()
    assert loss == pytest.approx(loss_t.item(), rel=1e-12)
    expected = torch_gradients(module)
    grads = named_grads(model)
    assert grads.keys() == expected.keys()
    for name, grad in grads.items():
        np.testing.assert_allclose(grad, expected[name], atol=1e-10, err_msg=name)


# ---- the contract ----------------------------------------------------------------------

def test_grads_mirror_params_and_backward_needs_a_forward():
    rng = np.random.default_rng(8)
    model = sf.EncoderModel(vocab_size=5, n_classes=5, d_model=8, n_heads=2, d_ff=12, n_layers=2,
                            norm="pre", rng=rng)
    with pytest.raises(RuntimeError, match="needs a forward pass first"):
        model.backward(np.zeros((1, 3, 5)))
    _, d_logits = sf.cross_entropy(model.forward(rng.integers(0, 5, (2, 3))),
                                   rng.integers(0, 5, (2, 3)))
    model.backward(d_logits)
    for name, owner, key in model.named_parameters():
        assert owner.grads.keys() == owner.params.keys(), name
        assert owner.grads[key].shape == owner.params[key].shape, name
        assert owner.grads[key].dtype == owner.params[key].dtype, name
    with pytest.raises(RuntimeError, match="needs a forward pass first"):
        model.backward(d_logits)  # one forward serves one backward


def test_float32_stays_float32_through_backward():
    rng = np.random.default_rng(9)
    model = sf.EncoderModel(vocab_size=5, n_classes=5, d_model=8, n_heads=2, d_ff=12, n_layers=2,
                            rng=rng, dtype=np.float32)
    logits = model.forward(rng.integers(0, 5, (2, 3)))
    assert logits.dtype == np.float32
    _, d_logits = sf.cross_entropy(logits, rng.integers(0, 5, (2, 3)))
    assert d_logits.dtype == np.float32
    model.backward(d_logits)
    for name, owner, key in model.named_parameters():
        assert owner.grads[key].dtype == np.float32, name


cross_shapes = st.fixed_dictionaries({
    "n_q": st.integers(1, 4),
    "n_k": st.integers(1, 4),
    "n_heads": st.integers(1, 3),
    "d_k": st.integers(1, 3),
    # the context's leading axes: the same as x's, or broadcast against them
    "context_batch": st.sampled_from([(2,), (1,), ()]),
    "mask": st.sampled_from(["none", "causal", "padding"]),
    "seed": st.integers(0, 2**16),
})


@examples(25)
@given(cross_shapes)
def test_cross_attention_against_finite_differences(s):
    """backward gives (dx, d_context): queries from x, keys and values from the context."""
    rng = np.random.default_rng(s["seed"])
    d_model = s["n_heads"] * s["d_k"]
    layer = sf.MultiHeadAttention(d_model, s["n_heads"], rng=rng)
    sf.randomize_parameters(layer, rng)
    x = rng.standard_normal((2, s["n_q"], d_model))
    context = rng.standard_normal((*s["context_batch"], s["n_k"], d_model))
    n_q, n_k = s["n_q"], s["n_k"]
    mask = {"none": None,
            "causal": np.tri(n_q, n_k, k=n_k - n_q, dtype=bool),  # may leave rows empty
            "padding": (np.arange(n_k) < rng.integers(0, n_k + 1, (2, 1, 1, 1)))}[s["mask"]]
    pairs = sf.gradient_pairs(layer, x, rng, mask=mask, context=context)
    # A gradient far below the rounding noise of finite differences (a nearly saturated
    # softmax) is not evidence either way; exact zeros (every key masked) are still checked.
    for name in ("x", "context"):
        size = np.linalg.norm(pairs[name][1])
        assume(size == 0 or size > 1e-3)
    assert set(pairs) == {"x", "context", *layer.params}
    assert pairs["context"][0].shape == context.shape
    assert_gradients_match(pairs, zero=("b_k",))


def test_cross_attention_against_torch_autograd():
    rng = np.random.default_rng(10)
    layer = sf.MultiHeadAttention(8, 2, rng=rng)
    sf.randomize_parameters(layer, rng)
    x = rng.standard_normal((3, 5, 8))
    context = rng.standard_normal((3, 7, 8))
    pad = np.arange(7) < np.array([7, 4, 1])[:, None, None, None]  # (3, 1, 1, 7): True = keep
    g = rng.standard_normal(x.shape)
    layer.forward(x, mask=pad, context=context)
    d_x, d_context = layer.backward(g)
    module = to_torch(layer)
    x_t = torch.tensor(x, requires_grad=True)
    c_t = torch.tensor(context, requires_grad=True)
    # torch's key_padding_mask: True = blocked
    out, _ = module(x_t, c_t, c_t, key_padding_mask=torch.from_numpy(~pad[:, 0, 0]),
                    need_weights=False)
    (out * torch.from_numpy(g)).sum().backward()
    expected = torch_gradients(module)
    for name, grad in named_grads(layer).items():
        np.testing.assert_allclose(grad, expected[name], atol=1e-10, err_msg=name)
    np.testing.assert_allclose(d_x, x_t.grad.numpy(), atol=1e-10)
    np.testing.assert_allclose(d_context, c_t.grad.numpy(), atol=1e-10)


def test_self_attention_returns_one_gradient_cross_attention_two():
    rng = np.random.default_rng(14)
    layer = sf.MultiHeadAttention(4, 2, rng=rng)
    x = rng.standard_normal((2, 3, 4))
    layer.forward(x)
    assert isinstance(layer.backward(np.ones((2, 3, 4))), np.ndarray)
    layer.forward(x, context=x)  # a context given, even x itself: two inputs, two gradients
    d_x, d_context = layer.backward(np.ones((2, 3, 4)))
    layer.forward(x)
    np.testing.assert_allclose(d_x + d_context, layer.backward(np.ones((2, 3, 4))),
                               atol=1e-12)


def test_attention_without_biases_has_gradients_for_its_weights_only():
    rng = np.random.default_rng(13)
    layer = sf.MultiHeadAttention(6, 2, bias=False, rng=rng)
    pairs = sf.gradient_pairs(layer, rng.standard_normal((2, 3, 6)), rng)
    assert set(pairs) == {"x", "w_q", "w_k", "w_v", "w_o"}
    assert list(layer.grads) == list(layer.params)
    assert_gradients_match(pairs)


def test_torch_gradients_need_a_backward_pass():
    module = to_torch(sf.MultiHeadAttention(4, 2))
    with pytest.raises(ValueError, match="no gradient"):
        torch_gradients(module)


def test_bad_inputs_get_named_errors():
    with pytest.raises(TypeError, match="integer token ids"):
        sf.Embedding(5, 4).forward(np.array([0.5]))
    with pytest.raises(ValueError, match=r"\[0, 5\)"):
        sf.Embedding(5, 4).forward(np.array([5]))
    with pytest.raises(ValueError, match="targets of shape"):
        sf.cross_entropy(np.zeros((2, 3)), np.zeros(3, dtype=int))
    with pytest.raises(ValueError, match="finite"):
        sf.cross_entropy(np.array([[np.nan, 0.0]]), np.array([0]))
    with pytest.raises(TypeError, match="float64"):
        sf.numerical_gradient(lambda: 0.0, np.zeros(2, dtype=np.float32))
