"""Implicit gradients against closed forms, gradcheck and the unrolled oracle; the DEQ module."""

import math

import pytest
import torch
from torch import nn

from deqlab import (
    DEQ,
    Anderson,
    Broyden,
    FixedPointStats,
    Implicit,
    JacobianFree,
    Picard,
    SolverError,
    Unrolled,
    fixed_point,
)
from deqlab.implicit import TRAINING_SOLVER
from helpers import contraction

EXACT = {"tol": 1e-13, "stop": "abs", "max_iter": 2000}


@pytest.mark.parametrize(
    "solver", [Picard(**EXACT), Anderson(**EXACT), Broyden(**EXACT)], ids=lambda s: s.name
)
def test_affine_gradient_equals_closed_form(solver):
    # z* = (I - M)⁻¹ b, L = cᵀz*  ⇒  ∂L/∂b = u := (I - M)⁻ᵀ c,  ∂L/∂M = u z*ᵀ
    M = contraction(7, 0.8).requires_grad_()
    b, c = torch.randn(7, requires_grad=True), torch.randn(7)
    stats = FixedPointStats()
    z = fixed_point(lambda z: M @ z + b, torch.zeros(7), solver=solver, stats=stats)
    (c @ z).backward()
    eye = torch.eye(7)
    z_exact = torch.linalg.solve(eye - M.detach(), b.detach())
    u = torch.linalg.solve((eye - M.detach()).T, c)
    torch.testing.assert_close(z.detach(), z_exact, atol=1e-10, rtol=0)
    torch.testing.assert_close(b.grad, u, atol=1e-10, rtol=0)
    torch.testing.assert_close(M.grad, torch.outer(u, z_exact), atol=1e-10, rtol=0)
    assert stats.forward.converged and stats.backward.converged
    torch.testing.assert_close(stats.backward.z, u, atol=1e-10, rtol=0)


@pytest.mark.parametrize("per_sample", [False, True])
def test_gradcheck_tanh_cell(per_sample):
    # z = tanh(z Wᵀ + x Uᵀ + β), a batch of 3 samples of width 4
    W = contraction(4, 0.7).requires_grad_()
    U = torch.randn(4, 2, requires_grad=True)
    beta = torch.randn(4, requires_grad=True)
    x = torch.randn(3, 2, requires_grad=True)
    solver = Anderson(tol=1e-13, stop="abs", per_sample=per_sample)

    def equilibrium(W, U, beta, x):
        return fixed_point(
            lambda z: torch.tanh(z @ W.T + x @ U.T + beta), torch.zeros(3, 4), solver=solver
        )

    assert torch.autograd.gradcheck(equilibrium, (W, U, beta, x))


@pytest.mark.parametrize("unrolled_solver", [Picard, Anderson, Broyden])
def test_implicit_agrees_with_unrolled_oracle(unrolled_solver):
    W, x = contraction(16, 0.9).requires_grad_(), torch.randn(16, 5, requires_grad=True)

    def f(z):  # (16, 5): the whole batch matrix is one problem
        return torch.tanh(W @ z + x) + 0.1 * torch.sin(z)

    def grads(solver, backward):
        z = fixed_point(f, torch.zeros(16, 5), solver=solver, backward=backward)
        loss = (z**3).sum() + z[0].sum()
        return torch.autograd.grad(loss, (W, x))

    exact = grads(Picard(tol=1e-12, stop="abs"), Implicit())
    oracle = grads(unrolled_solver(tol=1e-12, stop="abs"), Unrolled())  # autograd through steps
    for g_exact, g_oracle in zip(exact, oracle, strict=True):
        torch.testing.assert_close(g_exact, g_oracle, atol=1e-8, rtol=0)


def test_jacobian_free_is_the_one_step_approximation():
    M = contraction(5, 0.6)
    b, c = torch.randn(5, requires_grad=True), torch.randn(5)
    z = fixed_point(
        lambda z: M @ z + b, torch.zeros(5), solver=Picard(**EXACT), backward=JacobianFree()
    )
    (c @ z).backward()
    torch.testing.assert_close(b.grad, c)  # u ≈ g: the (I - M)⁻ᵀ factor is dropped
    exact = torch.linalg.solve((torch.eye(5) - M).T, c)
    assert (b.grad - exact).norm() > 1e-2


