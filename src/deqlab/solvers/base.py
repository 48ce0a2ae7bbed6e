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
from deqlab.solvers.rows import RowMap, evaluate_pending
from deqlab.solvers.solution import (
    Solution,
    SolverError,
    Status,
    non_finite_reason,
    relative_residual,
    resolve_tol,
)

Map = Callable[[torch.Tensor], torch.Tensor]


class Stepper(Protocol):
    """One solve's stepping rule: ``step(z, fz, g=None) -> z_next`` on ``(B, N)`` iterates,
    ``g = fz − z`` (the loop passes the residual it computed; None: the stepper computes it);
    an object, so that what a method remembers between steps is explicit state."""

    def __call__(
        self, z: torch.Tensor, fz: torch.Tensor, g: torch.Tensor | None = None
    ) -> torch.Tensor: ...


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
            SolverError: not converged (status MAX_STEPS or DIVERGED) and ``throw=True``.
        """
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

        tol = resolve_tol(self.tol, z0.dtype)
        z = z0.reshape(batch, -1)  # (B, N)
        trace = IterationTrace(self, tol, _first_eval(f, z0).reshape(batch, -1), z)
        compact = self.per_sample and isinstance(f, RowMap) and not torch.is_grad_enabled()
        trace.compacting = compact
        step = self.stepper()
        while not trace.done:
            z_next = step(z, trace.fz, trace.g)
            if compact and trace.settled:  # evaluate only the rows still pending
                z, fz = evaluate_pending(f, z, z_next, trace.fz, trace.pending, shape)
            else:
                z, fz = z_next, f_flat(z_next)
            trace.observe(z, fz)
        solution = self.finish(step, trace.solution(shape))
        if solution.status is Status.DIVERGED and not math.isfinite(solution.residuals[-1]):
            reason = non_finite_reason(z, trace.fz, solution.n_steps)
            solution = replace(solution, non_finite=reason)
        if self.throw and not solution.converged:
            raise SolverError(self.name, solution, tol=tol, stop=self.stop)
        return solution


class History:
    """The last ``capacity`` iterates ``(B, N)`` of a solve, stored as one ``(B, m, N)`` buffer.

    A ring: :meth:`push` overwrites the oldest slot once full (the solvers' sums are
    order-free). Writes are in place, except when autograd records the solve
    (``Unrolled``), where they are out-of-place so that saved tensors stay valid.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.count = 0
        self.buffer: torch.Tensor | None = None

    def push(self, x: torch.Tensor) -> int:
        """Store ``x`` ``(B, N)``; return its slot."""
        slot = self.count % self.capacity
        if self.buffer is None:
            self.buffer = x.new_empty(x.shape[0], self.capacity, x.shape[1])  # (B, m, N)
        if torch.is_grad_enabled() and (x.requires_grad or self.buffer.requires_grad):
            index = torch.tensor([slot], device=x.device)
            self.buffer = self.buffer.index_copy(1, index, x[:, None])
        else:
            self.buffer[:, slot] = x
        self.count += 1
        return slot

    def __len__(self) -> int:
        return min(self.count, self.capacity)

    def stacked(self) -> torch.Tensor:
        """The stored iterates, ``(B, len(self), N)`` (slots ``0 .. len-1``)."""
        assert self.buffer is not None
        return self.buffer[:, : len(self)]

    def clear(self) -> None:
        self.count = 0


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


class IterationTrace:
    """Residual trace, best iterate per row, and the stopping decision of one solve.

    ``tol`` is the solver's tolerance resolved for the iterates' dtype (``solver.tol`` may
    be None). Divergence is judged on the absolute residual ``‖f(z) - z‖`` whatever the
    stopping rule (the relative one stays bounded while the iterates blow up).
    """

    def __init__(
        self, solver: SolverOptions, tol: float, fz0: torch.Tensor, z0: torch.Tensor
    ) -> None:
        self.solver = solver
        self.tol = tol
        self.residuals: list[float] = []
        self.status = Status.MAX_STEPS
        self.done = False
        self.best_z = z0
        inf = torch.full((z0.shape[0],), math.inf, dtype=z0.dtype, device=z0.device)
        self.best_r = inf  # (B,) residual (rule `stop`) of best_z
        self.least_abs = inf  # (B,) least absolute residual seen
        self.steps = torch.zeros(z0.shape[0], dtype=torch.long, device=z0.device)  # (B,)
        self.compacting = False  # rows that met tol are frozen (see deqlab.solvers.rows)
        self.settled = False  # some row met tol
        self.pending = torch.ones_like(self.steps, dtype=torch.bool)  # (B,) rows still to converge
        self.observe(z0, fz0)

    def observe(self, z: torch.Tensor, fz: torch.Tensor) -> None:
        """Record ``f(z) = fz`` (both ``(B, N)``), its residual ``g = fz − z`` (the stepper
        reuses it), and decide whether to stop. Under row compaction the rows that had met
        tol were frozen at their best iterate (the loop evaluates only the pending ones)."""
        self.fz, self.g = fz, fz - z
        r_abs = torch.linalg.vector_norm(self.g.detach(), dim=1)  # (B,)
        r = r_abs if self.solver.stop == "abs" else relative_residual(r_abs, fz.detach())
        self.steps += self.pending  # (B,) evaluations until the row met tol
        improved = r < self.best_r  # (B,); False where r is NaN
        frozen = self.compacting and self.settled  # rows not pending kept their best iterate
        kept = improved | ~self.pending if frozen else improved
        self.best_r = torch.where(improved, r, self.best_r)
        self.least_abs = torch.fmin(self.least_abs, r_abs)
        pending = self.best_r > self.tol  # (B,) samples still to converge
        blown_up = pending & (r_abs > self.solver.divergence_factor * self.least_abs)
        maxima = torch.stack([r.max(), r_abs.max()]).double()  # NaN propagates through max
        counts = [m.sum(dtype=torch.float64) for m in (pending, blown_up, kept, improved)]
        worst, largest_abs, n_pending, n_blown_up, n_kept, n_improved = torch.cat(
            [maxima, torch.stack(counts)]
        ).tolist()  # the one device sync of the step
        rows = len(r)
        self.pending, self.settled = pending, n_pending < rows
        if n_kept == rows:  # no copy: iterates are never modified in place
            self.best_z = z
        elif n_improved:
            self.best_z = torch.where(improved[:, None], z, self.best_z)
        self.residuals.append(worst)
        if not math.isfinite(largest_abs) or n_blown_up:
            self.status, self.done = Status.DIVERGED, True
        elif not n_pending:
            self.status, self.done = Status.CONVERGED, True
        elif len(self.residuals) >= self.solver.max_iter:
            self.done = True

    def solution(self, shape: torch.Size) -> Solution:
        return Solution(
            z=self.best_z.reshape(shape),
            status=self.status,
            n_steps=len(self.residuals),
            residuals=self.residuals,
            residual=float(self.best_r.max()),
            sample_residuals=self.best_r,
            sample_steps=self.steps,
            evaluations=float(self.steps.sum()) / len(self.steps)
            if self.compacting
            else len(self.residuals),
        )
