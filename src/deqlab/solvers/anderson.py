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

from dataclasses import dataclass

import torch

from deqlab._checks import check_int, check_real
from deqlab.solvers.base import Solver
from deqlab.solvers.history import History
from deqlab.solvers.solution import register


@register("anderson")
@dataclass(frozen=True, kw_only=True)
class Anderson(Solver):
    """Anderson acceleration with history ``m``, Tikhonov regularization and damping.

    Args:
        history: number ``m`` of past iterates mixed (``m = 1`` is damped Picard).
        tikhonov: relative regularization ``λ / (tr(GGᵀ)/n)`` of the least-squares system.
        damping: mixing ``β`` in ``(0, 1]``.
        (others: see :class:`deqlab.solvers.base.Solver`)

    With ``per_sample=True`` every sample has its own weights ``α`` (one batched
    ``m × m`` solve per step, no Python loop over samples).
    """

    history: int = 5
    tikhonov: float = 1e-8
    damping: float = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int("history", self.history, min_value=1)
        check_real("tikhonov", self.tikhonov, low=0.0)
        check_real("damping", self.damping, low=0.0, high=1.0, low_inclusive=False)

    def stepper(self) -> AndersonState:
        """A fresh history (iterates, residuals and their Gram matrix) for one solve."""
        return AndersonState(self)


class AndersonState:
    """What Anderson keeps between steps: the last ``m`` damped images ``x_i + β g_i`` (what
    the weights mix) and residuals ``g_i``, and the Gram matrix ``G Gᵀ`` ``(B, m, m)``,
    updated one row per step. Where the weights are unusable they are set to the newest slot
    alone, so that the mix gives that row's plain step exactly (no second ``(B, N)`` select).

    Buffers and their views (Gram rows and columns, the identity's rows) are made once per
    solve, so that a step of a full history is a fixed, short sequence of batched operations.
    """

    def __init__(self, solver: Anderson) -> None:
        self.solver = solver
        self.steps, self.gs = History(solver.history), History(solver.history)
        self.gram: torch.Tensor | None = None  # G Gᵀ (B, m, m), in at least float32
        self.gram_rows: list[torch.Tensor] = []  # gram[:, i, :] and gram[:, :, i], (B, m)
        self.gram_columns: list[torch.Tensor] = []
        self.eye: torch.Tensor | None = None  # I (m, m), its columns (m, 1), and 1 (m, 1)
        self.eye_columns: list[torch.Tensor] = []
        self.ones: torch.Tensor | None = None

    def __call__(
        self, z: torch.Tensor, fz: torch.Tensor, g: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Store ``(x + βg, g)`` with ``g = f(z) − z`` and return the safeguarded mixed
        iterate ``Σ α_i (x_i + β g_i)`` ``(B, N)`` (β = 1: ``Σ α_i f(x_i)``)."""
        beta, g = self.solver.damping, fz - z if g is None else g  # (B, N)
        plain = fz if beta == 1.0 else z + beta * g  # this row's plain step
        slot = self.gs.push(g)
        self.steps.push(plain)
        H = self._update_gram(g, slot)
        n = len(self.gs)
        if n == 1:
            return plain
        alpha = self._weights(H, slot)  # (B, 1, n)
        if alpha.dtype != z.dtype:
            alpha = alpha.to(z.dtype)
        return torch.bmm(alpha, self.steps.stacked()).view_as(z)

    def residual_out(self, z: torch.Tensor) -> torch.Tensor | None:
        """The history slot the next residual ``g`` goes to (written there by the loop)."""
        return self.gs.next_slot(z)

    def _update_gram(self, g: torch.Tensor, slot: int) -> torch.Tensor:
        """Write row and column ``slot`` of ``G Gᵀ`` (``g_i · g_new``); in place, except when
        autograd records the solve (``Unrolled``). Returns ``G Gᵀ`` of the stored ``n``."""
        if self.gram is None:
            work = torch.promote_types(g.dtype, torch.float32)  # >= float32
            m = self.solver.history
            self.gram = g.new_zeros(g.shape[0], m, m, dtype=work)
            self.gram_rows, self.gram_columns = list(self.gram.unbind(1)), list(self.gram.unbind(2))
        H, n = self.gram, len(self.gs)
        G = self.gs.stacked()  # (B, n, N)
        if G.dtype != H.dtype:
            G, g = G.to(H.dtype), g.to(H.dtype)
        row = torch.bmm(g.unsqueeze(1), G.mT).view(g.shape[0], n)  # gᵀGᵀ: a fast bmm layout
        if torch.is_grad_enabled() and (row.requires_grad or H.requires_grad):
            H = H.clone()
            H[:, slot, :n] = row
            H[:, :n, slot] = row
            self.gram = H
            self.gram_rows, self.gram_columns = list(H.unbind(1)), list(H.unbind(2))
        elif n == self.solver.history:
            self.gram_rows[slot].copy_(row)
            self.gram_columns[slot].copy_(row)
        else:
            H[:, slot, :n] = row
            H[:, :n, slot] = row
        return H if n == self.solver.history else H[:, :n, :n]

    def _weights(self, H: torch.Tensor, slot: int) -> torch.Tensor:
        """``α = y / 1ᵀy`` with ``(H + λI) y = 1``, as a row ``(B, 1, n)``; where that is
        unusable (singular, or not finite) ``α = e_slot``, the newest step alone."""
        m, n = self.solver.history, H.shape[1]
        if self.eye is None:  # the constants, made once per solve
            self.eye = torch.eye(m, dtype=H.dtype, device=H.device)
            self.eye_columns = [row[None, :] for row in self.eye.unbind(0)]  # e_i as (1, m)
            self.ones = torch.ones(m, 1, dtype=H.dtype, device=H.device)
        eye, ones = (self.eye, self.ones) if n == m else (self.eye[:n, :n], self.ones[:n])
        lam = self.solver.tikhonov * H.diagonal(dim1=1, dim2=2).mean(dim=1, keepdim=True)
        # H + λI: λ·1 and λ·0 are exact, so the fused form equals the textbook sum
        y, info = torch.linalg.solve_ex(torch.addcmul(H, lam.unsqueeze(2), eye), ones)
        alpha = (y / y.sum(dim=1, keepdim=True)).mT  # (B, 1, n)
        # 1ᵀα is finite exactly when every α_i is (they sum to 1 when finite)
        ok = (info == 0).view(-1, 1, 1) & torch.isfinite(alpha.sum(dim=2, keepdim=True))
        e_slot = self.eye_columns[slot] if n == m else self.eye_columns[slot][:, :n]
        return torch.where(ok, alpha, e_slot)  # no NaN in the mix
