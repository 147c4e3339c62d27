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
