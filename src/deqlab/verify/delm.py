"""Kawaguchi (2021) on the user's data and a deep equilibrium linear model (DELM).

The DELM of the paper's experiments: φ(x) = x, so its width is m = d; A, B drawn
N(0, 1/m) (Appendix D.1) from ``seed``; scalar outputs (m_y = 1), the square loss
L = Σ_i (q_i − y_i)² of Corollary 1. Measured at initialization:

- Theorem 1's guaranteed λ_T ≥ 1/(m(1 + γ)²) (Eq. 33) and the initialization-dependent
  λ_min(D_0) of Eq. (8) (:func:`lambda_min_dynamics`, the m_y = 1 case in O(m³));
- σ_min(Φ), κ = 2σ_min(Φ)², L(A_0, B_0) and L* (Corollary 1);
- Corollary 1's rate: L − L* falls at least like e^{−4σ_min(Φ)²λ_T T}, with λ_T at its
  guaranteed bound and at λ_min(D_0) (what λ_T is if λ_min(D_t) never drops below its start);
- the time to reach ε, T ≥ m(1+γ)²/(4σ_min(Φ)²) log((L_0 − L*)/ε) (Eqs. (9)–(10); ε =
  :data:`EPSILON_FRACTION` of L_0 − L* unless given) and the GD steps it takes at η.

The hypotheses and theorems are those of the Figure 2–3 experiments
(:mod:`deqlab.experiments.kawaguchi2021.corollaries`), fed one run's rows. With ``train``:
GD (:class:`deqlab.train.delm_gd.DELMGradientDescent`) and Corollary 1 with both λ_T.
The logistic loss of Corollary 2 (Eqs. (11)–(12)) is not checked: verify fits the labels
with the square loss.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from deqlab.experiments.kawaguchi2021.corollaries import (
    COROLLARY_1,
    bound_checks,
    gamma_hypothesis,
    hypotheses,
    lambda_bound_check,
)
from deqlab.models.delm import DELM, column_softmax
from deqlab.statements import Statement
from deqlab.theory.kawaguchi2021 import (
    delm_objective,
    lambda_lower_bound,
    pl_ratio,
    rank_ratio,
    rank_tolerance,
    square_loss,
    square_loss_optimum,
)
from deqlab.train.delm_gd import DELMGradientDescent
from deqlab.verify.eigen import lanczos_largest
from deqlab.verify.inputs import Inputs
from deqlab.verify.progress import Progress, silent

#: ε = this fraction of L(A_0, B_0) − L* when no ε is given.
EPSILON_FRACTION = 1e-3
#: "The theorem's η": GD follows the flow (Eq. 6) when η·λ_max(∇²L) ≤ 1; half of that.
ETA_FRACTION = 0.5


def lambda_min_dynamics(A: torch.Tensor, B: torch.Tensor, gamma: float) -> float:
    """λ_min(D) of Eq. (8) for one output (m_y = 1), in O(m³) time and O(m²) memory.

    With m_y = 1, D = Σ_k M_k v_k v_kᵀ = Vᵀ diag(M) V, V = U⁻¹ (rows v_k), and
    M_k = 1 + γ²‖Z J_k‖² where (Z J_k)_j = s_kj (Z_j − Z s_k) (J_k = diag(s_k) − s_k s_kᵀ,
    s_k column k of σ(A), Z = BU⁻¹). :func:`deqlab.theory.kawaguchi2021.dynamics_matrix`
    forms D for any m_y through an O(m³)-memory einsum; the tests compare the two.
    """
    if B.shape[0] != 1:
        raise ValueError(f"`B` must have one row (m_y = 1); got shape {tuple(B.shape)}")
    m = A.shape[0]
    S = column_softmax(A)  # (m, m), column k = s_k
    U = torch.eye(m, dtype=A.dtype, device=A.device) - gamma * S
    V = torch.linalg.inv(U)
    Z = (B @ V)[0]  # (m,)
    centred = Z[:, None] - (Z @ S)[None, :]  # (j, k): Z_j − Z s_k
    M = 1.0 + gamma**2 * (S**2 * centred**2).sum(dim=0)  # (m,)
    D = V.T @ (M[:, None] * V)
    return float(torch.linalg.eigvalsh(0.5 * (D + D.T))[0])


def sharpness(model: DELM, Phi: torch.Tensor, Y: torch.Tensor) -> float:
    """λ_max(∇²L(A, B)) by Lanczos on Hessian-vector products (double backward).

    The same number as :func:`deqlab.theory.kawaguchi2021.objective_sharpness`, which
    forms the (m² + m)² Hessian and is checked against this on small models.
    """
    A, B = model.A.detach(), model.B.detach()
    sizes = (A.numel(), B.numel())
    theta = torch.cat([A.reshape(-1), B.reshape(-1)])

    def objective(t: torch.Tensor) -> torch.Tensor:
        a, b = t.split(sizes)
        return delm_objective(a.view_as(A), b.view_as(B), Phi, Y, model.gamma)

    def hvp(v):
        vec = torch.as_tensor(v, dtype=theta.dtype)
        return torch.autograd.functional.hvp(objective, theta, vec)[1].numpy()

    return lanczos_largest(hvp, theta.numel())[0]


@dataclass(frozen=True, eq=False)
class DELMInit:
    """The DELM at initialization and what Corollary 1 reads from it."""

    inputs: Inputs
    gamma: float
    seed: int
    model: DELM
    lambda_D0: float
    sigma_min: float
    rank_ratio: float
    rank_tol: float
    loss0: float
    loss_star: float
    pl_ratio: float
    sharpness: float

    @property
    def m(self) -> int:
        return self.model.m

    @property
    def kappa(self) -> float:
        return 2 * self.sigma_min**2

    @property
    def lambda_bound(self) -> float:
        return lambda_lower_bound(self.m, self.gamma)

    @property
    def eta_theorem(self) -> float:
        return ETA_FRACTION / self.sharpness

    def row(self) -> dict[str, object]:
        """The step-0 row the corollaries' builders read."""
        return {"step": 0, "loss": self.loss0, "loss_star": self.loss_star,
                "lambda_T": self.lambda_D0, "rank_ratio": self.rank_ratio,
                "rank_tol": self.rank_tol, "pl_ratio": self.pl_ratio,
                "sharpness_start": self.sharpness, "sharpness_end": self.sharpness}  # fmt: skip


