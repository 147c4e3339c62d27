"""Tests for scratchformer.optim: Adam against torch.optim.AdamW, the schedule, clipping."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import scratchformer as sf


def model_with_grads(seed=0):
    rng = np.random.default_rng(seed)
    model = sf.EncoderModel(vocab_size=6, n_classes=6, d_model=8, n_heads=2, d_ff=12, n_layers=2,
                            rng=rng)
    tokens = rng.integers(0, 6, (3, 5))
    _, d_logits = sf.cross_entropy(model.forward(tokens), tokens)
    model.backward(d_logits)
    return model


def test_adam_matches_torch_adamw_over_several_steps():
    model = model_with_grads()
    params = {n: torch.tensor(o.params[k]) for n, o, k in model.named_parameters()}
    for p in params.values():
        p.requires_grad_(True)
    reference = torch.optim.AdamW(params.values(), lr=1.0, betas=(0.9, 0.98), eps=1e-9,
                                  weight_decay=0.0)
    decayed = [p for n, p in params.items() if p.ndim >= 2]
    others = [p for n, p in params.items() if p.ndim < 2]
    reference = torch.optim.AdamW([{"params": decayed, "weight_decay": 0.1},
                                   {"params": others, "weight_decay": 0.0}],
                                  lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    adam = sf.Adam(model, weight_decay=0.1)
    rng = np.random.default_rng(1)
    for lr in [1e-3, 3e-3, 2e-3, 5e-4]:
        for name, owner, key in model.named_parameters():  # fresh gradients every step
            owner.grads[key] = rng.standard_normal(owner.params[key].shape)
            params[name].grad = torch.tensor(owner.grads[key])
        for group in reference.param_groups:
            group["lr"] = lr
        reference.step()
        adam.step(lr)
    for name, owner, key in model.named_parameters():
        np.testing.assert_allclose(owner.params[key], params[name].detach().numpy(),
                                   rtol=1e-12, atol=1e-14, err_msg=name)


def test_adam_refuses_to_step_without_gradients():
    model = sf.EncoderModel(vocab_size=4, n_classes=4, d_model=4, n_heads=1, d_ff=4, n_layers=1)
    with pytest.raises(RuntimeError, match="run backward"):
        sf.Adam(model).step(1e-3)


def test_warmup_cosine_shape():
    lr = [sf.warmup_cosine(t, peak=1.0, warmup=10, total=110, final=0.1) for t in range(130)]
    assert lr[0] == pytest.approx(0.1) and lr[9] == pytest.approx(1.0)
    assert np.all(np.diff(lr[:10]) > 0)  # rises during warm-up
    assert np.all(np.diff(lr[10:111]) <= 0)  # then only falls
    assert lr[60] == pytest.approx(0.1 + 0.9 * 0.5)  # half-way down the cosine
    assert lr[110] == pytest.approx(0.1) and lr[129] == pytest.approx(0.1)
    assert sf.warmup_cosine(0, peak=2.0, warmup=0, total=5) == 2.0
    with pytest.raises(ValueError, match="warmup < total"):
        sf.warmup_cosine(0, peak=1.0, warmup=5, total=5)


def test_clipping_caps_the_norm_and_keeps_the_direction():
    model = model_with_grads()
    before = {n: o.grads[k].copy() for n, o, k in model.named_parameters()}
    norm = sf.grad_norm(model)
    expected = math.sqrt(sum(float((g**2).sum()) for g in before.values()))
    assert norm == pytest.approx(expected, rel=1e-12)
    returned = sf.clip_grad_norm(model, norm / 4)
    assert returned == pytest.approx(norm, rel=1e-12)
    assert sf.grad_norm(model) == pytest.approx(norm / 4, rel=1e-12)
    for name, owner, key in model.named_parameters():
        np.testing.assert_allclose(owner.grads[key], before[name] / 4, rtol=1e-12)
    sf.clip_grad_norm(model, norm)  # below the cap: untouched
    assert sf.grad_norm(model) == pytest.approx(norm / 4, rel=1e-12)


def test_clipping_a_diverged_gradient_raises():
    model = model_with_grads()
    _, owner, key = next(model.named_parameters())
    owner.grads[key][0, 0] = np.nan
    with pytest.raises(FloatingPointError, match="diverged"):
        sf.clip_grad_norm(model, 1.0)


def per_parameter_adam(params, grads, state, lr, t, betas=(0.9, 0.98), eps=1e-9, decay=0.1):
    """The update of the equations, one parameter at a time, in the same float operations."""
    beta1, beta2 = betas
    step_size = lr / (1.0 - beta1**t)
    root_correction2 = math.sqrt(1.0 - beta2**t)
    for name, param in params.items():
        m, v = state.setdefault(name, (np.zeros_like(param), np.zeros_like(param)))
        if param.ndim >= 2:
            param *= 1.0 - lr * decay
        m *= beta1
        m += (1.0 - beta1) * grads[name]
        v *= beta2
        v += (1.0 - beta2) * np.square(grads[name])
        param -= m / (np.sqrt(v) / root_correction2 + eps) * step_size


def test_one_update_over_all_parameters_is_each_parameter_s_update_bit_for_bit():
    """Adam updates every parameter of a dtype in one pass over one buffer: the same float
    operations as the equations applied parameter by parameter, so the same bits, in float32
    and float64 parameters of one model alike."""
    model = sf.EncoderModel(vocab_size=6, n_classes=6, d_model=8, n_heads=2, d_ff=12,
                            n_layers=2, rng=np.random.default_rng(0), dtype=np.float32)
    model.head.params["b"] = model.head.params["b"].astype(np.float64)  # a second dtype
    mine = sf.Adam(model, weight_decay=0.1)
    params = {n: o.params[k].copy() for n, o, k in model.named_parameters()}
    state, rng = {}, np.random.default_rng(1)
    for t, lr in enumerate([1e-3, 3e-3, 2e-3], start=1):
        grads = {}
        for name, owner, key in model.named_parameters():
            grads[name] = rng.standard_normal(params[name].shape).astype(params[name].dtype)
            owner.grads = {**(owner.grads or {}), key: grads[name].copy()}
        per_parameter_adam(params, grads, state, lr, t)
        if t == 2:
            mine.step(lr, listed=sf.gradients(model))  # a listed step is the same step
        else:
            mine.step(lr)
    for name, owner, key in model.named_parameters():
        assert owner.params[key].dtype == params[name].dtype, name
        assert np.array_equal(owner.params[key], params[name]), name
        assert np.array_equal(mine.state[name][0], state[name][0]), name  # m, as its view
        assert np.array_equal(mine.state[name][1], state[name][1]), name  # v


def test_adam_refuses_a_model_whose_parameters_changed():
    model = model_with_grads()
    adam = sf.Adam(model)
    model.head.params["w"] = np.zeros((8, 7))
    model.head.grads["w"] = np.zeros((8, 7))
    with pytest.raises(ValueError, match="changed since the optimiser was made"):
        adam.step(1e-3)


def test_a_gradient_of_the_wrong_shape_is_refused_by_name():
    model = model_with_grads()
    model.head.grads["w"] = model.head.grads["w"][:, :2]
    with pytest.raises(RuntimeError, match=r"gradient for head\.w has shape \(8, 2\)"):
        sf.gradients(model)
