"""RateMonitor along a GD run against the closed forms of a quadratic (linear-regression) loss.

The DEQ is trained through its linear head alone, so z* is fixed and
L(w) = ‖Z w − y‖²/(2n): ∇L = Zᵀr/n, Hessian Zᵀ Z/n, and one GD step multiplies the loss by
exactly (L − η‖g‖² + η²/2 gᵀ H g)/L.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from deqlab import DEQ, Anderson, Implicit
from deqlab.diagnosis import RateMonitor
from deqlab.diagnosis.monitor import hessian_lambda_max


class TanhCell(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.lin = nn.Linear(d, d)
        self.lin.weight.data.mul_(0.5)
        self.lin.requires_grad_(False)

    def forward(self, z: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.lin(z) + x)


def problem(n: int = 10, m: int = 4):
    torch.manual_seed(7)
    deq = DEQ(TanhCell(m), solver=Anderson(tol=1e-13, max_iter=300), backward=Implicit())
    head = nn.Linear(m, 1, bias=False)
    X, y = torch.randn(n, m), torch.randn(n, 1)

    def closure() -> torch.Tensor:
        head.zero_grad()
        loss = (head(deq(X)) - y).square().sum() / (2 * n)
        loss.backward()
        return loss

    Z = deq(X).detach()
    return head, closure, Z, y


def test_hessian_power_iteration_is_the_top_eigenvalue_and_restores_the_state():
    head, closure, Z, _ = problem()
    closure()
    grad, weight = head.weight.grad.clone(), head.weight.detach().clone()
    beta = hessian_lambda_max(closure, [head.weight], iters=200, tol=1e-12, eps=1e-4, seed=0)
    expected = float(torch.linalg.eigvalsh(Z.T @ Z / Z.shape[0])[-1])
    assert beta == pytest.approx(expected, rel=1e-8)
    assert torch.equal(head.weight.grad, grad) and torch.equal(head.weight.detach(), weight)


def test_monitor_along_gd_matches_the_closed_forms():
    head, closure, Z, y = problem()
    n, lr = Z.shape[0], 0.4
    H = Z.T @ Z / n
    beta = float(torch.linalg.eigvalsh(H)[-1])
    monitor = RateMonitor(lr, curvature_every=5, power_iters=200, power_tol=1e-12)
    expected = []
    for _ in range(12):
        loss = closure()
        w = head.weight.detach().reshape(-1)
        r = Z @ w - y.reshape(-1)
        g = Z.T @ r / n
        L = float(r @ r) / (2 * n)
        after = L - lr * float(g @ g) + lr**2 / 2 * float(g @ H @ g)
        expected.append((L, float(g @ g) / (2 * L), after / L))
        record = monitor.observe(loss, [head.weight], closure)
        with torch.no_grad():
            head.weight.sub_(lr * head.weight.grad)
    for record, (L, ratio, factor) in zip(monitor.records[:-1], expected, strict=False):
        assert record["loss"] == pytest.approx(L, rel=1e-12)
        assert record["pl_ratio"] == pytest.approx(ratio, rel=1e-10)
        assert record["measured"] == pytest.approx(factor, rel=1e-10)
        assert record["curvature"] == pytest.approx(beta, rel=1e-8)
        # the PL/smoothness prediction bounds the measured factor of a quadratic
        assert record["measured"] <= record["predicted"] + 1e-10
    assert record["eta_max"] == pytest.approx(2 / beta, rel=1e-8)
    summary = monitor.summary()
    assert summary["measured_rate"] <= summary["predicted_rate"]
    assert "measured" in monitor.reading()


def test_the_prediction_fails_beyond_the_step_size_limit():
    """At η > 2/β the quadratic's loss grows along the top direction: measured factor > 1."""
    head, closure, Z, _ = problem()
    beta = float(torch.linalg.eigvalsh(Z.T @ Z / Z.shape[0])[-1])
    monitor = RateMonitor(3.0 / beta, curvature_every=10, power_iters=100, power_tol=1e-10)
    for _ in range(20):
        loss = closure()
        monitor.observe(loss, [head.weight], closure)
        with torch.no_grad():
            head.weight.sub_(monitor.lr * head.weight.grad)
    assert monitor.records[-2]["measured"] > 1
    assert monitor.lr > monitor.records[-1]["eta_max"]


