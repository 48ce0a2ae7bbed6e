"""Corollaries 1–2 and Theorem 1's bound on λ_T, checked on measured DELM trajectories.

The statement builders of Kawaguchi (2021) shared by Figures 2 and 3.  The corollaries
are proven for every width and initialization, so they are theorem statements checked on
every recorded trajectory, guarded by their hypotheses (:mod:`.hypotheses`).  A value over
several runs is decided by :func:`deqlab.statements.worst`: a measured violation is never
hidden by a missing run.

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
from typing import TYPE_CHECKING

from deqlab.experiments.base import Row
from deqlab.papers import KAWAGUCHI
from deqlab.papers.kawaguchi2021.hypotheses import (
    Corollary,
    Runs,
    count_runs,
    gamma_hypothesis,
    recorded,
)
from deqlab.papers.kawaguchi2021.theory import lambda_lower_bound, time_to_accuracy
from deqlab.statements import Kind, Source, Statement, is_measured, number, theorem, worst

if TYPE_CHECKING:
    from deqlab.experiments.blocks import DELMSynthetic

#: Relative slack of "loss ≤ bound" (float64 rounding of sums of up to ~10⁴-sized losses).
BOUND_RTOL = 1e-9
#: The two λ_T of the bounds: the row column and how the statement names it.
BOUNDS = {
    "bound_dependent": "λ_T = inf_{t≤T} λ_min(D_t) (initialization-dependent)",
    "bound_independent": "λ_T = 1/(m(1+γ)²) (initialization-independent)",
}


def runs_by_task(rows: Sequence[Row]) -> dict[str, list[Row]]:
    """The rows of each task, in the tasks' order of appearance, each sorted by step."""
    runs: dict[str, list[Row]] = {}
    for r in rows:
        runs.setdefault(str(r["task"]), []).append(r)
    return {k: sorted(v, key=lambda r: int(r["step"])) for k, v in runs.items()}


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
class _Worst:
    """The smallest decay-exponent ratio over the steps τ ≥ 1 of the runs, and where."""

    ratio: float | None = None
    where: str = ""
    counted: int = 0
    skipped: int = 0
    why: str = ""


def _bound_check(
    name: str, location: str, runs: Runs, column: str, lr: float, guards: Sequence[Statement]
) -> Statement:
    expected = "≥ 1 at every step τ ≥ 1 (L_τ ≤ bound_τ; at τ = 0 both equal L₀, a tie not counted)"
    found = _Worst()
    for key, rows in runs.items():
        found = _combine(found, _decay_ratio(key, rows, column))
    if found.ratio is None:
        check = KAWAGUCHI.not_measured(
            Kind.THEOREM,
            location,
            name=name,
            expected=expected,
            why=found.why or "no recorded trajectory",
        )
        return theorem(check, guards)
    return KAWAGUCHI.theorem(
        location,
        name=name,
        value=found.ratio,
        relation=">=",
        threshold=1.0,
        measured=f"min over steps τ ≥ 1 of log((L₀ − L*)/(L_τ − L*)) / log((L₀ − L*)/"
        f"(bound_τ − L*)) = {found.ratio:.4g} ({found.where}); {found.counted} steps of "
        f"{count_runs(runs)}",
        expected=expected,
        detail=f"GD with η = {lr:g}, flow time T = τη; {found.skipped} steps where the loss "
        f"or the bound is within {BOUND_RTOL:g}·L₀ of L* (or the bound of L₀), the loss not "
        "above the bound, hold but are not resolvable in float64 and not counted",
        given=guards,
    )


def _combine(a: _Worst, b: _Worst) -> _Worst:
    if a.why or b.why:
        return a if a.why else b
    best = a if b.ratio is None or (a.ratio is not None and a.ratio <= b.ratio) else b
    return _Worst(best.ratio, best.where, a.counted + b.counted, a.skipped + b.skipped)


