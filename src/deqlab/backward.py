"""How to differentiate a fixed point: the backward objects, each computing its own adjoint.

For ``z* = f(z*, θ)`` and a loss gradient ``g = ∂ℓ/∂z*``, every method returns a vector
``u`` and the parameter gradient is ``uᵀ ∂f/∂θ`` (one tracked call ``f(z*)``, see
:mod:`deqlab.gradient`). The methods differ in ``u`` (:meth:`Backward.adjoint`):

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
  the returned iterate, the test oracle; the implicit gradient only in the limit. It has no
  adjoint: it records the forward solve itself (:meth:`Backward.solve`, :meth:`Backward.attach`).

``Implicit(init="shine")`` starts the exact adjoint solve from SHINE's estimate and
``Implicit(warm_start=True)`` from the previous adjoint: both only move the starting
point, so the gradient stays exact and fewer VJPs are needed when the start is good.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.utils.checkpoint import checkpoint

from deqlab._checks import (
    NonFiniteError,
    check_bool,
    check_choice,
    check_int,
    check_real,
    check_tensor,
)
from deqlab.fixed_point_stats import BackwardRecord, FixedPointStats, Hint, OnFailure, solve
from deqlab.gradient import Adjoint, GradientSpec, attach
from deqlab.solvers import Broyden, Solution, Solver
from deqlab.solvers.rows import RowMap

Map = Callable[[torch.Tensor], torch.Tensor]
INITS = ("zero", "grad", "shine")


class Backward:
    """How to differentiate a fixed point: the forward solve the gradient needs
    (:meth:`solve`), how ``z*`` joins autograd (:meth:`attach`), and the adjoint ``u``
    (:meth:`adjoint`). Subclasses are frozen dataclasses of hyper-parameters."""

    #: the backward pass takes VJPs ``J_f(z*)ᵀ u`` (then the graph of ``f`` at ``z*`` is
    #: recorded once: one evaluation)
    takes_vjps = False
    #: a non-finite ``g`` is refused with a clear error (instead of a failed adjoint)
    checks_grad = True
    #: autograd records the forward solve (else it runs under ``torch.no_grad``)
    records_forward = False

    def check(self, solver: Solver) -> None:
        """ValueError where this backward cannot use ``solver``'s forward solve."""

    def solve(
        self,
        solver: Solver,
        f: Map,
        z0: torch.Tensor,
        stats: FixedPointStats,
        on_failure: OnFailure,
        hint: Hint,
    ) -> Solution:
        """The forward solve of :meth:`forward_problem`; without autograd unless
        ``records_forward`` (else ``z*`` is joined to autograd by :meth:`attach`)."""
        solver, f = self.forward_problem(solver, f)
        if self.records_forward:
            return solve(solver, f, z0, "forward", stats, on_failure, hint)
        with torch.no_grad():
            return solve(solver, f, z0.detach(), "forward", stats, on_failure, hint)

    def forward_problem(self, solver: Solver, f: Map) -> tuple[Solver, Map]:
        """The solver and map of the forward solve (the layer's own, unless a backward
        needs them changed)."""
        return solver, f

    def attach(self, f: Map, solution: Solution, spec: GradientSpec) -> torch.Tensor:
        """``z*`` with its gradient: ``g`` is replaced by :meth:`adjoint`'s ``u``."""
        return attach(f, solution, spec)

    def adjoint(self, problem: Adjoint) -> tuple[torch.Tensor, BackwardRecord]:
        """The vector ``u`` that replaces ``g`` on the edge ``f(z*)``, and its record."""
        raise NotImplementedError(f"{type(self).__name__} has no adjoint")


def _check_broyden(backward: Backward, solver: Solver) -> None:
    if not isinstance(solver, Broyden):
        raise ValueError(
            f"`backward` {backward!r} reuses Broyden's inverse-Jacobian estimate; the forward "
            f"solver is {solver.name}: pass solver=Broyden(...)"
        )