def test_without_gd_there_is_no_prediction_and_bad_input_is_named():
    monitor = RateMonitor(0.1, gd=False)
    p = torch.ones(3, requires_grad=True)
    p.grad = torch.ones(3)
    assert monitor.observe(torch.tensor(2.0), [p])["predicted"] is None
    assert monitor.records[0]["pl_ratio"] == pytest.approx(3 / 4)
    with pytest.raises(ValueError, match="`loss` must be a finite"):
        monitor.observe(math.nan, [p])
    with pytest.raises(ValueError, match="`params`"):
        monitor.observe(1.0, [])
    with pytest.raises(ValueError, match="lr"):
        RateMonitor(0.0)


class Model(nn.Module):
    """A tanh DEQ with a linear head, every parameter trained."""

    def __init__(self, deq_of, d: int = 3) -> None:
        super().__init__()
        torch.manual_seed(11)
        self.cell = nn.Linear(d, d)
        self.cell.weight.data.mul_(0.6)
        self.head = nn.Linear(d, 2)
        self.deq = deq_of(lambda z, x: torch.tanh(self.cell(z) + x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.deq(x))


def test_hessian_of_a_trained_deq_against_the_dense_unrolled_hessian():
    """β of the monitor (HVPs from exact implicit gradients) against λ_max of the Hessian by
    double backpropagation through an unrolled, converged Picard solve."""
    from torch.func import functional_call

    from deqlab import Picard, Unrolled

    X, y = torch.randn(5, 3), torch.randn(5, 2)
    model = Model(lambda f: DEQ(f, solver=Anderson(tol=1e-14, max_iter=300), backward=Implicit()))
    oracle = Model(lambda f: DEQ(f, solver=Picard(tol=1e-14, max_iter=400), backward=Unrolled()))
    params = list(model.parameters())
    names = [name for name, _ in model.named_parameters()]
    sizes = [p.numel() for p in params]

    def loss_of(flat: torch.Tensor) -> torch.Tensor:
        parts = {
            n: v.reshape(p.shape) for n, v, p in zip(names, flat.split(sizes), params, strict=True)
        }
        return (functional_call(oracle, parts, (X,)) - y).square().sum() / 10

    flat = torch.cat([p.detach().reshape(-1) for p in params])
    dense = torch.autograd.functional.hessian(loss_of, flat)
    expected = float(torch.linalg.eigvalsh(dense)[-1])

    def closure() -> torch.Tensor:
        model.zero_grad()
        loss = (model(X) - y).square().sum() / 10
        loss.backward()
        return loss

    closure()
    beta = hessian_lambda_max(closure, params, iters=300, tol=1e-11, eps=1e-5, seed=0)
    assert beta == pytest.approx(expected, rel=1e-6)


def test_steps_with_approximate_gradients_get_no_prediction_and_are_said():
    """A DEQ with its default phantom gradient: the monitor records the step but predicts
    nothing from an approximate gradient, and its reading counts such steps."""
    torch.manual_seed(3)
    deq, head = DEQ(TanhCell(4).requires_grad_()), nn.Linear(4, 1, bias=False)
    X, y = torch.randn(10, 4), torch.randn(10, 1)
    monitor = RateMonitor(0.1)
    for _ in range(3):
        head.zero_grad()
        deq.zero_grad()
        loss = (head(deq(X)) - y).square().mean()
        loss.backward()
        assert deq.last_backward.exact is False
        record = monitor.observe(loss, [*deq.parameters(), head.weight], exact=False)
        assert record["exact"] is False and record["predicted"] is None
        assert record["pl_ratio"] > 0
    monitor.observe(loss, [head.weight], exact=True)
    assert monitor.records[-1]["predicted"] is not None
    assert "3 of 4 steps had approximate gradients" in monitor.reading()
    with pytest.raises(TypeError, match="`exact` must be a bool"):
        monitor.observe(loss, [head.weight], exact=1)
