"""One solve's bookkeeping: residuals, the best iterate of each row, stalls, and when to stop.

Every solver's loop (:mod:`deqlab.solvers.base`, the splitting solvers) hands each evaluation
``f(z)`` to an :class:`IterationTrace`, which keeps per row ``i`` of the ``(B, N)`` iterates

* the best residual ``r*_i`` (rule ``stop``) and the iterate that reached it: a solve returns
  its best iterate, not its last;
* whether the row is *pending* (``r*_i > tol``) and, with stall detection, *stalled*: a pending
  row whose best residual, extrapolated at its rate over its last ``w = stall_window``
  evaluations to the end of the budget, still misses the tolerance (ours):

      r*_i(k) · (r*_i(k) / r*_i(k − w))^((K − k − 1) / w) > tol,    K = max_iter,

  after ``k + 1`` evaluations; a residual that has stopped falling (ratio 1) is the extreme
  case. The rest of the budget would not bring such a row to the tolerance, so it stops with
  its best iterate (a stall is final). A row that is neither converged nor stalled is
  *active*; the solve stops when no row is active (status CONVERGED if none is pending, else
  STALLED), diverges, or reaches ``max_iter``.

Divergence is judged on the absolute residual ``‖f(z) − z‖`` whatever the stopping rule (the
relative one stays bounded while the iterates blow up). Each step makes one host sync: a
small vector of maxima and counts.
"""

from __future__ import annotations

import contextlib
import math
from types import ModuleType

import numpy as np
import torch

from deqlab.solvers.options import SolverOptions
from deqlab.solvers.rows import select_rows
from deqlab.solvers.solution import Solution, Status, relative_residual

#: dtypes whose per-row bookkeeping runs in numpy on the host, on any device: a numpy
#: operation on ``B`` numbers costs a fraction of a torch dispatch (on a GPU, of a kernel
#: launch; the residual norms come to the host in the step's one sync), and float32/float64
#: comparisons, ``where``, ``fmin`` and one division round exactly as torch's
HOST_DTYPES = {torch.float32: np.float32, torch.float64: np.float64}


