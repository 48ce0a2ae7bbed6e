"""Splitting solvers (forward-backward, Peaceman–Rachford) for monotone DEQs (thesis §2.3.2)."""

import pytest
import torch

from deqlab.solvers import Anderson, SolverError, Status
from deqlab.solvers.splitting import ForwardBackward, MonotoneOperator, PeacemanRachford

TIGHT = {"tol": 1e-13, "max_iter": 5000}


def monotone_weight(n: int, m: float, scale: float = 1.0, symmetric: bool = False):
    """``W = (1 − m) I − AᵀA + B − Bᵀ`` (Eq. 3.3) with random A, B."""
    A = scale * torch.randn(n, n) / n**0.5
    B = torch.zeros(n, n) if symmetric else scale * torch.randn(n, n) / n**0.5
    return (1 - m) * torch.eye(n) - A.T @ A + B - B.T


@pytest.fixture
def problem():
    n, N, m = 12, 5, 0.5
    W = monotone_weight(n, m, scale=0.6)
    return MonotoneOperator(W, m), W, torch.randn(n, N)


@pytest.mark.parametrize("solver", [ForwardBackward(**TIGHT), PeacemanRachford(**TIGHT)])
def test_splitting_matches_generic_anderson(problem, solver):
    op, W, c = problem
    z_split = solver.solve(op, c).z
    z_generic = Anderson(tol=1e-13, max_iter=500)(lambda z: torch.relu(W @ z + c), c * 0).z
    assert torch.allclose(z_split, z_generic, atol=1e-10, rtol=0)
    assert torch.allclose(torch.relu(W @ z_split + c), z_split, atol=1e-11, rtol=0)


@pytest.mark.parametrize("solver", [ForwardBackward(**TIGHT), PeacemanRachford(**TIGHT)])
def test_adjoint_equals_linear_solve(problem, solver):
    """``w = D(g + Wᵀ w)`` has the closed form ``w = (I − D Wᵀ)⁻¹ D g``."""
    op, W, g = problem
    mask = (torch.rand_like(g) < 0.6).to(g.dtype)
    w = solver.solve_adjoint(op, mask, g).z
    n = W.shape[0]
    for j in range(g.shape[1]):  # one column = one sample
        D = torch.diag(mask[:, j])
        expected = torch.linalg.solve(torch.eye(n) - D @ W.T, D @ g[:, j])
        assert torch.allclose(w[:, j], expected, atol=1e-10, rtol=0)


def test_proposition_3_contraction_bound(problem):
    """‖I − α(I − W)‖₂ ≤ √(1 − 2αm + α²L²) < 1 for α in (0, 2m/L²)."""
    op, W, _ = problem
    n = W.shape[0]
    for frac in (0.1, 0.5, 0.9):
        alpha = frac * op.alpha_max
        T = torch.eye(n) - alpha * (torch.eye(n) - W)
        bound = op.contraction_bound(alpha)
        assert float(torch.linalg.matrix_norm(T, ord=2)) <= bound + 1e-12
        assert bound < 1.0


def test_monotone_operator_constants(problem):
    op, W, _ = problem
    sym = torch.eye(W.shape[0]) - (W + W.T) / 2
    assert float(torch.linalg.eigvalsh(sym).min()) >= op.m - 1e-12  # I − W ⪰ m I
    fresh = MonotoneOperator(W, op.m)  # no cached exact L
    assert fresh.lipschitz_estimate(iters=300) == pytest.approx(op.lipschitz, rel=1e-6)
    assert fresh.lipschitz_estimate(iters=3) <= op.lipschitz * (1 + 1e-12)  # a lower bound
    assert op.lipschitz == pytest.approx(float(torch.linalg.svdvals(torch.eye(12) - W)[0]))


@pytest.mark.parametrize("symmetric", [True, False])
def test_resolvent_and_its_transpose(symmetric):
    n, m, alpha = 9, 0.3, 0.7
    W = monotone_weight(n, m, symmetric=symmetric)
    op = MonotoneOperator(W, m)
    y = torch.randn(n, 4)
    K = (1 + alpha) * torch.eye(n) - alpha * W
    assert torch.allclose(op.solve_resolvent(y, alpha), torch.linalg.solve(K, y), atol=1e-12)
    assert torch.allclose(
        op.solve_resolvent(y, alpha, transpose=True), torch.linalg.solve(K.T, y), atol=1e-12
    )
    assert op.factorization(alpha) == ("cholesky" if symmetric else "lu")


def test_peaceman_rachford_converges_for_large_alpha_and_faster_than_fb(problem):
    op, _, c = problem
    pr = PeacemanRachford(alpha=20.0, **TIGHT).solve(op, c)
    fb = ForwardBackward(**TIGHT).solve(op, c)
    assert pr.converged and fb.converged
    assert torch.allclose(pr.z, fb.z, atol=1e-10, rtol=0)
    assert PeacemanRachford(**TIGHT).solve(op, c).n_steps < fb.n_steps


@pytest.mark.parametrize("solver", [ForwardBackward(**TIGHT), PeacemanRachford(**TIGHT)])
def test_warm_start_at_the_equilibrium_stops_at_once(problem, solver):
    op, _, c = problem
    z_star = solver.solve(op, c).z
    again = solver.solve(op, c, z_star)
    assert again.n_steps == 1 and again.converged  # residual at z0 already below tol


def test_forward_backward_rejects_alpha_outside_convergent_range(problem):
    op, _, c = problem
    with pytest.raises(ValueError, match=r"`alpha` = .* outside the convergent range \(0, 2m/L²\)"):
        ForwardBackward(alpha=1.01 * op.alpha_max).solve(op, c)
    ForwardBackward(alpha=0.99 * op.alpha_max, **TIGHT).solve(op, c)  # inside: fine


@pytest.mark.parametrize("cls", [ForwardBackward, PeacemanRachford])
def test_bad_hyper_parameters(cls):
    with pytest.raises(ValueError, match="`alpha` must be in"):
        cls(alpha=0.0)
    with pytest.raises(ValueError, match="`tol` must be in"):
        cls(tol=-1.0)
    with pytest.raises(ValueError, match="`stop` must be one of"):
        cls(stop="max")
    with pytest.raises(TypeError, match="`max_iter` must be an int"):
        cls(max_iter=2.5)


def test_bad_operator_and_shapes(problem):
    op, W, c = problem
    with pytest.raises(ValueError, match="`m` must be in"):
        MonotoneOperator(W, 0.0)
    with pytest.raises(ValueError, match="`W` must be square"):
        MonotoneOperator(W[:, :3], 0.5)
    with pytest.raises(TypeError, match="`op` must be a MonotoneOperator"):
        PeacemanRachford().solve(W, c)
    with pytest.raises(ValueError, match=r"`c` must have shape \(12, 'any'\)"):
        PeacemanRachford().solve(op, c[:5])
    with pytest.raises(ValueError, match="`z0` must have shape"):
        PeacemanRachford().solve(op, c, torch.zeros(12, 2))


def test_non_convergence_status_and_error(problem):
    op, _, c = problem
    solution = ForwardBackward(tol=1e-14, max_iter=3, throw=False).solve(op, c)
    assert solution.status is Status.MAX_STEPS and solution.n_steps == 3
    with pytest.raises(
        SolverError, match=r"ForwardBackward max_steps after 3 steps.*forward solve"
    ):
        ForwardBackward(tol=1e-14, max_iter=3).solve(op, c)
