"""Theorem 2 (Section 3.2, Appendix A.2) as claims on DELM trajectories.

Three theorem statements, each decided by :func:`~deqlab.statements.worst` on its largest
relative gap over every recorded step, δ_t and loss against the float64 ``tolerance``
(ours): Eq. (13)'s velocity d/dt f_θt = (1/δ_t)V_tφ with V_t the solved trust-region step;
the proof's KKT multiplier μ = 1/(2δ_t) (Appendix A.2); and D_t = U⁻ᵀSU⁻¹ for m_y = 1 in
Eq. (26) (Appendix A.2). The runs are one :class:`~deqlab.statements.Run` per (loss, δ_t as
a fraction of δ̄_t): its steps the recorded GD steps, its series the gaps, its constant
``delta_fraction``.
"""

from __future__ import annotations

from collections.abc import Mapping

from deqlab.papers.kawaguchi2021 import KAWAGUCHI
from deqlab.statements import Kind, Run, Statement, claim, worst

#: column -> (statement name, source location, what the column compares)
CHECKS = {
    "velocity_error": (
        "Theorem 2: d/dt f_θt = (1/δ_t)V_tφ with vec(V_t) the minimiser of L₀ᵗ over the trust "
        "region of G_t-norm (Eq. 13)",
        "Theorem 2, Eq. (13)",
        "max_i |d/dt f_θt(x_i) − (1/δ_t)V_tφ(x_i)| / max_i |d/dt f_θt(x_i)|, V_t from an "
        "independent solve of the trust-region subproblem, d/dt f by autograd along −∇L",
    ),
    "multiplier_error": (
        "Theorem 2's proof: the trust-region constraint is active with KKT multiplier μ = 1/(2δ_t)",
        "Appendix A.2 (proof of Theorem 2)",
        "|2μδ_t − 1| for the multiplier μ of the solved subproblem",
    ),
    "closed_form_error": (
        "for m_y = 1, D_t = U_t⁻ᵀS_tU_t⁻¹: d vec(B_tU_t⁻¹)/dt = −U_t⁻ᵀS_tU_t⁻¹∇L₀",
        "Appendix A.2 (D_t for m_y = 1), Eq. (26)",
        "max_k |measured d vec(Z)/dt − (−U⁻ᵀSU⁻¹∇L₀)|_k / max_k |measured d vec(Z)/dt|_k",
    ),
}


@claim
def trust_region_check(column: str, runs: Mapping[str, Run], *, tolerance: float) -> Statement:
    """The statement of ``column`` (:data:`CHECKS`): its largest gap over every step of
    every run ≤ ``tolerance``."""
    name, location, what = CHECKS[column]
    expected = f"≤ {tolerance:g} (agreement in float64; the tolerance is ours)"
    points = [
        (v, run, s) for run in runs.values() for s, v in zip(run.steps, run[column], strict=True)
    ]
    value = worst([v for v, _, _ in points], "<=", tolerance)
    if value is None:
        bad = next(((run, s) for v, run, s in points if v != v or abs(v) == float("inf")), None)
        why = (
            "no recorded step"
            if bad is None
            else (f"non-finite {column} at step {bad[1]} of {bad[0].label('task')}")
        )
        return KAWAGUCHI.not_measured(Kind.THEOREM, location, name=name, expected=expected, why=why)
    _, run, step = next(p for p in points if p[0] == value)
    fractions = sorted({run.constant("delta_fraction") for run in runs.values()})
    steps = {(r.label("task"), s) for r in runs.values() for s in r.steps}
    return KAWAGUCHI.theorem(
        location,
        name=name,
        value=value,
        relation="<=",
        threshold=tolerance,
        measured=f"largest {what} = {value:.3g} ({run.label('task')}, step {step}, δ_t = "
        f"{run.constant('delta_fraction'):g}·δ̄_t)",
        expected=expected,
        detail=f"{len(points)} checks: {len(steps)} recorded steps of "
        f"{len({r.label('task') for r in runs.values()})} runs × δ_t/δ̄_t ∈ "
        f"{{{', '.join(f'{c:g}' for c in fractions)}}}, δ̄_t = sup{{δ : G_t ≻ 0}}",
    )


def theorem_2(runs: Mapping[str, Run], *, tolerance: float) -> list[Statement]:
    """The three statements of :data:`CHECKS`."""
    return [trust_region_check(column, runs, tolerance=tolerance) for column in CHECKS]
