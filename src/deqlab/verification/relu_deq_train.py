"""``train`` for the ReLU DEQ: full-batch GD (:class:`deqlab.train.GDTrainer`) from the
network of initialization, then Theorem 1's predictions against the run, side by side.

The statements are the paper's claims (shared with the Figure 1 experiment), fed this run:

- Theorem 1 (i)–(iii), the per-step contraction and the parameter drift of its proof
  (:func:`~deqlab.papers.ling2023.theorem1.theorem1_statements`) over τ ≥ 1, NOT
  APPLICABLE outside Condition 1 and Eq. (10);
- Eqs. (4)–(5) and λ_min(H(τ)) ≥ λ_τ of Section 2.3
  (:func:`~deqlab.papers.ling2023.theorem1.pl_statements`) over τ ≥ 1, guarded by
  Lemma 2's ‖W(τ)‖₂ < 1; λ_min of H(τ) = H1 + H2 + H3
  (:func:`deqlab.papers.ling2023.theory.pl_gram_lambda_min`) is taken
  at :data:`H_CHECKS` evenly spread steps and at the last.

The run records steps τ = 0, …, T (the record of τ = T is taken after the T-th update).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

from deqlab.papers.ling2023.claims import Width
from deqlab.papers.ling2023.margins import PLMargins, Theorem1Margins, pl_margins, theorem1_margins
from deqlab.papers.ling2023.theorem1 import pl_statements, theorem1_statements
from deqlab.papers.ling2023.theory import pl_gram_lambda_min
from deqlab.statements import Run, Statement, is_measured
from deqlab.train.relu_deq import GDConfig, GDTrainer
from deqlab.verification.progress import Progress, silent
from deqlab.verification.relu_deq import SOLVE_TOL, ReLUDEQInit
from deqlab.verification.stand_ins import measured_rate

#: H(τ) of Eq. (4) is formed at this many evenly spread steps (and at the last).
H_CHECKS = 10
#: The columns of each step kept in the JSON document and drawn.
RECORD_KEYS = (
    "step",
    "loss",
    "lambda_min",
    "H_lambda_min",
    "grad_norm",
    "W_norm",
    "dist_from_init",
)


@dataclass(frozen=True)
class Training:
    """A GD run: η, its records (τ = 0..T, with ``H_lambda_min`` where H was formed), the
    trainer's status and Theorem 1's margins (None when step 0 has no loss or λ_0)."""

    eta: float
    records: list[dict]
    status: str
    message: str
    margins: Theorem1Margins | None

    @property
    def run(self) -> Run:
        return Run.from_rows("train", self.records)

    @property
    def pl(self) -> PLMargins:
        return pl_margins(self.run)


def train(init: ReLUDEQInit, *, steps: int, eta: float, progress: Progress = silent) -> Training:
    """Run ``steps`` GD steps with step size ``eta`` on a copy of ``init.model``."""
    X, y = init.inputs.X, init.inputs.y
    model = copy.deepcopy(init.model)
    config = GDConfig(lr=eta, tol=SOLVE_TOL, metrics_every=1, spectral_every=1)
    trainer = GDTrainer(model, X, y, config)
    every = max(1, steps // H_CHECKS)
    gram: dict[int, float] = {}
    while not trainer.stopped and trainer.step_count <= steps:  # the last records θ(T)
        tau = trainer.step_count
        progress("gradient descent", tau, steps)
        if tau % every == 0 or tau == steps:
            gram[tau] = pl_gram_lambda_min(model, X, SOLVE_TOL)
        trainer.step()
    records = [{**r, "H_lambda_min": gram.get(r["step"], math.nan)} for r in trainer.records]
    try:
        margins = theorem1_margins(Run.from_rows("train", records), eta)
    except ValueError:  # step 0 has no loss or λ_0: nothing to compare with
        margins = None
    return Training(eta, records, trainer.stop_reason or "ok", trainer.message, margins)


def statements(init: ReLUDEQInit, run: Training, guards: list[Statement]) -> list[Statement]:
    """Theorem 1 guarded by ``guards`` (Assumption 1, Eqs. (7)–(9), Eq. (10)); Eqs. (4)–(5)
    guarded by Lemma 2's hypothesis."""
    trained = [Width(init.width, run.eta, init.cond, run.run)]
    return [*theorem1_statements("", trained, guards), *pl_statements("", trained)]


def numbers(init: ReLUDEQInit, run: Training) -> dict[str, object]:
    """Predicted against measured, side by side, and the records (:data:`RECORD_KEYS`)."""
    losses = [(r["step"], r["loss"]) for r in run.records if is_measured(r["loss"])]
    last_step, last_loss = losses[-1] if losses else (0, math.nan)
    loss0 = losses[0][1] if losses else math.nan
    g, pl = run.margins, run.pl
    lam0 = init.lambda0 or 0.0
    rate = measured_rate(loss0, last_loss, last_step)
    return {
        "steps": last_step,
        "eta": run.eta,
        "status": run.status,
        "message": run.message,
        "loss0": loss0,
        "loss_final": last_loss,
        "rate_predicted": 1 - run.eta * lam0 / 2,
        "rate_measured": rate,
        "max_step_ratio": None if g is None else g.max_step_ratio,
        "min_lambda_ratio": None if g is None else g.min_lambda_ratio,
        "max_W_norm": None if g is None else g.max_W_norm,
        "max_drift": None if g is None else g.max_drift,
        "drift_bound": None if init.cond is None else init.cond.drift_bound,
        "bound_factor": None if g is None else g.bound_factor,
        "min_eq4": pl.min_eq4,
        "min_h_ratio": pl.min_h_ratio,
        "min_eq5": pl.min_eq5,
        "h_steps": list(pl.h_steps),
        "records": [{k: r.get(k) for k in RECORD_KEYS} for r in run.records],
    }
