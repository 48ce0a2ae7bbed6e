"""Kawaguchi (2021), Appendix B: the implicit bias of Theorem 2 toward 1ᵀφ(x) as γ → 1.

For the square loss with m_y = 1, Theorem 2's step is V_t = −r_tᵀ(I − γσ(A_t))⁻¹ (Eq. 37),
and Appendix B argues that vec(V_t) = (1/(1 − γ))P₁r_t + g_γ((I − P₁)r_t) with ‖g_γ‖ < c for
all γ (P₁ = 11ᵀ/m): the component along 1 grows like 1/(1 − γ), the rest stays bounded.

We train DELMs (square loss on the first coordinate of Zou et al.'s y = −x + 0.1ς, Gaussian
x ∈ R^d, φ(x) = x) by full-batch GD at the config's γ from two initializations: A, B
entries N(0, 1/m) (``random``) and A = 0 with B N(0, 1/m) (``a-zero``: σ(0) = 11ᵀ/m is
doubly stochastic).  At log-spaced steps we take A_t and r_t = δ_tS_tU_t⁻¹∇L₀(Z_t) (δ_t =
δ̄_t/2; the r the proof of Theorem 2 implies), check Eq. (37) against δ_t d/dt Z_t measured
by autograd, and, as Appendix B's argument does, hold A_t and r_t fixed while γ runs
through ``gammas`` → 1: vec V(γ) = −(I − γσ(A_t))⁻ᵀr_t, split into ‖P₁ vec V‖,
‖(I − P₁) vec V‖ and ‖vec V + P₁r_t/(1 − γ)‖ (Appendix B's g_γ).  The statements are in
:mod:`.appb_report`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from deqlab.data import zou_synthetic
from deqlab.experiments.base import Experiment, Row, Task, TaskContext
from deqlab.experiments.blocks import DELMSynthetic
from deqlab.experiments.constraints import (
    FRACTION,
    INCREASING,
    NONNEGATIVE,
    POSITIVE,
    Interval,
    Length,
)
from deqlab.experiments.deviations import measurement, not_given
from deqlab.experiments.kawaguchi2021 import appb_report
from deqlab.experiments.kawaguchi2021.trajectory import log_spaced_steps, probe_trajectory
from deqlab.experiments.registry import register
from deqlab.models.delm import DELM
from deqlab.papers import KAWAGUCHI
from deqlab.papers.kawaguchi2021.trust_region import (
    appendix_b_velocity,
    error_vector,
    flow_velocities,
    ones_split,
    perron_vector,
    trust_region_terms,
)
from deqlab.train.delm_gd import DELMGDConfig, DELMGradientDescent

NO_EXPERIMENT = "Appendix B has no experiment"
INITS = ("random", "a-zero")


@dataclass(frozen=True)
class AppBConfig(DELMSynthetic):
    noise: float = 0.1
    records: int = 6
    gammas: tuple[float, ...] = (0.9, 0.99, 0.999, 0.9999, 0.99999, 0.999999)
    tolerance: float = 1e-8

    constraints: ClassVar = {
        "noise": NONNEGATIVE,
        "records": Interval(1),
        "gammas": (Length(2), FRACTION, INCREASING),
        "tolerance": POSITIVE,
    }


def _model(config: AppBConfig, init: str, dtype: torch.dtype) -> DELM:
    generator = torch.Generator().manual_seed(config.seed * 1000 + 1)
    model = DELM(config.d, 1, gamma=config.gamma, generator=generator, dtype=dtype)
    if init == "a-zero":
        with torch.no_grad():
            model.A.zero_()
    return model


def sweep_rows(model: DELM, X: torch.Tensor, Y: torch.Tensor, config: AppBConfig) -> list[Row]:
    """Eq. (37) at the model's (A_t, B_t), then vec V(γ) for each γ of the sweep."""
    A, B = model.A.detach(), model.B.detach()
    terms = trust_region_terms(A, B, X, Y, model.gamma)
    delta = 0.5 * terms.delta_bar()
    r = error_vector(terms, delta)
    sigma = torch.softmax(A, dim=0)
    zdot = flow_velocities(A, B, X, Y, model.gamma)[0][0]
    V = appendix_b_velocity(sigma, r, model.gamma)
    eq37 = float((V - delta * zdot).abs().max() / (delta * zdot).abs().max())
    lead = float(perron_vector(sigma) @ r)  # (1 − γ) vec V → −(πᵀr)1
    rows = []
    for gamma in config.gammas:
        v = appendix_b_velocity(sigma, r, gamma)
        along, rest = ones_split(v)
        paper_rest = float((v + r.mean() / (1 - gamma)).norm())  # ‖vec V − (−P₁r/(1 − γ))‖
        rows.append(
            {
                "sweep_gamma": gamma,
                "along": along,
                "rest": rest,
                "paper_rest": paper_rest,
                "perron_gap": abs((1 - gamma) * float(v.mean()) + lead) / abs(lead),
                "eq37_error": eq37,
                "delta": delta,
            }
        )
    return rows


