"""A DELM's gradient-descent trajectory with Theorem 1's bounds, as tidy rows (Figures 2, 3).

Each row is one recorded step τ of full-batch GD (the Euler discretization of the flow,
Eq. 6, flow time T = τη): the loss, λ_min(D_τ) (Eq. 8), λ_T = inf_{t≤τ} λ_min(D_t), both
bounds of Theorem 1 (Eq. 7), ‖B_τ‖₁ and L*.  Every row of a run also carries the measured
constants its corollary's hypotheses and Eqs. (9)–(12) are decided on (one reason:
statements read only the table): the corollary's PL constant κ, σ_r(Φ)/σ_1(Φ) with its
rank tolerance, the PL ratio of Definition 1 at the initial predictor Z₀ = B₀U₀⁻¹, and
λ_max(∇²L) at the first and last parameters.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from deqlab.experiments.base import Row, TaskContext
from deqlab.papers.kawaguchi2021.theory import (
    objective_sharpness,
    pl_ratio,
    rank_ratio,
    rank_tolerance,
)
from deqlab.train.delm_gd import DELMGradientDescent

#: The trainer's history columns kept in the rows.
HISTORY_COLUMNS = (
    "step",
    "loss",
    "lambda_min",
    "lambda_T",
    "bound_independent",
    "bound_dependent",
    "b_norm1",
)


def log_spaced_steps(total: int, count: int) -> list[int]:
    """0 and about ``count`` distinct integers log-spaced in [1, total], ending at ``total``."""
    if total < 1:
        return [0]
    steps = {round(math.exp(math.log(total) * i / max(count - 1, 1))) for i in range(count)}
    return sorted({0, total} | steps)


def train_delm_with_bounds(
    trainer: DELMGradientDescent, targets: list[int], ctx: TaskContext
) -> dict[str, torch.Tensor]:
    """Run ``trainer`` through the step ``targets`` (each recorded), checkpointing at each.

    Resumes from ``ctx`` when a checkpoint exists; the history lives in the trainer state.
    """
    resumed = ctx.resume()
    if resumed is not None:
        trainer.load_state_dict(resumed[0])
    for target in targets:
        if target < trainer.step_count or (target == trainer.step_count and target > 0):
            continue
        trainer.run(target - trainer.step_count)
        trainer.evaluate()  # the record of step `target`
        ctx.checkpoint(trainer.state_dict(), [])
        ctx.progress(target, targets[-1])
    return trainer.history_tensors()


def probe_trajectory(
    trainer: DELMGradientDescent,
    targets: list[int],
    ctx: TaskContext,
    probe: Callable[[int, float], list[Row]],
) -> list[Row]:
    """Train through the step ``targets``; at each, the rows of ``probe(step, loss)``.

    ``loss`` is the training objective at that step.  Checkpoints (the trainer state and
    the rows so far) at each target and resumes from ``ctx`` when a checkpoint exists.
    """
    rows: list[Row] = []
    resumed = ctx.resume()
    if resumed is not None:
        trainer.load_state_dict(resumed[0])
        rows = list(resumed[1])
    for target in targets:
        if target < trainer.step_count or (rows and target == trainer.step_count):
            continue
        trainer.run(target - trainer.step_count)
        rows += probe(target, float(trainer.objective().detach()))
        ctx.checkpoint(trainer.state_dict(), rows)
        ctx.progress(target, targets[-1])
    return rows


def run_trajectory(
    trainer: DELMGradientDescent, targets: list[int], ctx: TaskContext, base: Row
) -> list[Row]:
    """Train through ``targets`` (see :func:`train_delm_with_bounds`) and return its rows.

    ``trainer`` must hold the model at its initialization (the start constants are
    measured there before a checkpoint, if any, is loaded).
    """
    start = {
        **_rank(trainer),
        "pl_ratio": _pl_ratio(trainer),
        "sharpness_start": _sharpness(trainer),
    }
    history = train_delm_with_bounds(trainer, targets, ctx)
    constants = {
        **start,
        "sharpness_end": _sharpness(trainer),
        "loss_star": trainer.loss_star,
        "kappa": trainer.kappa,
    }
    return [
        {**base, **{c: history[c][i].item() for c in HISTORY_COLUMNS}, **constants}
        for i in range(len(history["step"]))
    ]


def _features(trainer: DELMGradientDescent) -> torch.Tensor:
    with torch.no_grad():
        return trainer.model.features(trainer.X)  # (m, n)


def _rank(trainer: DELMGradientDescent) -> dict[str, float]:
    """σ_r(Φ)/σ_1(Φ) for the corollary's rank r: min(n, m) (square loss) or m (logistic)."""
    Phi = _features(trainer)
    m, n = Phi.shape
    rank = min(m, n) if trainer.config.loss == "square" else m
    return {"rank_ratio": rank_ratio(Phi, rank), "rank_tol": rank_tolerance(Phi)}


def _pl_ratio(trainer: DELMGradientDescent) -> float:
    """The PL ratio at Z₀; NaN when κ = 0 (τ = 0 with R = ∞, or Φ below the corollary's rank:
    the ratio has no meaning)."""
    if trainer.kappa == 0.0:
        return math.nan
    with torch.no_grad():
        W = trainer.model.linear_weight()  # (m_y, m) = B U⁻¹
    return pl_ratio(
        W,
        _features(trainer),
        trainer.Y,
        kappa=trainer.kappa,
        loss_star=trainer.loss_star,
        loss=trainer.config.loss,
        tau=trainer.config.tau,
    )


def _sharpness(trainer: DELMGradientDescent) -> float:
    model = trainer.model
    return objective_sharpness(
        model.A,
        model.B,
        _features(trainer),
        trainer.Y,
        model.gamma,
        loss=trainer.config.loss,
        tau=trainer.config.tau,
    )
