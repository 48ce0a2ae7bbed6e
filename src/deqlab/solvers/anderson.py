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
from deqlab.solvers.base import History, Solver, Stepper
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

    def _stepper(self) -> Stepper:
        xs, gs = History(self.history), History(self.history)  # iterates x_i, residuals g_i
        gram: list[torch.Tensor] = []  # [G Gᵀ] as (B, m, m), updated one row per step

        def step(z: torch.Tensor, fz: torch.Tensor) -> torch.Tensor:
            g = fz - z  # (B, N)
            xs.push(z)
            slot = gs.push(g)
            plain = z + self.damping * g  # (B, N)
            n = len(gs)
            if not gram:
                work = torch.promote_types(z.dtype, torch.float32)  # >= float32
                gram.append(z.new_zeros(z.shape[0], self.history, self.history, dtype=work))
            X, G = xs.stacked(), gs.stacked()  # (B, n, N)
            H = gram[0].clone()  # (B, m, m)
            row = (G.to(H.dtype) @ g.to(H.dtype)[:, :, None])[:, :, 0]  # (B, n): g_i · g_new
            H[:, slot, :n] = row
            H[:, :n, slot] = row
            gram[0] = H
            if n == 1:
                return plain
            H = H[:, :n, :n]
            scale = H.diagonal(dim1=1, dim2=2).mean(dim=1)  # (B,)
            eye = torch.eye(n, dtype=H.dtype, device=H.device)
            H = H + (self.tikhonov * scale)[:, None, None] * eye
            ones = torch.ones(H.shape[0], n, 1, dtype=H.dtype, device=H.device)
            y, info = torch.linalg.solve_ex(H, ones)  # (B, n, 1), (B,)
            alpha = (y / y.sum(dim=1, keepdim=True)).transpose(1, 2)  # (B, 1, n)
            ok = (info == 0) & torch.isfinite(alpha).all(dim=2)[:, 0]  # (B,)
            alpha = torch.where(ok[:, None, None], alpha, 0.0).to(X.dtype)  # no NaN in the mix
            mixed = (alpha @ X + self.damping * (alpha @ G))[:, 0]  # Σα(x + βg): (B, N)
            return torch.where(ok[:, None], mixed, plain)

        return step