#: Every field: Appendix B has no experiment.
PAPER_SETTING = {
    "n": not_given(NO_EXPERIMENT),
    "d": not_given(NO_EXPERIMENT),
    "noise": not_given(NO_EXPERIMENT + "; Section 4's 0.1"),
    "gamma": not_given(NO_EXPERIMENT + "; the training γ, Appendix D.1's 0.8"),
    "lr": not_given("Theorem 2 is for the gradient flow; GD gives its points"),
    "steps": not_given(NO_EXPERIMENT),
    "records": measurement(),
    "gammas": not_given("Appendix B: γ → 1, no values; ours: 1 − 10⁻ᵏ"),
    "tolerance": not_given("agreement of Eq. (37) in float64 (ours)"),
    "seed": not_given(),
}


@register
class Kawaguchi2021AppB(Experiment):
    """Appendix B: V_t's component along 1 against the rest as γ → 1."""

    slug = "appb"
    title = "Implicit bias toward 1ᵀφ(x) as γ → 1 (Appendix B, Eq. 37)"
    paper = KAWAGUCHI
    report = appb_report
    where = "Appendix B"
    Config = AppBConfig
    presets: ClassVar = {
        "tiny": {
            "n": 30,
            "d": 3,
            "gamma": 0.5,
            "lr": 1e-3,
            "steps": 40,
            "records": 3,
            "gammas": (0.9, 0.99, 0.999, 0.9999),
        },
        "quick": {"steps": 500, "records": 4},
        "paper": {},
    }
    paper_setting: ClassVar = PAPER_SETTING
    figure_captions: ClassVar = {
        "appb": "Appendix B's split of Theorem 2's step vec V = −(I − γσ(A_t))⁻ᵀr_t as γ → 1 "
        "with A_t and r_t fixed at steps of a DELM's GD trajectory: the component along 1, "
        "the rest, and Appendix B's remainder vec V + P₁r_t/(1 − γ), for a random A₀ and "
        "A₀ = 0; the subtitle gives n, d, the training γ and η.",
    }
    metric_columns: ClassVar = {
        "task": "random (A₀, B₀ entries N(0, 1/m)) or a-zero (A₀ = 0)",
        "step": "GD iteration of the trajectory the state (A_t, r_t) is taken from",
        "loss_value": "training loss at that step",
        "sweep_gamma": "the γ of U_γ = I − γσ(A_t) in vec V(γ)",
        "along": "‖P₁ vec V(γ)‖",
        "rest": "‖(I − P₁) vec V(γ)‖",
        "paper_rest": "‖vec V(γ) + P₁r_t/(1 − γ)‖ (Appendix B's g_γ)",
        "perron_gap": "|(1 − γ)·mean(vec V) + πᵀr_t| / |πᵀr_t|, π the Perron vector of σ(A_t)",
        "eq37_error": "relative gap of −r_tᵀU_t⁻¹ and δ_t d/dt Z_t (Eq. 37)",
        "delta": "δ_t = δ̄_t/2",
    }
    default_checkpoint_every = 500

    def tasks(self, config: AppBConfig) -> list[Task]:
        return [Task(init, {"init": init}) for init in INITS]

    def run_task(self, config: AppBConfig, task: Task, ctx: TaskContext) -> list[Row]:
        data = zou_synthetic(config.n, config.d, noise=config.noise, seed=config.seed)
        X, Y = data.X.to(ctx.device), data.y[:1].to(ctx.device)
        model = _model(config, str(task.params["init"]), X.dtype).to(ctx.device)
        trainer = DELMGradientDescent(model, X, Y, DELMGDConfig(lr=config.lr, record_every=10**12))

        def probe(step: int, loss_value: float) -> list[Row]:
            rows = sweep_rows(model, X, Y, config)
            return [{"task": task.key, "step": step, "loss_value": loss_value, **r} for r in rows]

        return probe_trajectory(trainer, log_spaced_steps(config.steps, config.records), ctx, probe)
