"""Thesis (Hieu 2022), Chapter 3: full-batch GD on monotone DEQs of several widths.

Setting (Section 3.2.1): ``z* = relu(W z* + U x)``, ``W = (1 − m) I − AᵀA + B − Bᵀ``
(Eq. 3.3), ``ŷ = uᵀz*``, ``L = ½‖ŷ − y‖²`` (Eq. 3.4), GD on θ = (A, B, U, u) with the exact
gradient of the Peaceman–Rachford adjoint, in float64. The thesis has no experiment for
Chapter 3; ours: N points uniform on the sphere of radius √d with N(0, 1) labels
(``deqlab.data``), widths n ≥ N, entries ``A, B ~ N(0, 1/n)``, ``U ~ N(0, 1/d)``, ``u ~ N(0, 1/n)``.

Learning rate: Theorem 3.3.5's bound on η is of order 1e-6 here, so — as for Ling et al.'s
Figure 1 — one η for every width, ``eta_fraction · 2/λ_max(Z(0)ᵀZ(0))`` of the widest model
(the stability limit of GD on the output layer). The Theorem 3.3.5 curve
``(1 − ηλ_0²/4)^k L(0)`` uses that η; Conditions 1–2 (Eqs. 3.8–3.9, 3.16–3.18) and the
induction hypotheses are evaluated with balls of radius ``radius``
(:mod:`deqlab.theory.mondeq`).

Metrics: every record of :class:`deqlab.train.mondeq_gd.MonDEQGD` plus ``width``, ``eta``,
``eta_max`` (Theorem 3.3.5), ``lambda0`` and, constant over a task, each side of each
condition: ``eq3_8_lhs``, ``eq3_8_rhs``, ``eq3_8_holds``, … ``eq3_18_holds``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import torch

from deqlab._checks import check_int, check_positive, check_real
from deqlab.data import get_dataset
from deqlab.experiments.base import Claim, Experiment, Row, Task, TaskContext
from deqlab.experiments.registry import register
from deqlab.models.mondeq import MonDEQ
from deqlab.solvers.splitting import PeacemanRachford
from deqlab.train.mondeq_gd import MonDEQGD

CONDITION_KEYS = ("eq3_8", "eq3_9", "eq3_16", "eq3_17", "eq3_18")


@dataclass(frozen=True)
class MonDEQGDConfig:
    """Defaults of our synthetic setting (see the module docstring)."""

    n_samples: int = 50
    d: int = 10
    widths: tuple[int, ...] = (50, 100, 200, 400)
    m: float = 0.2
    steps: int = 500
    eta_fraction: float = 0.5
    radius: float = 1.0
    tol: float = 1e-10  # relative residual of the forward and adjoint splitting solves
    loss_rtol: float = 1e-2  # claim: final loss <= loss_rtol · L(0)
    seed: int = 0
    data_seed: int = 0

    def __post_init__(self) -> None:
        n = check_int("n_samples", self.n_samples, min_value=2)
        check_int("d", self.d, min_value=1)
        if not self.widths or sorted(set(self.widths)) != list(self.widths):
            raise ValueError(f"`widths` must be strictly increasing; got {list(self.widths)}")
        if self.widths[0] < n:
            raise ValueError(
                f"`widths` must all be >= n_samples = {n} (the thesis assumes n >= N); "
                f"got {list(self.widths)}"
            )
        check_positive("m", self.m)
        check_int("steps", self.steps, min_value=1)
        check_real("eta_fraction", self.eta_fraction, low=0.0, high=1.0, low_inclusive=False)
        check_positive("radius", self.radius)
        check_positive("tol", self.tol)
        check_positive("loss_rtol", self.loss_rtol)


def _model(config: MonDEQGDConfig, width: int, device: str) -> MonDEQ:
    generator = torch.Generator().manual_seed(config.seed * 100_003 + width)
    solver = PeacemanRachford(tol=config.tol, max_iter=5000)
    model = MonDEQ(
        config.d, width, m=config.m, solver=solver, generator=generator, dtype=torch.float64
    )
    return model.to(device)


def _learning_rate(config: MonDEQGDConfig, X: torch.Tensor, device: str) -> float:
    """``eta_fraction · 2/λ_max(Z(0)ᵀZ(0))`` of the widest model."""
    with torch.no_grad():
        Z = _model(config, config.widths[-1], device).equilibrium(X)
    return config.eta_fraction * 2.0 / float(torch.linalg.eigvalsh(Z.T @ Z)[-1])


@register
class Hieu2022MonDEQGD(Experiment):
    """GD on monotone DEQs against Theorem 3.3.5 (see the module docstring)."""

    name = "hieu2022-mondeq-gd"
    title = "GD on monotone DEQs of several widths vs Theorem 3.3.5"
    paper = (
        "Hieu, An NTK analysis of deep equilibrium models (thesis, 2022), Chapter 3: "
        "Conditions 1–2, Theorems 3.3.1 and 3.3.5"
    )
    Config = MonDEQGDConfig
    presets: ClassVar = {
        "tiny": {"n_samples": 6, "d": 3, "widths": (12, 48), "steps": 25, "loss_rtol": 0.5},
        "quick": {"n_samples": 30, "widths": (30, 60, 120, 240), "steps": 200},
        "paper": {},
    }
    metric_columns: ClassVar = {
        "width": "hidden width n",
        "eta": "learning rate η (same for every width)",
        "eta_max": "the step-size bound of Theorem 3.3.5",
        "lambda0": "λ_0 = σ_min(Z(0))",
        "step": "GD step k",
        "loss": "L(θ(k)) = ½‖ŷ − y‖²",
        "loss_bound": "(1 − ηλ_0²/4)^k L(θ(0)), Eq. (3.20)",
        "sigma_min": "σ_min(Z(k))",
        "dist_A": "‖A(k) − A(0)‖_F (likewise dist_B, dist_U, dist_u)",
        "in_balls": "Hypothesis 1: every parameter within radius R of its start",
        "sigma_ok": "Hypothesis 2: σ_min(Z(k)) ≥ λ_0/2",
        "loss_ok": "Hypothesis 3: loss <= loss_bound",
        "eq3_8_lhs": "left side of Eq. (3.8) (likewise _rhs, _holds; eq3_9 … eq3_18)",
    }
    default_checkpoint_every = 50

    def tasks(self, config: MonDEQGDConfig) -> list[Task]:
        return [Task(f"width{n}", {"width": n}) for n in config.widths]

    def run_task(self, config: MonDEQGDConfig, task: Task, ctx: TaskContext) -> list[Row]:
        data = get_dataset(
            "sphere", n=config.n_samples, d=config.d, seed=config.data_seed, dtype=torch.float64
        )
        X, y = data.X.to(ctx.device), data.y.to(ctx.device)
        width = int(task.params["width"])
        eta = _learning_rate(config, X, ctx.device)
        trainer = MonDEQGD(_model(config, width, ctx.device), X, y, lr=eta, radius=config.radius)
        resumed = ctx.resume()
        if resumed is not None:
            trainer.load_state_dict(resumed[0])
        while trainer.step_count < config.steps and trainer.finite:
            trainer.step()
            if trainer.step_count % ctx.checkpoint_every == 0:
                ctx.checkpoint(trainer.state_dict(), [])
            ctx.progress(trainer.step_count, config.steps)
        if trainer.finite:
            trainer.step(update=False)
        constant: Row = {
            "width": width,
            "eta": eta,
            "eta_max": trainer.eta_max,
            "lambda0": trainer.constants.lambda0,
        }
        for key, row in zip(CONDITION_KEYS, trainer.conditions, strict=True):
            constant.update({f"{key}_lhs": row["lhs"], f"{key}_rhs": row["rhs"]})
            constant[f"{key}_holds"] = row["holds"]
        return [{**constant, **record} for record in trainer.records]

    def claims(self, config: MonDEQGDConfig, rows: list[Row]) -> list[Claim]:
        from deqlab.experiments.hieu2022_mondeq_gd_report import mondeq_gd_claims

        return mondeq_gd_claims(config, rows)

    def plot(self, config: MonDEQGDConfig, rows: list[Row], directory: Path) -> list[Path]:
        from deqlab.experiments.hieu2022_mondeq_gd_report import plot_mondeq_gd

        return plot_mondeq_gd(rows, directory)
