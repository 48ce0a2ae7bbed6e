"""One vocabulary for the checked statements of a paper, from theory to report.

A :class:`Statement` says where it comes from (:class:`Source`: a paper and the theorem /
equation / figure, with the paper's words for observations), what kind it is
(:class:`Kind`), what was measured, what was expected, the margin, and a :class:`Verdict`.
Verdicts are measurements: a statement is PASS only if it was measured and could have
failed; no data gives NOT MEASURED; a theorem whose hypotheses were measured not to hold
is NOT APPLICABLE, with the failing hypothesis, by how much, and what would satisfy it.

A paper is named in one place, its :class:`Paper` record (:mod:`deqlab.papers`). The
record owns its citations and builds its statements bound to itself, the way
optimistix's ``RESULTS`` owns its messages::

    from deqlab.papers import LING
    from deqlab.statements import worst

    LING.theorem(
        "Theorem 1 (i)",
        name="Theorem 1 (i): ‖W(τ)‖₂ < 1 for τ ≥ 1",
        value=worst(norms, "<", 1.0), relation="<", threshold=1.0,
        measured=f"max ‖W(τ)‖₂ = {numbers(norms)}",
        given=hypotheses,
    )

Modules: :mod:`~deqlab.statements.statement` (the types), :mod:`~deqlab.statements.decide`
(:func:`measure`, :func:`theorem`, :func:`implication` and :func:`worst`, the only places
verdicts are decided), :mod:`~deqlab.statements.paper` (:class:`Paper` and its builders),
:mod:`~deqlab.statements.counts` (:class:`Counts`), :mod:`~deqlab.statements.series` (the
typed measurements claims take: :class:`Series`, :class:`Run`) and
:mod:`~deqlab.statements.claims` (:func:`claim`, the registry of the papers' claims).
Numbers are written by :func:`deqlab._format.number`, re-exported here with :func:`numbers`.
"""

from deqlab._format import number, numbers
from deqlab.statements.claims import claim
from deqlab.statements.counts import Counts
from deqlab.statements.decide import (
    constant_not_given,
    implication,
    measure,
    measures,
    min_step_gap,
    not_measured,
    ours,
    ratio,
    strictly_increasing,
    theorem,
    worst,
)
from deqlab.statements.paper import DEQLAB, OURS, Paper
from deqlab.statements.series import Run, Series, runs_from_rows
from deqlab.statements.statement import (
    ALLOWED,
    OURS_KEY,
    RELATIONS,
    Kind,
    Source,
    Statement,
    Verdict,
    is_measured,
    paper_of,
)

__all__ = [
    "ALLOWED",
    "DEQLAB",
    "OURS",
    "OURS_KEY",
    "RELATIONS",
    "Counts",
    "Kind",
    "Paper",
    "Run",
    "Series",
    "Source",
    "Statement",
    "Verdict",
    "claim",
    "constant_not_given",
    "implication",
    "is_measured",
    "measure",
    "measures",
    "min_step_gap",
    "not_measured",
    "number",
    "numbers",
    "ours",
    "paper_of",
    "ratio",
    "runs_from_rows",
    "strictly_increasing",
    "theorem",
    "worst",
]