def _decay_ratio(key: str, rows: Sequence[Row], column: str) -> _Worst:
    """min_{τ≥1} e_τ/E_τ of one run (see the module docstring)."""
    if not rows or int(rows[0]["step"]) != 0:
        return _Worst(why=f"{key} has no record of step 0")
    bad = [r for r in rows if not all(is_measured(r.get(c)) for c in ("loss", column, "loss_star"))]
    if bad:
        return _Worst(why=f"non-finite loss or bound at step {bad[0]['step']} of {key}")
    loss0, loss_star = float(rows[0]["loss"]), float(rows[0]["loss_star"])
    gap0, eps = loss0 - loss_star, BOUND_RTOL * abs(loss0)
    if gap0 <= eps:
        return _Worst(why=f"{key} starts at L* (within {BOUND_RTOL:g}·L₀)")
    resolution = eps / gap0  # the smallest exponent float64 tells from 0
    worst, skipped, counted = (math.inf, ""), 0, 0
    for r in rows[1:]:
        loss, bound = float(r["loss"]), float(r[column])
        e = math.log(gap0 / max(loss - loss_star, eps))
        E = math.log(gap0 / max(bound - loss_star, eps))
        if loss - bound > eps:  # a violation: e < E
            ratio = e / max(E, resolution)
        elif min(loss, bound) - loss_star <= eps or resolution > E:
            skipped += 1  # holds, but e or E is at the float64 floor: no ratio to report
            continue
        else:  # below the bound, or above it by rounding only
            ratio = max(e / E, 1.0)
        counted += 1
        worst = min(worst, (ratio, f"{key}, step {r['step']}"))
    if not counted:
        return _Worst(skipped=skipped, why=f"no step of {key} resolvable against the bound")
    return _Worst(worst[0], worst[1], counted, skipped)


