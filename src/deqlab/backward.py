"""How to differentiate a fixed point: the backward objects and the adjoints they compute.

For ``z* = f(z*, θ)`` and a loss gradient ``g = ∂ℓ/∂z*``, every method returns a vector
``u`` and the parameter gradient is ``uᵀ ∂f/∂θ`` (one tracked call ``f(z*)``, see
:mod:`deqlab.implicit`). The methods differ in ``u``:

* :class:`Implicit` — EXACT: the adjoint fixed point ``u = g + J_f(z*)ᵀ u`` (Hieu 2022,
  Eq. 2.4), solved with VJPs to the adjoint solver's tolerance.
* :class:`Phantom` — APPROXIMATE: ``k`` damped steps ``u ← (1 − λ) u + λ (g + J_fᵀ u)``
  from ``u = 0``, i.e. ``u_k = λ Σ_{i<k} ((1 − λ) I + λ J_f)ᵀⁱ g`` (Geng et al. 2021,
  "On training implicit models", the unrolling-based phantom gradient, Eq. 8 with the
  Jacobians taken at ``z*``): the gradient of ``k`` unrolled damped steps
  ``z ← (1 − λ) z + λ f(z)`` started at a fixed point. ``u_k → (I − J_f)⁻ᵀ g`` as
  ``k → ∞`` when ``ρ((1 − λ) I + λ J_f) < 1``.
* :class:`JacobianFree` — APPROXIMATE: ``u = g`` (Fung et al. 2022), ``Phantom(1, 1)``.
* :class:`Shine` — APPROXIMATE: ``u = −Bᵀ g`` with ``B ≈ (J_f − I)⁻¹`` the forward Broyden
  solve's final inverse-Jacobian estimate (Ramzi et al. 2022, "SHINE", Eq. 4): no VJP.
* :class:`Unrolled` — backpropagation through the solver's iterations: the derivative of
  the returned iterate, the test oracle; the implicit gradient only in the limit.

:class:`ImplicitGradient` is the ``torch.autograd.Function`` that puts ``u`` in place of
``g`` during ``.backward()`` (:func:`deqlab.fixed_point` applies it).

``Implicit(init="shine")`` starts the exact adjoint solve from SHINE's estimate and
``Implicit(warm_start=True)`` from the previous adjoint: both only move the starting
point, so the gradient stays exact and fewer VJPs are needed when the start is good.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from deqlab._checks import check_bool, check_choice, check_int, check_real
from deqlab.fixed_point_stats import (
    BackwardRecord,
    FixedPointStats,
    Hint,
    solve,
)
from deqlab.solvers import Broyden, Solution, Solver
from deqlab.solvers.rows import RowMap
from deqlab.vjp import VJP

Map = Callable[[torch.Tensor], torch.Tensor]
INITS = ("zero", "grad", "shine")


@dataclass(frozen=True)
class Implicit:
    """Exact implicit gradient: solve the adjoint ``u = g + J_fᵀ u`` with VJPs.

    Args:
        solver: solver of the adjoint fixed point; None uses the forward solver.
        warm_start: start from the previous adjoint stored in the ``stats`` object
            passed to :func:`fixed_point` (when its shape matches), instead of ``init``.
        init: the start otherwise: ``"zero"``; ``"grad"`` (``u₀ = g``, the adjoint map's
            value at 0: one VJP fewer); ``"shine"`` (``u₀ = −Bᵀg`` from a Broyden forward
            solve, Ramzi et al. 2022). The solution does not depend on it.
    """

    solver: Solver | None = None
    warm_start: bool = False
    init: str = "zero"

    def __post_init__(self) -> None:
        if self.solver is not None and not isinstance(self.solver, Solver):
            raise TypeError(
                f"`solver` must be a Solver (Picard, Anderson, Broyden) or None; "
                f"got {type(self.solver).__name__}"
            )
        check_bool("warm_start", self.warm_start)
        check_choice("init", self.init, INITS)


@dataclass(frozen=True)
class Unrolled:
    """Backpropagate through the forward solver's iterations (autograd records each one).

    Args:
        steps: cap on the recorded iterations (replaces the solver's ``max_iter``);
            None keeps the solver's own.
    """

    steps: int | None = None

    def __post_init__(self) -> None:
        if self.steps is not None:
            check_int("steps", self.steps, min_value=1)


@dataclass(frozen=True)
class JacobianFree:
    """APPROXIMATE one-step gradient ``u ≈ g`` (Fung et al. 2022, Jacobian-free backprop).

    Drops the ``(I - J_f)⁻¹`` factor; cheap, and a descent direction when ``f`` is
    contractive, but not the true gradient (the theory in this package needs that).
    """


@dataclass(frozen=True)
class Phantom:
    """APPROXIMATE phantom gradient (Geng et al. 2021): ``steps`` damped adjoint steps.

    ``u ← (1 − λ) u + λ (g + J_f(z*)ᵀ u)`` from ``u = 0``, ``λ = damping``: the gradient of
    ``steps`` unrolled steps ``z ← (1 − λ) z + λ f(z)`` from ``z*`` (at a fixed point),
    ``steps − 1`` VJPs and no stored graph. Tends to the implicit gradient as ``steps``
    grows when ``ρ((1 − λ) I + λ J_f) < 1``; never labelled exact.
    """

    steps: int = 5
    damping: float = 0.5

    def __post_init__(self) -> None:
        check_int("steps", self.steps, min_value=1)
        check_real("damping", self.damping, low=0.0, high=1.0, low_inclusive=False)


@dataclass(frozen=True)
class Shine:
    """APPROXIMATE SHINE gradient (Ramzi et al. 2022): ``u = −Bᵀg``, no VJP.

    ``B ≈ (J_f − I)⁻¹`` is the forward :class:`~deqlab.solvers.Broyden` solve's final
    quasi-Newton estimate; needs a Broyden forward solver.
    """


Backward = Implicit | Unrolled | JacobianFree | Phantom | Shine
BACKWARDS = (Implicit, Unrolled, JacobianFree, Phantom, Shine)


def check_backward(backward: object, solver: Solver) -> None:
    """TypeError for a non-backward; ValueError where SHINE has no Broyden forward solve."""
    if not isinstance(backward, BACKWARDS):
        raise TypeError(
            "`backward` must be Implicit(), Unrolled(), JacobianFree(), Phantom() or Shine(); "
            f"got {backward!r}"
        )
    shine = isinstance(backward, Shine) or getattr(backward, "init", None) == "shine"
    if shine and not isinstance(solver, Broyden):
        raise ValueError(
            f"`backward` {backward!r} reuses Broyden's inverse-Jacobian estimate; the forward "
            f"solver is {solver.name}: pass solver=Broyden(...)"
        )


@dataclass(frozen=True)
class Adjoint:
    """One backward pass's problem: ``vjp(u) = J_f(z*)ᵀ u``, the incoming ``g``, and what
    the forward solve left (its Solution, solver, the layer's stats, policy and hint)."""

    vjp: VJP | None
    grad: torch.Tensor
    forward: Solution
    solver: Solver
    stats: FixedPointStats
    on_failure: str | None
    hint: Hint


def adjoint(backward: Backward, problem: Adjoint) -> tuple[torch.Tensor, BackwardRecord]:
    """The vector ``u`` that replaces ``g`` on the edge ``f(z*)``, and its record."""
    g = problem.grad
    if isinstance(backward, JacobianFree):
        return g, _approximate(problem, "jacobian_free", "Jacobian-free: u = g")
    if isinstance(backward, Shine):
        u = -problem.forward.inverse_jacobian.rmatvec(g)
        return u, _approximate(problem, "shine", "SHINE: u = −Bᵀg (Broyden's estimate)")
    if isinstance(backward, Phantom):
        return _phantom(backward, problem)
    return _implicit(backward, problem)


def _approximate(problem: Adjoint, method: str, reason: str) -> BackwardRecord:
    if not problem.forward.converged:
        reason += "; the forward solve did not converge"
    return BackwardRecord(method, False, reason, *_work(problem))


def _work(problem: Adjoint) -> tuple[float, float]:
    """VJPs and evaluations of ``f`` the backward pass spent, in full batches."""
    return (0.0, 0.0) if problem.vjp is None else (problem.vjp.vjps, problem.vjp.evaluations)


def _phantom(backward: Phantom, problem: Adjoint) -> tuple[torch.Tensor, BackwardRecord]:
    lam, g, vjp = backward.damping, problem.grad, problem.vjp
    assert vjp is not None or backward.steps == 1
    u = lam * g  # the first step from u = 0 (J_fᵀ0 = 0: no VJP)
    for _ in range(backward.steps - 1):
        u = (1 - lam) * u + lam * (g + vjp(u))
    reason = f"phantom gradient: {backward.steps} damped steps (λ = {lam})"
    return u, _approximate(problem, "phantom", reason)


def _implicit(backward: Implicit, problem: Adjoint) -> tuple[torch.Tensor, BackwardRecord]:
    g, vjp = problem.grad, problem.vjp
    assert vjp is not None
    solver = backward.solver or problem.solver

    def adjoint_map(u: torch.Tensor) -> torch.Tensor:  # u ↦ g + J_fᵀ u
        return g + vjp(u)

    def adjoint_rows(u_sub: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        return g.index_select(0, index) + vjp.rows(u_sub, index)

    rows = solver.per_sample and isinstance(vjp.f, RowMap)
    f = RowMap(adjoint_map, adjoint_rows) if rows else adjoint_map
    u0, stats = _start(backward, problem), problem.stats
    solution = solve(solver, f, u0, "adjoint", stats, problem.on_failure, problem.hint)
    reasons = []
    if not problem.forward.converged:
        reasons.append("the forward solve did not converge (J_f taken at the best iterate)")
    if not solution.converged:
        reasons.append(f"the adjoint solve did not converge (residual {solution.residual:.1e})")
    record = BackwardRecord("implicit", not reasons, "; ".join(reasons), *_work(problem), solution)
    return solution.z, record


def _start(backward: Implicit, problem: Adjoint) -> torch.Tensor:
    """``u₀``: the previous adjoint (``warm_start``, same shape/dtype/device), else ``init``."""
    g, previous = problem.grad, problem.stats.backward
    if backward.warm_start and previous is not None:
        same = (previous.z.shape, previous.z.dtype, previous.z.device)
        if same == (g.shape, g.dtype, g.device):
            return previous.z
    if backward.init == "grad":
        return g
    if backward.init == "shine":
        return -problem.forward.inverse_jacobian.rmatvec(g)
    return torch.zeros_like(g)


@dataclass(frozen=True)
class GradientSpec:
    """Everything :class:`ImplicitGradient` needs besides tensors (built by ``fixed_point``)."""

    f: Map
    solver: Solver
    backward: Backward
    stats: FixedPointStats
    hint: Hint
    on_failure: str | None
    forward: Solution


def _takes_vjps(backward: Backward) -> bool:
    """Whether the backward takes VJPs (then the graph of ``f`` at ``z*`` is recorded, one
    evaluation): ``Implicit``, and ``Phantom`` beyond its first step."""
    return isinstance(backward, Implicit) or (isinstance(backward, Phantom) and backward.steps > 1)


class ImplicitGradient(torch.autograd.Function):
    """Identity on values (returns ``z*``); backward maps ``g`` to the ``u`` of the
    backward object (:func:`adjoint`), which autograd sends along the edge ``f(z*)``."""

    @staticmethod
    def forward(
        ctx: Any, z_out: torch.Tensor, z_star: torch.Tensor, spec: GradientSpec
    ) -> torch.Tensor:
        # z_out = f(z*) carries the graph to the closed-over tensors; z_star the values.
        ctx.save_for_backward(z_star)
        ctx.spec = spec
        return z_star.clone()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, None, None]:
        spec: GradientSpec = ctx.spec
        if torch.is_grad_enabled():  # backward(create_graph=True)
            raise RuntimeError(
                "fixed_point supports first-order gradients only with Implicit, Phantom, Shine "
                "and JacobianFree (create_graph=True was requested); use backward=Unrolled() "
                "for higher order"
            )
        if not isinstance(spec.backward, JacobianFree) and not bool(torch.isfinite(grad).all()):
            raise ValueError("the gradient reaching the fixed point z* must be finite; got NaN/Inf")
        (z_star,) = ctx.saved_tensors
        vjp = VJP(spec.f, z_star) if _takes_vjps(spec.backward) else None
        problem = Adjoint(
            vjp, grad, spec.forward, spec.solver, spec.stats, spec.on_failure, spec.hint
        )
        with torch.no_grad():
            u, record = adjoint(spec.backward, problem)
        spec.stats.record_gradient(record)
        return u, None, None
