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
from deqlab.solvers.base import History, Solver
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
    """What Anderson keeps between steps: the last ``m`` iterates ``x_i`` and residuals
    ``g_i`` and the Gram matrix ``G Gᵀ`` ``(B, m, m)``, updated one row per step. Where the
    weights are unusable they are set to the newest slot alone, so that the mix gives that
    row's plain step exactly (no second ``(B, N)`` select)."""

    def __init__(self, solver: Anderson) -> None:
        self.solver = solver
        self.xs, self.gs = History(solver.history), History(solver.history)
        self.gram: torch.Tensor | None = None  # G Gᵀ (B, m, m), in at least float32

    def __call__(
        self, z: torch.Tensor, fz: torch.Tensor, g: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Store ``(z, g = f(z) − z)`` and return the safeguarded mixed iterate ``(B, N)``."""
        beta, g = self.solver.damping, fz - z if g is None else g  # (B, N)
        self.xs.push(z)
        slot = self.gs.push(g)
        H = self._update_gram(g, slot)
        n = len(self.gs)
        if n == 1:
            return z + beta * g  # the plain step
        X, G = self.xs.stacked(), self.gs.stacked()  # (B, n, N)
        alpha = self._weights(H[:, :n, :n], slot).to(X.dtype)  # (B, 1, n)
        mixed = alpha @ G if beta == 1.0 else beta * (alpha @ G)
        return (alpha @ X + mixed)[:, 0]  # Σα(x + βg): (B, N)

    def _update_gram(self, g: torch.Tensor, slot: int) -> torch.Tensor:
        """Write row and column ``slot`` of ``G Gᵀ`` (``g_i · g_new``); in place, except when
        autograd records the solve (``Unrolled``)."""
        if self.gram is None:
            work = torch.promote_types(g.dtype, torch.float32)  # >= float32
            m = self.solver.history
            self.gram = g.new_zeros(g.shape[0], m, m, dtype=work)
        recorded = torch.is_grad_enabled() and (g.requires_grad or self.gram.requires_grad)
        H = self.gram.clone() if recorded else self.gram
        n = len(self.gs)
        row = (self.gs.stacked().to(H.dtype) @ g.to(H.dtype)[:, :, None])[:, :, 0]  # (B, n)
        H[:, slot, :n] = row
        H[:, :n, slot] = row
        self.gram = H
        return H

    def _weights(self, H: torch.Tensor, slot: int) -> torch.Tensor:
        """``α = y / 1ᵀy`` with ``(H + λI) y = 1`` ``(B, 1, n)``; where that is unusable
        (singular, or not finite) ``α = e_slot``, the newest step alone."""
        n = H.shape[1]
        scale = H.diagonal(dim1=1, dim2=2).mean(dim=1)  # (B,)
        H = H.clone()
        H.diagonal(dim1=1, dim2=2).add_((self.solver.tikhonov * scale)[:, None])  # H + λI
        ones = H.new_ones(H.shape[0], n, 1)
        y, info = torch.linalg.solve_ex(H, ones)  # (B, n, 1), (B,)
        alpha = (y / y.sum(dim=1, keepdim=True)).transpose(1, 2)  # (B, 1, n)
        ok = (info == 0) & torch.isfinite(alpha).all(dim=2)[:, 0]  # (B,)
        newest = torch.zeros_like(alpha[:1])  # (1, 1, n)
        newest[..., slot] = 1.0
        return torch.where(ok[:, None, None], alpha, newest)  # no NaN in the mix