def lambda_bound_check(
    runs: Runs, guards: Sequence[Statement], *, m: int, gamma: float
) -> Statement:
    """Theorem 1 (Eq. 33): λ_min(D_t) ≥ 1/(m(1+γ)²) for every (A_t, B_t), decided on the
    smallest λ_T·m(1+γ)² over all runs (λ_T is the running infimum over every GD step)."""
    lam = lambda_lower_bound(m, gamma)
    smallest = worst(recorded(runs, "lambda_T"), ">=", lam)
    ratio = None if smallest is None else smallest / lam
    return KAWAGUCHI.theorem(
        "Theorem 1, Eq. (33)",
        name="Theorem 1: λ_min(D_t) ≥ 1/(m(1+γ)²) at every step",
        value=ratio,
        relation=">=",
        threshold=1.0,
        measured=f"min_t λ_min(D_t) = {number(smallest, 4)} = {number(ratio, 4)} × "
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
    steps of every run, guarded by the corollary's hypotheses."""
    name = f"{equation}: L(A_T, B_T) − L* ≤ ε for every T ≥ m(1+γ)²/(2κ)·log((L₀ − L*)/ε)"
    location = f"Section 3.1.2–3.1.3, {equation}"
    expected = f"≤ 1 at every recorded step with T = τη ≥ T_ε (ε = {eps_rel:g}·(L₀ − L*))"
    found = [_accuracy_time(key, rows, lr, m, gamma, eps_rel) for key, rows in runs.items()]
    why = next((f[3] for f in found if f[3]), "")
    counted = [f for f in found if f[0] is not None]
    if why or not counted:
        why = why or "no run recorded a step at or after its T_ε: " + "; ".join(f[2] for f in found)
        check = KAWAGUCHI.not_measured(
            Kind.THEOREM, location, name=name, expected=expected, why=why
        )
        return theorem(check, guards)
    largest = max(counted, key=lambda f: f[0])
    slack = min((f[4] for f in found if f[4] is not None), default=None)
    return KAWAGUCHI.theorem(
        location,
        name=name,
        value=largest[0],
        relation="<=",
        threshold=1.0,
        measured=f"largest (L_T − L*)/ε at T ≥ T_ε = {largest[0]:.4g} ({largest[1]}); "
        + "; ".join(f[2] for f in found),
        expected=expected,
        detail=f"GD with η = {lr:g}, T = τη; T_ε is the time Theorem 1 predicts with the "
        "worst-case λ_T = 1/(m(1+γ)²); the measured time is the first recorded T with "
        "L_T − L* ≤ ε" + _slack(slack),
        given=guards,
    )


def corollary_checks(
    corollary: Corollary,
    runs: Runs,
    guards: Sequence[Statement],
    config: DELMSynthetic,
    *,
    equation: str,
    eps_rel: float,
    time_guards: Sequence[Statement] = (),
) -> list[Statement]:
    """Theorem 1's bound on λ_T (guarded by γ ∈ (0, 1)), the corollary's two bounds
    (guarded by ``guards``) and its time to accuracy ``equation`` (guarded by ``guards``
    and ``time_guards``), each on every run of ``runs``, trained in ``config``'s setting
    (m = d, γ, η)."""
    m, gamma, lr = config.d, config.gamma, config.lr
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


def _accuracy_time(
    key: str, rows: Sequence[Row], lr: float, m: int, gamma: float, eps_rel: float
) -> tuple[float | None, str, str, str, float | None]:
    """(largest (L_T − L*)/ε over T ≥ T_ε or None, where, predicted vs measured, why not,
    T_ε / measured time to ε or None)."""
    cols = ("loss", "loss_star", "kappa")
    if not rows or int(rows[0]["step"]) != 0:
        return None, "", "", f"{key} has no record of step 0", None
    if not all(is_measured(r.get(c)) for r in rows for c in cols):
        return None, "", "", f"non-finite loss, L* or κ in {key}", None
    loss_star = float(rows[0]["loss_star"])
    eps = eps_rel * (float(rows[0]["loss"]) - loss_star)
    if eps <= 0:
        return None, "", "", f"{key} starts at L*", None
    t_eps = time_to_accuracy(m, gamma, float(rows[0]["kappa"]), eps / eps_rel, eps)
    times = [(int(r["step"]) * lr, (float(r["loss"]) - loss_star) / eps) for r in rows]
    hit = next((t for t, ratio in times if ratio <= 1.0), None)
    ratios = [(ratio, t) for t, ratio in times if t >= t_eps]
    hit_text = (
        "not reached"
        if hit is None
        else f"{hit:.4g}" + (f" = {hit / t_eps:.3g} × T_ε" if t_eps > 0 else "")
    )  # T_ε = 0 when ε ≥ L₀ − L*
    say = f"{key}: T_ε = {t_eps:.4g}, measured time to ε {hit_text}, last T = {times[-1][0]:.4g}"
    slack = t_eps / hit if hit else None
    if not ratios:
        return None, "", say, "", slack
    ratio, t = max(ratios)
    return ratio, f"{key}, T = {t:.4g}", say, "", slack


def faster_rate_observation(
    rows: Sequence[Row], source: Source, *, m: int, gamma: float
) -> Statement:
    """The paper's observation that the initialization-dependent bound converges faster:
    its rate λ_T = inf λ_min(D_t) at the last step over 1/(m(1+γ)²)."""
    lam = lambda_lower_bound(m, gamma)
    lam_T = worst([rows[-1].get("lambda_T")] if rows else [], ">", lam)
    value = None if lam_T is None else lam_T / lam
    return KAWAGUCHI.observation(
        source.location,
        name="the initialization-dependent bound converges faster than the independent one",
        value=value,
        relation=">",
        threshold=1.0,
        measured=f"λ_T = {number(lam_T, 4)} at step {rows[-1]['step'] if rows else '—'}, "
        f"{number(value, 4)} × 1/(m(1+γ)²) = {lam:.4g}",
        expected="> 1: a faster rate e^{−2κλ_T T} (both bounds start at L₀)",
        quote=source.quote,
    )
