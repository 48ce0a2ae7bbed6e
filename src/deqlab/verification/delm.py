"""Kawaguchi (2021) on the user's data and a deep equilibrium linear model (DELM).

The DELM of the paper's experiments: φ(x) = x, so its width is m = d; A, B drawn
N(0, 1/m) (Appendix D.1) from ``seed``; scalar outputs (m_y = 1) and one of two losses:

- ``"square"``: L = Σ_i (q_i − y_i)², Corollary 1 (rank(Φ) = min(n, m), κ = 2σ_min(Φ)²);
- ``"logistic"``: ℓ(q, y) = −y log s(q) − (1 − y) log(1 − s(q)) + τq², y ∈ {0, 1},
  Corollary 2 (rank(Φ) = m, ‖B_t‖₁ < (1 − γ)R, κ = (2τ + ρ(R))σ_min(Φ)², L* = L*_{0,R}).
  Labels of two other values are read as 0 (the smaller) and 1 (ours: :func:`binary_labels`).

Measured at initialization:

- Theorem 1's guaranteed λ_T ≥ 1/(m(1 + γ)²) (Eq. 33) and the initialization-dependent
  λ_min(D_0) of Eq. (8) with its certified bracket (m_y = 1, D in O(m³):
  :func:`deqlab.papers.kawaguchi2021.theory_large.dynamics_matrix_one_output`;
  :mod:`deqlab.theory.brackets`);
- σ_min(Φ), the corollary's κ, L(A_0, B_0) and L*;
- the rate: L − L* falls at least like e^{−2κλ_T T} (Eq. 7), with λ_T at its guaranteed
  bound and at λ_min(D_0) (what λ_T is if λ_min(D_t) never drops below its start);
- the time to reach ε, T ≥ m(1+γ)²/(2κ) log((L_0 − L*)/ε) (Eq. (9); with the corollaries'
  κ: Eq. (10) for the square loss, Eq. (11) for the logistic loss with R = ∞ and Eq. (12)
  with τ = 0, R < ∞; ε = :data:`EPSILON_FRACTION` of L_0 − L* unless given) and the GD steps
  it takes at η.

The hypotheses and theorems are the paper's claims (:mod:`deqlab.papers.kawaguchi2021`),
fed one run (:func:`start_run`: the initialization as step 0). With ``train``
(:mod:`deqlab.verification.delm_train`): GD, the corollary with both λ_T, and
the time to ε against the run: T_ε predicted (worst-case λ_T) beside the first recorded
T = τη with L − L* ≤ ε, the theorem decided on L_T − L* ≤ ε at every recorded T ≥ T_ε.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

import torch

from deqlab.models.delm import DELM
from deqlab.papers.kawaguchi2021.corollaries import accuracy_equation, lambda_bound_check
from deqlab.papers.kawaguchi2021.hypotheses import (
    COROLLARY_1,
    COROLLARY_2,
    Corollary,
    gamma_hypothesis,
    hypotheses,
    kappa_hypothesis,
)
from deqlab.papers.kawaguchi2021.theory import (
    corollary1_kappa,
    corollary2_kappa,
    lambda_lower_bound,
    logistic_loss,
    logistic_loss_optimum,
    logistic_rho,
    pl_ratio,
    rank_ratio,
    rank_tolerance,
    square_loss,
    square_loss_optimum,
)
from deqlab.papers.kawaguchi2021.theory_large import (
    dynamics_matrix_one_output,
    objective_sharpness_lanczos,
)
from deqlab.statements import Run, Statement
from deqlab.theory.brackets import Bracket
from deqlab.theory.spectra import least_eigenvalue_large
from deqlab.verification.inputs import InputError, Inputs
from deqlab.verification.progress import Progress, silent

#: ε = this fraction of L(A_0, B_0) − L* when no ε is given.
EPSILON_FRACTION = 1e-3
#: "The theorem's η": GD follows the flow (Eq. 6) when η·λ_max(∇²L) ≤ 1; half of that.
ETA_FRACTION = 0.5
#: The losses and the corollary that covers each.
LOSSES = {"square": COROLLARY_1, "logistic": COROLLARY_2}


@dataclass(frozen=True)
class Loss:
    """The loss of L₀ (Eq. 2): its name, τ and the radius R of Corollary 2 (∞: none)."""

    name: str = "square"
    tau: float = 0.0
    radius: float = math.inf

    @property
    def corollary(self) -> Corollary:
        return LOSSES[self.name]

    def __call__(self, Q: torch.Tensor, Y: torch.Tensor) -> torch.Tensor:
        return square_loss(Q, Y) if self.name == "square" else logistic_loss(Q, Y, self.tau)

    def optimum(self, Phi: torch.Tensor, Y: torch.Tensor) -> float:
        """L* (square) or L*_{0,R} (logistic), the minimum of L₀ (over ‖W‖₁ ≤ R)."""
        if self.name == "square":
            return float(square_loss_optimum(Phi, Y)[1])
        return float(logistic_loss_optimum(Phi, Y, tau=self.tau, radius=self.radius)[1])

    def kappa(self, Phi: torch.Tensor) -> float:
        """κ = 2σ_min(Φ)² (Corollary 1) or (2τ + ρ(R))σ_min(Φ)² (Corollary 2, Appendix A.4),
        the trainer's: 0 below the corollary's rank (its bound is then vacuous)."""
        if self.name == "square":
            return corollary1_kappa(Phi)
        return corollary2_kappa(Phi, tau=self.tau, radius=self.radius)


@dataclass(frozen=True, eq=False)
class DELMInit:
    """The DELM at initialization and what its corollary reads from it."""

    inputs: Inputs
    gamma: float
    seed: int
    loss: Loss
    model: DELM
    lambda_D0: float
    sigma_min: float
    kappa: float
    rank_ratio: float
    rank_tol: float
    loss0: float
    loss_star: float
    pl_ratio: float
    sharpness: float
    label_map: dict[str, int] | None = None  # two labels read as 0 and 1 (binary_labels)
    lambda_D0_bracket: Bracket | None = None

    def brackets(self) -> dict[str, Bracket]:
        """The certified bracket of λ_min(D_0) (JSON ``lambda_min_D0_bounds``)."""
        found = self.lambda_D0_bracket
        return {} if found is None else {"lambda_min_D0": found}

    def at(self, values: dict[str, float]) -> DELMInit:
        """This initialization with λ_min(D_0) set to ``values["lambda_min_D0"]`` (a corner of
        its bracket: :mod:`deqlab.verification.precision`)."""
        return replace(self, lambda_D0=values.get("lambda_min_D0", self.lambda_D0))

    @property
    def m(self) -> int:
        return self.model.m

    @property
    def lambda_bound(self) -> float:
        return lambda_lower_bound(self.m, self.gamma)

    @property
    def eta_theorem(self) -> float:
        return ETA_FRACTION / self.sharpness

    @property
    def b_norm1(self) -> float:
        """‖B_0‖₁, the induced 1-norm (largest absolute column sum) of Corollary 2."""
        return float(self.model.B.detach().abs().sum(dim=0).max())

    def row(self) -> dict[str, object]:
        """The step-0 row the corollaries' builders read."""
        return {
            "step": 0,
            "loss": self.loss0,
            "loss_star": self.loss_star,
            "lambda_T": self.lambda_D0,
            "rank_ratio": self.rank_ratio,
            "rank_tol": self.rank_tol,
            "pl_ratio": self.pl_ratio,
            "kappa": self.kappa,
            "b_norm1": self.b_norm1,
            "sharpness_start": self.sharpness,
            "sharpness_end": self.sharpness,
        }


