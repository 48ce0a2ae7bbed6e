"""Corollaries 1–2 and Theorem 1's bound on λ_T, checked on measured DELM trajectories.

The statement builders of Kawaguchi (2021) shared by Figures 2 and 3.  The corollaries
are proven for every width and initialization, so they are theorem statements checked on
every recorded trajectory, guarded by their hypotheses (:mod:`.hypotheses`).  A value over
several runs and steps is decided by :func:`deqlab.statements.worst`: a measured violation
is never hidden by a missing run or step (a loss that rises above its bound and then
overflows is FAIL).

A bound B_τ = L* + (L₀ − L*) e^{−E_τ} holds at step τ iff the trajectory's decay exponent
e_τ = log((L₀ − L*)/(L_τ − L*)) is at least E_τ.  The statement is decided on
min_{τ≥1} e_τ/E_τ ≥ 1: the margin over the steps after the start (at τ = 0 the trajectory
and both bounds equal L₀, a tie), and a value that says how much faster than its bound
the loss decayed.  Gaps within the float64 slack BOUND_RTOL·L₀ are rounding: a step where
the trajectory exceeds the bound by more is a violation (ratio < 1); one where the
trajectory or the bound is within it of L* (or the bound of L₀) and the trajectory is not
above the bound holds, but its exponent is not resolvable and it is not counted.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from deqlab.papers.kawaguchi2021 import KAWAGUCHI
from deqlab.papers.kawaguchi2021.hypotheses import (
    Corollary,
    Runs,
    count_runs,
    gamma_hypothesis,
    recorded,
)
from deqlab.papers.kawaguchi2021.theory import lambda_lower_bound, time_to_accuracy
from deqlab.statements import (
    Kind,
    Run,
    Source,
    Statement,
    claim,
    is_measured,
    number,
    ratio,
    theorem,
    worst,
)

#: Relative slack of "loss ≤ bound" (float64 rounding of sums of up to ~10⁴-sized losses).
BOUND_RTOL = 1e-9
#: The two λ_T of the bounds: the row column and how the statement names it.
BOUNDS = {
    "bound_dependent": "λ_T = inf_{t≤T} λ_min(D_t) (initialization-dependent)",
    "bound_independent": "λ_T = 1/(m(1+γ)²) (initialization-independent)",
}


@claim
def bound_checks(
    corollary: Corollary, runs: Runs, guards: Sequence[Statement], *, lr: float
) -> list[Statement]:
    """The corollary's inequality with each λ_T, on every run, guarded by ``guards``."""
    found = []
    for column, which in BOUNDS.items():
        where = "" if column == "bound_dependent" else ", with λ_T ≥ 1/(m(1+γ)²) (Eq. 33)"
        name = f"{corollary.name}: L(A_T, B_T) ≤ its bound with {which}"
        found.append(_bound_check(name, corollary.location + where, runs, column, lr, guards))
    return found


@dataclass(frozen=True)
class _Ratios:
    """The decay-exponent ratios e_τ/E_τ of one run at its resolvable steps τ ≥ 1 (None
    where the loss or the bound is not finite), and the steps that hold unresolved."""

    points: list[tuple[float | None, str]]
    skipped: int = 0
    why: str = ""


