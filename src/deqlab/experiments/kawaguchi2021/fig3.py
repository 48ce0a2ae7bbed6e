"""Kawaguchi (2021), Figure 3 (Appendix D.2): the logistic-loss bounds of Corollary 2.

The logistic-loss version of Figure 2(c): a random-initialized DELM (γ = 0.8, A and B
entries N(0, 1/m)) trained by full-batch GD (the Euler discretization of Eq. 6 with time
step ``lr``) on ℓ(q, y) = −y log s(q) − (1 − y) log(1 − s(q)) + τ q², against the bounds of
Corollary 2 with R = ∞, L*_R = L*: L* + (L₀ − L*) exp(−4τ σ_min(Φ)² λ_T T), with λ_T the
initialization-independent 1/(m(1+γ)²) and the initialization-dependent min_t λ_min(D_t).

The paper does not give this figure's data or τ.  Ours: Zou et al.'s Gaussian inputs
x ∈ R^10 (n = 1000, φ(x) = x) with labels y = 1[(−x + ν ς)_1 > 0], the sign of the first
coordinate of Zou's noisy target (``label_noise`` ν = 0.5 makes the classes overlap), and
τ = 0.01 so that the minimum exists (Section 3.1.3).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import torch

from deqlab._checks import check_int, check_positive, check_real
from deqlab.data import zou_synthetic
from deqlab.experiments.base import Claim, Experiment, Task, TaskContext
from deqlab.experiments.kawaguchi2021.fig2 import (
    Row,
    bound_claims,
    history_rows,
    log_spaced_steps,
    plot_bounds,
    train_delm_with_bounds,
)
from deqlab.experiments.registry import register
from deqlab.models.delm import DELM, check_gamma
from deqlab.theory.kawaguchi2021 import lambda_lower_bound
from deqlab.train.delm_gd import DELMGradientDescent


@dataclass(frozen=True)
class Fig3Config:
    n: int = 1000
    d: int = 10
    label_noise: float = 0.5
    tau: float = 0.01
    gamma: float = 0.8
    lr: float = 1e-4
    steps: int = 100_000
    records: int = 200
    optimum_rtol: float = 1e-4
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("n", "d", "steps", "records"):
            check_int(name, getattr(self, name), min_value=1)
        check_int("seed", self.seed, min_value=0)
        check_real("label_noise", self.label_noise, low=0.0)
        check_gamma(self.gamma)
        for name in ("tau", "lr", "optimum_rtol"):
            check_positive(name, getattr(self, name))


def logistic_data(config: Fig3Config, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs X (d, n) and labels y (1, n) in {0, 1} (see the module docstring)."""
    data = zou_synthetic(config.n, config.d, noise=config.label_noise, seed=config.seed)
    return data.X.to(device), (data.y[:1] > 0).to(data.X.dtype).to(device)


@register
class Kawaguchi2021Fig3(Experiment):
    """Logistic loss: the GD trajectory stays under both bounds of Corollary 2."""

    name = "kawaguchi2021-fig3"
    title = "DELM with the logistic loss and Corollary 2's bounds (Figure 3)"
    paper = "Kawaguchi, On the theory of implicit deep learning, ICLR 2021 (Figure 3, App. D.2)"
    Config = Fig3Config
    presets: ClassVar = {
        "tiny": {"n": 40, "d": 3, "gamma": 0.5, "lr": 5e-3, "steps": 200, "records": 12,
                 "optimum_rtol": 1e-3},
        "quick": {"steps": 20_000, "records": 80},
        "paper": {},
    }  # fmt: skip
    metric_columns: ClassVar = {
        "step": "GD iteration (flow time = step · lr)",
        "loss": "training loss Σ_i ℓ(f(x_i), y_i), logistic + τq²",
        "loss_star": "global minimum value L* (convex solve over the linear models)",
        "lambda_min": "λ_min(D_t) (Eq. 8)",
        "lambda_T": "min over the steps so far of λ_min(D_t)",
        "bound_independent": "Corollary 2 (R = ∞) with λ_T = 1/(m(1+γ)²)",
        "bound_dependent": "Corollary 2 (R = ∞) with λ_T = min_t λ_min(D_t)",
    }
    default_checkpoint_every = 500

    def tasks(self, config: Fig3Config) -> list[Task]:
        return [Task("logistic-delm-random1")]

    def run_task(self, config: Fig3Config, task: Task, ctx: TaskContext) -> list[Row]:
        X, y = logistic_data(config, ctx.device)
        generator = torch.Generator().manual_seed(config.seed * 1000 + 1)
        model = DELM(config.d, 1, gamma=config.gamma, generator=generator, dtype=X.dtype)
        trainer = DELMGradientDescent(
            model.to(ctx.device), X, y, lr=config.lr, loss="logistic", tau=config.tau,
            record_every=10**12,
        )  # fmt: skip
        history = train_delm_with_bounds(
            trainer, log_spaced_steps(config.steps, config.records), ctx
        )
        return history_rows(history, {"task": task.key}, trainer.loss_star)

    def claims(self, config: Fig3Config, rows: list[Row]) -> list[Claim]:
        lam = lambda_lower_bound(config.d, config.gamma)
        last = rows[-1]
        gap = (float(last["loss"]) - float(last["loss_star"])) / float(last["loss_star"])
        return [
            *bound_claims(rows, "Corollary 2", lam),
            Claim(
                "the DELM reaches the global minimum value of the logistic loss",
                gap <= config.optimum_rtol,
                f"final (L − L*)/L* = {gap:.3g} after {last['step']} steps",
                f"<= {config.optimum_rtol:g}",
            ),
        ]

    def plot(self, config: Fig3Config, rows: list[Row], directory: Path) -> list[Path]:
        import matplotlib.pyplot as plt  # imported here: spawned workers never plot

        from deqlab.report import figure_style, save_figure

        with figure_style():
            fig, ax = plt.subplots()
            plot_bounds(ax, rows)
            ax.set_title(f"logistic loss (τ = {config.tau:g}) and Corollary 2's bounds")
            return save_figure(fig, directory, "fig3")