def targets(inputs: Inputs) -> torch.Tensor:
    return inputs.y[None, :]  # (1, n)


def binary_labels(inputs: Inputs) -> tuple[Inputs, dict[str, int] | None]:
    """``inputs`` with labels in {0, 1} for the logistic loss, and the map used (None when
    they already are). Two other values are read as 0 (the smaller) and 1 (ours: the image
    sets of ``deqlab data`` carry ±1); more than two values raise :class:`InputError`."""
    values = torch.unique(inputs.y)
    if bool(((values == 0) | (values == 1)).all()):
        return inputs, None
    if values.numel() != 2:
        raise InputError(
            f"the logistic loss (Corollary 2) needs labels y ∈ {{0, 1}} (or two classes); the "
            f"labels take {values.numel()} distinct values"
        )
    mapped = (inputs.y == values[1]).to(inputs.y.dtype)
    return replace(inputs, y=mapped), {f"{float(values[0]):g}": 0, f"{float(values[1]):g}": 1}


def initialize(
    inputs: Inputs, *, gamma: float, seed: int, loss: Loss = Loss(), progress: Progress = silent
) -> DELMInit:
    """Draw the DELM and measure everything of the module docstring (labels in {0, 1} for
    the logistic loss: see :func:`binary_labels`)."""
    progress("DELM at initialization", 0, 2)
    generator = torch.Generator().manual_seed(seed)
    model = DELM(inputs.d, 1, gamma=gamma, generator=generator, dtype=torch.float64)
    Phi, Y = inputs.X, targets(inputs)
    A, B = model.A.detach(), model.B.detach()
    rank = min(inputs.n, inputs.d) if loss.name == "square" else inputs.d
    sigma = float(torch.linalg.svdvals(Phi)[min(inputs.n, inputs.d) - 1])
    with torch.no_grad():
        loss0 = float(loss(model(inputs.X), Y))
    loss_star, kappa = loss.optimum(Phi, Y), loss.kappa(Phi)
    pl = (
        pl_ratio(
            model.linear_weight().detach(),
            Phi,
            Y,
            kappa=kappa,
            loss_star=loss_star,
            loss=loss.name,
            tau=loss.tau,
        )
        if kappa > 0
        else math.nan
    )
    progress("λ_max(∇²L) at initialization", 1, 2)
    dynamics = least_eigenvalue_large(dynamics_matrix_one_output(A, B, gamma))
    top = objective_sharpness_lanczos(model, Phi, Y, loss.name, loss.tau)
    ranks = rank_ratio(Phi, rank), rank_tolerance(Phi)
    return DELMInit(
        inputs, gamma, seed, loss, model, dynamics.computed, sigma, kappa, *ranks, loss0,
        loss_star, pl, top, lambda_D0_bracket=dynamics.bracket,
    )  # fmt: skip


