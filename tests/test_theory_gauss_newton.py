"""The Gauss–Newton curvature and PL ratio from VJPs and central-difference JVPs, against the
dense Jacobian (torch.autograd.functional.jacobian) of a small nonlinear model and of a
monotone DEQ, in float64."""

from __future__ import annotations

import pytest
import torch

from deqlab.models.mondeq import MonDEQ
from deqlab.theory.gauss_newton import gauss_newton


def _dense(predict, theta, y):
    J = torch.autograd.functional.jacobian(predict, theta)  # (n, p)
    r = predict(theta).detach() - y
    H = J @ J.T
    return float(torch.linalg.eigvalsh(H)[-1]), float((J.T @ r) @ (J.T @ r) / (r @ r))


def test_a_small_network_against_its_dense_jacobian():
    g = torch.Generator().manual_seed(0)
    X = torch.randn(5, 9, generator=g, dtype=torch.float64)
    y = torch.randn(9, generator=g, dtype=torch.float64)

    def predict(theta):
        W, a = theta[:15].view(3, 5), theta[15:]
        return a @ torch.tanh(W @ X)

    theta = torch.randn(18, generator=g, dtype=torch.float64)
    top, mu = _dense(predict, theta, y)
    found = gauss_newton(predict, theta, y)
    assert found.curvature == pytest.approx(top, rel=1e-6)
    assert found.pl_ratio == pytest.approx(mu, rel=1e-8) and found.pl_ratio <= found.curvature


def test_a_monotone_deq_against_its_dense_jacobian():
    g = torch.Generator().manual_seed(1)
    model = MonDEQ(3, 6, m=0.5, generator=g, dtype=torch.float64)
    X = torch.randn(3, 5, generator=g, dtype=torch.float64)
    y = torch.randn(5, generator=g, dtype=torch.float64)
    names = [name for name, _ in model.named_parameters()]
    shapes = [p.shape for _, p in model.named_parameters()]
    theta = torch.cat([p.detach().reshape(-1) for p in model.parameters()])

    def predict(t):
        parts = t.split([s.numel() for s in shapes])
        params = {n: p.view(s) for n, p, s in zip(names, parts, shapes, strict=True)}
        return torch.func.functional_call(model, params, (X,))

    top, mu = _dense(predict, theta, y)
    found = gauss_newton(predict, theta, y)
    assert found.curvature == pytest.approx(top, rel=1e-5)
    assert found.pl_ratio == pytest.approx(mu, rel=1e-6)
