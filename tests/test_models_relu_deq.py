"""ReLU DEQ of Ling et al. (2023): Assumption-1 init, structured solves, and the gradient
against three independent oracles (generic fixed_point + autograd, Lemma 2's Kronecker
closed form, central finite differences), all in float64."""

import warnings

import pytest
import torch

from deqlab.implicit import Implicit, fixed_point
from deqlab.models import ReLUDEQ
from deqlab.papers.ling2023.theory import lemma2_gradients
from deqlab.solvers import Picard, SolverError, Status
from helpers import relu_problem


def _rel(a, b):
    return float((a - b).norm() / b.norm())


def test_init_is_seeded_and_has_assumption1_variances():
    m, d, sigma_w2 = 400, 50, 0.08
    model = ReLUDEQ.init(d, m, sigma_w2=sigma_w2, seed=3)
    again = ReLUDEQ.init(d, m, sigma_w2=sigma_w2, seed=3)
    other = ReLUDEQ.init(d, m, sigma_w2=sigma_w2, seed=4)
    assert torch.equal(model.W, again.W) and torch.equal(model.a, again.a)
    assert not torch.equal(model.W, other.W)
    W, U, a = model.W.detach(), model.U.detach(), model.a.detach()
    # sample variances / Assumption 1 variances; std of the estimate is sqrt(2/N)
    assert abs(float(W.var()) / (2 * sigma_w2 / m) - 1) < 0.02  # N = 160000
    assert abs(float(U.var()) / (2 / d) - 1) < 0.05  # N = 20000
    assert abs(float(a.var()) / (1 / m) - 1) < 0.3  # N = 400
    assert abs(float(W.mean())) < 5 * (2 * sigma_w2 / m) ** 0.5 / m
    assert (model.m, model.d) == (m, d)


def test_sigma_w2_at_least_one_eighth_warns():
    with pytest.warns(UserWarning, match="violates Assumption 1"):
        ReLUDEQ.init(3, 8, sigma_w2=0.125)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ReLUDEQ.init(3, 8, sigma_w2=0.124)


def test_float32_and_device_are_honoured():
    m32 = ReLUDEQ.init(4, 16, seed=2, dtype=torch.float32, device="cpu")
    m64 = ReLUDEQ.init(4, 16, seed=2)
    assert m32.W.dtype == torch.float32 and m32.W.device.type == "cpu"
    assert torch.equal(m32.W, m64.W.float())  # same draw, then cast
    X = torch.randn(4, 3, dtype=torch.float32)
    grads = m32.gradients(X, torch.zeros(3, dtype=torch.float32), tol=1e-5)
    assert grads.W.dtype == torch.float32


def test_bad_inputs_are_rejected():
    model, X, y = relu_problem(data_seed=101)
    with pytest.raises(ValueError, match=r"`X` must have shape \(d, n\) with d == U.shape\[1\]"):
        model.equilibrium(X.T)
    with pytest.raises(ValueError, match=r"`y` must have shape \(n,\) with n == X.shape\[1\]"):
        model.gradients(X, y[:-1])
    with pytest.raises(ValueError, match="`X` must have the model's dtype"):
        model.equilibrium(X.float())
    with pytest.raises(TypeError, match=r"`X` must be a torch\.Tensor"):
        model.equilibrium(X.numpy())
    with pytest.raises(ValueError, match=r"`W` must have shape \(3, 3\)"):
        ReLUDEQ(torch.zeros(3, 4), torch.zeros(3, 2), torch.zeros(3))
    with pytest.raises(ValueError, match=r"`a` must have shape \(3,\)"):
        ReLUDEQ(torch.zeros(3, 3), torch.zeros(3, 2), torch.zeros(4))
    with pytest.raises(ValueError, match="`m` must be >= 1"):
        ReLUDEQ.init(3, 0)
    with pytest.raises(ValueError, match=r"`sigma_w2` must be in \[0"):
        ReLUDEQ.init(3, 4, sigma_w2=-0.1)
    with pytest.raises(ValueError, match=r"`tol` must be in \(0"):
        model.equilibrium(X, tol=0.0)