def time_to_epsilon(init: DELMInit, lam: float, epsilon: float) -> float:
    """T ≥ 1/(2κλ) · log((L_0 − L*)/ε) (Eq. (9) with λ_T = λ; Eqs. (10)–(12) with the
    corollaries' κ at λ = 1/(m(1+γ)²)); 0 if already within ε, inf if κ = 0."""
    gap = init.loss0 - init.loss_star
    if gap <= epsilon:
        return 0.0
    rate = 2 * init.kappa * lam
    return math.inf if rate <= 0 else math.log(gap / epsilon) / rate


def epsilon_for(init: DELMInit, epsilon: float | None) -> float:
    """The given ε, else :data:`EPSILON_FRACTION` of L₀ − L* (of 1 where L₀ − L* ≤ 0: then
    there is no time to ε to predict or measure, and the statements say so)."""
    if epsilon is not None:
        return epsilon
    return EPSILON_FRACTION * gap_or_one(init)


def gap_or_one(init: DELMInit) -> float:
    gap = init.loss0 - init.loss_star
    return gap if gap > 0 else 1.0


def numbers(init: DELMInit, eta: float | None, epsilon: float | None) -> dict[str, object]:
    """Every number of the module docstring under stable keys."""
    eps = epsilon_for(init, epsilon)
    times = {
        "guaranteed": time_to_epsilon(init, init.lambda_bound, eps),
        "at_init": time_to_epsilon(init, init.lambda_D0, eps),
    }
    step = eta or init.eta_theorem
    loss = init.loss
    return {
        "width": init.m,
        "gamma": init.gamma,
        "seed": init.seed,
        "loss": loss.name,
        "corollary": loss.corollary.name,
        "tau": loss.tau,
        "radius": loss.radius,
        "rho_R": None if loss.name == "square" else logistic_rho(init.inputs.X, loss.radius),
        "lambda_T_lower_bound": init.lambda_bound,
        "lambda_min_D0": init.lambda_D0,
        "lambda_min_D0_bounds": _bounds(init.lambda_D0_bracket),
        "lambda_min_D0_over_bound": init.lambda_D0 / init.lambda_bound,
        "sigma_min_phi": init.sigma_min,
        "rank_ratio": init.rank_ratio,
        "kappa": init.kappa,
        "bound_vacuous": init.kappa == 0,
        "loss0": init.loss0,
        "loss_star": init.loss_star,
        "pl_ratio": init.pl_ratio,
        "rate_guaranteed": 2 * init.kappa * init.lambda_bound,
        "rate_at_init": 2 * init.kappa * init.lambda_D0,
        "epsilon": eps,
        "time_to_epsilon": times,
        "time_equation": accuracy_equation(loss.name, loss.tau, loss.radius),
        "steps_to_epsilon": {k: v / step for k, v in times.items()},
        "sharpness": init.sharpness,
        "eta_theorem": init.eta_theorem,
        "eta": eta,
    }