def _targets(inputs: Inputs) -> torch.Tensor:
    return inputs.y[None, :]  # (1, n)


def initialize(inputs: Inputs, *, gamma: float, seed: int, progress: Progress = silent):
    """Draw the DELM and measure everything of the module docstring."""
    progress("DELM at initialization", 0, 2)
    generator = torch.Generator().manual_seed(seed)
    model = DELM(inputs.d, 1, gamma=gamma, generator=generator, dtype=torch.float64)
    Phi, Y = inputs.X, _targets(inputs)
    A, B = model.A.detach(), model.B.detach()
    rank = min(inputs.n, inputs.d)
    singular_values = torch.linalg.svdvals(Phi)
    with torch.no_grad():
        loss0 = float(square_loss(model(inputs.X), Y))
    loss_star = float(square_loss_optimum(Phi, Y)[1])
    sigma = float(singular_values[rank - 1])
    kappa = 2 * sigma**2
    pl = pl_ratio(model.linear_weight().detach(), Phi, Y, kappa=kappa, loss_star=loss_star) \
        if kappa > 0 else math.nan  # fmt: skip
    progress("λ_max(∇²L) at initialization", 1, 2)
    return DELMInit(inputs, gamma, seed, model, lambda_min_dynamics(A, B, gamma), sigma,
                    rank_ratio(Phi, rank), rank_tolerance(Phi), loss0, loss_star, pl,
                    sharpness(model, Phi, Y))  # fmt: skip


def time_to_epsilon(init: DELMInit, lam: float, epsilon: float) -> float:
    """T ≥ 1/(4σ_min(Φ)²λ) · log((L_0 − L*)/ε) (Eq. (10) with λ_T = λ); 0 if already
    within ε, inf if σ_min(Φ) = 0."""
    gap = init.loss0 - init.loss_star
    if gap <= epsilon:
        return 0.0
    rate = 4 * init.sigma_min**2 * lam
    return math.inf if rate <= 0 else math.log(gap / epsilon) / rate


def default_epsilon(init: DELMInit) -> float:
    return EPSILON_FRACTION * max(init.loss0 - init.loss_star, 0.0)


