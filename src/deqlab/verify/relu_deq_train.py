"""``train`` for the ReLU DEQ: full-batch GD (:class:`deqlab.train.GDTrainer`) from the
network of initialization, then Theorem 1's predictions against the run, side by side.

- Theorem 1 (i)–(iii), the per-step contraction and the parameter drift of its proof: the
  experiments' builder (:func:`~deqlab.experiments.ling2023.statements.theorem1_statements`)
  over τ ≥ 1, NOT APPLICABLE outside Condition 1 and Eq. (10);
- Eq. (5), ‖∇_θΦ(τ)‖² ≥ 2λ_τΦ(τ), at every recorded step;
- Eq. (4), ‖∇_θΦ(τ)‖² ≥ 2λ_min(H(τ))Φ(τ), and Section 2.3's λ_min(H(τ)) ≥ λ_τ at τ = 0
  and τ = T, with H = JJᵀ the n×n Gram matrix of the Jacobian of ŷ in θ = (W, U, a):
  m times :func:`~deqlab.theory.ntk.empirical_ntk` (standard normalisation is Θ/m).

The run records steps τ = 0, …, T (the record of τ = T is taken after the T-th update).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from deqlab.experiments.ling2023.statements import source, theorem1_statements
from deqlab.models.relu_deq import ReLUDEQ
from deqlab.statements import Kind, Statement, is_measured, measure, not_measured
from deqlab.theory.ling2023 import Theorem1Margins, theorem1_margins
from deqlab.theory.ntk import empirical_ntk
from deqlab.train.gd import GDConfig, GDTrainer
from deqlab.verify.eigen import least_eigenvalue_large
from deqlab.verify.progress import Progress, silent
from deqlab.verify.relu_deq import SOLVE_TOL, ReLUDEQInit

#: The columns of each step kept in the JSON document and drawn.
RECORD_KEYS = ("step", "loss", "lambda_min", "grad_norm", "W_norm", "dist_from_init")


@dataclass(frozen=True)
class EndPoint:
    """At one step: ‖∇_θΦ‖², Φ, λ_τ and λ_min(H) (H = JJᵀ)."""

    step: int
    grad_sq: float
    loss: float
    lambda_tau: float
    lambda_H: float


@dataclass(frozen=True)
class Training:
    """A GD run: η, its records (τ = 0..T), the trainer's status, Theorem 1's margins
    (None when step 0 has no loss or λ_0) and the end points of Eq. (4)."""

    eta: float
    records: list[dict]
    status: str
    message: str
    margins: Theorem1Margins | None
    ends: list[EndPoint]


def train(init: ReLUDEQInit, *, steps: int, eta: float, progress: Progress = silent) -> Training:
    """Run ``steps`` GD steps with step size ``eta`` on a copy of ``init.model``."""
    X, y = init.inputs.X, init.inputs.y
    model = copy.deepcopy(init.model)
    config = GDConfig(lr=eta, tol=SOLVE_TOL, metrics_every=1, spectral_every=1)
    trainer = GDTrainer(model, X, y, config)
    trainer.run(steps, callback=lambda rec: progress("gradient descent", rec["step"] + 1, steps))
    ends = []
    if trainer.status == "ok":
        final = copy.deepcopy(model)  # θ(T), before the step that records it moves on
        trainer.step()
        ends = [_end_point(init.model, X, trainer.records[0]),
                _end_point(final, X, trainer.records[-1])]  # fmt: skip
    try:
        margins = theorem1_margins(trainer.records, eta)
    except ValueError:  # step 0 has no loss or λ_0: nothing to compare with
        margins = None
    return Training(eta, trainer.records, trainer.status, trainer.message, margins, ends)


def _end_point(model: ReLUDEQ, X, record: Mapping) -> EndPoint:
    H = model.m * empirical_ntk(model, X, tol=SOLVE_TOL)  # (n, n) = J Jᵀ
    return EndPoint(int(record["step"]), float(record["grad_norm"]) ** 2, float(record["loss"]),
                    float(record["lambda_min"]), least_eigenvalue_large(H).value)  # fmt: skip


def statements(init: ReLUDEQInit, run: Training, guards: Sequence[Statement]) -> list[Statement]:
    """Theorem 1 guarded by ``guards`` (Assumption 1, Eqs. (7)–(9), Eq. (10)); Eqs. (4)–(5)."""
    theorem1 = theorem1_statements("", [init.width], [init.cond], [run.eta], [run.margins],
                                   guards)  # fmt: skip
    return [*theorem1, eq5(run.records), eq4(run.ends), gram_below_h(run.ends)]


def eq5(records: Sequence[Mapping]) -> Statement:
    """Eq. (5): min over steps of ‖∇_θΦ‖²/(2λ_τΦ) ≥ 1 (steps with λ_τ > 0 and Φ > 0)."""
    ratios = [
        (float(r["grad_norm"]) ** 2 / (2 * float(r["lambda_min"]) * float(r["loss"])), r["step"])
        for r in records
        if all(is_measured(r.get(k)) for k in ("grad_norm", "lambda_min", "loss"))
        and r["lambda_min"] > 0 and r["loss"] > 0
    ]  # fmt: skip
    name, where = "Eq. (5): ‖∇_θΦ(τ)‖² ≥ 2λ_τΦ(τ)", source("Eq. (5), Section 2.3")
    expected = "≥ 1 at every recorded step"
    if not ratios:
        why = "no step with λ_τ > 0 and Φ(τ) > 0 (λ_τ = 0 when m < n)"
        return not_measured(name, Kind.THEOREM, where, expected=expected, why=why)
    value, step = min(ratios)
    return measure(
        name, Kind.THEOREM, where, value=value, relation=">=", threshold=1.0,
        measured=f"min_τ ‖∇_θΦ‖²/(2λ_τΦ) = {value:.6g} (step {step}; {len(ratios)} steps)",
        expected=expected, detail="the a-block of ∇_θΦ is Z r, and ‖Z r‖² ≥ λ_min(ZᵀZ)‖r‖²",
    )  # fmt: skip


def eq4(ends: Sequence[EndPoint]) -> Statement:
    """Eq. (4) at τ = 0 and τ = T: ‖∇_θΦ‖²/(2λ_min(H)Φ) ≥ 1."""
    name, where = "Eq. (4): ‖∇_θΦ(τ)‖² ≥ 2λ_min(H(τ))Φ(τ)", source("Eq. (4), Section 2.3")
    return _ratio_check(
        name, where, ends, lambda e: e.grad_sq / (2 * e.lambda_H * e.loss),
        "‖∇_θΦ‖²/(2λ_min(H)Φ)", lambda e: e.lambda_H > 0 and e.loss > 0,
    )  # fmt: skip


def gram_below_h(ends: Sequence[EndPoint]) -> Statement:
    """Section 2.3: λ_min(H(τ)) ≥ λ_τ (H₁ = G(τ) is one of three PSD terms)."""
    name, where = "λ_min(H(τ)) ≥ λ_τ", source("Section 2.3 (H = H₁ + H₂ + H₃, H₁ = G)")
    return _ratio_check(name, where, ends, lambda e: e.lambda_H / e.lambda_tau,
                        "λ_min(H)/λ_τ", lambda e: e.lambda_tau > 0)  # fmt: skip


def _ratio_check(name, where, ends, ratio, what, defined) -> Statement:
    expected = "≥ 1 at τ = 0 and at the last step τ = T"
    usable = [(ratio(e), e.step) for e in ends if defined(e)]
    if not usable:
        why = "no run reached its last step" if not ends else "λ_τ = 0 or Φ = 0 at both ends"
        return not_measured(name, Kind.THEOREM, where, expected=expected, why=why)
    value = min(v for v, _ in usable)
    shown = ", ".join(f"τ = {s}: {v:.6g}" for v, s in usable)
    return measure(name, Kind.THEOREM, where, value=value, relation=">=", threshold=1.0,
                   measured=f"{what} = {shown}", expected=expected,
                   detail="H = JJᵀ, J the Jacobian of ŷ in (W, U, a) (Lemma 2)")  # fmt: skip


def numbers(init: ReLUDEQInit, run: Training) -> dict[str, object]:
    """Predicted against measured, side by side, and the records (:data:`RECORD_KEYS`)."""
    losses = [(r["step"], r["loss"]) for r in run.records if is_measured(r["loss"])]
    last_step, last_loss = losses[-1] if losses else (0, math.nan)
    loss0 = losses[0][1] if losses else math.nan
    g = run.margins
    lam0 = init.lambda0 or 0.0
    measured_rate = (last_loss / loss0) ** (1 / last_step) if last_step and loss0 > 0 else None
    return {
        "steps": last_step, "eta": run.eta, "status": run.status, "message": run.message,
        "loss0": loss0, "loss_final": last_loss,
        "rate_predicted": 1 - run.eta * lam0 / 2, "rate_measured": measured_rate,
        "max_step_ratio": None if g is None else g.max_step_ratio,
        "min_lambda_ratio": None if g is None else g.min_lambda_ratio,
        "max_W_norm": None if g is None else g.max_W_norm,
        "max_drift": None if g is None else g.max_drift,
        "drift_bound": None if init.cond is None else init.cond.drift_bound,
        "bound_factor": None if g is None else g.bound_factor,
        "end_points": [vars(e) for e in run.ends],
        "records": [{k: r.get(k) for k in RECORD_KEYS} for r in run.records],
    }  # fmt: skip