def test_equilibrium_solves_eq2_and_warm_start_costs_no_product():
    model, X, _ = relu_problem(data_seed=101)
    sol = model.equilibrium(X, tol=1e-13)
    # Z0 = 0: the first product is free; converged columns drop out of later products
    assert sol.converged and sol.n_steps / 2 < sol.n_products < sol.n_steps - 1
    assert _rel(model.layer(sol.Z, X).detach(), sol.Z) < 1e-12
    assert torch.equal(sol.mask, (model.W @ sol.x_in + model.U @ X).detach() > 0)
    again = model.equilibrium(X, tol=1e-6, Z0=sol.Z)
    assert again.n_steps == 1 and again.n_products == 0  # the product of Z0 is supplied


def test_solver_failure_raises_with_message():
    model, X, y = relu_problem(data_seed=101)
    sol = model.equilibrium(X, tol=1e-14, max_iter=2)
    assert not sol.converged and sol.status is Status.MAX_STEPS and sol.n_steps == 2
    assert len(sol.residuals) == 2 and sol.residual == sol.residuals[-1] > 1e-14
    with pytest.raises(SolverError, match=r"forward solve .* max_steps after 2 steps"):
        model.gradients(X, y, tol=1e-14, max_iter=2)


def test_gradient_matches_generic_fixed_point_autograd():
    model, X, y = relu_problem(data_seed=101)
    ours = model.gradients(X, y, tol=1e-13)
    Z = fixed_point(
        lambda Z: model.layer(Z, X),
        torch.zeros(model.m, X.shape[1]),
        solver=Picard(tol=1e-13, max_iter=1000),
        backward=Implicit(),
    )
    loss = 0.5 * (model.predict(Z) - y).square().sum()
    loss.backward()
    assert abs(float(loss.detach()) - ours.loss) <= 1e-12 * ours.loss
    for name in ("W", "U", "a"):
        assert _rel(getattr(ours, name), getattr(model, name).grad) < 1e-8, name


def test_gradient_matches_lemma2_closed_form():
    model, X, y = relu_problem(data_seed=101)
    ours = model.gradients(X, y, tol=1e-13)
    for got, want in zip(
        (ours.W, ours.U, ours.a), lemma2_gradients(model, X, y, ours.forward.Z), strict=True
    ):
        assert _rel(got, want) < 1e-8


def test_gradient_matches_central_finite_differences():
    model, X, y = relu_problem(data_seed=101)
    ours = model.gradients(X, y, tol=1e-14)
    gen = torch.Generator().manual_seed(7)
    directions = [torch.randn(p.shape, generator=gen, dtype=p.dtype) for p in model.parameters()]
    eps = 1e-6

    def loss_at(sign):
        with torch.no_grad():
            for p, v in zip(model.parameters(), directions, strict=True):
                p.add_(sign * eps * v)
            value = model.gradients(X, y, tol=1e-14).loss
            for p, v in zip(model.parameters(), directions, strict=True):
                p.sub_(sign * eps * v)
        return value

    fd = (loss_at(1.0) - loss_at(-1.0)) / (2 * eps)
    exact = sum(
        float((g * v).sum()) for g, v in zip((ours.W, ours.U, ours.a), directions, strict=True)
    )
    assert abs(fd - exact) <= 1e-8 * abs(exact)


def test_forward_is_the_differentiable_prediction():
    model, X, y = relu_problem(data_seed=101)
    y_hat = model(X)
    assert y_hat.requires_grad and y_hat.shape == (X.shape[1],)
    torch.testing.assert_close(
        y_hat.detach(), model.predict(model.equilibrium(X, tol=1e-12).Z).detach()
    )
    (0.5 * (y_hat - y).square().sum()).backward()
    assert _rel(model.a.grad, model.gradients(X, y, tol=1e-12).a) < 1e-8