def _bound_check(
    name: str, location: str, runs: Runs, column: str, lr: float, guards: Sequence[Statement]
) -> Statement:
    expected = "≥ 1 at every step τ ≥ 1 (L_τ ≤ bound_τ; at τ = 0 both equal L₀, a tie not counted)"
    per_run = [_decay_ratios(run, column) for run in runs.values()]
    points = [p for r in per_run for p in r.points]
    value = worst([v for v, _ in points], ">=", 1.0)
    if value is None:
        why = "; ".join(r.why for r in per_run if r.why) or "no recorded trajectory"
        check = KAWAGUCHI.not_measured(
            Kind.THEOREM, location, name=name, expected=expected, why=why
        )
        return theorem(check, guards)
    where = next(at for v, at in points if v == value)
    counted = sum(v is not None for v, _ in points)
    return KAWAGUCHI.theorem(
        location,
        name=name,
        value=value,
        relation=">=",
        threshold=1.0,
        measured=f"min over steps τ ≥ 1 of log((L₀ − L*)/(L_τ − L*)) / log((L₀ − L*)/"
        f"(bound_τ − L*)) = {value:.4g} ({where}); {counted} steps of {count_runs(runs)}",
        expected=expected,
        detail=f"GD with η = {lr:g}, flow time T = τη; {sum(r.skipped for r in per_run)} steps "
        f"where the loss or the bound is within {BOUND_RTOL:g}·L₀ of L* (or the bound of L₀), "
        "the loss not above the bound, hold but are not resolvable in float64 and not "
        "counted" + _missing(points),
        given=guards,
    )


def _missing(points: Sequence[tuple[float | None, str]]) -> str:
    """Where a ratio could not be measured (a non-finite loss or bound)."""
    missing = [at for v, at in points if v is None]
    if not missing:
        return ""
    return f"; not measured (a non-finite loss or bound) at {len(missing)}: {missing[0]}, …"


def _decay_ratios(run: Run, column: str) -> _Ratios:
    """e_τ/E_τ of one run at each step τ ≥ 1 (see the module docstring): None where the
    loss or the bound is not finite; a run without step 0 or starting at L* is one point
    not measured."""
    loss, bound = run["loss"], run[column]
    if not run.steps or run.steps[0] != 0:
        return _Ratios([(None, f"{run.key}, step 0")], why=f"{run.key} has no record of step 0")
    loss0, loss_star = loss[0], run["loss_star"][0]
    if not (is_measured(loss0) and is_measured(loss_star)):
        return _Ratios([(None, f"{run.key}, step 0")], why=f"non-finite L₀ or L* in {run.key}")
    gap0, eps = loss0 - loss_star, BOUND_RTOL * abs(loss0)
    if gap0 <= eps:
        why = f"{run.key} starts at L* (within {BOUND_RTOL:g}·L₀)"
        return _Ratios([(None, f"{run.key}, step 0")], why=why)
    resolution = eps / gap0  # the smallest exponent float64 tells from 0
    points: list[tuple[float | None, str]] = []
    skipped = 0
    for step, value, limit in zip(run.steps[1:], loss[1:], bound[1:], strict=True):
        at = f"{run.key}, step {step}"
        if not (is_measured(value) and is_measured(limit)):
            above = ratio(value, limit, "<=") == math.inf  # an overflow past the bound
            points.append((-math.inf if above else None, at))
            continue
        e = math.log(gap0 / max(value - loss_star, eps))
        E = math.log(gap0 / max(limit - loss_star, eps))
        if value - limit > eps:  # a violation: e < E
            points.append((e / max(E, resolution), at))
        elif min(value, limit) - loss_star <= eps or resolution > E:
            skipped += 1  # holds, but e or E is at the float64 floor: no ratio to report
        else:  # below the bound, or above it by rounding only
            points.append((max(e / E, 1.0), at))
    if not points:
        why = f"no step of {run.key} resolvable against the bound"
        return _Ratios([(None, f"{run.key}")], skipped, why)
    return _Ratios(points, skipped)


@claim
def lambda_bound_check(
    runs: Runs, guards: Sequence[Statement], *, m: int, gamma: float
) -> Statement:
    """Theorem 1 (Eq. 33): λ_min(D_t) ≥ 1/(m(1+γ)²) for every (A_t, B_t), decided on the
    smallest λ_T·m(1+γ)² over all runs (λ_T is the running infimum over every GD step)."""
    lam = lambda_lower_bound(m, gamma)
    smallest = worst(recorded(runs, "lambda_T"), ">=", lam)
    share = None if smallest is None else smallest / lam
    return KAWAGUCHI.theorem(
        "Theorem 1, Eq. (33)",
        name="Theorem 1: λ_min(D_t) ≥ 1/(m(1+γ)²) at every step",
        value=share,
        relation=">=",
        threshold=1.0,
        measured=f"min_t λ_min(D_t) = {number(smallest, 4)} = {number(share, 4)} × "
        f"1/(m(1+γ)²) over {count_runs(runs)}",
        expected=f"≥ 1/(m(1+γ)²) = {lam:.4g} (m = {m}, γ = {gamma:g})",
        given=guards,
    )


