"""Well-posedness of a DEQ at its equilibrium, per sample.

Two questions, both about the cell's Jacobian ``J_f`` at ``z*`` (Bai et al. 2021, §3;
Hieu 2022, Eq. 2.3):

* Does the forward solve converge? ``‖J_f(z*)‖₂ < 1`` makes ``f`` a local contraction in
  the 2-norm (Banach), so Picard iteration converges near ``z*`` at the rate ``‖J_f‖₂``;
  the *contraction margin* is ``1 − max_i ‖J_f,i‖₂`` (ours: a sufficient condition;
  ``ρ(J_f) < 1`` is the necessary one for Picard, and Anderson or Broyden can converge
  beyond both).
* Is the equilibrium, and hence the implicit gradient, well posed? ``dz*/dθ =
  (I − J_f)⁻¹ ∂f/∂θ`` exists when ``σ_min(I − J_f) > 0``; the adjoint solve's error is
  amplified by up to ``cond(I − J_f) = σ_max/σ_min``.

The per-sample estimates (JVP/VJP Lanczos and power iteration) are the engine's
:func:`deqlab.fixed_point_diagnostics`, one copy for the layer and for this tool.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from deqlab.fixed_point_diagnostics import fixed_point_diagnostics


def _floats(t: torch.Tensor) -> tuple[float, ...]:
    return tuple(float(v) for v in t.detach().cpu().to(torch.float64))


@dataclass(frozen=True)
class WellPosedness:
    """Per-sample tuples (length n): ``jacobian_norm`` ‖J_f‖₂, ``spectral_radius`` ρ(J_f),
    ``sigma_min`` / ``sigma_max`` of I − J_f, ``residual`` ‖f(z*) − z*‖/‖f(z*)‖."""

    jacobian_norm: tuple[float, ...]
    spectral_radius: tuple[float, ...]
    sigma_min: tuple[float, ...]
    sigma_max: tuple[float, ...]
    residual: tuple[float, ...]

    @property
    def contraction_margin(self) -> float:
        """``1 − max_i ‖J_f,i‖₂``: positive when f contracts near z* at every sample."""
        return 1.0 - max(self.jacobian_norm)

    @property
    def condition(self) -> tuple[float, ...]:
        """Per-sample ``cond(I − J_f) = σ_max/σ_min`` (inf where σ_min = 0)."""
        return tuple(
            hi / lo if lo > 0 else float("inf")
            for hi, lo in zip(self.sigma_max, self.sigma_min, strict=True)
        )

    def to_dict(self) -> dict:
        return {
            "contraction_margin": self.contraction_margin,
            "jacobian_norm": list(self.jacobian_norm),
            "spectral_radius": list(self.spectral_radius),
            "sigma_min": list(self.sigma_min),
            "sigma_max": list(self.sigma_max),
            "condition": list(self.condition),
            "residual": list(self.residual),
        }


def well_posedness(
    cell, x: torch.Tensor, z_star: torch.Tensor, *, iters: int, seed: int
) -> WellPosedness:
    """Measure :class:`WellPosedness` of ``z* = cell(z*, x)`` at the given ``z_star``."""
    gen = torch.Generator(device=z_star.device).manual_seed(seed)
    diag = fixed_point_diagnostics(
        lambda z: cell(z, x), z_star, rows=z_star.shape[0], iters=iters, generator=gen
    )
    with torch.no_grad():
        fz = cell(z_star, x).flatten(1)
    gap = torch.linalg.vector_norm(fz - z_star.flatten(1), dim=1)
    residual = gap / torch.linalg.vector_norm(fz, dim=1).clamp_min(1e-12)
    return WellPosedness(
        _floats(diag.jacobian_norm),
        _floats(diag.spectral_radius),
        _floats(diag.sigma_min),
        _floats(diag.sigma_max),
        _floats(residual),
    )
