"""The autograd side of a fixed point: the backward pass's problem and the Function that puts
the backward object's vector ``u`` in place of the incoming gradient ``g``.

For ``z* = f(z*, θ)`` and ``g = ∂ℓ/∂z*``, every backward object (:mod:`deqlab.backward`)
returns a vector ``u``; one tracked evaluation ``f(z*)`` connects ``z*`` to every tensor ``f``
closes over, and :class:`ImplicitGradient` sends ``u`` along that edge during
``.backward()``, so autograd delivers ``uᵀ ∂f/∂θ`` to all of them (Hieu 2022, Eq. 2.4).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from deqlab._checks import _all_finite
from deqlab.fixed_point_stats import BackwardRecord, FixedPointStats, Hint, OnFailure
from deqlab.solvers import Solution, Solver
from deqlab.vjp import VJP

if TYPE_CHECKING:
    from deqlab.backward import Backward

Map = Callable[[torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class Adjoint:
    """One backward pass's problem: ``vjp(u) = J_f(z*)ᵀ u`` (None for a backward that takes
    no VJP), the incoming ``g``, and what the forward solve left (its Solution, solver, the
    layer's stats, policy and hint)."""

    vjp: VJP | None
    grad: torch.Tensor
    forward: Solution
    solver: Solver
    stats: FixedPointStats
    on_failure: OnFailure
    hint: Hint

    def work(self) -> tuple[float, float]:
        """VJPs and evaluations of ``f`` the backward pass spent, in full batches."""
        return (0.0, 0.0) if self.vjp is None else (self.vjp.vjps, self.vjp.evaluations)

    def approximate(self, method: str, reason: str) -> BackwardRecord:
        """The record of an approximate gradient (``reason``: which approximation)."""
        if not self.forward.converged:
            reason += "; the forward solve did not converge"
        return BackwardRecord(method, False, reason, *self.work())


@dataclass(frozen=True)
class GradientSpec:
    """Everything :class:`ImplicitGradient` needs besides tensors (built by ``fixed_point``)."""

    f: Map
    solver: Solver
    backward: Backward
    stats: FixedPointStats
    hint: Hint
    on_failure: OnFailure
    forward: Solution


class ImplicitGradient(torch.autograd.Function):
    """Identity on values (returns ``z*``); backward maps ``g`` to the ``u`` of the
    backward object (``spec.backward.adjoint``), which autograd sends along the edge ``f(z*)``."""

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
        if spec.backward.checks_grad and grad.numel() and not _all_finite(grad):
            raise ValueError("the gradient reaching the fixed point z* must be finite; got NaN/Inf")
        (z_star,) = ctx.saved_tensors
        vjp = VJP(spec.f, z_star) if spec.backward.takes_vjps else None
        problem = Adjoint(
            vjp, grad, spec.forward, spec.solver, spec.stats, spec.on_failure, spec.hint
        )
        with torch.no_grad():
            u, record = spec.backward.adjoint(problem)
        spec.stats.record_gradient(record)
        return u, None, None


def attach(f: Map, solution: Solution, spec: GradientSpec) -> torch.Tensor:
    """``z*`` joined to autograd through one tracked evaluation ``f(z*)`` (``z*`` unchanged
    where autograd is off or ``f`` closes over nothing that requires a gradient)."""
    z_star = solution.z
    if not torch.is_grad_enabled():
        return z_star
    z_out = f(z_star)  # one tracked step: the edge to every tensor f closes over
    if not z_out.requires_grad:
        return z_star
    return ImplicitGradient.apply(z_out, z_star, spec)
