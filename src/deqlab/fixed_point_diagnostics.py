"""Cheap, opt-in diagnostics of a fixed point ``z* = f(z*)``: how contractive and how well
posed the equilibrium and its implicit gradient are, from JVPs and VJPs only.

With ``J = J_f(z*)`` (per row of a ``(R, N)`` layout: per sample when ``f`` acts on each
sample alone, so that ``J`` is block diagonal):

* spectral radius ``ρ(J)`` by power iteration ``v ← J v / ‖J v‖`` (JVPs), estimated as the
  geometric mean of ``‖J v_i‖`` over the second half of the iterations (a real dominant
  eigenvalue: converges geometrically; a complex pair: the mean smooths the rotation).
  ``ρ(J) < 1`` is what makes Picard converge locally (Hieu 2022, §2.1.2);
* ``‖J‖₂`` and ``σ_min(I − J)`` by Lanczos (full reorthogonalisation) on ``JᵀJ`` and
  ``(I − J)ᵀ(I − J)`` (one JVP and one VJP per iteration). Ritz values lie inside the
  spectrum, so ``‖J‖₂`` is estimated from below and ``σ_min(I − J)`` from above; both are
  exact once the iterations reach the row's dimension (the same run gives ``σ_max(I − J)``,
  from below). ``σ_min(I − J) > 0`` is the implicit function theorem's hypothesis (Hieu
  2022, Eq. 2.3); ``1 / σ_min`` bounds how much the adjoint solve ``(I − J)ᵀu = g``
  amplifies ``g``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from deqlab._checks import check_int, check_tensor
from deqlab.solvers import Solution

Map = Callable[[torch.Tensor], torch.Tensor]
_BREAKDOWN = 1e3  # β_j below 1e3 eps × the operator's scale seen: the Krylov space closed


@dataclass(frozen=True, eq=False)
class FixedPointDiagnostics:
    """Estimates at ``z*``, one entry per row (sample), and the forward solve's work.

    Attributes:
        spectral_radius: ``ρ(J_f)`` ``(R,)``.
        jacobian_norm: ``‖J_f‖₂`` ``(R,)`` (from below).
        sigma_min: ``σ_min(I − J_f)`` ``(R,)`` (from above).
        sigma_max: ``σ_max(I − J_f)`` ``(R,)`` (from below; the same Lanczos run), so
            ``sigma_max / sigma_min`` estimates the condition number of ``I − J_f``.
        sample_steps, sample_residuals: the forward solve's per-row steps and residuals
            (None when no Solution was given).
        products: JVPs + VJPs spent on the estimates.
    """

    spectral_radius: torch.Tensor
    jacobian_norm: torch.Tensor
    sigma_min: torch.Tensor
    sigma_max: torch.Tensor
    sample_steps: torch.Tensor | None
    sample_residuals: torch.Tensor | None
    products: int

    def summary(self) -> str:
        """One line: worst rows of each estimate (and the solve's steps and residual)."""
        text = (
            f"ρ(J_f) max {float(self.spectral_radius.max()):.3g}, ‖J_f‖₂ max "
            f"{float(self.jacobian_norm.max()):.3g}, σ_min(I − J_f) min "
            f"{float(self.sigma_min.min()):.3g}"
        )
        if self.sample_steps is not None and self.sample_residuals is not None:
            text += (
                f"; solver steps max {int(self.sample_steps.max())}, residual max "
                f"{float(self.sample_residuals.max()):.2e}"
            )
        return text


def fixed_point_diagnostics(
    f: Map,
    z: torch.Tensor,
    rows: int = 1,
    iters: int = 20,
    forward: Solution | None = None,
    *,
    generator: torch.Generator | None = None,
) -> FixedPointDiagnostics:
    """Spectral radius, ``‖J_f‖₂`` and ``σ_min(I − J_f)`` at ``z`` (module docstring).

    Args:
        f: map of tensors shaped like ``z``.
        z: the fixed point (detached here).
        rows: ``z.shape[0]`` for per-sample estimates (``f`` acting on each sample
            alone), 1 for the whole tensor as one problem.
        iters: power / Lanczos iterations (Lanczos stops at a row's dimension).
        forward: the solve's Solution, whose per-row steps and residuals are copied.
        generator: random generator of the start vectors.
    """
    z = check_tensor("z", z).detach()
    iters = check_int("iters", iters, min_value=2)
    rows = check_int("rows", rows, min_value=1)
    if z.numel() % rows or (rows > 1 and z.shape[0] != rows):
        raise ValueError(f"`rows` must be 1 or z.shape[0] = {z.shape[0]}; got {rows}")
    ops = _Products(f, z, rows)
    start = torch.randn(
        (rows, z.numel() // rows), generator=generator, dtype=z.dtype, device=z.device
    )
    rho = _power_radius(ops.jvp, start, iters)
    norm_sq = _lanczos_extremes(lambda v: ops.vjp(ops.jvp(v)), start, iters)[1]
    shifted_min, shifted_max = _lanczos_extremes(ops.shifted_gram, start, iters)
    return FixedPointDiagnostics(
        spectral_radius=rho,
        jacobian_norm=norm_sq.clamp_min(0).sqrt(),
        sigma_min=shifted_min.clamp_min(0).sqrt(),
        sigma_max=shifted_max.clamp_min(0).sqrt(),
        sample_steps=None if forward is None else forward.sample_steps,
        sample_residuals=None if forward is None else forward.sample_residuals,
        products=ops.count,
    )


class _Products:
    """``v ↦ J v`` (forward mode) and ``v ↦ Jᵀ v`` (one stored graph) on ``(R, n)`` rows."""

    def __init__(self, f: Map, z: torch.Tensor, rows: int) -> None:
        self.f, self.z, self.rows, self.count = f, z, rows, 0
        with torch.enable_grad():
            self.z_leaf = z.clone().requires_grad_()
            self.fz = f(self.z_leaf)

    def jvp(self, v: torch.Tensor) -> torch.Tensor:
        self.count += 1
        with torch.no_grad():
            _, out = torch.func.jvp(self.f, (self.z,), (v.reshape(self.z.shape),))
        return out.reshape(self.rows, -1)

    def vjp(self, v: torch.Tensor) -> torch.Tensor:
        self.count += 1
        with torch.enable_grad():
            (out,) = torch.autograd.grad(
                self.fz, self.z_leaf, v.reshape(self.z.shape), retain_graph=True, allow_unused=True
            )
        return torch.zeros_like(v) if out is None else out.reshape(self.rows, -1)

    def shifted_gram(self, v: torch.Tensor) -> torch.Tensor:
        """``(I − J)ᵀ(I − J) v``."""
        a = v - self.jvp(v)
        return a - self.vjp(a)


def _unit(v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    norm = torch.linalg.vector_norm(v, dim=1, keepdim=True)  # (R, 1)
    return v / norm.clamp_min(torch.finfo(v.dtype).tiny), norm[:, 0]


def _power_radius(jvp: Map, start: torch.Tensor, iters: int) -> torch.Tensor:
    """``ρ(J) ≈ exp(mean log ‖J v_i‖)`` over the last half of ``iters`` power steps ``(R,)``."""
    v, _ = _unit(start)
    logs = []
    for _ in range(iters):
        v, norm = _unit(jvp(v))
        logs.append(norm.clamp_min(torch.finfo(v.dtype).tiny).log())
    return torch.stack(logs[iters // 2 :]).mean(dim=0).exp()


def _lanczos_extremes(
    op: Map, start: torch.Tensor, iters: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Smallest and largest Ritz values ``(R,)`` of the symmetric PSD ``op`` after
    ``min(iters, n)`` Lanczos steps with full reorthogonalisation (per row).

    A row whose Krylov space closes early (``β_j ≈ 0``: the Ritz values are then exact)
    stops growing: its later diagonal entries repeat ``α_0``, a Rayleigh quotient, which
    lies between the extreme Ritz values and so leaves them unchanged.
    """
    steps = min(iters, start.shape[1])
    q, _ = _unit(start)
    basis = [q]  # orthonormal q_1 … q_j, each (R, n)
    alphas, betas = [], []
    active = torch.ones(start.shape[0], dtype=torch.bool, device=start.device)  # (R,)
    scale = torch.zeros(start.shape[0], dtype=start.dtype, device=start.device)
    for j in range(steps):
        w = op(q)
        alpha = (w * q).sum(dim=1)  # (R,)
        alphas.append(torch.where(active, alpha, alphas[0]) if alphas else alpha)
        for _ in range(2):  # w ⟂ q_1 … q_j (twice: Kahan's rule)
            Q = torch.stack(basis, dim=1)  # (R, j+1, n)
            w = w - ((Q @ w[:, :, None]).transpose(1, 2) @ Q)[:, 0]
        if j + 1 == steps:
            break
        q, beta = _unit(w)
        scale = torch.maximum(scale, alpha.abs() + beta)
        active = active & (beta > _BREAKDOWN * torch.finfo(w.dtype).eps * scale)
        betas.append(torch.where(active, beta, 0.0))
        basis.append(q)
    T = torch.diag_embed(torch.stack(alphas, dim=1))  # (R, s, s) tridiagonal
    if betas:
        off = torch.diag_embed(torch.stack(betas, dim=1), offset=1)
        T = T + off + off.transpose(1, 2)
    ritz = torch.linalg.eigvalsh(T)  # (R, s), ascending
    return ritz[:, 0], ritz[:, -1]
