"""Well-posedness of a DEQ at its equilibrium, per sample.

Two questions, both about the cell's Jacobian ``J_f`` at ``z*`` (Bai et al. 2021, §3;
Hieu 2022, Eq. 2.3):

* Does the forward solve converge? ``‖J_f(z*)‖₂ < 1`` makes ``f`` a local contraction in
  the 2-norm (Banach), so Picard iteration converges near ``z*`` at the rate ``‖J_f‖₂``;
  the *contraction margin* is ``1 − ‖J_f‖₂`` (ours: a sufficient condition, not a
  necessary one — Anderson and Broyden can converge beyond it).
* Is the equilibrium, and hence the implicit gradient, well posed? ``dz*/dθ =
  (I − J_f)⁻¹ ∂f/∂θ`` exists when ``σ_min(I − J_f) > 0``; the adjoint solve's error is
  amplified by ``cond(I − J_f) = σ_max/σ_min``.

The per-sample singular values come from :mod:`deqlab.diagnose.power`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from deqlab.diagnose.power import CellJacobian, jacobian_spectra


@dataclass(frozen=True)
class WellPosedness:
    """Per-sample tuples (length n): ``jacobian_norm`` ‖J_f‖₂, ``sigma_min`` / ``sigma_max``
    of I − J_f, ``residual`` ‖f(z*) − z*‖/‖f(z*)‖; ``power_converged`` says whether every
    power iteration met its tolerance."""

    jacobian_norm: tuple[float, ...]
    sigma_min: tuple[float, ...]
    sigma_max: tuple[float, ...]
    residual: tuple[float, ...]
    power_converged: bool

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
            "sigma_min": list(self.sigma_min),
            "sigma_max": list(self.sigma_max),
            "condition": list(self.condition),
            "residual": list(self.residual),
            "power_converged": self.power_converged,
        }


def well_posedness(
    cell, x: torch.Tensor, z_star: torch.Tensor, *, tol: float, max_iter: int, seed: int
) -> WellPosedness:
    """Measure :class:`WellPosedness` of ``z* = cell(z*, x)`` at the given ``z_star``."""
    spectra = jacobian_spectra(
        CellJacobian(lambda z: cell(z, x), z_star), tol=tol, max_iter=max_iter, seed=seed
    )
    with torch.no_grad():
        fz = cell(z_star, x).flatten(1)
    gap = torch.linalg.vector_norm(fz - z_star.flatten(1), dim=1)
    residual = gap / torch.linalg.vector_norm(fz, dim=1).clamp_min(1e-12)

    def floats(t: torch.Tensor) -> tuple[float, ...]:
        return tuple(float(v) for v in t.detach().cpu().to(torch.float64))

    return WellPosedness(
        floats(spectra.jacobian_norm),
        floats(spectra.sigma_min),
        floats(spectra.sigma_max),
        floats(residual),
        spectra.converged,
    )
