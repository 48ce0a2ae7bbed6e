"""The solver base class: shared hyper-parameters, validation and the iteration loop.

Every solver is a frozen dataclass of hyper-parameters with one call signature,
``solver(f, z0) -> Solution``. The loop (:meth:`Solver.__call__`) is shared: evaluate
``f``, record the residual, keep the best iterate, stop or step. A subclass only says how
to step, through :meth:`Solver.stepper`.

Internally iterates are ``(B, N)``: ``B = z0.shape[0]`` with ``per_sample=True``, else
``B = 1`` (the whole tensor is one problem). The solve runs in the caller's grad mode:
:func:`deqlab.fixed_point` runs it under ``torch.no_grad`` (and with autograd on for the
``Unrolled`` oracle, which is why the steps are out-of-place).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol

import torch

from deqlab._checks import check_bool, check_tensor
from deqlab.solvers.options import SolverOptions
from deqlab.solvers.rows import RowMap, evaluate_frozen, evaluate_pending, evaluation_rows
from deqlab.solvers.solution import Solution, Status, non_finite_reason, resolve_tol
from deqlab.solvers.trace import IterationTrace

Map = Callable[[torch.Tensor], torch.Tensor]


class Stepper(Protocol):
    """One solve's stepping rule: ``step(z, fz, g=None) -> z_next`` on ``(B, N)`` iterates,
    ``g = fz − z`` (the loop passes the residual it computed; None: the stepper computes it);
    an object, so that what a method remembers between steps is explicit state.
    ``residual_out(z)``: where the loop should write the next ``g`` (a buffer the stepper
    keeps it in, saving a copy), or None."""

    def __call__(
        self, z: torch.Tensor, fz: torch.Tensor, g: torch.Tensor | None = None
    ) -> torch.Tensor: ...

    def residual_out(self, z: torch.Tensor) -> torch.Tensor | None: ...


class StatelessStep:
    """A stepper that remembers nothing: ``rule(z, fz, g)`` (e.g. Picard's damped step)."""

    def __init__(self, rule: Callable[..., torch.Tensor]) -> None:
        self.rule = rule

    def __call__(
        self, z: torch.Tensor, fz: torch.Tensor, g: torch.Tensor | None = None
    ) -> torch.Tensor:
        return self.rule(z, fz, g)

    def residual_out(self, z: torch.Tensor) -> None:
        return None


@dataclass(frozen=True, kw_only=True)
class Solver(SolverOptions, ABC):
    """A fixed-point solver: the shared options plus ``per_sample``.

    Args:
        per_sample: dim 0 is the batch; stop when every sample meets ``tol``. Assumes
            ``f`` acts on each sample independently (the best iterate is kept per sample).
        (others: see :class:`deqlab.solvers.options.SolverOptions`)
    """

    per_sample: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        check_bool("per_sample", self.per_sample)

    @abstractmethod
    def stepper(self) -> Stepper:
        """A fresh stepping rule for one solve (it may keep state between steps)."""

    def finish(self, step: Stepper, solution: Solution) -> Solution:
        """The solve's Solution, given the stepping rule's final state (a subclass may add
        what the state learned, e.g. Broyden's inverse-Jacobian estimate)."""
        return solution

    def __call__(self, f: Map, z0: torch.Tensor) -> Solution:
        """Solve ``z = f(z)`` from ``z0``; ``f`` maps tensors of ``z0``'s shape to that shape.

        An empty ``z0`` (no entries, e.g. a batch of 0 samples) is its own fixed point:
        converged after 0 evaluations. A solve that meets NaN/Inf stops DIVERGED with
        ``Solution.non_finite`` saying where (:class:`~deqlab.solvers.solution.NonFinite`).

        Raises:
            TypeError: ``f`` not callable; ``z0`` or ``f(z0)`` not a floating tensor;
                ``f(z0)`` of another dtype or device than ``z0``.
            ValueError: non-finite ``z0`` or ``f(z0)``; ``f(z0)`` shaped unlike ``z0``;
                ``per_sample`` with a 0-d ``z0``; ``z0`` on the meta device.
            SolverError: not converged (status MAX_STEPS, STALLED or DIVERGED) and
                ``throw=True``.
        """
        solution = self.run(f, z0)
        return solution.raise_if_failed() if self.throw else solution

    def run(self, f: Map, z0: torch.Tensor) -> Solution:
        """The solve of :meth:`__call__` without raising on failure (``throw`` is not read):
        the caller reads ``Solution.status`` (e.g. a policy, :mod:`deqlab.fixed_point_stats`)."""
        if not callable(f):
            raise TypeError(f"`f` must be callable; got {type(f).__name__}")
        check_tensor("z0", z0)
        if self.per_sample and z0.ndim == 0:
            raise ValueError("`z0` must have a batch dim 0 when per_sample=True; got a 0-d tensor")
        if not z0.numel():
            return _empty_solution(z0, self.per_sample)
        shape = z0.shape
        batch = shape[0] if self.per_sample else 1

        def f_flat(z: torch.Tensor) -> torch.Tensor:  # (B, N) -> (B, N)
            return f(z.reshape(shape)).reshape(batch, -1)

        if z0.ndim == 2 and batch == shape[0]:  # already (B, N): no reshape per call
            f_flat = f

        tol = resolve_tol(self.tol, z0.dtype)
        z = z0.reshape(batch, -1)  # (B, N)
        compact = self.per_sample and isinstance(f, RowMap) and not torch.is_grad_enabled()
        step = self.stepper()
        fz = _first_eval(f, z0).reshape(batch, -1)
        trace = IterationTrace(self, tol, fz, z, compact, step.residual_out(z))
        while not trace.done:
            z_next = step(z, trace.fz, trace.g)
            if compact and 2 * trace.n_active <= batch:  # evaluate only the active rows
                rows = evaluation_rows(trace.active, z.device)
                z, fz = evaluate_pending(f, z, z_next, trace.fz, rows, shape)
                trace.rows_evaluated += len(rows[0])
            elif compact and trace.settled:  # the others keep z and f(z), all are evaluated
                z, fz = evaluate_frozen(f_flat, z, z_next, trace.fz, trace.active)
                trace.rows_evaluated += batch
            else:
                z, fz = z_next, f_flat(z_next)
                trace.rows_evaluated += batch
            trace.observe(z, fz, step.residual_out(z))
        solution = self.finish(step, trace.solution(shape))
        if solution.status is Status.DIVERGED and not math.isfinite(solution.residuals[-1]):
            reason = non_finite_reason(z, trace.fz, solution.n_steps)
            solution = replace(solution, non_finite=reason)
        return solution


def _first_eval(f: Map, z0: torch.Tensor) -> torch.Tensor:
    """``f(z0)``, checked: a floating tensor of ``z0``'s shape, dtype and device with finite
    entries (a map that changes the dtype would fail one step later inside the solver)."""
    fz = check_tensor("f(z0)", f(z0), finite=False)
    if fz.shape != z0.shape:
        raise ValueError(
            f"`f(z0)` must have the shape of `z0` {tuple(z0.shape)}; got {tuple(fz.shape)}"
        )
    if (fz.dtype, fz.device) != (z0.dtype, z0.device):
        raise TypeError(
            f"`f(z0)` must have the dtype and device of `z0` ({z0.dtype}, {z0.device}); got "
            f"({fz.dtype}, {fz.device}): the map changes them (cast its output to z's dtype, "
            "or keep its parameters in the state's dtype and device)"
        )
    return check_tensor("f(z0)", fz)


def _empty_solution(z0: torch.Tensor, per_sample: bool) -> Solution:
    """The solve of an empty ``z0``: itself, converged after 0 evaluations."""
    rows = z0.shape[0] if per_sample else 1
    return Solution(
        z=z0,
        status=Status.CONVERGED,
        n_steps=0,
        residuals=[],
        residual=0.0,
        sample_residuals=z0.new_zeros(rows),
        sample_steps=torch.zeros(rows, dtype=torch.long, device=z0.device),
        evaluations=0.0,
    )
