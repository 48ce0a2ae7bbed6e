"""``train`` for the DELM: full-batch GD (:class:`deqlab.train.delm_gd.DELMGradientDescent`)
from the DELM of initialization, then the corollary against the run (Kawaguchi 2021): both
λ_T, Theorem 1's λ bound and the time to ε (Eqs. (9)–(12)), predicted beside measured.
A run that diverges stops there: its last row has the step and an infinite loss, so a loss
that rose above its bound before it overflowed is a FAIL of the corollary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from deqlab.models.delm import DELM
from deqlab.papers.kawaguchi2021.corollaries import (
    accuracy_equation,
    accuracy_time_check,
    bound_checks,
    lambda_bound_check,
)
from deqlab.papers.kawaguchi2021.theory_large import objective_sharpness_lanczos
from deqlab.statements import Run, Statement
from deqlab.train.delm_gd import DELMGDConfig, DELMGradientDescent
from deqlab.train.divergence import DivergenceError
from deqlab.verification.delm import (
    DELMInit,
    epsilon_for,
    gap_or_one,
    guards_for,
    kappa_guard,
    targets,
    time_to_epsilon,
)
from deqlab.verification.progress import Progress, silent


@dataclass(frozen=True)
class DELMTraining:
    """A GD run: η, its rows (step 0..T, the corollaries' columns) and, when it diverged,
    why (``message``; its last row then has the step and an infinite loss)."""

    eta: float
    rows: list[dict]
    message: str = ""

    def run(self) -> Run:
        return Run.from_rows("train", self.rows)


def train(init: DELMInit, *, steps: int, eta: float, progress: Progress = silent) -> DELMTraining:
    """GD with step ``eta`` for ``steps`` steps from a copy of the initial DELM."""
    model = DELM.from_matrices(init.model.A.detach(), init.model.B.detach(), gamma=init.gamma)
    loss = init.loss
    gd = DELMGDConfig(lr=eta, loss=loss.name, tau=loss.tau, radius=loss.radius)
    Y = targets(init.inputs)
    trainer = DELMGradientDescent(model, init.inputs.X, Y, gd)
    try:
        for step in range(steps):
            progress("gradient descent (DELM)", step, steps)
            trainer.step()
            trainer.evaluate()  # the record of θ(step + 1)
    except DivergenceError as error:
        message = str(error)
    else:
        message = ""
    history = trainer.history_tensors()
    rows = [{k: v[i].item() for k, v in history.items()} for i in range(len(history["step"]))]
    if message:  # where it stopped: its loss overflowed (or was not finite)
        rows.append({"step": trainer.step_count, "loss": math.inf})
    start = init.row()
    start["sharpness_end"] = (
        math.nan
        if message
        else objective_sharpness_lanczos(model, init.inputs.X, Y, loss.name, loss.tau)
    )
    for row in rows:
        row["loss_star"], row["kappa"] = init.loss_star, init.kappa
    rows[0] = {**start, **rows[0]}
    return DELMTraining(eta, rows, message)


def train_statements(
    init: DELMInit, run: DELMTraining, epsilon: float | None = None
) -> list[Statement]:
    """The corollary with both λ_T, Theorem 1's λ bound and the time to ε (Eqs. (9)–(12),
    :func:`accuracy_time_check`: L_T − L* ≤ ε at every recorded T = τη ≥ T_ε) over the
    run, guarded (the time to ε also by κ > 0 for the logistic loss)."""
    runs = {"train": run.run()}
    guards = guards_for(init, runs, run.eta)
    checks = bound_checks(init.loss.corollary, runs, guards, lr=run.eta)
    loss, positive = init.loss, kappa_guard(init, runs)
    time_check = accuracy_time_check(
        runs,
        [*guards, *positive],
        lr=run.eta,
        m=init.m,
        gamma=init.gamma,
        equation=accuracy_equation(loss.name, loss.tau, loss.radius),
        eps_rel=epsilon_for(init, epsilon) / gap_or_one(init),
    )
    return [
        *guards,
        *positive,
        *checks,
        lambda_bound_check(runs, guards, m=init.m, gamma=init.gamma),
        time_check,
    ]


def _first_step(run: DELMTraining, epsilon: float) -> int | None:
    """The first recorded step τ with L − L* ≤ ε; None if the run never gets there."""
    return next((int(r["step"]) for r in run.rows if r["loss"] - r["loss_star"] <= epsilon), None)


def measured_time_to_epsilon(run: DELMTraining, epsilon: float) -> float | None:
    """The first recorded T = τη with L(A_T, B_T) − L* ≤ ε; None if the run never gets there."""
    step = _first_step(run, epsilon)
    return None if step is None else step * run.eta


def train_numbers(
    init: DELMInit, run: DELMTraining, epsilon: float | None = None
) -> dict[str, object]:
    """The final loss gap against both bounds, the time to ε predicted (Eqs. (9)–(12),
    worst-case λ_T) and measured, and the rows."""
    last, eps = run.rows[-1], epsilon_for(init, epsilon)
    keys = (
        "step",
        "time",
        "loss",
        "lambda_min",
        "lambda_T",
        "bound_independent",
        "bound_dependent",
    )
    return {
        "steps": int(last["step"]),
        "eta": run.eta,
        "status": "diverged" if run.message else "ok",
        "message": run.message,
        "loss0": run.rows[0]["loss"],
        "loss_final": last["loss"],
        "loss_star": init.loss_star,
        "bound_independent_final": last.get("bound_independent"),
        "bound_dependent_final": last.get("bound_dependent"),
        "lambda_T": last.get("lambda_T"),
        "sharpness_end": run.rows[0]["sharpness_end"],
        "epsilon": eps,
        "time_to_epsilon": {
            "predicted": time_to_epsilon(init, init.lambda_bound, eps),
            "measured": measured_time_to_epsilon(run, eps),
        },
        "steps_to_epsilon": {
            "predicted": time_to_epsilon(init, init.lambda_bound, eps) / run.eta,
            "measured": _first_step(run, eps),
        },
        "records": [{k: r.get(k) for k in keys} for r in run.rows],
    }
