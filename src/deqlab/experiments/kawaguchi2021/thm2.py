"""Kawaguchi (2021), Theorem 2 (Section 3.2, Appendix A.2), measured along DELM trajectories.

For m_y = 1 and a differentiable loss, at every time t and every δ_t ∈ (0, δ̄_t],

    d/dt f_θt = (1/δ_t) V_t φ,   vec(V_t) ∈ argmin_{v ∈ 𝒱_t} L₀ᵗ(v),
    𝒱_t = {v : ‖v‖_{G_t} ≤ δ_t‖d/dt vec(B_tU_t⁻¹)‖_{G_t}}

(Eq. 13), with G_t = U_t(S_t⁻¹ − δ_tF_t)U_tᵀ ≻ 0 and L₀ᵗ the second-order model of L₀ at
B_tU_t⁻¹.  We train random-initialized DELMs (A, B entries N(0, 1/m), m_y = 1) by
full-batch GD with the square loss and the logistic loss + τq², and at log-spaced steps
compute S_t, F_t, δ̄_t = sup{δ : G_t ≻ 0} and, for each δ_t = c·δ̄_t of
``delta_fractions``, the minimiser of the trust-region subproblem by an independent
closed-form solve (:func:`~deqlab.papers.kawaguchi2021.trust_region.solve_trust_region`).
We compare (1/δ_t)V_tφ(x_i) with d/dt f_θt(x_i) measured by forward-mode autograd along −∇L (the
flow, Eq. 6), the KKT multiplier with the proof's μ = 1/(2δ_t), and the proof's
D_t = U⁻ᵀSU⁻¹ (Eq. 26 with m_y = 1) with the measured d vec(Z_t)/dt.

Data (not given by the paper, which has no experiment for Theorem 2): Zou et al.'s Gaussian
inputs x ∈ R^d, φ(x) = x; the square loss on the first coordinate of y = −x + 0.1ς, the
logistic loss on the labels 1[(−x + ν ς)_1 > 0] of Figure 3.  The statements are in
:mod:`.thm2_report`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch

from deqlab.data import zou_synthetic
from deqlab.experiments.base import Experiment, Row, Task, TaskContext
from deqlab.experiments.blocks import DELMSynthetic
from deqlab.experiments.constraints import (
    DISTINCT,
    FRACTION,
    NONEMPTY,
    NONNEGATIVE,
    POSITIVE,
    Interval,
)
from deqlab.experiments.deviations import measurement, not_given
from deqlab.experiments.kawaguchi2021 import thm2_report
from deqlab.experiments.kawaguchi2021.trajectory import log_spaced_steps, probe_trajectory
from deqlab.experiments.registry import register
from deqlab.models.delm import DELM
from deqlab.papers import KAWAGUCHI
from deqlab.papers.kawaguchi2021.trust_region import (
    flow_velocities,
    solve_trust_region,
    trust_region_terms,
)
from deqlab.train.delm_gd import DELMGDConfig, DELMGradientDescent

NO_EXPERIMENT = "the paper has no experiment for Theorem 2 (Section 3.2)"
LOSSES = ("square", "logistic")


@dataclass(frozen=True)
class Thm2Config(DELMSynthetic):
    noise: float = 0.1
    label_noise: float = 0.5
    tau: float = 0.01
    records: int = 12
    delta_fractions: tuple[float, ...] = (0.01, 0.5, 0.9)
    tolerance: float = 1e-8

    constraints: ClassVar = {
        "noise": NONNEGATIVE,
        "label_noise": NONNEGATIVE,
        "tau": NONNEGATIVE,
        "records": Interval(1),
        "delta_fractions": (NONEMPTY, FRACTION, DISTINCT),
        "tolerance": POSITIVE,
    }


def thm2_data(config: Thm2Config, loss: str, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """X (d, n) and scalar targets (1, n): y₁ of Zou's data, or Figure 3's labels."""
    noise = config.noise if loss == "square" else config.label_noise
    data = zou_synthetic(config.n, config.d, noise=noise, seed=config.seed)
    y = data.y[:1] if loss == "square" else (data.y[:1] > 0).to(data.X.dtype)
    return data.X.to(device), y.to(device)


def trust_region_rows(
    model: DELM, X: torch.Tensor, Y: torch.Tensor, config: Thm2Config, loss: str
) -> list[Row]:
    """One row per δ fraction: Theorem 2's quantities at the model's current (A, B)."""
    A, B, gamma = model.A.detach(), model.B.detach(), model.gamma
    tau = config.tau if loss == "logistic" else 0.0
    terms = trust_region_terms(A, B, X, Y, gamma, loss=loss, tau=tau)
    zdot, fdot = flow_velocities(A, B, X, Y, gamma, loss=loss, tau=tau)
    zdot, scale = zdot[0], float(fdot.abs().max())
    closed = float((terms.closed_form_velocity() - zdot).abs().max() / zdot.abs().max())
    delta_bar = terms.delta_bar()
    rows = []
    for fraction in config.delta_fractions:
        delta = fraction * delta_bar
        G = terms.G(delta)
        radius = delta * math.sqrt(float(zdot @ G @ zdot))
        v, multiplier = solve_trust_region(terms.gradient, terms.hessian, G, radius)
        predicted = (v @ X) / delta  # (1/δ) V φ(x_i), (n,)
        rows.append(
            {
                "delta_fraction": fraction,
                "delta_bar": delta_bar,
                "delta": delta,
                "velocity_error": float((predicted - fdot[0]).abs().max()) / scale,
                "multiplier_error": abs(multiplier * delta - 1.0),
                "closed_form_error": closed,
                "g_min_eig": float(torch.linalg.eigvalsh(G)[0]),
                "fdot_max": scale,
            }
        )
    return rows


#: Every field: the paper gives no setting for Theorem 2.
PAPER_SETTING = {
    "n": not_given(NO_EXPERIMENT),
    "d": not_given(NO_EXPERIMENT),
    "noise": not_given(NO_EXPERIMENT + "; Section 4's 0.1 for the square loss"),
    "label_noise": not_given(NO_EXPERIMENT + "; Figure 3's labels (ours)"),
    "tau": not_given("Theorem 2 holds for any differentiable loss; τ for the logistic loss"),
    "gamma": not_given(NO_EXPERIMENT + "; Appendix D.1's 0.8"),
    "lr": not_given("Theorem 2 is for the gradient flow; GD gives its points"),
    "steps": not_given(NO_EXPERIMENT),
    "records": measurement(),
    "delta_fractions": not_given(
        "Theorem 2: every δ_t ∈ (0, δ̄_t]; ours: fractions of δ̄_t = sup{δ : G_t ≻ 0}"
    ),
    "tolerance": not_given("agreement in float64 (ours)"),
    "seed": not_given(),
}


@register
class Kawaguchi2021Thm2(Experiment):
    """Theorem 2's implicit trust-region Newton step, measured along DELM trajectories."""

    slug = "thm2"
    title = "DELM dynamics as a trust-region Newton method (Theorem 2, Eq. 13)"
    paper = KAWAGUCHI
    report = thm2_report
    where = "Theorem 2"
    Config = Thm2Config
    presets: ClassVar = {
        "tiny": {"n": 30, "d": 3, "gamma": 0.5, "lr": 1e-2, "steps": 50, "records": 4},
        "quick": {"steps": 1000, "records": 8},
        "paper": {},
    }
    paper_setting: ClassVar = PAPER_SETTING
    figure_captions: ClassVar = {
        "thm2": "Theorem 2 along GD trajectories of random-initialized DELMs (square and "
        "logistic loss): the largest relative gap between the measured d/dt f_θt(x_i) and "
        "(1/δ_t)V_tφ(x_i) with V_t the solved trust-region step, and |2μδ_t − 1| for its "
        "KKT multiplier, at each δ_t as a fraction of δ̄_t; the subtitle gives n, d, γ, τ "
        "and η.",
    }
    metric_columns: ClassVar = {
        "task": "square-delm or logistic-delm",
        "loss": "square or logistic",
        "step": "GD iteration (flow time = step · lr)",
        "loss_value": "training loss L(A_t, B_t)",
        "delta_fraction": "δ_t/δ̄_t",
        "delta_bar": "δ̄_t = 1/λ_max(S^{1/2}FS^{1/2}) = sup{δ : G_t ≻ 0}",
        "delta": "δ_t",
        "velocity_error": "max_i |d/dt f(x_i) − (1/δ)V φ(x_i)| / max_i |d/dt f(x_i)|",
        "multiplier_error": "|2μδ_t − 1| for the trust-region KKT multiplier μ",
        "closed_form_error": "relative gap of d vec(Z)/dt and −U⁻ᵀSU⁻¹∇L₀ (Eq. 26, m_y = 1)",
        "g_min_eig": "λ_min(G_t) (> 0 for δ_t < δ̄_t)",
        "fdot_max": "max_i |d/dt f(x_i)|",
    }
    default_checkpoint_every = 200

    def tasks(self, config: Thm2Config) -> list[Task]:
        return [Task(f"{loss}-delm", {"loss": loss}) for loss in LOSSES]

    def run_task(self, config: Thm2Config, task: Task, ctx: TaskContext) -> list[Row]:
        loss = str(task.params["loss"])
        X, Y = thm2_data(config, loss, ctx.device)
        generator = torch.Generator().manual_seed(config.seed * 1000 + 1)
        model = DELM(config.d, 1, gamma=config.gamma, generator=generator, dtype=X.dtype)
        tau = config.tau if loss == "logistic" else 0.0
        gd = DELMGDConfig(lr=config.lr, loss=loss, tau=tau, record_every=10**12)
        trainer = DELMGradientDescent(model.to(ctx.device), X, Y, gd)

        def probe(step: int, loss_value: float) -> list[Row]:
            base = {"task": task.key, "loss": loss, "step": step, "loss_value": loss_value}
            return [{**base, **r} for r in trust_region_rows(model, X, Y, config, loss)]

        return probe_trajectory(trainer, log_spaced_steps(config.steps, config.records), ctx, probe)
