"""The encoder–decoder model, its masks and its loss.

- The loss against ``F.cross_entropy(ignore_index=, label_smoothing=)`` and finite
  differences; the label-smoothed value also from its definition, written out.
- The model's backward pass against finite differences (float64, Hypothesis shapes, padded
  sources and targets) and against PyTorch's autograd on the same weights, loss included.
- What the masks promise: padding changes nothing at the real positions, the decoder does
  not look ahead, pad rows are finite.
- Teacher forcing computes the sequential decoding steps (the chapter "The decoder"): bit for
  bit when every step runs on the parallel pass's shape (the future filled with anything)
  and attention is computed in one pass (up to 64 x 64 scores per head), within 100 eps of
  the largest logit when step t runs on its t tokens alone (BLAS sums a product's terms in an
  order that depends on the number of rows), and within 100 eps beyond 64 positions, where
  the blocked kernel chooses whether to subtract the row maximum from a bound over all keys,
  masked ones included (a case where that choice flips is checked to occur).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st

import scratchformer as sf
from conftest import examples
from scratchformer.pytorch import TorchEncoderDecoderModel, from_torch, to_torch, torch_gradients
from test_backward import assert_gradients_match, assert_tiny_gradients_match

F = torch.nn.functional


# ---- the loss ---------------------------------------------------------------------------

@pytest.mark.parametrize("eps", [0.0, 0.1, 0.5, 1.0])
@pytest.mark.parametrize("pad_id", [None, 0])
def test_loss_and_gradient_equal_pytorchs_cross_entropy(eps, pad_id):
    rng = np.random.default_rng(30)
    logits = rng.standard_normal((3, 5, 7)) * 2
    targets = rng.integers(0, 7, (3, 5))
    targets[0, 3:] = 0
    targets[2, 1:] = 0  # padding, if pad_id is 0
    loss, d_logits = sf.sequence_cross_entropy(logits, targets, pad_id=pad_id,
                                               label_smoothing=eps)
    logits_t = torch.tensor(logits, requires_grad=True)
    loss_t = F.cross_entropy(logits_t.reshape(-1, 7), torch.from_numpy(targets).reshape(-1),
                             ignore_index=-100 if pad_id is None else pad_id,
                             label_smoothing=eps)
    loss_t.backward()
    assert loss == pytest.approx(loss_t.item(), rel=1e-12)
    np.testing.assert_allclose(d_logits, logits_t.grad.numpy(), rtol=0, atol=1e-14)
    if pad_id == 0:
        assert not d_logits[targets == 0].any()  # pad tokens get no gradient


def test_label_smoothing_is_the_cross_entropy_with_the_smoothed_distribution():
    rng = np.random.default_rng(31)
    logits, targets = rng.standard_normal((4, 6)), np.array([1, 0, 5, 0])
    eps, k = 0.2, 6
    q = np.full((4, k), eps / k)  # eps/K on every class, the correct one included
    q[np.arange(4), targets] += 1 - eps
    log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    keep = targets != 0
    expected = -(q * log_p)[keep].sum() / keep.sum()
    loss, d_logits = sf.sequence_cross_entropy(logits, targets, pad_id=0, label_smoothing=eps)
    assert loss == pytest.approx(expected, rel=1e-12)
    numeric = sf.numerical_gradient(
        lambda: sf.sequence_cross_entropy(logits, targets, pad_id=0,
                                          label_smoothing=eps)[0], logits)
    assert sf.relative_error(d_logits, numeric) < 1e-8
    # without smoothing and padding it is the package's plain cross-entropy
    plain = sf.sequence_cross_entropy(logits, targets)
    assert plain[0] == pytest.approx(sf.cross_entropy(logits, targets)[0], rel=1e-14)


def test_loss_of_padding_only_is_refused_not_nan():
    with pytest.raises(ValueError, match="no token is left after removing the padding"):
        sf.sequence_cross_entropy(np.zeros((2, 3, 4)), np.zeros((2, 3), int), pad_id=0)


# ---- the model's gradients ---------------------------------------------------------------

def _padded(rng, batch, n, vocab, first=None):
    """Random ids in [1, vocab) with random lengths >= 1, right-padded with 0."""
    tokens = rng.integers(1, vocab, (batch, n))
    lengths = rng.integers(1, n + 1, batch)
    tokens[np.arange(n) >= lengths[:, None]] = 0
    if first is not None:
        tokens[:, 0] = first
    return tokens


model_shapes = st.fixed_dictionaries({
    "batch": st.integers(1, 3),
    "n_s": st.integers(1, 4),
    "n_t": st.integers(1, 4),
    "d_k": st.integers(2, 3),
    "d_ff": st.integers(2, 5),
    "norm": st.sampled_from(["post", "pre"]),
    "seed": st.integers(0, 2**16),
})


def _kink_free(model):
    """Smallest |pre-activation| of every ReLU in the last forward."""
    gaps = []
    for _, layer in model._tree():
        if isinstance(layer, sf.FeedForward):
            pre = layer._saved["x"] @ layer.params["w_1"] + layer.params["b_1"]
            gaps.append(float(np.abs(pre).min()))
    return min(gaps)


@examples(6)
@given(model_shapes)
def test_the_model_against_finite_differences(s):
    rng = np.random.default_rng(s["seed"])
    model = sf.EncoderDecoderModel(vocab_size=6, target_vocab_size=5, d_model=2 * s["d_k"],
                                   n_heads=2, d_ff=s["d_ff"], n_layers=2, norm=s["norm"],
                                   rng=rng)
    sf.randomize_parameters(model, rng)
    source = _padded(rng, s["batch"], s["n_s"], 6)
    target = _padded(rng, s["batch"], s["n_t"], 5, first=1)
    model.forward(source, target)
    assume(_kink_free(model) > 1e-3)
    pairs = sf.gradient_pairs(model, source, rng, target=target)
    assert set(pairs) == {name for name, _, _ in model.named_parameters()}
    zero = [name for name in pairs if name.endswith("attention.b_k")]
    # rows of the embeddings no token uses get no gradient: compared as zeros
    for name, used in (("source_embedding.table", source), ("target_embedding.table", target)):
        analytic, numeric = pairs.pop(name)
        unused = np.setdiff1d(np.arange(len(analytic)), used)
        assert not analytic[unused].any() and np.abs(numeric[unused]).max(initial=0) < 1e-7
        pairs[name] = (np.delete(analytic, unused, 0), np.delete(numeric, unused, 0))
    assert_tiny_gradients_match(pairs, zero)
    assert_gradients_match(pairs, zero)


def _pair(norm, rng):
    model = sf.EncoderDecoderModel(vocab_size=9, target_vocab_size=8, d_model=8, n_heads=2,
                                   d_ff=16, n_layers=2, norm=norm, rng=rng)
    sf.randomize_parameters(model, rng)
    return model, to_torch(model).train()  # dropout 0; train mode: no fast path


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_model_and_smoothed_loss_against_torch_autograd(norm):
    rng = np.random.default_rng(32)
    model, module = _pair(norm, rng)
    source = np.array([[3, 4, 5, 6, 7], [3, 4, 0, 0, 0], [8, 0, 0, 0, 0], [5, 5, 5, 5, 5]])
    target = np.array([[1, 3, 4, 5, 2, 0], [1, 6, 2, 0, 0, 0], [1, 2, 0, 0, 0, 0],
                       [1, 7, 7, 7, 7, 2]])  # BOS ... EOS, padded
    logits = model.forward(source, target[:, :-1])
    loss, d_logits = sf.sequence_cross_entropy(logits, target[:, 1:], pad_id=0,
                                               label_smoothing=0.1)
    model.backward(d_logits)
    logits_t = module(torch.from_numpy(source), torch.from_numpy(target[:, :-1]))
    loss_t = F.cross_entropy(logits_t.reshape(-1, 8), torch.from_numpy(target[:, 1:]).reshape(-1),
                             ignore_index=0, label_smoothing=0.1)
    loss_t.backward()
    np.testing.assert_allclose(logits, logits_t.detach().numpy(), rtol=0, atol=1e-12)
    assert loss == pytest.approx(loss_t.item(), rel=1e-12)
    expected = torch_gradients(module)
    grads = {name: owner.grads[key] for name, owner, key in model.named_parameters()}
    assert grads.keys() == expected.keys()
    for name, grad in grads.items():
        np.testing.assert_allclose(grad, expected[name], rtol=0, atol=1e-10, err_msg=name)


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_round_trip_through_torch(norm):
    rng = np.random.default_rng(33)
    model, module = _pair(norm, rng)
    back = from_torch(module)
    assert type(back) is sf.EncoderDecoderModel and back.config == model.config
    for (name, owner, key), (other, twin, twin_key) in zip(model.named_parameters(),
                                                           back.named_parameters()):
        assert name == other
        np.testing.assert_array_equal(owner.params[key], twin.params[twin_key])
    broken = TorchEncoderDecoderModel(module.source_embedding, list(module.encoder_blocks),
                                      None, module.target_embedding,
                                      list(module.decoder_blocks), None, module.head, 0)
    if norm == "pre":
        with pytest.raises(ValueError, match="encoder_norm exactly when"):
            from_torch(broken)


# ---- what the masks promise ---------------------------------------------------------------

def test_padding_changes_nothing_at_the_real_positions():
    rng = np.random.default_rng(34)
    model = sf.EncoderDecoderModel(vocab_size=9, target_vocab_size=8, d_model=8, n_heads=2,
                                   d_ff=16, n_layers=2, rng=rng)
    source, target = np.array([[3, 4, 5]]), np.array([[1, 6, 7]])
    alone = model.forward(source, target)
    padded = model.forward(np.array([[3, 4, 5, 0, 0]]), np.array([[1, 6, 7, 0]]))
    np.testing.assert_allclose(padded[:, :3], alone, rtol=0, atol=1e-12)
    assert np.isfinite(padded).all()  # the pad row too


def test_the_decoder_does_not_look_ahead():
    rng = np.random.default_rng(35)
    model = sf.EncoderDecoderModel(vocab_size=9, target_vocab_size=8, d_model=8, n_heads=2,
                                   d_ff=16, n_layers=2, norm="pre", rng=rng)
    source = np.array([[3, 4, 5]])
    first = model.forward(source, np.array([[1, 6, 7, 3]]))
    other = model.forward(source, np.array([[1, 6, 2, 5]]))  # the last two tokens changed
    np.testing.assert_allclose(first[:, :2], other[:, :2], rtol=0, atol=1e-12)
    assert not np.allclose(first[:, 2:], other[:, 2:])


@pytest.mark.parametrize("norm", ["post", "pre"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_teacher_forcing_computes_the_sequential_steps(norm, dtype):
    rng = np.random.default_rng(36)
    model = sf.EncoderDecoderModel(vocab_size=9, target_vocab_size=34, d_model=16, n_heads=2,
                                   d_ff=24, n_layers=2, norm=norm, rng=rng, dtype=dtype)
    source = rng.integers(1, 9, (50, 5))
    source[np.arange(5) >= rng.integers(1, 6, (50, 1))] = 0  # padded sources
    target = np.concatenate([np.ones((50, 1), int), rng.integers(3, 34, (50, 6))], axis=1)
    with model.inference():
        memory = model.encode(source)
        memory_mask = sf.padding_mask(source, 0)
        parallel = model.decode(target, memory, memory_mask)
        scale = np.finfo(dtype).eps * np.abs(parallel).max()
        for t in range(target.shape[1]):
            buffer = rng.integers(0, 34, target.shape)  # the future: anything
            buffer[:, :t + 1] = target[:, :t + 1]
            step = model.decode(buffer, memory, memory_mask)[:, t]
            np.testing.assert_array_equal(step, parallel[:, t])
            growing = model.decode(target[:, :t + 1], memory, memory_mask)[:, t]
            assert np.abs(growing - parallel[:, t]).max() <= 100 * scale


def test_the_masks():
    tokens = np.array([[1, 5, 0]])
    np.testing.assert_array_equal(sf.padding_mask(tokens, 0)[0, 0, 0], [True, True, False])
    np.testing.assert_array_equal(sf.target_mask(tokens, 0)[0, 0],
                                  [[True, False, False], [True, True, False],
                                   [True, True, False]])


def test_a_source_of_padding_only_gives_finite_output():
    model = sf.EncoderDecoderModel(vocab_size=5, target_vocab_size=5, d_model=4, n_heads=2,
                                   d_ff=4, n_layers=1)
    assert np.isfinite(model.forward(np.zeros((1, 3), int), np.array([[1, 3]]))).all()


def test_the_configuration_is_frozen_and_rebuilds_the_model():
    model = sf.EncoderDecoderModel(vocab_size=7, target_vocab_size=9, d_model=8, n_heads=2,
                                   d_ff=8, n_layers=3, norm="pre")
    assert isinstance(model.config, sf.ModelConfig)
    with pytest.raises(dataclasses.FrozenInstanceError):
        model.config.n_layers = 1
    twin = sf.EncoderDecoderModel(**dataclasses.asdict(model.config))
    assert twin.num_parameters == model.num_parameters
    assert len(model.decoder_blocks) == 3 and model.decoder_norm is not None


def test_teacher_forcing_beyond_64_positions_holds_to_rounding():
    """The bound that lets the blocked kernel skip the row maximum covers masked keys too,
    so a later token can change how row t is rounded (not its exact value): the buffer test
    agrees within 100 eps of the largest output, and with these inputs, scaled to put the
    bound near the threshold, some steps do differ in some bit (the theorem's condition is
    not met there, so the book does not claim bit equality)."""
    rng = np.random.default_rng(1)
    block = sf.DecoderBlock(8, 2, 16, rng=rng)
    sf.randomize_parameters(block, rng)
    n = 80
    x = 1.5 * rng.standard_normal((2, n, 8))
    memory = rng.standard_normal((2, 4, 8))
    mask = sf.causal_mask(n)
    parallel = block.forward(x, memory, mask=mask)
    scale = np.finfo(np.float64).eps * np.abs(parallel).max()
    inexact = 0
    for t in range(n):
        buffer = 1.5 * rng.standard_normal(x.shape)
        buffer[:, :t + 1] = x[:, :t + 1]
        step = block.forward(buffer, memory, mask=mask)[:, t]
        assert np.abs(step - parallel[:, t]).max() <= 100 * scale
        inexact += not np.array_equal(step, parallel[:, t])
    assert inexact > 0  # the case the theorem's condition excludes does occur


def test_a_logit_that_overflows_below_the_others_is_probability_zero_without_smoothing():
    """float16 cannot hold z - max z = -120000, but the class has probability 0 either way:
    without label smoothing the loss is that of the target, not NaN (0 * inf); the target's
    own overflow is refused (the table in test_house)."""
    logits = np.array([[60000.0, -60000.0]], np.float16)
    loss, d_logits = sf.sequence_cross_entropy(logits, np.array([0]))
    assert loss == 0.0 and d_logits.tolist() == [[0.0, 0.0]]
    assert sf.cross_entropy(logits, np.array([0]))[0] == 0.0
    with pytest.raises(ValueError, match="the cross-entropy overflowed float16"):
        sf.sequence_cross_entropy(logits, np.array([0]), label_smoothing=0.1)