def test_double_use_and_retain_graph():
    W, x = contraction(6, 0.5).requires_grad_(), torch.randn(6)
    z = fixed_point(lambda z: torch.tanh(W @ z + x), torch.zeros(6), solver=Anderson(**EXACT))
    loss = z.sum() * z[0] + (z**2).sum()  # z* used in several places
    loss.backward(retain_graph=True)
    once = W.grad.clone()
    loss.backward()  # the second backward accumulates the same gradient
    torch.testing.assert_close(W.grad, 2 * once)
    W_ = W.detach().clone().requires_grad_()
    z_ = fixed_point(
        lambda z: torch.tanh(W_ @ z + x),
        torch.zeros(6),
        solver=Picard(**EXACT),
        backward=Unrolled(),
    )
    (z_.sum() * z_[0] + (z_**2).sum()).backward()
    torch.testing.assert_close(once, W_.grad, atol=1e-10, rtol=0)


def test_warm_started_adjoint_reuses_the_previous_one():
    W, x = contraction(8, 0.9).requires_grad_(), torch.randn(8)
    stats = FixedPointStats()

    def backward_steps() -> int:
        z = fixed_point(
            lambda z: torch.tanh(W @ z + x),
            torch.zeros(8),
            solver=Picard(tol=1e-10),
            backward=Implicit(warm_start=True),
            stats=stats,
        )
        z.sum().backward()
        return stats.backward.n_steps

    cold = backward_steps()
    assert backward_steps() == 1 < cold  # the same problem again: starts at its adjoint


def test_no_graph_without_grad():
    W = contraction(4, 0.5).requires_grad_()
    with torch.no_grad():
        z = fixed_point(lambda z: W @ z + 1.0, torch.zeros(4))
    assert not z.requires_grad
    z = fixed_point(lambda z: 0.5 * z + 1.0, torch.zeros(4))  # nothing to differentiate
    assert not z.requires_grad


def test_forward_failure_carries_caller_hint():
    R = torch.tensor([[0.0, -1.3], [1.3, 0.0]])  # ‖R‖₂ = 1.3
    with pytest.raises(
        SolverError, match=r"Picard max_steps after 50 steps.*Hint: ‖W‖₂ = 1.3 >= 1; forward solve"
    ):
        fixed_point(
            lambda z: R @ z + 1.0,
            torch.zeros(2),
            solver=Picard(max_iter=50),
            hint=lambda: "‖W‖₂ = 1.3 >= 1",
        )


def test_adjoint_failure_is_reported_at_backward():
    # Anderson finds the fixed point of a non-contractive map; Picard cannot solve its adjoint
    R = 1.0 * torch.tensor([[math.cos(2.0), -math.sin(2.0)], [math.sin(2.0), math.cos(2.0)]])
    b = torch.ones(2, requires_grad=True)
    z = fixed_point(
        lambda z: R @ z + b,
        torch.zeros(2),
        solver=Anderson(**EXACT),
        backward=Implicit(solver=Picard(max_iter=40)),
    )
    with pytest.raises(SolverError, match=r"Picard max_steps after 40 steps.*adjoint solve"):
        z.sum().backward()


def test_bad_arguments():
    with pytest.raises(TypeError, match=r"`solver` must be a Solver"):
        fixed_point(torch.tanh, torch.zeros(2), solver="anderson")
    with pytest.raises(
        TypeError,
        match=r"`backward` must be Implicit\(\), Unrolled\(\), JacobianFree\(\), Phantom\(\)",
    ):
        fixed_point(torch.tanh, torch.zeros(2), backward="implicit")
    with pytest.raises(TypeError, match=r"`solver` must be a Solver .* or None"):
        Implicit(solver="picard")
    with pytest.raises(ValueError, match=r"`steps` must be >= 1; got 0"):
        Unrolled(steps=0)
    with pytest.raises(ValueError, match=r"`f\(z0\)` must have the shape of `z0`"):
        fixed_point(lambda z: z.sum(), torch.zeros(2))
    with pytest.raises(ValueError, match=r"`z0` must be finite"):
        fixed_point(torch.tanh, torch.tensor([math.inf]))


class TanhCell(nn.Module):
    """z ↦ tanh(W z + U x + β) on column batches: z (4, n), x (3, n)."""

    def __init__(self) -> None:
        super().__init__()
        self.W = nn.Parameter(contraction(4, 0.8))
        self.U = nn.Parameter(torch.randn(4, 3))
        self.beta = nn.Parameter(torch.randn(4, 1))

    def initial_state(self, x):
        return x.new_zeros(4, x.shape[1])

    def forward(self, z, x):
        return torch.tanh(self.W @ z + self.U @ x + self.beta)


