"""Anderson acceleration (Anderson 1965; Walker & Ni 2011), safeguarded and batched.

With the last ``n <= m`` iterates ``x_i`` and their images ``f_i = f(x_i)``, residuals
``g_i = f_i - x_i`` stacked as the rows of ``G`` (``n × N``), the mixing weights solve

    α = argmin ‖Gᵀα‖²  s.t.  1ᵀα = 1   ⇔   (G Gᵀ + λ I) y = 1,  α = y / 1ᵀy,

with Tikhonov ``λ = tikhonov · tr(G Gᵀ) / n`` (relative, so scale-free), and the next
iterate is ``x⁺ = β Σ α_i f_i + (1 - β) Σ α_i x_i = Σ α_i (x_i + β g_i)``. ``G Gᵀ`` is
updated by one row per step (``O(mN)``, not ``O(m²N)``). Safeguard (cf. locuslab/deq issue
#20): where the small system is singular or its solution is not finite, that sample takes
the plain damped step ``x + β (f(x) - x)`` instead — the solve never crashes. The best
iterate seen is returned (shared loop, :mod:`deqlab.solvers.base`). ``G Gᵀ`` and the small
system are kept in at least float32: ``torch.linalg`` has no float16/bfloat16 solve.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from deqlab._checks import check_bool, check_int, check_real
from deqlab.solvers.base import Solver
from deqlab.solvers.history import History
from deqlab.solvers.solution import register

#: devices whose small system is solved where it lives; elsewhere (a GPU) ``G Gᵀ`` is kept on
#: the host, each step's new row copied over: a batched ``m × m`` solve and its check cost
#: a few launches' time on a CPU and a dozen launches (~300 µs) on a GPU
HOST_DEVICES = {"cpu"}


@register("anderson")
@dataclass(frozen=True, kw_only=True)
class Anderson(Solver):
    """Anderson acceleration with history ``m``, Tikhonov regularization and damping.

    Args:
        history: number ``m`` of past iterates mixed (``m = 1`` is damped Picard).
        tikhonov: relative regularization ``λ / (tr(GGᵀ)/n)`` of the least-squares system.
        damping: mixing ``β`` in ``(0, 1]``.
        fused: solve every sample's small system in one compiled loop, in float64
            (:mod:`deqlab.solvers.anderson_fused`, numba): ~65 µs less per step for 64
            systems of 5 × 5 on the host; iterates differ from the default path by
            rounding. Autograd-recorded solves (``Unrolled``) take the default path.
        (others: see :class:`deqlab.solvers.base.Solver`)

    With ``per_sample=True`` every sample has its own weights ``α`` (one batched
    ``m × m`` solve per step, no Python loop over samples).
    """

    history: int = 5
    tikhonov: float = 1e-8
    damping: float = 1.0
    fused: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int("history", self.history, min_value=1)
        check_real("tikhonov", self.tikhonov, low=0.0)
        check_real("damping", self.damping, low=0.0, high=1.0, low_inclusive=False)
        check_bool("fused", self.fused)

    def stepper(self) -> AndersonState:
        """A fresh history (iterates, residuals and their Gram matrix) for one solve."""
        return AndersonState(self)


class AndersonState:
    """What Anderson keeps between steps: the last ``m`` damped images ``x_i + β g_i`` (what
    the weights mix) and residuals ``g_i``, and the Gram matrix ``G Gᵀ`` ``(B, m, m)``,
    updated one row per step (:class:`GramSystem`). Where the weights are unusable they are
    set to the newest slot alone, so that the mix gives that row's plain step exactly (no
    second ``(B, N)`` select). The textbook step it must equal:
    :func:`deqlab.solvers.anderson_reference.reference_step`.
    """

    def __init__(self, solver: Anderson) -> None:
        self.solver = solver
        self.steps, self.gs = History(solver.history), History(solver.history)
        self.system: GramSystem | None = None

    def __call__(
        self, z: torch.Tensor, fz: torch.Tensor, g: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Store ``(x + βg, g)`` with ``g = f(z) − z`` and return the safeguarded mixed
        iterate ``Σ α_i (x_i + β g_i)`` ``(B, N)`` (β = 1: ``Σ α_i f(x_i)``)."""
        beta, g = self.solver.damping, fz - z if g is None else g  # (B, N)
        plain = fz if beta == 1.0 else z + beta * g  # this row's plain step
        slot = self.gs.push(g)
        self.steps.push(plain)
        if self.system is None:
            self.system = GramSystem(self.solver, self.gs)
        H = self.system.update(self.gs, g, slot)
        if len(self.gs) == 1:
            return plain
        alpha = self.system.weights(H, slot)  # (B, 1, n)
        if alpha.dtype != z.dtype or self.system.apart:
            alpha = alpha.to(z.device, z.dtype)
        return torch.bmm(alpha, self.steps.stacked()).view_as(z)

    def residual_out(self, z: torch.Tensor) -> torch.Tensor | None:
        """The history slot the next residual ``g`` goes to (written there by the loop)."""
        return self.gs.next_slot(z)