def start_run(init: DELMInit) -> Run:
    """The initialization as a run of one step (step 0)."""
    return Run.from_rows("init", [init.row()])


def _bounds(found: Bracket | None) -> list[float] | None:
    return None if found is None else [found.lower, found.upper]


def statements(init: DELMInit, eta: float | None) -> list[Statement]:
    """The corollary's hypotheses (:func:`guards_for`; for the logistic loss also κ > 0,
    which Eqs. (11)–(12)'s time to ε needs); Theorem 1's λ_min(D_0) ≥ 1/(m(1+γ)²) guarded
    by them."""
    runs = {"init": start_run(init)}
    guards = guards_for(init, runs, eta)
    positive = kappa_guard(init, runs)
    return [*guards, *positive, lambda_bound_check(runs, guards, m=init.m, gamma=init.gamma)]


def kappa_guard(init: DELMInit, runs: Mapping[str, Run]) -> list[Statement]:
    """κ > 0, which Eqs. (11)–(12) need (logistic loss; the square loss's κ = 2σ_min(Φ)² > 0
    is rank(Φ) = min(n, m), already a guard)."""
    loss = init.loss
    if loss.name == "square":
        return []
    return [kappa_hypothesis(runs, tau=loss.tau, radius=loss.radius)]


def guards_for(init: DELMInit, runs: Mapping[str, Run], eta: float | None) -> list[Statement]:
    """The corollary's hypotheses on ``runs``: rank(Φ), the PL inequality, for the logistic
    loss with R < ∞ ‖B_t‖₁ < (1 − γ)R and, with an η, GD following the flow. Left out, as
    they could not fail here: γ ∈ (0, 1) (verify refuses any other γ: the DELM is not
    defined) and ‖B_t‖₁ < (1 − γ)·∞."""
    loss = init.loss
    corollary = loss.corollary
    if loss.radius == math.inf:
        corollary = replace(corollary, radius_hypothesis=False)
    found = hypotheses(
        corollary, runs, lr=eta or init.eta_theorem, gamma=init.gamma, radius=loss.radius
    )
    kept = [s for s in found if s.name != gamma_hypothesis(init.gamma).name]
    return kept if eta is not None else kept[:-1]  # the flow hypothesis comes last
