"""The monotone DEQ (thesis Definition 3.2.1, Eq. 3.3): well-posedness and exact gradients."""

import pytest
import torch

from deqlab.implicit import Implicit
from deqlab.models.mondeq import MonDEQ, monotone_fixed_point
from deqlab.solvers import Anderson
from deqlab.solvers.splitting import ForwardBackward, PeacemanRachford
from deqlab.train.mondeq_gd import MonDEQGD

D, N, WIDTH, M = 4, 6, 10, 0.4
TIGHT = {"tol": 1e-13, "max_iter": 5000}


def make(solver, **kwargs):
    torch.manual_seed(1)
    return MonDEQ(D, WIDTH, m=M, solver=solver, **({"sigma_A": 0.6, "sigma_B": 0.6} | kwargs))


@pytest.mark.parametrize("scale", [0.1, 1.0, 10.0])
def test_monotonicity_holds_for_any_parameters(scale):
    """``I − W ⪰ m I`` (Proposition 1) whatever A and B are."""
    model = MonDEQ(D, WIDTH, m=M, sigma_A=scale, sigma_B=scale)
    W = model.weight().detach()
    sym = torch.eye(WIDTH) - (W + W.T) / 2
    assert float(torch.linalg.eigvalsh(sym).min()) >= M - 1e-10 * scale**2


def test_unique_equilibrium_from_any_start():
    """Well-posedness: solvers started anywhere reach the same ``Z*``."""
    model = make(PeacemanRachford(**TIGHT), sigma_A=3.0, sigma_B=3.0, sigma_U=2.0)
    X = torch.randn(D, N)
    with torch.no_grad():
        reference = model.equilibrium(X)
        for _ in range(3):
            z0 = 5 * torch.randn(WIDTH, N)
            assert torch.allclose(model.equilibrium(X, z0), reference, atol=1e-10, rtol=0)
        model.solver = PeacemanRachford(alpha=5.0, **TIGHT)
        assert torch.allclose(model.equilibrium(X), reference, atol=1e-10, rtol=0)
        W = model.weight()
        assert torch.allclose(torch.relu(W @ reference + model.U @ X), reference, atol=1e-11)


def _grads(model, X, y):
    model.zero_grad()
    X = X.clone().requires_grad_()
    loss = 0.5 * ((model(X) - y) ** 2).sum()  # Eq. (3.4)
    loss.backward()
    return [p.grad.clone() for p in (model.A, model.B, model.U, model.u)] + [X.grad]


@pytest.mark.parametrize("solver", [PeacemanRachford(**TIGHT), ForwardBackward(**TIGHT)])
def test_gradients_match_generic_implicit_path(solver):
    X, y = torch.randn(D, N), torch.randn(N)
    splitting = make(solver)
    generic = make(Anderson(tol=1e-13, max_iter=500), backward=Implicit())
    for got, want in zip(_grads(splitting, X, y), _grads(generic, X, y), strict=True):
        assert torch.allclose(got, want, atol=1e-9, rtol=0)
    assert splitting.last_forward.converged and splitting.last_backward.converged


def test_gradcheck_through_the_splitting_adjoint():
    X = torch.randn(3, 4)
    n = 5
    A, B, U = (torch.randn(n, n) / 2, torch.randn(n, n) / 2, torch.randn(n, 3))
    params = [t.requires_grad_() for t in (A, B, U)]

    def output(A, B, U):
        W = (1 - M) * torch.eye(n) - A.T @ A + B - B.T
        return monotone_fixed_point(W, U @ X, m=M, solver=PeacemanRachford(**TIGHT))

    assert torch.autograd.gradcheck(output, params, eps=1e-6, atol=1e-7, fast_mode=True)


def test_central_finite_differences():
    model = make(PeacemanRachford(**TIGHT))
    X, y = torch.randn(D, N), torch.randn(N)
    grads = _grads(model, X, y)
    eps = 1e-6
    for param, grad in zip((model.A, model.B, model.U), grads, strict=False):
        for idx in [(0, 1), (3, 2)]:
            with torch.no_grad():
                param[idx] += eps
                up = 0.5 * ((model(X) - y) ** 2).sum()
                param[idx] -= 2 * eps
                down = 0.5 * ((model(X) - y) ** 2).sum()
                param[idx] += eps
            assert float((up - down) / (2 * eps)) == pytest.approx(float(grad[idx]), abs=1e-7)


