"""The quantities Theorem 1 of Ling et al. (2023) and its proof bound, and the PL
inequalities of Section 2.3 (Eqs. (4)–(5)), along a GD run (the trainer's records as a
:class:`~deqlab.statements.Run`), each at its worst over the steps τ >= 1 by
:func:`~deqlab.statements.worst`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from deqlab._checks import check_positive
from deqlab.statements import Run, ratio, worst


@dataclass(frozen=True)
class Theorem1Margins:
    """The quantities Theorem 1 and its proof bound, at their worst over the steps τ >= 1,
    each decided by :func:`~deqlab.statements.worst` against its bound (a violation is
    kept beside a missing value; a missing value beside none leaves NaN).

    τ = 0 is left out: there every bound of Theorem 1 holds by construction (with equality
    for (iii)), so it says nothing about the run. A quantity measured only every so many
    steps (λ_τ, ‖W(τ)‖₂, the distance) is read where it was due (not NaN); NaN where nothing
    was measured after step 0 (e.g. a run of one step).

    - ``max_W_norm``: ‖W(τ)‖₂ where measured (Lanczos), Theorem 1 (i) (< 1);
    - ``max_W_norm_bound``: the trainer's upper bound of ‖W(τ)‖₂ (every step; < 1);
    - ``min_lambda_ratio``: λ_τ/λ_0, Theorem 1 (ii) (> 1/2);
    - ``max_loss_ratio``: Φ(τ) / ((1 − ηλ_0/2)^τ Φ(0)), Theorem 1 (iii) (<= 1);
    - ``max_step_ratio``: Φ(τ+1) / ((1 − ηλ_0/2) Φ(τ)) over consecutive recorded steps,
      the per-step contraction the proof establishes (Appendix B.1, step (3); <= 1);
    - ``max_drift``: the largest ‖θ(τ) − θ(0)‖ (to compare with
      :attr:`Condition1.drift_bound`; NaN if one is not finite);
    - ``last_step``: the last step with a finite loss; ``bound_factor``: (1 − ηλ_0/2)^T at
      T = ``last_step``, how far the bound of (iii) has moved from Φ(0) by then.
    """

    lambda0: float
    loss0: float
    last_step: int
    max_W_norm: float
    max_W_norm_bound: float
    min_lambda_ratio: float
    max_loss_ratio: float
    max_step_ratio: float
    max_drift: float
    bound_factor: float


def theorem1_margins(run: Run, lr: float) -> Theorem1Margins:
    """:class:`Theorem1Margins` of a GD run (``deqlab.train.GDTrainer`` records as a
    :class:`~deqlab.statements.Run`) with η = ``lr``.

    Reads ``loss``, ``lambda_min``, ``W_norm``, ``W_norm_bound`` and ``dist_from_init``;
    λ_0 and Φ(0) come from step 0, which must have both measured.
    """
    lr = check_positive("lr", lr)
    if not isinstance(run, Run) or not run.steps:
        raise ValueError("`run` must be a Run of GD records with at least one step")
    lambda0, loss0 = run["lambda_min"][0], run["loss"][0]
    if run.steps[0] != 0 or not (math.isfinite(lambda0) and math.isfinite(loss0)):
        raise ValueError("`run` must start with step 0 with `loss` and `lambda_min` measured")
    factor = 1.0 - lr * lambda0 / 2.0

    def after_start(key: str) -> list[tuple[int, float]]:
        return run.points(key, start=1)

    losses = dict(zip(run.steps, run["loss"], strict=True))
    finite = [s for s, v in losses.items() if math.isfinite(v)]
    step_ratios = [
        _ratio_to_bound(losses[s + 1], 1, factor, losses[s]) for s in run.steps if s + 1 in losses
    ]
    loss_ratios = [_ratio_to_bound(v, s, factor, loss0) for s, v in after_start("loss")]
    lambda_ratios = [v / lambda0 for _, v in after_start("lambda_min")]
    return Theorem1Margins(
        lambda0=lambda0,
        loss0=loss0,
        last_step=finite[-1],
        max_W_norm=_nan(worst(_values(after_start("W_norm")), "<", 1.0)),
        max_W_norm_bound=_nan(worst(_values(after_start("W_norm_bound")), "<", 1.0)),
        min_lambda_ratio=_nan(worst(lambda_ratios, ">", 0.5)),
        max_loss_ratio=_nan(worst(loss_ratios, "<=", 1.0)),
        max_step_ratio=_nan(worst(step_ratios, "<=", 1.0)),
        max_drift=_nan(worst(_values(after_start("dist_from_init")), "<=")),
        bound_factor=factor ** finite[-1],
    )


def _values(points: Sequence[tuple[int, float]]) -> list[float]:
    return [v for _, v in points]


def _nan(value: float | None) -> float:
    return math.nan if value is None else value


def _ratio_to_bound(loss: float, step: int, factor: float, loss0: float) -> float:
    """Φ(τ) / ((1 − ηλ_0/2)^τ Φ(0)), in logs so that long runs do not underflow; ``inf``
    (a measured violation) where the bound is not positive (Φ(0) = 0, ηλ_0/2 = 1, or
    ηλ_0/2 > 1 at an odd τ) and the loss is, or where the loss overflowed (+inf: above
    every bound); NaN where the loss is NaN or −inf or Φ(0) is not finite (an overflowed
    Φ(0) bounds nothing)."""
    if not math.isfinite(loss0) or loss != loss or loss == -math.inf:
        return math.nan
    if loss == math.inf:
        return math.inf
    if loss <= 0:
        return 0.0
    if loss0 <= 0 or factor == 0 or (factor < 0 and step % 2):
        return math.inf
    log_bound = step * math.log(abs(factor)) + math.log(loss0)
    return math.exp(min(700.0, math.log(loss) - log_bound))


@dataclass(frozen=True)
class PLMargins:
    """The PL inequalities of Section 2.3 at their worst over the steps τ >= 1 of a GD run,
    each decided by :func:`~deqlab.statements.worst` against 1.

    With g² = ‖∇_θΦ(τ)‖², H(τ) = H1 + H2 + H3 and λ_τ = λ_min(H1), each ratio is >= 1
    where its inequality holds (see :func:`_ratio` for a right side <= 0, e.g. Φ(τ) = 0):

    - ``min_eq4``: g² / (2 λ_min(H(τ)) Φ(τ)) over the steps with H due (Eq. (4));
    - ``min_h_ratio``: λ_min(H(τ)) / λ_τ over those steps (the observation before Eq. (5));
    - ``min_eq5``: g² / (2 λ_τ Φ(τ)) over the steps with λ_τ and g due (Eq. (5));
    - ``h_steps`` / ``eq5_steps``: the steps each ran over; ``checked_steps``: those of
      Eq. (5) whose ratio was measured;
    - ``max_W_norm_bound``: the trainer's upper bound of ‖W(τ)‖₂ over the steps where
      Eq. (5) was checked (its ratio measured; a superset of those of Eq. (4)): below 1,
      J(τ) is invertible there (Lemma 2); ``max_W_norm``: ‖W(τ)‖₂ where Lanczos measured it
      among those steps.

    A quantity is due at a step where it is not NaN (±inf: due, measured where it breaks
    its inequality); NaN where no step after the start has the quantities.
    """

    min_eq4: float
    min_h_ratio: float
    min_eq5: float
    h_steps: tuple[int, ...]
    eq5_steps: tuple[int, ...]
    max_W_norm_bound: float
    max_W_norm: float
    checked_steps: tuple[int, ...] = ()


def pl_margins(run: Run) -> PLMargins:
    """:class:`PLMargins` of a GD run with the series ``loss``, ``grad_norm`` (‖∇_θΦ‖),
    ``lambda_min`` (λ_τ), ``H_lambda_min`` (λ_min(H(τ))), ``W_norm_bound`` and ``W_norm``."""

    def due(k: int, *keys: str) -> bool:
        return run.steps[k] >= 1 and all(run[key][k] == run[key][k] for key in keys)

    eq5 = [k for k in range(len(run.steps)) if due(k, "loss", "grad_norm", "lambda_min")]
    eq4 = [k for k in eq5 if due(k, "H_lambda_min")]
    loss, grad, lam, h = run["loss"], run["grad_norm"], run["lambda_min"], run["H_lambda_min"]
    W, bound = run["W_norm"], run["W_norm_bound"]
    checked = [k for k in eq5 if _measured(_pl_ratio(grad[k], lam[k], loss[k]))]
    return PLMargins(
        min_eq4=_least([_pl_ratio(grad[k], h[k], loss[k]) for k in eq4]),
        min_h_ratio=_least([_ratio(h[k], lam[k]) for k in eq4]),
        min_eq5=_least([_pl_ratio(grad[k], lam[k], loss[k]) for k in eq5]),
        h_steps=tuple(run.steps[k] for k in eq4),
        eq5_steps=tuple(run.steps[k] for k in eq5),
        max_W_norm_bound=_nan(worst([bound[k] for k in checked], "<", 1.0)),
        max_W_norm=_nan(worst([W[k] for k in checked if W[k] == W[k]], "<", 1.0)),
        checked_steps=tuple(run.steps[k] for k in checked),
    )


def _measured(value: float) -> bool:
    """A PL ratio that was measured: not NaN, and not +inf (an inequality holding
    trivially)."""
    return value == value and value != math.inf


def _least(ratios: Sequence[float]) -> float:
    """The worst of the margins ``ratios`` against 1 (:func:`worst`), the steps where the
    inequality holds trivially (+inf: a right side <= 0) left out; NaN without one."""
    return _nan(worst([r for r in ratios if r != math.inf], ">=", 1.0))


def _pl_ratio(grad_norm: float, lam: float, loss: float) -> float:
    """‖∇Φ‖² / (2 λ Φ) at one step (:func:`_ratio`; NaN where one is NaN)."""
    return _ratio(grad_norm * grad_norm, 2.0 * lam * loss)


def _ratio(lhs: float, rhs: float) -> float:
    """The margin of ``lhs >= rhs`` as a ratio (>= 1 iff it holds): lhs / rhs for rhs > 0;
    for rhs <= 0, +inf where it holds, else lhs − rhs (< 0). Where a side is ±inf (an
    overflow), −inf if that breaks ``lhs >= rhs`` (:func:`~deqlab.statements.ratio`), else
    NaN; NaN where one is NaN."""
    if not (math.isfinite(lhs) and math.isfinite(rhs)):
        found = ratio(lhs, rhs, ">=")
        return math.nan if found is None else found
    if rhs > 0:
        return lhs / rhs
    return math.inf if lhs >= rhs else lhs - rhs