def numbers(init: DELMInit, eta: float | None, epsilon: float | None) -> dict[str, object]:
    """Every number of the module docstring under stable keys."""
    eps = default_epsilon(init) if epsilon is None else epsilon
    times = {"guaranteed": time_to_epsilon(init, init.lambda_bound, eps),
             "at_init": time_to_epsilon(init, init.lambda_D0, eps)}  # fmt: skip
    step = eta or init.eta_theorem
    return {
        "width": init.m, "gamma": init.gamma, "seed": init.seed,
        "lambda_T_lower_bound": init.lambda_bound, "lambda_min_D0": init.lambda_D0,
        "lambda_min_D0_over_bound": init.lambda_D0 / init.lambda_bound,
        "sigma_min_phi": init.sigma_min, "rank_ratio": init.rank_ratio,
        "kappa": init.kappa, "loss0": init.loss0, "loss_star": init.loss_star,
        "pl_ratio": init.pl_ratio,
        "rate_guaranteed": 4 * init.sigma_min**2 * init.lambda_bound,
        "rate_at_init": 4 * init.sigma_min**2 * init.lambda_D0,
        "epsilon": eps, "time_to_epsilon": times,
        "steps_to_epsilon": {k: v / step for k, v in times.items()},
        "sharpness": init.sharpness, "eta_theorem": init.eta_theorem, "eta": eta,
    }  # fmt: skip


def statements(init: DELMInit, eta: float | None) -> list[Statement]:
    """rank(Φ), the PL inequality (and, with ``eta``, GD following the flow) as
    hypotheses; Theorem 1's λ_min(D_0) ≥ 1/(m(1+γ)²) guarded by them."""
    guards = guards_for(init, {"init": [init.row()]}, eta)
    return [*guards, lambda_bound_check({"init": [init.row()]}, guards, m=init.m,
                                        gamma=init.gamma)]  # fmt: skip


def guards_for(init: DELMInit, runs, eta: float | None) -> list[Statement]:
    """Corollary 1's hypotheses on ``runs``: rank(Φ), the PL inequality and, with an η, GD
    following the flow. γ ∈ (0, 1) is not among them: verify refuses any other γ (the
    DELM is not defined), so that statement could not fail here."""
    found = hypotheses(COROLLARY_1, runs, lr=eta or init.eta_theorem, gamma=init.gamma)
    kept = [s for s in found if s.name != gamma_hypothesis(init.gamma).name]
    return kept if eta is not None else kept[:-1]  # the flow hypothesis comes last


@dataclass(frozen=True)
class DELMTraining:
    """A GD run: η and its rows (step 0..T), in the corollaries' row format."""

    eta: float
    rows: list[dict]


def train(init: DELMInit, *, steps: int, eta: float, progress: Progress = silent) -> DELMTraining:
    """GD with step ``eta`` for ``steps`` steps from a copy of the initial DELM."""
    model = DELM.from_matrices(init.model.A.detach(), init.model.B.detach(), gamma=init.gamma)
    trainer = DELMGradientDescent(model, init.inputs.X, _targets(init.inputs), lr=eta)
    for step in range(steps):
        progress("gradient descent (DELM)", step, steps)
        trainer.run(1)
    history = trainer.history_tensors()
    rows = [{k: v[i].item() for k, v in history.items()} for i in range(len(history["step"]))]
    start = init.row()
    start["sharpness_end"] = sharpness(model, init.inputs.X, _targets(init.inputs))
    for row in rows:
        row["loss_star"] = init.loss_star
    rows[0] = {**start, **rows[0]}
    return DELMTraining(eta, rows)


def train_statements(init: DELMInit, run: DELMTraining) -> list[Statement]:
    """Corollary 1 with both λ_T and Theorem 1's λ bound over the run, guarded."""
    runs = {"train": run.rows}
    guards = guards_for(init, runs, run.eta)
    checks = bound_checks(COROLLARY_1, runs, guards, lr=run.eta)
    return [*guards, *checks, lambda_bound_check(runs, guards, m=init.m, gamma=init.gamma)]


def train_numbers(init: DELMInit, run: DELMTraining) -> dict[str, object]:
    """The final loss gap against both bounds, and the rows."""
    last = run.rows[-1]
    keys = ("step", "time", "loss", "lambda_min", "lambda_T", "bound_independent",
            "bound_dependent")  # fmt: skip
    return {
        "steps": int(last["step"]), "eta": run.eta, "loss_final": last["loss"],
        "bound_independent_final": last["bound_independent"],
        "bound_dependent_final": last["bound_dependent"], "lambda_T": last["lambda_T"],
        "sharpness_end": run.rows[0]["sharpness_end"],
        "records": [{k: r.get(k) for k in keys} for r in run.rows],
    }  # fmt: skip