class IterationTrace:
    """Residual trace, best iterate and state of each row, and the stopping decision.

    ``tol`` is the tolerance resolved for the iterates' dtype. ``frozen``: rows that are done
    keep their iterate (row compaction, :mod:`deqlab.solvers.rows`: the loop evaluates only
    the active rows). ``out``: where to write the first residual (see :meth:`observe`).

    The per-row vectors (best residual, state, steps) are numpy arrays for float32/float64
    iterates (on any device) and tensors on the iterates' device otherwise (``xp``); the same
    expressions serve both. The residual norms and the best iterate stay tensors.
    """

    def __init__(
        self,
        solver: SolverOptions,
        tol: float,
        fz0: torch.Tensor,
        z0: torch.Tensor,
        frozen: bool = False,
        out: torch.Tensor | None = None,
    ) -> None:
        self.solver, self.tol, self.frozen = solver, tol, frozen
        self.relative, self.factor = solver.stop == "rel", solver.divergence_factor
        self.rows = rows = z0.shape[0]
        self.residuals: list[float] = []
        self.status, self.done, self.settled = Status.MAX_STEPS, False, False
        self.n_active, self.rows_evaluated = rows, rows  # f(z0): every row
        self.best_z = z0
        self.host, self.device = z0.dtype in HOST_DTYPES, z0.device
        self.xp: ModuleType = np if self.host else torch
        if self.host:
            inf = np.full(rows, np.inf, dtype=HOST_DTYPES[z0.dtype])
            self.steps = np.zeros(rows, dtype=np.int64)  # (B,)
        else:
            inf = torch.full((rows,), math.inf, dtype=z0.dtype, device=z0.device)
            self.steps = torch.zeros(rows, dtype=torch.long, device=z0.device)
        self.best_r, self.least_abs = inf, inf  # (B,) best residual (rule `stop`), least abs
        self.pending = self.steps == 0  # (B,) r* > tol
        self.active = self.pending  # (B,) pending and not stalled: the rows still iterated
        window = solver.stall_window
        self.window = None
        if window is not None:  # rows of one (w, B) buffer: r* of the last w evaluations
            buffer = np.full((window, rows), np.inf, inf.dtype) if self.host else (
                inf.expand(window, rows).clone())  # fmt: skip
            self.window = list(buffer)
        self.rows_trace: dict[str, list[torch.Tensor]] | None = None
        if solver.trace_samples:
            self.rows_trace = {"abs": [], "rel": []}
        # on the host the residual norms go to two (B,) buffers seen by numpy (no conversion;
        # from a GPU, one copy into a host buffer per step)
        if self.host:
            norms = z0.new_empty(2, rows)
            on_cpu = z0.device.type == "cpu"
            self.norms_copy = norms if on_cpu else norms.new_empty(2, rows, device="cpu")
            self.norms_device, self.norms = norms, norms.unbind(0)
            self.norms_host = self.norms_copy.numpy()
        self.observe(z0, fz0, out)

    def observe(self, z: torch.Tensor, fz: torch.Tensor, out: torch.Tensor | None = None) -> None:
        """Record ``f(z) = fz`` (both ``(B, N)``) and its residual ``g = fz − z`` (kept for the
        stepper; written into ``out`` when given, the stepper's own buffer), update each row's
        best iterate and state, and decide whether to stop."""
        recorded = torch.is_grad_enabled() and (fz.requires_grad or z.requires_grad)
        self.fz, self.g = fz, fz - z if out is None or recorded else torch.sub(fz, z, out=out)
        g, fz = (self.g.detach(), fz.detach()) if self.g.requires_grad else (self.g, fz)
        r_abs, size = self._norms(g, fz)  # (B,) ‖f(z) − z‖ and ‖f(z)‖ (None if not needed)
        with np.errstate(all="ignore") if self.host else contextlib.nullcontext():
            r = relative_residual(r_abs, size=size) if self.relative else r_abs
            improved, kept = self._update(r, r_abs)
            state = self._sync(r, r_abs, improved, kept)
        worst, largest_abs, n_active, n_pending, blown_up, n_improved, n_kept = state
        if n_kept == self.rows:  # no copy: iterates are never modified in place
            self.best_z = z
        elif n_improved:
            self.best_z = select_rows(improved, z, self.best_z)
        self.residuals.append(worst)
        self.settled, self.n_active = n_active < self.rows, n_active
        if not math.isfinite(largest_abs) or blown_up:
            self.status, self.done = Status.DIVERGED, True
        elif not n_active:
            self.status = Status.STALLED if n_pending else Status.CONVERGED
            self.done = True
        elif len(self.residuals) >= self.solver.max_iter:
            self.done = True

    def _norms(self, g: torch.Tensor, fz: torch.Tensor) -> tuple:
        """``‖g‖`` and, for the relative rule, ``‖f(z)‖`` of each row: numpy views of the
        host buffers, else tensors; with ``trace_samples`` both residuals are kept."""
        need_size = self.relative or self.rows_trace is not None
        if self.host:
            r_abs, size = self.norms
            torch.linalg.vector_norm(g, dim=1, out=r_abs)
            if need_size:
                torch.linalg.vector_norm(fz, dim=1, out=size)
            if self.norms_copy is not self.norms_device:  # from the GPU: the step's one sync
                self.norms_copy.copy_(self.norms_device)
        else:
            r_abs = torch.linalg.vector_norm(g, dim=1)
            size = torch.linalg.vector_norm(fz, dim=1) if need_size else None
        if self.rows_trace is not None:
            self.rows_trace["abs"].append(r_abs.clone())
            self.rows_trace["rel"].append(relative_residual(r_abs, size=size))
        if self.host:
            return self.norms_host[0], self.norms_host[1] if self.relative else None
        return r_abs, size

    def _update(self, r, r_abs) -> tuple:
        """Each row's best residual, least absolute residual, state and steps after the
        residuals ``r`` (rule ``stop``) and ``r_abs`` of this evaluation; returns the rows
        that improved and that keep their iterate."""
        self.steps += self.active  # (B,) evaluations until the row converged or stalled
        improved = r < self.best_r  # (B,); False where r is NaN
        # rows done before this step kept their iterate; a converged one is its best
        kept = improved | ~self.pending if self.frozen and self.settled else improved
        self.best_r = self.xp.where(improved, r, self.best_r)
        self.least_abs = self.xp.fmin(self.least_abs, r_abs)
        self.pending = self.best_r > self.tol
        self.active = self._active()
        return improved, kept

    def _blown_up(self, r_abs):
        """Pending rows whose absolute residual exceeds ``divergence_factor`` times the least
        one seen."""
        return self.pending & (r_abs > self.factor * self.least_abs)

    def _sync(self, r, r_abs, improved, kept) -> tuple:
        """``(max r, max r_abs, active, pending, blown up, improved, kept)`` on the host: the
        maxima (NaN propagates) and the counts of rows; one device sync for tensors. On the
        host a count the decision does not read is not taken: pending only when no row is
        active, improved only when some row does not keep its iterate, blown up only when
        the largest residual exceeds the factor times the least (else no row can)."""
        if not self.host:
            flags = [self.active, self.pending, self._blown_up(r_abs), improved, kept]
            maxima = torch.stack([r, r_abs]).amax(dim=1).double()
            counts = torch.stack(flags).sum(dim=1, dtype=torch.float64)
            return tuple(torch.cat([maxima, counts]).tolist())
        largest_abs = r_abs.max()
        n_active, n_kept = np.count_nonzero(self.active), np.count_nonzero(kept)
        blown_up = not largest_abs <= self.factor * self.least_abs.min() and np.count_nonzero(
            self._blown_up(r_abs)
        )
        return (
            float(r.max()),
            float(largest_abs),
            n_active,
            n_active or np.count_nonzero(self.pending),
            blown_up,
            n_kept < self.rows and np.count_nonzero(improved),
            n_kept,
        )

    def _active(self):
        """Pending rows that have not stalled: still active, and their best residual
        extrapolated to the end of the budget meets tol (while ``r*(k − w)`` is inf the ratio
        is 0: no stall)."""
        if self.window is None:
            return self.pending
        k, w = len(self.residuals), len(self.window)
        earlier = self.window[k % w]  # r* of w evaluations ago
        power = (self.solver.max_iter - k - 1) / w
        if k < w and power > 0:  # r*(k − w) is inf: the projection is 0 or NaN, no stall
            earlier[:] = self.best_r
            return self.active & self.pending
        rate = self.best_r / earlier  # (B,) the residual's fall over the window
        projected = self.best_r * rate**power
        earlier[:] = self.best_r
        return self.active & self.pending & ~(projected > self.tol)

    def solution(self, shape: torch.Size) -> Solution:
        return Solution(
            z=self.best_z.reshape(shape),
            status=self.status,
            n_steps=len(self.residuals),
            residuals=self.residuals,
            residual=float(self.best_r.max()),
            sample_residuals=self._tensor(self.best_r),
            sample_steps=self._tensor(self.steps),
            sample_stalled=None
            if self.window is None
            else self._tensor(self.pending & ~self.active),
            sample_trace=None
            if self.rows_trace is None
            else {k: torch.stack(v) for k, v in self.rows_trace.items()},
            evaluations=self.rows_evaluated / self.rows if self.frozen else len(self.residuals),
            solver=self.solver.name,
            tolerance=self.tol,
            stop=self.solver.stop,
        )

    def _tensor(self, values) -> torch.Tensor:
        return torch.from_numpy(values).to(self.device) if self.host else values