def accuracy_equation(loss: str, tau: float, radius: float) -> str:
    """The equation giving T_ε for a loss: Eq. (10) (square), Eq. (11) (logistic, R = ∞),
    Eq. (12) (logistic, τ = 0, R < ∞), else Theorem 1's Eq. (9) with Corollary 2's κ."""
    if loss == "square":
        return "Eq. (10)"
    if radius == math.inf:
        return "Eq. (11)"
    return "Eq. (12)" if tau == 0 else "Eq. (9) with κ = (2τ + ρ(R))σ_min(Φ)²"


@claim
def accuracy_time_check(
    runs: Runs,
    guards: Sequence[Statement],
    *,
    equation: str,
    lr: float,
    m: int,
    gamma: float,
    eps_rel: float,
) -> Statement:
    """Eqs. (9)–(12): L(A_T, B_T) − L* ≤ ε at every recorded T ≥ T_ε (:func:`time_to_accuracy`),
    ε = ``eps_rel``·(L₀ − L*) for each run; decided on the largest (L_T − L*)/ε over those
    steps of every run (:func:`worst`: a non-finite loss there is not measured, beside a
    violation it is FAIL), guarded by the corollary's hypotheses."""
    name = f"{equation}: L(A_T, B_T) − L* ≤ ε for every T ≥ m(1+γ)²/(2κ)·log((L₀ − L*)/ε)"
    location = f"Section 3.1.2–3.1.3, {equation}"
    expected = f"≤ 1 at every recorded step with T = τη ≥ T_ε (ε = {eps_rel:g}·(L₀ − L*))"
    found = [_accuracy_time(run, lr, m, gamma, eps_rel) for run in runs.values()]
    points = [p for f in found for p in f.points]
    value = worst([v for v, _ in points], "<=", 1.0)
    if value is None:
        why = "; ".join(f.why for f in found if f.why) or (
            "no run recorded a step at or after its T_ε: " + "; ".join(f.said for f in found)
        )
        check = KAWAGUCHI.not_measured(
            Kind.THEOREM, location, name=name, expected=expected, why=why
        )
        return theorem(check, guards)
    where = next(at for v, at in points if v == value)
    slacks = [f.slack for f in found if f.slack is not None]
    return KAWAGUCHI.theorem(
        location,
        name=name,
        value=value,
        relation="<=",
        threshold=1.0,
        measured=f"largest (L_T − L*)/ε at T ≥ T_ε = {value:.4g} ({where}); "
        + "; ".join(f.said for f in found),
        expected=expected,
        detail=f"GD with η = {lr:g}, T = τη; T_ε is the time Theorem 1 predicts with the "
        "worst-case λ_T = 1/(m(1+γ)²); the measured time is the first recorded T with "
        "L_T − L* ≤ ε" + _slack(worst(slacks, ">")),
        given=guards,
    )


def corollary_checks(
    corollary: Corollary,
    runs: Runs,
    guards: Sequence[Statement],
    *,
    m: int,
    gamma: float,
    lr: float,
    equation: str,
    eps_rel: float,
    time_guards: Sequence[Statement] = (),
) -> list[Statement]:
    """Theorem 1's bound on λ_T (guarded by γ ∈ (0, 1)), the corollary's two bounds
    (guarded by ``guards``) and its time to accuracy ``equation`` (guarded by ``guards``
    and ``time_guards``), each on every run of ``runs``, trained with width m = d, γ and
    step η = ``lr``."""
    return [
        lambda_bound_check(runs, [gamma_hypothesis(gamma)], m=m, gamma=gamma),
        *bound_checks(corollary, runs, guards, lr=lr),
        accuracy_time_check(
            runs,
            [*guards, *time_guards],
            equation=equation,
            lr=lr,
            m=m,
            gamma=gamma,
            eps_rel=eps_rel,
        ),
    ]


