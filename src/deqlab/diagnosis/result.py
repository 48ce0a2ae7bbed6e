"""What :func:`deqlab.diagnose` returns, and its reading in plain words.

The reading states an estimate as a fact only where its bracket decides the question
(``σ_min(I − J_f) ≥ 0.05 > 0``); an unconverged estimate is named as such, with the bound it
does give. A bound from Courant–Fischer, an exhausted Krylov space or a dense SVD is stated
outright; one that rests on Kuczyński & Woźniakowski's bound says "with probability ≥ 0.999
over the random start" (:mod:`deqlab.fixed_point_diagnostics`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from deqlab.diagnosis.pl import BatchRate
from deqlab.diagnosis.wellposed import WellPosedness
from deqlab.fixed_point_diagnostics import FAILURE
from deqlab.krylov_bounds import Estimate

#: How a bound that rests on Kuczyński & Woźniakowski's is qualified in words.
LIKELY = f"with probability ≥ {1 - FAILURE:g} over the random start"


@dataclass(frozen=True)
class NTKSpectrum:
    """The spectrum of the empirical NTK Θ (n k × n k) on the batch, over the parameters
    ``params`` (name → entries; Θ has rank ≤ their total P): ``eigenvalues`` ascending,
    ``lambda_min``, ``lambda_max`` and ``condition = λ_max/λ_min``."""

    eigenvalues: tuple[float, ...]
    params: dict[str, int]

    @classmethod
    def of(cls, theta: torch.Tensor, params: dict[str, int]) -> NTKSpectrum:
        eig = torch.linalg.eigvalsh(theta.to(torch.float64))
        return cls(tuple(float(v) for v in eig), dict(params))

    @property
    def lambda_min(self) -> float:
        return self.eigenvalues[0]

    @property
    def lambda_max(self) -> float:
        return self.eigenvalues[-1]

    @property
    def size(self) -> int:
        return len(self.eigenvalues)

    @property
    def n_params(self) -> int:
        return sum(self.params.values())

    @property
    def condition(self) -> float:
        return self.lambda_max / self.lambda_min if self.lambda_min > 0 else float("inf")

    def over(self) -> str:
        """The parameters in words: ``cell.W, cell.U, head.weight (P = 1840)``; more than four
        of a module as ``12 tensors of the cell, cell.attn.in_proj_weight … cell.mlp.2.bias``."""
        parts = []
        for module in ("cell", "head"):
            names = [k for k in self.params if k.startswith(module + ".")]
            if len(names) > 4:
                parts.append(f"{len(names)} tensors of the {module}, {names[0]} … {names[-1]}")
            elif names:
                parts.append(", ".join(names))
        return f"{', '.join(parts)} (P = {self.n_params})"

    def to_dict(self) -> dict:
        return {
            "lambda_min": self.lambda_min,
            "lambda_max": self.lambda_max,
            "condition": self.condition,
            "size": self.size,
            "n_params": self.n_params,
            "params": dict(self.params),
            "eigenvalues": list(self.eigenvalues),
        }


@dataclass(frozen=True)
class Diagnosis:
    """The theory measured on a DEQ at its equilibrium on one batch.

    ``wellposed``: per-sample contraction and conditioning with brackets (:mod:`.wellposed`);
    ``ntk``: the spectrum of the empirical NTK at z* and the parameters it is over
    (:mod:`.implicit_ntk`); ``rate``: PL ratio, curvature and GD rate (:mod:`.pl`; None
    without ``y``); ``solver_steps``: evaluations of the cell in the layer's forward solve;
    ``equilibrium_converged``: whether the refining solve of z* met its tolerance (if not,
    everything is measured at the solver's best iterate); ``adjoint_converged``: whether the
    adjoint solves of the exact Jacobians met theirs (None when only the head is trained).
    """

    wellposed: WellPosedness
    ntk: NTKSpectrum
    rate: BatchRate | None
    solver_steps: int
    equilibrium_converged: bool
    adjoint_converged: bool | None

    @property
    def trained(self) -> tuple[str, ...]:
        """The parameters the NTK is over, ``"cell.<name>"`` / ``"head.<name>"``."""
        return tuple(self.ntk.params)

    def to_dict(self) -> dict:
        return {
            "wellposed": self.wellposed.to_dict(),
            "ntk": self.ntk.to_dict(),
            "rate": None if self.rate is None else self.rate.to_dict(),
            "solver_steps": self.solver_steps,
            "equilibrium_converged": self.equilibrium_converged,
            "adjoint_converged": self.adjoint_converged,
            "trained": list(self.trained),
        }

    def reading(self) -> str:
        """One short reading in plain words (each clause: a number, then what it means)."""
        w = self.wellposed
        clauses = [_contraction(w), _posedness(w.sigma_min), _ntk(self.ntk), *_rate(self.rate)]
        if self.adjoint_converged is False:
            clauses.insert(2, "the adjoint solves missed their tolerance: the NTK is approximate")
        if not self.equilibrium_converged:
            clauses.insert(0, (
                f"the forward solve missed its tolerance (residual up to {max(w.residual):.2g}): "
                "z* is the solver's best iterate, not an equilibrium, and all below is measured "
                "there"
            ))  # fmt: skip
        return "; ".join(clauses) + "."

    def __str__(self) -> str:
        w, n = self.wellposed, self.ntk
        lines = [
            f"samples {len(w.residual)}, forward solver steps {self.solver_steps}, J_f v by "
            f"{w.estimates.route}, Krylov steps ≤ {w.estimates.max_iter} (bracket rtol "
            f"{w.estimates.rtol:g})" + ("; σ_min, σ_max by dense SVD" if w.estimates.dense else ""),
            "ρ(J_f) " + _worst(w.spectral_radius, "max"),
            "‖J_f‖₂ " + _worst(w.jacobian_norm, "max"),
            "σ_min(I − J_f) " + _worst(w.sigma_min, "min")
            + f"; residual max {max(w.residual):.2g}",
            f"NTK ({n.size}×{n.size}) over {n.over()}: λ_min {n.lambda_min:.3g}, "
            f"λ_max {n.lambda_max:.3g}, condition {n.condition:.3g}",
        ]  # fmt: skip
        if self.rate is not None:
            r = self.rate
            lines.append(
                f"loss {r.loss:.4g}, PL ratio ‖∇L‖²/(2L) {r.pl_ratio:.3g}, Gauss–Newton "
                f"λ_max {r.curvature:.3g} (η < {r.eta_max:.3g})"
            )
        return "\n".join([*lines, "reading: " + self.reading()])

    def _repr_html_(self) -> str:
        """The page, figures embedded, for Jupyter."""
        from deqlab.diagnosis.page import diagnosis_page

        return diagnosis_page(self)

    def to_html(self, path: str | Path) -> Path:
        """Write the page (figures embedded) to ``path`` atomically; return it."""
        from deqlab.diagnosis.page import write_page

        return write_page(self._repr_html_(), path)


def _worst(e: Estimate, which: str) -> str:
    """The worst sample's estimate and its status, e.g. ``max 1.1 ∈ [1.08, 1.13] (converged;
    median 0.9)``."""
    i = int(e.value.argmax() if which == "max" else e.value.argmin())
    value, lower, upper = float(e.value[i]), float(e.lower[i]), float(e.upper[i])
    median = float(e.value.to(torch.float64).median())
    status = "exact" if bool(e.exact[i]) else "converged" if bool(e.converged[i]) else (
        f"NOT converged after {e.steps} steps"
    )  # fmt: skip
    return (
        f"{which} {value:.3g}, bracket [{lower:.3g}, {upper:.3g}] ({status}); median "
        f"{median:.3g}; {int(e.converged.sum())} of {len(e.value)} samples converged"
    )


def _contraction(w: WellPosedness) -> str:
    """Does f contract near z* (‖J_f‖₂ < 1), and does Picard converge (ρ(J_f) < 1)?"""
    low, high = w.contraction_margin
    if low > 0:
        how = "" if bool(w.jacobian_norm.exact.all()) else f" ({LIKELY})"
        return (
            f"‖J_f‖₂ ≤ {1 - low:.2g} < 1 at every sample{how}: f contracts near z*, Picard "
            "converges"
        )
    norm = f"‖J_f‖₂ up to {float(w.jacobian_norm.value.max()):.2g}"
    if high < 0:
        head = f"{norm} ≥ 1: f is not a contraction in the 2-norm"
    else:
        head = (
            f"{norm} (bracket up to {1 - high:.2g}–{1 - low:.2g}, not converged): whether f "
            "contracts in the 2-norm is not decided"
        )
    rho = w.spectral_radius
    worst = float(rho.value.max())
    if not bool(rho.converged.all()):
        return f"{head}; ρ(J_f) estimate up to {worst:.2g} (not converged after {rho.steps} steps)"
    if worst < 1:
        return f"{head}, but ρ(J_f) ≈ {worst:.2g} < 1: Picard converges near z*"
    above = int((rho.value >= 1).sum())
    return (
        f"{head}, and ρ(J_f) ≈ {worst:.2g} ≥ 1 at {above} of {len(rho.value)} samples: Picard "
        "diverges there (Anderson or Broyden may still converge)"
    )


def _posedness(sigma: Estimate) -> str:
    """Is I − J_f invertible at every sample, by the lower bound of σ_min?"""
    lowest, worst = float(sigma.lower.min()), float(sigma.value.min())
    if lowest > 0:
        if bool(sigma.exact.all()):
            said = f"σ_min(I − J_f) = {worst:.2g} > 0 at every sample (exact)"
        elif bool(sigma.converged.all()):
            said = f"σ_min(I − J_f) ≈ {worst:.2g} > 0 at every sample (≥ {lowest:.2g} {LIKELY})"
        else:
            said = (
                f"σ_min(I − J_f) ≥ {lowest:.2g} > 0 at every sample ({LIKELY}; the estimate "
                f"{worst:.2g} did not converge)"
            )
        return said + ": the implicit gradient is well posed"
    singular = sigma.exact & (sigma.lower <= 0)
    if bool(singular.any()):
        return (
            f"σ_min(I − J_f) = 0 to round-off at {int(singular.sum())} of {len(sigma.value)} "
            "samples: I − J_f is singular there, the implicit gradient is not defined"
        )
    return (
        f"σ_min(I − J_f) ≤ {worst:.2g} at some sample, not converged after {sigma.steps} "
        "Krylov steps (no positive lower bound): whether the implicit gradient is well posed "
        "is not decided (raise max_iter)"
    )


def _ntk(n: NTKSpectrum) -> str:
    over = f"the NTK over {n.over()}"
    if n.lambda_min <= 0:
        return f"{over} has λ_min {n.lambda_min:.2g} ≤ 0: the PL inequality fails for some targets"
    return f"{over} has λ_min {n.lambda_min:.2g}, condition {n.condition:.2g}"


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