class GramSystem:
    """The small system of one solve: ``H = G Gᵀ`` ``(B, m, m)`` in at least float32 (updated
    one row and column per step, in place unless autograd records the solve), and the weights
    ``α = y / 1ᵀy`` with ``(H + λI) y = 1``.

    Every view a step of a full history needs (``H``'s row ``i`` as a ``(B, 1, m)`` product
    target, its column ``i``, its diagonal, ``g_i`` as a ``(B, 1, N)`` row, ``Gᵀ``) is made once
    per solve, so that such a step is a fixed sequence of ten batched operations; the weights
    are checked in numpy (one check, a fraction of a torch dispatch). On a GPU ``H`` lives on
    the host (:data:`HOST_DEVICES`) unless autograd records the solve.
    """

    def __init__(self, solver: Anderson, gs: History) -> None:
        assert gs.buffer is not None
        self.m, self.tikhonov = solver.history, solver.tikhonov
        work = torch.promote_types(gs.buffer.dtype, torch.float32)  # linalg needs >= float32
        recorded = torch.is_grad_enabled() and gs.buffer.requires_grad
        local = recorded or gs.buffer.device.type in HOST_DEVICES
        where = gs.buffer.device if local else torch.device("cpu")
        batch = gs.buffer.shape[0]
        self.gram = gs.buffer.new_zeros(batch, self.m, self.m, dtype=work, device=where)
        self.eye = torch.eye(self.m, dtype=work, device=self.gram.device)
        self.ones = torch.ones(self.m, 1, dtype=work, device=self.gram.device)
        self.host = self.gram.device.type in HOST_DEVICES
        self.residuals = gs.buffer  # the history the views below are of
        self.g_rows = [gs.buffer[:, i : i + 1] for i in range(self.m)]  # g_i (B, 1, N)
        self.residuals_t = gs.buffer.mT  # Gᵀ (B, N, m)
        self.row = gs.buffer.new_empty(self.gram.shape[0], 1, self.m)  # (a strided out= is slow)
        self.apart = not local  # H on the host, the history on a GPU
        self.row_host = self.gram.new_empty(self.row.shape) if self.apart else self.row
        self.row_flat = self.row_host[:, 0]  # (B, m)
        self.alpha = self.gram.new_empty(self.gram.shape[0], self.m, 1)  # α of a full history
        self.alpha_host = self.alpha.numpy() if self.host else None
        self.fused = solver.fused and self.host and not recorded
        if self.fused:  # α as contiguous rows (B, 1, m) for the mix, H seen by numpy
            from deqlab.solvers.anderson_fused import fused_weights

            self.fused_weights, self.gram_host = fused_weights, self.gram.numpy()
            self.alpha_rows = self.gram.new_empty(batch, 1, self.m)
            self.alpha_rows_host = self.alpha_rows.numpy()[:, 0]
        self._views()

    def _views(self) -> None:
        """Views of the Gram buffer (made again where autograd replaced it)."""
        H = self.gram
        self.rows = [H[:, i : i + 1] for i in range(self.m)]  # row i (B, 1, m)
        self.columns = list(H.unbind(2))  # column i (B, m)
        self.diagonal = H.diagonal(dim1=1, dim2=2).unsqueeze(1)  # (B, 1, m)

    def update(self, gs: History, g: torch.Tensor, slot: int) -> torch.Tensor:
        """Row and column ``slot`` of ``H`` become ``G g`` (``g`` the newest residual, stored in
        ``slot`` of ``gs``); returns ``H`` of the stored ``n``."""
        n, H, G = len(gs), self.gram, gs.stacked()
        if torch.is_grad_enabled() and (G.requires_grad or H.requires_grad):
            row = torch.bmm(g.unsqueeze(1), G.mT).view(g.shape[0], n)
            self.gram = H = H.clone()  # out of place: autograd keeps the old H
            H[:, slot, :n] = row
            H[:, :n, slot] = row
            self._views()
        elif G.dtype != H.dtype:  # a float16/bfloat16 history, multiplied in float32
            row = torch.bmm(g.to(H.dtype).unsqueeze(1), G.to(H.dtype).mT).view(g.shape[0], n)
            row = row.to(H.device)
            H[:, slot, :n] = row
            H[:, :n, slot] = row
        elif n == self.m and G is self.residuals:  # gᵀGᵀ: a fast bmm layout
            row = torch.bmm(self.g_rows[slot], self.residuals_t, out=self.row)  # (B, 1, m)
            if self.apart:  # one copy of the row to the host
                row = self.row_host.copy_(row)
            self.rows[slot].copy_(row)
            self.columns[slot].copy_(self.row_flat)
        else:
            row = torch.bmm(G[:, slot : slot + 1], G.mT)[:, 0].to(H.device)  # (B, n)
            H[:, slot, :n] = row
            H[:, :n, slot] = row
        return H if n == self.m else H[:, :n, :n]

    def weights(self, H: torch.Tensor, slot: int) -> torch.Tensor:
        """``α = y / 1ᵀy`` with ``(H + λI) y = 1``, ``λ = tikhonov · tr(H) / n``, as a row
        ``(B, 1, n)``; where that is unusable (singular, or not finite) ``α = e_slot``, the
        newest step alone."""
        n = H.shape[1]
        if self.fused and not H.requires_grad:  # (a recorded H is a copy: not gram_host's)
            self.fused_weights(self.gram_host, n, slot, self.tikhonov, self.alpha_rows_host)
            return self.alpha_rows[:, :, :n]
        full = n == self.m
        diagonal = self.diagonal if full else H.diagonal(dim1=1, dim2=2).unsqueeze(1)
        eye, ones = (self.eye, self.ones) if full else (self.eye[:n, :n], self.ones[:n])
        # H + λI: λ·1 and λ·0 are exact, so the fused form equals the textbook sum
        A = torch.addcmul(H, diagonal.mean(dim=2, keepdim=True), eye, value=self.tikhonov)
        y, info = torch.linalg.solve_ex(A, ones)  # (B, n, 1)
        total = y.sum(dim=1, keepdim=True)
        if self.host and not y.requires_grad:  # the safeguard in numpy, on α's memory
            alpha = torch.div(y, total, out=self.alpha) if full else y / total
            _safeguard(self.alpha_host if full else alpha.numpy(), info.numpy(), slot)
            return alpha.mT
        alpha = y / total  # (B, n, 1)
        ok = (info == 0).view(-1, 1, 1) & torch.isfinite(alpha).all(dim=1, keepdim=True)
        return torch.where(ok, alpha, eye[:, slot : slot + 1]).mT  # no NaN in the mix


def _safeguard(alpha: np.ndarray, info: np.ndarray, slot: int) -> None:
    """``α_b = e_slot`` in place where system ``b`` was singular (``info`` not 0) or its
    weights are not finite (rows of frozen samples repeat one residual: singular). The sum
    of all weights is finite only when every weight is (NaN and ±inf propagate; an overflow
    of a finite sum only sends the solve to the row-by-row test)."""
    if not np.count_nonzero(info) and math.isfinite(alpha.sum()):
        return
    unusable = (info != 0) | ~np.isfinite(alpha).all(axis=(1, 2))
    alpha[unusable] = 0.0
    alpha[unusable, slot] = 1.0