def test_output_is_linear_readout_of_equilibrium():
    model = make(PeacemanRachford(**TIGHT))
    X = torch.randn(D, N)
    with torch.no_grad():
        assert torch.allclose(model(X), model.equilibrium(X).T @ model.u)
    assert model(X).shape == (N,)


def test_bad_input():
    with pytest.raises(ValueError, match="`m` must be in"):
        MonDEQ(D, WIDTH, m=0.0)
    with pytest.raises(ValueError, match="`m` must be in"):
        MonDEQ(D, WIDTH, m=-1.0)
    with pytest.raises(ValueError, match="`width` must be >= 1"):
        MonDEQ(D, 0)
    with pytest.raises(TypeError, match="`solver` must be ForwardBackward, PeacemanRachford"):
        MonDEQ(D, WIDTH, solver="anderson")
    with pytest.raises(ValueError, match="`backward` applies to the generic path only"):
        MonDEQ(D, WIDTH, backward=Implicit())
    model = MonDEQ(D, WIDTH)
    with pytest.raises(
        ValueError, match=r"`X` must have shape \(d, N\) with d == U.shape\[1\] == 4"
    ):
        model(torch.randn(N, D))
    with pytest.raises(ValueError, match="`z0` must have shape"):
        model(torch.randn(D, N), torch.zeros(WIDTH, N + 1))
    with pytest.raises(TypeError, match="`solver` must be a splitting solver"):
        monotone_fixed_point(torch.eye(3), torch.ones(3, 1), m=1.0, solver=Anderson())


def test_the_bias_is_a_constant_input_feature():
    """``relu(Wz + Ux + b)`` is the unbiased model on ``[x; 1]`` with ``U' = [U, b]``: the
    same equilibrium, and ``∂ℓ/∂b`` is the last column of ``∂ℓ/∂U'`` (closed form
    ``Σ_j w_j`` of the adjoint columns)."""
    X, y = torch.randn(D, N), torch.randn(N)
    biased = make(PeacemanRachford(**TIGHT), bias=True)
    assert torch.equal(biased.b, torch.zeros(WIDTH))  # b = 0 at initialisation
    with torch.no_grad():
        biased.b.copy_(torch.randn(WIDTH))
    plain = MonDEQ(D + 1, WIDTH, m=M, solver=PeacemanRachford(**TIGHT))
    with torch.no_grad():
        for name in ("A", "B", "u"):
            getattr(plain, name).copy_(getattr(biased, name))
        plain.U.copy_(torch.cat([biased.U, biased.b[:, None]], dim=1))
    ones = torch.cat([X, torch.ones(1, N)])
    with torch.no_grad():
        assert torch.allclose(biased.equilibrium(X), plain.equilibrium(ones), atol=1e-11)
    for model, inputs in ((biased, X), (plain, ones)):
        model.zero_grad()
        (0.5 * ((model(inputs) - y) ** 2).sum()).backward()
    assert torch.allclose(biased.b.grad, plain.U.grad[:, -1], atol=1e-10, rtol=0)
    assert torch.allclose(biased.U.grad, plain.U.grad[:, :-1], atol=1e-10, rtol=0)


def test_gradcheck_of_the_bias_through_the_splitting_adjoint():
    X = torch.randn(D, 3)
    model = make(PeacemanRachford(**TIGHT), bias=True)

    def output(b):
        with torch.no_grad():
            W, C = model.weight(), model.U @ X
        return monotone_fixed_point(W, C + b[:, None], m=M, solver=model.solver)

    b = (0.3 * torch.randn(WIDTH)).requires_grad_()
    assert torch.autograd.gradcheck(output, (b,), eps=1e-6, atol=1e-7)


def test_no_bias_by_default_and_the_thesis_trainers_refuse_one():

    model = make(PeacemanRachford(**TIGHT))
    assert model.b is None and [n for n, _ in model.named_parameters()] == ["A", "B", "U", "u"]
    biased = make(PeacemanRachford(**TIGHT), bias=True)
    assert [n for n, _ in biased.named_parameters()] == ["A", "B", "U", "u", "b"]
    with pytest.raises(ValueError, match=r"must have no bias for GD against Theorem 3\.3\.5"):
        MonDEQGD(biased, torch.randn(D, N), torch.randn(N), lr=0.1)
    with pytest.raises(TypeError, match="`bias` must be a bool"):
        MonDEQ(D, WIDTH, bias=1)
