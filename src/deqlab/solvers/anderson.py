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
    """What Anderson keeps between steps: the last ``m`` damped images ``x_i + β g_i`` (what
    the weights mix) and residuals ``g_i``, and the Gram matrix ``G Gᵀ`` ``(B, m, m)``,
    updated one row per step. Where the weights are unusable they are set to the newest slot
    alone, so that the mix gives that row's plain step exactly (no second ``(B, N)`` select)."""

    def __init__(self, solver: Anderson) -> None:
        self.solver = solver
        self.steps, self.gs = History(solver.history), History(solver.history)
        self.gram: torch.Tensor | None = None  # G Gᵀ (B, m, m), in at least float32
        self.eye: torch.Tensor | None = None  # I (m, m) and 1 (m, 1): the weights' constants
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
        alpha = self._weights(H[:, :n, :n], slot).to(z.dtype)  # (B, 1, n)
        return (alpha @ self.steps.stacked())[:, 0]

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
        G = self.gs.stacked().to(H.dtype)  # (B, n, N)
        row = (g.to(H.dtype)[:, None, :] @ G.mT)[:, 0]  # (B, n); gᵀGᵀ: a fast bmm layout
        H[:, slot, :n] = row
        H[:, :n, slot] = row
        self.gram = H
        return H

    def _weights(self, H: torch.Tensor, slot: int) -> torch.Tensor:
        """``α = y / 1ᵀy`` with ``(H + λI) y = 1`` ``(B, 1, n)``; where that is unusable
        (singular, or not finite) ``α = e_slot``, the newest step alone."""
        n = H.shape[1]
        if self.eye is None:  # the constants, made once per solve
            self.eye = torch.eye(self.solver.history, dtype=H.dtype, device=H.device)
            self.ones = torch.ones(self.solver.history, 1, dtype=H.dtype, device=H.device)
        eye = self.eye[:n, :n]
        lam = self.solver.tikhonov * H.diagonal(dim1=1, dim2=2).mean(dim=1)  # (B,)
        y, info = torch.linalg.solve_ex(H + lam[:, None, None] * eye, self.ones[:n])
        alpha = (y / y.sum(dim=1, keepdim=True)).mT  # (B, 1, n)
        # 1ᵀα is finite exactly when every α_i is (they sum to 1 when finite)
        ok = (info == 0) & torch.isfinite(alpha.sum(dim=2))[:, 0]  # (B,)
        return torch.where(ok[:, None, None], alpha, eye[slot])  # no NaN in the mix
