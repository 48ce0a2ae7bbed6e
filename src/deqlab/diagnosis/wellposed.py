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

The per-sample estimates, each with its bracket and convergence status, are the engine's
:func:`deqlab.fixed_point_diagnostics`, one copy for the layer and for this tool.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from deqlab.fixed_point_diagnostics import FixedPointDiagnostics, fixed_point_diagnostics
from deqlab.krylov_bounds import Estimate


def _floats(t: torch.Tensor) -> list[float]:
    return [float(v) for v in t.detach().cpu().to(torch.float64)]


def estimate_dict(e: Estimate) -> dict:
    """An estimate as JSON-ready lists (value, lower, upper, converged, exact) and its steps."""
    return {
        "value": _floats(e.value),
        "lower": _floats(e.lower),
        "upper": _floats(e.upper),
        "converged": [bool(c) for c in e.converged],
        "exact": [bool(c) for c in e.exact],
        "steps": e.steps,
    }


@dataclass(frozen=True)
class WellPosedness:
    """The per-sample estimates at ``z*`` (``estimates``: ρ(J_f), ‖J_f‖₂, σ_min and σ_max of
    I − J_f with brackets) and ``residual`` ‖f(z*) − z*‖/‖f(z*)‖ per sample."""

    estimates: FixedPointDiagnostics
    residual: tuple[float, ...]

    @property
    def jacobian_norm(self) -> Estimate:
        return self.estimates.jacobian_norm

    @property
    def spectral_radius(self) -> Estimate:
        return self.estimates.spectral_radius

    @property
    def sigma_min(self) -> Estimate:
        return self.estimates.sigma_min

    @property
    def sigma_max(self) -> Estimate:
        return self.estimates.sigma_max

    @property
    def contraction_margin(self) -> tuple[float, float]:
        """``1 − max_i ‖J_f,i‖₂`` as a bracket (low, high): f contracts near z* at every
        sample when low > 0, does not (in the 2-norm) when high < 0."""
        return 1.0 - float(self.jacobian_norm.upper.max()), 1.0 - float(
            self.jacobian_norm.lower.max()
        )

    @property
    def condition(self) -> tuple[float, ...]:
        """Per-sample estimate ``cond(I − J_f) = σ_max/σ_min`` (inf where σ_min = 0)."""
        return tuple(
            hi / lo if lo > 0 else float("inf")
            for hi, lo in zip(
                _floats(self.sigma_max.value), _floats(self.sigma_min.value), strict=True
            )
        )

    def to_dict(self) -> dict:
        e = self.estimates
        return {
            "contraction_margin": list(self.contraction_margin),
            "jacobian_norm": estimate_dict(e.jacobian_norm),
            "spectral_radius": estimate_dict(e.spectral_radius),
            "sigma_min": estimate_dict(e.sigma_min),
            "sigma_max": estimate_dict(e.sigma_max),
            "condition": list(self.condition),
            "residual": list(self.residual),
            "route": e.route,
            "rtol": e.rtol,
            "max_iter": e.max_iter,
            "dense": e.dense,
        }


def well_posedness(
    f: Callable[[torch.Tensor], torch.Tensor],
    z_star: torch.Tensor,
    *,
    rtol: float,
    max_iter: int,
    seed: int,
) -> WellPosedness:
    """Measure :class:`WellPosedness` of ``z* = f(z*)`` at the packed ``z_star`` (n, …)."""
    gen = torch.Generator(device=z_star.device).manual_seed(seed)
    estimates = fixed_point_diagnostics(
        f, z_star, rows=z_star.shape[0], rtol=rtol, max_iter=max_iter, generator=gen
    )
    with torch.no_grad():
        fz = f(z_star).flatten(1)
    gap = torch.linalg.vector_norm(fz - z_star.flatten(1), dim=1)
    residual = gap / torch.linalg.vector_norm(fz, dim=1).clamp_min(1e-12)
    return WellPosedness(estimates, tuple(_floats(residual)))