def test_deq_module_matches_unrolled_and_exposes_stats():
    x = torch.randn(3, 5)
    deq = DEQ(TanhCell(), solver=Broyden(tol=1e-12, stop="abs"), backward=Implicit(init="grad"))
    assert deq.last_forward is None and set(dict(deq.named_parameters())) == {
        "cell.W",
        "cell.U",
        "cell.beta",
    }
    deq(x).square().sum().backward()
    assert deq.last_forward.converged and deq.last_backward.converged
    assert deq.last_forward.z.shape == (4, 5)
    exact = [p.grad.clone() for p in deq.parameters()]
    deq.zero_grad()
    deq.backward = Unrolled()
    deq.solver = Picard(tol=1e-13, stop="abs")
    deq(x).square().sum().backward()
    for g_exact, p in zip(exact, deq.parameters(), strict=True):
        torch.testing.assert_close(g_exact, p.grad, atol=1e-9, rtol=0)


def test_deq_default_z0_is_zeros_like_x_and_shape_errors_are_clear():
    W = contraction(3, 0.5)
    deq = DEQ(lambda z, x: torch.tanh(z @ W.T + x), solver=Anderson(**EXACT))
    x = torch.randn(2, 3)
    z = deq(x)
    torch.testing.assert_close(z, torch.tanh(z @ W.T + x), atol=1e-12, rtol=0)
    assert deq.last_forward.residuals[0] == pytest.approx(x.tanh().norm().item())  # z0 = 0
    with pytest.raises(
        ValueError, match=r"default z0 is zeros shaped like x \(2, 3\).* returned shape \(2, 2\)"
    ):
        DEQ(lambda z, x: z[:, :2])(x)
    with pytest.raises(  # an explicit z0: the solver's own shape check
        ValueError, match=r"`f\(z0\)` must have the shape of `z0` \(2, 3\); got \(2, 2\)"
    ):
        DEQ(lambda z, x: z[:, :2])(x, z0=torch.zeros(2, 3))
    with pytest.raises(TypeError, match=r"`z0` is needed: the cell has no initial_state"):
        DEQ(lambda z, x: z)((x, x))


def test_higher_order_gradients_are_refused_not_wrong():
    W = contraction(3, 0.5).requires_grad_()
    z = fixed_point(lambda z: torch.tanh(W @ z + 1.0), torch.zeros(3), solver=Picard(**EXACT))
    with pytest.raises(RuntimeError, match=r"first-order gradients only .* use backward=Unrolled"):
        torch.autograd.grad(z.sum(), W, create_graph=True)
    with pytest.raises(TypeError, match=r"`backward` must be Implicit\(\)"):
        DEQ(lambda z, x: z, backward=Unrolled)


def test_deq_state_wider_than_input_asks_for_z0():
    # state width 5, input width 3: the default z0 = zeros_like(x) cannot enter z Wᵀ
    W, U = contraction(5, 0.5), torch.randn(5, 3)
    deq = DEQ(lambda z, x: torch.tanh(z @ W.T + x @ U.T), solver=Anderson(**EXACT))
    x = torch.randn(4, 3)
    with pytest.raises(
        ValueError,
        match=r"default z0 is zeros shaped like x \(4, 3\) \(the cell has no initial_state\(x\)\)"
        r", and the cell rejected it: it raised RuntimeError: mat1 and mat2 shapes cannot be "
        r"multiplied.* pass the starting state as deq\(x, z0=\.\.\.\) \(the `z0` argument of "
        r"DEQ\.forward\)",
    ):
        deq(x)
    z = deq(x, z0=torch.zeros(4, 5))  # the remedy the message names
    torch.testing.assert_close(z, torch.tanh(z @ W.T + x @ U.T), atol=1e-12, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16])
def test_an_x_of_another_dtype_than_the_weights_is_named_as_a_dtype_error(dtype):
    # float32 weights, the state zeros_like(x): a later x in float64 is not a shape problem
    module_deq = DEQ(TanhLinear(torch.nn.Linear(3, 3, dtype=torch.float32)))
    module_deq(torch.randn(4, 3, dtype=torch.float32))  # float32 first: fine
    name = str(dtype).removeprefix("torch.")
    with pytest.raises(
        TypeError,
        match=rf"^`x` is {name} but the cell's parameters are float32, and the cell rejected "
        rf"the state of x's dtype: it raised RuntimeError: .*dtype.*\. Cast x to the "
        rf"parameters' dtype \(x\.to\(torch\.float32\)\) or the layer to x's "
        rf"\(deq\.to\(torch\.{name}\)\)$",
    ):
        module_deq(torch.randn(4, 3, dtype=dtype))
    z = module_deq.to(dtype)(torch.randn(4, 3, dtype=dtype))  # the remedy the message names
    assert z.dtype == dtype


