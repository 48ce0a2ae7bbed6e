"""Backward objects against independent references in float64: the phantom gradient
against literal unrolling and its convergence to the implicit gradient; SHINE against a
dense Broyden matrix; the adjoint's starting points keep the gradient exact."""

import itertools

import pytest
import torch

from deqlab import (
    DEQ,
    Anderson,
    Broyden,
    FixedPointStats,
    Implicit,
    JacobianFree,
    Phantom,
    Picard,
    Shine,
    Unrolled,
    fixed_point,
)
from helpers import contraction

EXACT = {"tol": 1e-13, "stop": "abs", "max_iter": 2000}


class TanhCell(torch.nn.Module):
    """``f(z, x) = tanh(z Wᵀ + x Uᵀ + β)`` with ``‖W‖₂ = 0.7``."""

    def __init__(self, d: int = 5, p: int = 3) -> None:
        super().__init__()
        self.W = torch.nn.Parameter(contraction(d, 0.7))
        self.U = torch.nn.Parameter(torch.randn(d, p, dtype=torch.float64))
        self.beta = torch.nn.Parameter(torch.randn(d, dtype=torch.float64))

    def forward(self, z: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(z @ self.W.T + x @ self.U.T + self.beta)

    def initial_state(self, x: torch.Tensor) -> torch.Tensor:
        return x.new_zeros(x.shape[0], self.W.shape[0])


def grads(deq: DEQ, x: torch.Tensor, c: torch.Tensor) -> list[torch.Tensor]:
    deq.zero_grad()
    (deq(x) * c).sum().backward()
    return [p.grad.clone() for p in deq.cell.parameters()]


@pytest.mark.parametrize(("steps", "damping"), [(1, 1.0), (3, 0.5), (8, 0.8)])
def test_phantom_equals_backpropagation_through_damped_steps_from_z_star(steps, damping):
    cell, x = TanhCell(), torch.randn(4, 3, dtype=torch.float64)
    c = torch.randn(4, 5, dtype=torch.float64)
    deq = DEQ(cell, solver=Anderson(**EXACT), backward=Phantom(steps, damping))
    phantom = grads(deq, x, c)
    z = deq.last_forward.z.detach()  # Geng et al.: k damped steps from z*, by autograd
    for _ in range(steps):
        z = (1 - damping) * z + damping * cell(z, x)
    unrolled = torch.autograd.grad((z * c).sum(), list(cell.parameters()))
    for a, b in zip(phantom, unrolled, strict=True):
        torch.testing.assert_close(a, b, atol=1e-11, rtol=0)
    record = deq.last_backward
    assert record.method == "phantom" and not record.exact and record.vjps == steps - 1
    assert record.evaluations == (steps > 1)  # the graph at z*, only when a VJP is taken


def test_phantom_tends_to_the_implicit_gradient_at_the_damped_rate():
    # affine f(z) = M z + b, ℓ = cᵀz*: ∂ℓ/∂b = u. Phantom: u_k − u* = −(Mᵀ_λ)^k u* with
    # M_λ = (1 − λ) I + λ M, so ‖u_k − u*‖ ≤ ‖M_λ‖₂^k ‖u*‖ (and falls with k).
    M, c, lam = contraction(6, 0.9), torch.randn(6, dtype=torch.float64), 0.5
    u_star = torch.linalg.solve((torch.eye(6, dtype=torch.float64) - M).T, c)
    q = float(torch.linalg.matrix_norm((1 - lam) * torch.eye(6, dtype=torch.float64) + lam * M, 2))
    errors = []
    for k in (1, 2, 4, 8, 16, 32, 64):
        b = torch.randn(6, dtype=torch.float64, requires_grad=True)
        z = fixed_point(
            lambda z, b=b: M @ z + b,
            torch.zeros(6, dtype=torch.float64),
            solver=Anderson(**EXACT),
            backward=Phantom(k, lam),
        )
        (c @ z).backward()
        errors.append(float((b.grad - u_star).norm()))
        assert errors[-1] <= q**k * float(u_star.norm()) * (1 + 1e-9) + 1e-12
    assert all(later < earlier for earlier, later in itertools.pairwise(errors))
    assert errors[-1] < 1e-6 * errors[0]


def test_phantom_one_undamped_step_is_jacobian_free():
    cell, x = TanhCell(), torch.randn(4, 3, dtype=torch.float64)
    c = torch.randn(4, 5, dtype=torch.float64)
    phantom = grads(DEQ(cell, solver=Anderson(**EXACT), backward=Phantom(1, 1.0)), x, c)
    jfb = grads(DEQ(cell, solver=Anderson(**EXACT), backward=JacobianFree()), x, c)
    for a, b in zip(phantom, jfb, strict=True):
        torch.testing.assert_close(a, b, atol=1e-14, rtol=0)


def broyden_affine(backward):
    M = contraction(6, 0.8)
    b = torch.randn(6, dtype=torch.float64, requires_grad=True)
    stats = FixedPointStats()
    z = fixed_point(
        lambda z, b=b: M @ z + b,
        torch.zeros(6, dtype=torch.float64),
        solver=Broyden(tol=1e-6, stop="abs"),
        backward=backward,
        stats=stats,
    )
    return M, b, z, stats


def test_shine_is_minus_the_transposed_broyden_matrix_applied_to_g():
    _, b, z, stats = broyden_affine(Shine())
    c = torch.randn(6, dtype=torch.float64)
    (c @ z).backward()
    estimate = stats.forward.inverse_jacobian  # B = −I + Σ u_i v_iᵀ, built densely
    B = -torch.eye(6, dtype=torch.float64) + estimate.us[0].T @ estimate.vs[0]
    torch.testing.assert_close(b.grad, -B.T @ c, atol=1e-13, rtol=0)
    assert stats.gradient.method == "shine" and not stats.gradient.exact
    assert stats.gradient.vjps == 0


def test_adjoint_starts_keep_the_gradient_exact():
    c = torch.randn(6, dtype=torch.float64)
    for init in ("zero", "grad", "shine"):
        M, b, z, stats = broyden_affine(Implicit(solver=Anderson(**EXACT), init=init))
        (c @ z).backward()
        u = torch.linalg.solve((torch.eye(6, dtype=torch.float64) - M).T, c)
        torch.testing.assert_close(b.grad, u, atol=1e-10, rtol=0)
        assert stats.forward.converged and stats.gradient.exact


def test_adjoint_started_at_g_saves_exactly_one_picard_vjp():
    M, c = contraction(6, 0.8), torch.randn(6, dtype=torch.float64)
    vjps = {}
    for init in ("zero", "grad"):
        b = torch.randn(6, dtype=torch.float64, requires_grad=True)
        stats = FixedPointStats()
        z = fixed_point(
            lambda z, b=b: M @ z + b,
            torch.zeros(6, dtype=torch.float64),
            solver=Picard(**EXACT),
            backward=Implicit(init=init),
            stats=stats,
        )
        (c @ z).backward()
        vjps[init] = stats.gradient.vjps
    assert vjps["grad"] == vjps["zero"] - 1


def test_shine_needs_a_broyden_forward_solve():
    with pytest.raises(ValueError, match=r"reuses Broyden's inverse-Jacobian estimate.*Anderson"):
        DEQ(TanhCell(), solver=Anderson(), backward=Shine())
    with pytest.raises(ValueError, match=r"solver=Broyden"):
        DEQ(TanhCell(), solver=Picard(), backward=Implicit(init="shine"))
    with pytest.raises(ValueError, match=r"`init` must be one of 'zero', 'grad', 'shine'"):
        Implicit(init="previous")
    with pytest.raises(ValueError, match=r"`damping` must be"):
        Phantom(3, 0.0)


class ScaledRotation(torch.nn.Module):
    """``f(z, (x, s))_i = s_i R z_i + x_i`` per sample: gain ``s_i`` sets its difficulty."""

    def __init__(self) -> None:
        super().__init__()
        angle = torch.tensor(1.0, dtype=torch.float64)
        self.R = torch.stack([torch.stack([angle.cos(), -angle.sin()]),
                              torch.stack([angle.sin(), angle.cos()])])  # fmt: skip

    def forward(self, z, inputs):
        x, scales = inputs
        return scales[:, None] * (z @ self.R.T) + x

    def initial_state(self, inputs):
        return torch.zeros_like(inputs[0])


def test_row_compacted_adjoint_is_exact_per_sample_with_less_work():
    # ℓ = Σ_i c_iᵀ z_i*  ⇒  ∂ℓ/∂x_i = u_i = (I − s_i R)⁻ᵀ c_i
    scales = torch.linspace(0.05, 0.95, 16, dtype=torch.float64)
    x = torch.randn(16, 2, dtype=torch.float64, requires_grad=True)
    c = torch.randn(16, 2, dtype=torch.float64)
    records = {}
    for compaction in (True, False):
        solver = Picard(tol=1e-12, stop="abs", max_iter=2000, per_sample=True)
        deq = DEQ(ScaledRotation(), solver=solver, backward=Implicit(), row_compaction=compaction)
        x.grad = None
        (deq((x, scales)) * c).sum().backward()
        R, eye = deq.cell.R, torch.eye(2, dtype=torch.float64)
        for i in range(16):
            u = torch.linalg.solve((eye - scales[i] * R).T, c[i])
            torch.testing.assert_close(x.grad[i], u, atol=1e-10, rtol=0)
        records[compaction] = deq.last_backward
    compact, full = records[True], records[False]
    assert compact.exact and full.exact and compact.n_steps == full.n_steps
    assert full.vjps == full.n_steps and full.evaluations == 1
    assert compact.vjps < 0.6 * full.vjps  # the easy samples stopped early
    assert compact.evaluations > 1  # the graph was rebuilt on the pending samples


def test_unrolled_gradient_is_recorded_at_backward_and_labelled():
    deq = DEQ(TanhCell(), solver=Picard(tol=1e-10, max_iter=200), backward=Unrolled())
    z = deq(torch.randn(4, 3, dtype=torch.float64))
    assert deq.last_backward is None  # nothing recorded before .backward()
    z.sum().backward()
    record = deq.last_backward
    assert record.method == "unrolled" and not record.exact
    assert record.vjps == deq.last_forward.n_steps and deq.stats.backward_passes == 1


def saved_bytes(fn):
    """``fn()`` and the bytes autograd saved for its backward (packed tensors, counted once)."""
    seen = {}

    def pack(t):
        seen[id(t)] = t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    return out, sum(seen.values())


def test_checkpointed_unrolling_gives_the_same_gradient_with_less_saved_memory():
    cell, x = TanhCell(d=32, p=3), torch.randn(16, 3, dtype=torch.float64)
    c = torch.randn(16, 32, dtype=torch.float64)
    results = {}
    for checkpoint in (False, True):
        solver = Picard(tol=1e-10, max_iter=40)
        deq = DEQ(cell, solver=solver, backward=Unrolled(checkpoint=checkpoint))
        cell.zero_grad()
        z, saved = saved_bytes(lambda deq=deq: deq(x))
        (z * c).sum().backward()
        results[checkpoint] = ([p.grad.clone() for p in cell.parameters()], saved)
    (plain, plain_bytes), (light, light_bytes) = results[False], results[True]
    for a, b in zip(plain, light, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-13, atol=1e-15)
    assert light_bytes < 0.6 * plain_bytes  # the cell's intermediates are recomputed