def _slack(slack: float | None) -> str:
    """The factor by which every run reached ε before T_ε: a loose bound, not a tight one."""
    if slack is None or slack <= 1.0:
        return ""
    return (
        f"; slack: every run reached ε at least {slack:.3g}× earlier than T_ε (smallest "
        "T_ε / measured time over the runs), so the pass says the bound is loose there, "
        "not that it is tight"
    )


@dataclass(frozen=True)
class _Accuracy:
    """One run against its T_ε: (L_T − L*)/ε at each recorded T ≥ T_ε (None where the loss
    is not finite), what was predicted and measured, why nothing could be (``why``), and
    T_ε / the measured time to ε (None when ε was never reached)."""

    points: list[tuple[float | None, str]]
    said: str = ""
    why: str = ""
    slack: float | None = None


def _accuracy_time(run: Run, lr: float, m: int, gamma: float, eps_rel: float) -> _Accuracy:
    if not run.steps or run.steps[0] != 0:
        return _Accuracy([(None, run.key)], why=f"{run.key} has no record of step 0")
    loss0, loss_star, kappa = run["loss"][0], run["loss_star"][0], run["kappa"][0]
    if not all(is_measured(x) for x in (loss0, loss_star, kappa)):
        return _Accuracy([(None, run.key)], why=f"non-finite L₀, L* or κ in {run.key}")
    eps = eps_rel * (loss0 - loss_star)
    if eps <= 0:
        return _Accuracy([(None, run.key)], why=f"{run.key} starts at L*")
    t_eps = time_to_accuracy(m, gamma, kappa, eps / eps_rel, eps)
    times = [
        (step * lr, (v - loss_star) / eps) for step, v in zip(run.steps, run["loss"], strict=True)
    ]
    hit = next((t for t, excess in times if excess <= 1.0), None)
    hit_text = (
        "not reached"
        if hit is None
        else f"{hit:.4g}" + (f" = {hit / t_eps:.3g} × T_ε" if t_eps > 0 else "")
    )  # T_ε = 0 when ε ≥ L₀ − L*
    said = f"{run.key}: T_ε = {t_eps:.4g}, measured time to ε {hit_text}, last T = "
    said += f"{times[-1][0]:.4g}"
    points = [(excess, f"{run.key}, T = {t:.4g}") for t, excess in times if t >= t_eps]
    return _Accuracy(points, said, slack=t_eps / hit if hit else None)


@claim
def faster_rate_observation(run: Run | None, source: Source, *, m: int, gamma: float) -> Statement:
    """The paper's observation that the initialization-dependent bound converges faster:
    its rate λ_T = inf_{t≤T} λ_min(D_t) at the end of ``run`` over 1/(m(1+γ)²), decided on
    the smallest recorded λ_T (the running infimum: its last value)."""
    lam = lambda_lower_bound(m, gamma)
    lam_T = worst(run["lambda_T"] if run is not None else [], ">", lam)
    value = None if lam_T is None else lam_T / lam
    last = run.steps[-1] if run is not None and run.steps else "—"
    return KAWAGUCHI.observation(
        source.location,
        name="the initialization-dependent bound converges faster than the independent one",
        value=value,
        relation=">",
        threshold=1.0,
        measured=f"λ_T = {number(lam_T, 4)} at step {last}, "
        f"{number(value, 4)} × 1/(m(1+γ)²) = {lam:.4g}",
        expected="> 1: a faster rate e^{−2κλ_T T} (both bounds start at L₀)",
        quote=source.quote,
    )