@dataclass(frozen=True)
class Implicit(Backward):
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
    takes_vjps = True

    def __post_init__(self) -> None:
        if self.solver is not None and not isinstance(self.solver, Solver):
            raise TypeError(
                f"`solver` must be a Solver (Picard, Anderson, Broyden) or None; "
                f"got {type(self.solver).__name__}"
            )
        check_bool("warm_start", self.warm_start)
        check_choice("init", self.init, INITS)

    def check(self, solver: Solver) -> None:
        if self.init == "shine":
            _check_broyden(self, solver)

    def adjoint(self, problem: Adjoint) -> tuple[torch.Tensor, BackwardRecord]:
        """The adjoint fixed point ``u = g + J_fᵀu``, solved from :meth:`start`."""
        g, vjp = problem.grad, problem.vjp
        solver = self.solver or problem.solver

        def adjoint_map(u: torch.Tensor) -> torch.Tensor:  # u ↦ g + J_fᵀ u
            return g + vjp(u)

        def adjoint_rows(u_sub: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
            return g.index_select(0, index) + vjp.rows(u_sub, index)

        rows = solver.per_sample and isinstance(vjp.f, RowMap)
        f = RowMap(adjoint_map, adjoint_rows) if rows else adjoint_map
        stats = problem.stats
        solution = solve(
            solver, f, self.start(problem), "adjoint", stats, problem.on_failure, problem.hint
        )
        reasons = []
        if not problem.forward.converged:
            reasons.append("the forward solve did not converge (J_f taken at the best iterate)")
        if not solution.converged:
            reasons.append(f"the adjoint solve did not converge (residual {solution.residual:.1e})")
        exact, reason = not reasons, "; ".join(reasons)
        return solution.z, BackwardRecord("implicit", exact, reason, *problem.work(), solution)

    def start(self, problem: Adjoint) -> torch.Tensor:
        """``u₀``: the previous adjoint (``warm_start``, same shape/dtype/device), else ``init``."""
        g, previous = problem.grad, problem.stats.backward
        if self.warm_start and previous is not None:
            same = (previous.z.shape, previous.z.dtype, previous.z.device)
            if same == (g.shape, g.dtype, g.device):
                return previous.z
        if self.init == "grad":
            return g
        if self.init == "shine":
            return -problem.forward.inverse_jacobian.rmatvec(g)
        return torch.zeros_like(g)


@dataclass(frozen=True)
class Unrolled(Backward):
    """Backpropagate through the forward solver's iterations (autograd records each one).

    Args:
        steps: cap on the recorded iterations (replaces the solver's ``max_iter``);
            None keeps the solver's own.
        checkpoint: keep only each iteration's input and output instead of the cell's
            intermediate tensors, and recompute the cell during ``.backward()``
            (``torch.utils.checkpoint``): memory per iteration falls from the cell's
            activations to two states, for one more evaluation per iteration. The gradient
            is the same.
    """

    steps: int | None = None
    checkpoint: bool = False
    checks_grad = False
    records_forward = True

    def __post_init__(self) -> None:
        if self.steps is not None:
            check_int("steps", self.steps, min_value=1)
        check_bool("checkpoint", self.checkpoint)

    def forward_problem(self, solver: Solver, f: Map) -> tuple[Solver, Map]:
        """The solver capped at ``steps``; ``f`` checkpointed with ``checkpoint``."""
        if self.steps is not None:
            solver = dataclasses.replace(solver, max_iter=self.steps)
        if not self.checkpoint:
            return solver, f
        return solver, lambda z: checkpoint(f, z, use_reentrant=False)

    def attach(self, f: Map, solution: Solution, spec: GradientSpec) -> torch.Tensor:
        """The solver's own iterate; at backward time, the record that the gradient went
        through the solver's iterations."""
        if solution.z.requires_grad:
            reason = (
                "backpropagation through the solver's iterations (the implicit gradient in "
                "the limit)"
            )
            if not solution.converged:
                reason += "; the forward solve did not converge"
            record = BackwardRecord("unrolled", exact=False, reason=reason, vjps=solution.n_steps)
            solution.z.register_hook(lambda grad: spec.stats.record_gradient(record))
        return solution.z


@dataclass(frozen=True)
class JacobianFree(Backward):
    """APPROXIMATE one-step gradient ``u ≈ g`` (Fung et al. 2022, Jacobian-free backprop).

    Drops the ``(I - J_f)⁻¹`` factor; cheap, and a descent direction when ``f`` is
    contractive, but not the true gradient (the theory in this package needs that).
    """

    checks_grad = False

    def adjoint(self, problem: Adjoint) -> tuple[torch.Tensor, BackwardRecord]:
        return problem.grad, problem.approximate("jacobian_free", "Jacobian-free: u = g")


@dataclass(frozen=True)
class Phantom(Backward):
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

    @property
    def takes_vjps(self) -> bool:  # type: ignore[override]
        return self.steps > 1

    def adjoint(self, problem: Adjoint) -> tuple[torch.Tensor, BackwardRecord]:
        lam, g, vjp = self.damping, problem.grad, problem.vjp
        u = lam * g  # the first step from u = 0 (J_fᵀ0 = 0: no VJP)
        for _ in range(self.steps - 1):  # u ← λ (g + J_fᵀu) + (1 − λ) u, three operations
            step = torch.add(g, vjp(u)).mul_(lam)
            u = step if lam == 1.0 else step.add_(u, alpha=1 - lam)
        if self.steps > 1:  # g is finite (checked): a NaN/Inf came from the cell's VJPs
            try:
                check_tensor("u", u)
            except NonFiniteError as err:
                raise NonFiniteError("u", err.count, _PHANTOM_NON_FINITE) from None
        reason = f"phantom gradient: {self.steps} damped steps (λ = {lam})"
        return u, problem.approximate("phantom", reason)


#: A phantom gradient whose damped steps met NaN/Inf (the same cause as an adjoint solve's).
_PHANTOM_NON_FINITE = (
    "backward pass: the phantom gradient's damped steps u ← λ(g + J_f(z*)ᵀu) + (1 − λ)u met "
    "{count} NaN/Inf entries; the gradient g reaching z* is finite, so the cell's "
    "vector-Jacobian product at z* is not (a derivative that is infinite there: sqrt or log "
    "at 0, a division), or the steps overflowed"
)


@dataclass(frozen=True)
class Shine(Backward):
    """APPROXIMATE SHINE gradient (Ramzi et al. 2022): ``u = −Bᵀg``, no VJP.

    ``B ≈ (J_f − I)⁻¹`` is the forward :class:`~deqlab.solvers.Broyden` solve's final
    quasi-Newton estimate; needs a Broyden forward solver.
    """

    def check(self, solver: Solver) -> None:
        _check_broyden(self, solver)

    def adjoint(self, problem: Adjoint) -> tuple[torch.Tensor, BackwardRecord]:
        u = -problem.forward.inverse_jacobian.rmatvec(problem.grad)
        return u, problem.approximate("shine", "SHINE: u = −Bᵀg (Broyden's estimate)")


def check_backward(backward: object, solver: Solver) -> None:
    """TypeError for a non-backward; ValueError where it cannot use ``solver``'s solve."""
    if not isinstance(backward, Backward):
        raise TypeError(
            "`backward` must be Implicit(), Unrolled(), JacobianFree(), Phantom() or Shine(); "
            f"got {backward!r}"
        )
    backward.check(solver)