class TanhLinear(torch.nn.Module):
    def __init__(self, linear: torch.nn.Linear) -> None:
        super().__init__()
        self.linear = linear

    def forward(self, z, x):
        return torch.tanh(self.linear(z) / 2 + x)


def test_deq_blames_the_zeros_z0_only_for_the_first_call():
    calls = []

    def cell(z, x):  # fails at its third evaluation, well after accepting the zeros
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("boom at the third call")
        return 0.5 * z + x

    with pytest.raises(RuntimeError, match=r"^boom at the third call$"):
        DEQ(cell)(torch.randn(2, 3))

    def out_of_memory(z, x):
        raise torch.OutOfMemoryError("fake out of memory")

    with pytest.raises(torch.OutOfMemoryError, match=r"^fake out of memory$"):
        DEQ(out_of_memory)(torch.randn(2, 3))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_deq_training_default_meets_its_tolerance_per_sample(dtype):
    # a plain lambda over nn.Linear(8, 8) with ‖W‖₂ = 0.8, x of shape (32, 8)
    c = nn.Linear(8, 8, dtype=dtype)
    with torch.no_grad():
        c.weight.copy_(contraction(8, 0.8))
    deq = DEQ(lambda z, x: torch.tanh(c(z) + x))
    x = torch.randn(32, 8, dtype=dtype)
    z = deq(x)
    assert z.shape == (32, 8) and z.dtype == dtype
    tol, forward = TRAINING_SOLVER.tol, deq.last_forward
    assert forward.converged and forward.sample_residuals.shape == (32,)
    assert forward.residual <= tol < forward.residuals[0]
    assert bool((forward.sample_residuals <= tol).all())
    assert int(forward.sample_steps.max()) == forward.n_steps
    # a posteriori: ‖z − z*‖ ≤ ‖f(z) − z‖ / (1 − 0.8) per sample (tanh is 1-Lipschitz)
    W, b, x64 = c.weight.double().detach(), c.bias.double().detach(), x.double()
    z_ref = fixed_point(lambda z: torch.tanh(z @ W.T + b + x64), x64 * 0, solver=Picard(**EXACT))
    fz = torch.tanh(z.double() @ W.T + b + x64)
    bound = (fz - z.double()).norm(dim=1) / 0.2
    assert bool(((z.double() - z_ref).norm(dim=1) <= bound + 1e-6).all())
    z.square().sum().backward()  # the layer's default gradient: phantom, labelled approximate
    assert deq.last_backward.method == "phantom" and not deq.last_backward.exact
    deq.backward = Implicit(init="grad")
    deq(x).square().sum().backward()  # the adjoint solve meets the same tolerance: exact
    assert deq.last_backward.exact and deq.last_backward.residual <= tol


def test_plain_callable_cell_trains_the_modules_it_closes_over():
    c = nn.Linear(6, 6)
    with torch.no_grad():
        c.weight.copy_(contraction(6, 0.8))
    deq = DEQ(lambda z, x: torch.tanh(c(z) + x), solver=Anderson(**EXACT), backward=Implicit())
    assert list(deq.parameters()) == []  # documented: a plain callable's modules stay unregistered
    x = torch.randn(4, 6)
    deq(x).pow(3).sum().backward()
    implicit = [c.weight.grad, c.bias.grad]
    c.zero_grad()
    deq.backward, deq.solver = Unrolled(), Picard(**EXACT)  # autograd through the iterations
    deq(x).pow(3).sum().backward()
    for g_implicit, g_unrolled in zip(implicit, [c.weight.grad, c.bias.grad], strict=True):
        torch.testing.assert_close(g_implicit, g_unrolled, atol=1e-9, rtol=0)


def test_deq_pickles_without_its_last_forward(tmp_path):
    deq = DEQ(TanhCell(), solver=Anderson(**EXACT))
    x = torch.randn(3, 5)
    deq(x)
    torch.save(deq, tmp_path / "deq.pt")
    loaded = torch.load(tmp_path / "deq.pt", weights_only=False)
    with pytest.raises(RuntimeError, match=r"call deq\(x\) first"):
        loaded.jacobian_penalty()
    torch.testing.assert_close(loaded(x), deq(x))
    assert loaded.stats.forward_solves == 2  # the counts travel: one before saving, one after
