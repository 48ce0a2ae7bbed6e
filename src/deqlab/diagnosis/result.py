"""What :func:`deqlab.diagnose` returns, and its reading in plain words."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from deqlab.diagnosis.pl import BatchRate
from deqlab.diagnosis.wellposed import WellPosedness


@dataclass(frozen=True)
class NTKSpectrum:
    """λ_min, λ_max and ``condition = λ_max/λ_min`` of the empirical NTK Θ (n k × n k) on
    the batch, with the number of trained parameters P (Θ has rank ≤ P)."""

    lambda_min: float
    lambda_max: float
    size: int
    n_params: int

    @classmethod
    def of(cls, theta: torch.Tensor, n_params: int) -> NTKSpectrum:
        eig = torch.linalg.eigvalsh(theta.to(torch.float64))
        return cls(float(eig[0]), float(eig[-1]), theta.shape[0], n_params)

    @property
    def condition(self) -> float:
        return self.lambda_max / self.lambda_min if self.lambda_min > 0 else float("inf")

    def to_dict(self) -> dict:
        return {
            "lambda_min": self.lambda_min,
            "lambda_max": self.lambda_max,
            "condition": self.condition,
            "size": self.size,
            "n_params": self.n_params,
        }


@dataclass(frozen=True)
class Diagnosis:
    """The theory measured on a DEQ at its equilibrium on one batch.

    ``wellposed``: per-sample contraction and conditioning (:mod:`.wellposed`); ``ntk``:
    the spectrum of the empirical NTK at z* (:mod:`.implicit_ntk`); ``rate``: PL ratio,
    curvature and GD rate (:mod:`.pl`; None without ``y``); ``solver_steps``: evaluations
    of the cell in the forward solve; ``adjoint_converged``: whether the adjoint solves of
    the exact Jacobians met their tolerance (None when only the head is trained).
    """

    wellposed: WellPosedness
    ntk: NTKSpectrum
    rate: BatchRate | None
    solver_steps: int
    adjoint_converged: bool | None
    trained: tuple[str, ...]

    def to_dict(self) -> dict:
        return {
            "wellposed": self.wellposed.to_dict(),
            "ntk": self.ntk.to_dict(),
            "rate": None if self.rate is None else self.rate.to_dict(),
            "solver_steps": self.solver_steps,
            "adjoint_converged": self.adjoint_converged,
            "trained": list(self.trained),
        }

    def reading(self) -> str:
        """One short reading in plain words (each clause: a number, then what it means)."""
        clauses = [_contraction(self.wellposed), _ntk(self.ntk), *_rate(self.rate)]
        if self.adjoint_converged is False:
            clauses.insert(1, "the adjoint solves missed their tolerance: the NTK is approximate")
        return "; ".join(clauses) + "."

    def __str__(self) -> str:
        w, n = self.wellposed, self.ntk
        lines = [
            f"samples {len(w.jacobian_norm)}, trained parameters {n.n_params}, "
            f"forward solver steps {self.solver_steps}",
            f"‖J_f‖₂ at z*: max {max(w.jacobian_norm):.3g}, median {_median(w.jacobian_norm):.3g}",
            f"σ_min(I − J_f): min {min(w.sigma_min):.3g}; cond(I − J_f): max "
            f"{max(w.condition):.3g}; "
            f"ρ(J_f) max {max(w.spectral_radius):.3g}; residual max {max(w.residual):.2g}",
            f"NTK ({n.size}×{n.size}): λ_min {n.lambda_min:.3g}, λ_max {n.lambda_max:.3g}, "
            f"condition {n.condition:.3g}",
        ]
        if self.rate is not None:
            r = self.rate
            lines.append(
                f"loss {r.loss:.4g}, PL ratio ‖∇L‖²/(2L) {r.pl_ratio:.3g}, Gauss–Newton "
                f"λ_max {r.curvature:.3g} (η < {r.eta_max:.3g})"
            )
        return "\n".join([*lines, "reading: " + self.reading()])


def _median(values: tuple[float, ...]) -> float:
    return float(torch.tensor(values, dtype=torch.float64).median())


def _contraction(w: WellPosedness) -> str:
    margin, worst, rho = w.contraction_margin, min(w.sigma_min), max(w.spectral_radius)
    if margin > 0:
        head = f"contraction margin {margin:.2g}: f contracts at z*, the solver converges"
    elif rho < 1:
        head = (
            f"contraction margin {margin:.2g} but ρ(J_f) ≤ {rho:.2g} < 1: not a contraction "
            "in the 2-norm, yet Picard converges near z*"
        )
    else:
        above = sum(v >= 1 for v in w.spectral_radius)
        head = (
            f"ρ(J_f) up to {rho:.2g} ≥ 1 at {above} of {len(w.spectral_radius)} samples: "
            "Picard diverges there (Anderson or Broyden may still converge)"
        )
    if worst > 0:
        return f"{head}; σ_min(I − J_f) {worst:.2g}: the implicit gradient is well posed"
    return f"{head}; σ_min(I − J_f) = 0: I − J_f is singular, the implicit gradient is not defined"


def _ntk(n: NTKSpectrum) -> str:
    if n.lambda_min <= 0:
        return f"NTK λ_min {n.lambda_min:.2g} ≤ 0: the PL inequality fails for some targets"
    return f"NTK λ_min {n.lambda_min:.2g}, condition {n.condition:.2g}"


def _rate(r: BatchRate | None) -> list[str]:
    if r is None:
        return []
    clauses = [f"PL ratio {r.pl_ratio:.2g}; the curvature allows η < {r.eta_max:.2g}"]
    if r.lr is not None and r.predicted is not None:
        said = f"at η = {r.lr:.2g} GD is predicted to multiply the loss by {r.predicted:.3g}"
        if r.measured is not None:
            said += f" per step; measured {r.measured:.3g}"
        clauses.append(said)
    return clauses
