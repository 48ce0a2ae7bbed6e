"""Precision driven by the decision (deqlab.verification.precision): verdicts and statuses
compared at the corners of the certified brackets, the undecided ones said so with why,
narrower brackets asked for where they decide; and on verify's printed output."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from deqlab.papers import LING
from deqlab.papers.ling2023 import network
from deqlab.papers.ling2023.theory import theorem2_scale
from deqlab.statements import Verdict
from deqlab.theory.brackets import Bracket
from deqlab.verification import precision
from deqlab.verification.answers import UNDECIDED_AT_BRACKETS, Answer, span


@dataclass(frozen=True)
class Toy:
    """A measured value λ with its bracket, as an init object of verify."""

    lam: float
    bracket: Bracket
    precision: float = 1e-3

    def brackets(self) -> dict[str, Bracket]:
        return {"lambda_star": self.bracket}

    def at(self, values: dict[str, float]) -> Toy:
        return replace(self, lam=values.get("lambda_star", self.lam))


def _evaluate(threshold: float):
    """λ ≥ threshold as a theorem statement, and the number 2/λ."""

    def evaluate(init: Toy):
        found = LING.theorem(
            "Theorem 3 (ii)", name="λ ≥ t", value=init.lam, relation=">=",
            threshold=threshold, measured=f"λ = {init.lam}",
        )  # fmt: skip
        return [found], {"lambda_star": init.lam, "width": 2.0 / init.lam}

    return evaluate


def _answer(init: Toy, numbers: dict, statements) -> list[Answer]:
    status = "holds" if statements[0].verdict is Verdict.PASS else "fails"
    return [Answer("Toy theorem", status, f"needs m ≥ {span(numbers, 'width', _two)}")]


def _two(x: float) -> str:
    return f"{x:.2g}"


def _toy(lower: float, upper: float) -> Toy:
    return Toy(upper, Bracket(lower, upper, "below", "above"))


def test_every_corner_of_the_brackets_once():
    two = {"a": Bracket(1.0, 2.0, "", ""), "b": Bracket(5.0, 5.0, "", "")}
    assert precision.corners(two) == [{"a": 1.0, "b": 5.0}, {"a": 2.0, "b": 5.0}]
    three = {k: Bracket(0.0, 1.0, "", "") for k in "xyz"}
    assert len(precision.corners(three)) == 8
    assert precision.corners({}) == []


def test_a_threshold_outside_the_bracket_is_decided_and_numbers_get_their_range():
    settled = precision.settle(_toy(0.999, 1.0), _evaluate(0.5), _answer)
    assert settled.undecided == [] and settled.statements[0].verdict is Verdict.PASS
    assert settled.numbers["ranges"]["width"] == [2.0, pytest.approx(2.0 / 0.999)]
    assert settled.answers[0].why == "needs m ≥ 2"  # the range does not show at 2 digits
    wide = precision.settle(_toy(0.9, 1.0), _evaluate(0.5), _answer)
    assert wide.answers[0].why == "needs m ≥ 2 to 2.2"  # … here it does


def test_a_threshold_inside_the_bracket_is_said_undecided_with_why():
    settled = precision.settle(_toy(0.999, 1.0), _evaluate(0.9995), _answer)
    statement, answer = settled.statements[0], settled.answers[0]
    assert statement.verdict is Verdict.NOT_MEASURED
    assert statement.detail.startswith("undecided at the certified brackets: FAIL at λ* = 0.999")
    assert answer.status == UNDECIDED_AT_BRACKETS
    assert "fails at λ* = 0.999; holds at λ* = 1" in answer.why
    assert answer.why.endswith("at the estimates: holds — needs m ≥ 2")
    assert settled.undecided[0].startswith("λ ≥ t: FAIL at λ* = 0.999; PASS at λ* = 1")
    assert settled.undecided[-1].startswith("why: the brackets cannot be narrowed further")
    printed = precision.lines({**settled.numbers, "lambda_star_bounds": [0.999, 1.0]})
    assert printed[0].startswith("certified brackets (lower sides: a float64 Cholesky")
    assert printed[1] == "  undecided at these brackets:" and "λ ≥ t" in printed[2]


def test_a_narrower_bracket_is_asked_for_where_it_decides():
    asked = []

    def refine(init: Toy, width: float) -> Toy:
        asked.append(width)
        return replace(init, bracket=Bracket(0.99999, 1.0, "below", "above"), precision=width)

    settled = precision.settle(_toy(0.999, 1.0), _evaluate(0.9995), _answer, refine)
    assert asked == [pytest.approx(1e-6)] and settled.undecided == []
    assert settled.statements[0].verdict is Verdict.PASS and settled.init.precision == 1e-6


def test_brackets_already_narrower_than_asked_or_at_their_floor_are_not_refined():
    asked = []
    narrow = Toy(1.0, Bracket(1.0 - 1e-12, 1.0, "", ""))
    settled = precision.settle(narrow, _evaluate(1.0), _answer, lambda i, w: asked.append(w))
    assert asked == [] and settled.statements[0].verdict is Verdict.NOT_MEASURED
    floor = Toy(1.0, Bracket(0.99, 1.0, "", "", at_floor=True))  # rounding's: wide, but final
    settled = precision.settle(floor, _evaluate(0.995), _answer, lambda i, w: asked.append(w))
    assert asked == [] and settled.statements[0].verdict is Verdict.NOT_MEASURED


def test_a_real_answer_whose_bracket_holds_its_threshold_is_said_undecided():
    from deqlab import ReLUDEQCheck
    from deqlab.cli.verify_output import header_lines
    from deqlab.verification import load_dataset
    from deqlab.verification.api import Verification
    from deqlab.verification.inputs import prepare
    from deqlab.verification.stand_ins import standins

    check = ReLUDEQCheck(width=30)
    x, y, _ = load_dataset("sphere", n=12, d=6)
    init = check.initialize(prepare(x, y), 0, lambda *a: None)
    assert init.K.bracket.lower > 0  # as measured: λ* > 0 decided
    wide = Bracket(-1e-3, init.K.bracket.upper, "a bracket widened by hand", "above")
    init = replace(init, K=replace(init.K, bracket=wide))

    def evaluate(at):
        return check.statements(at, None), check.numbers(at, None)

    settled = precision.settle(
        init, evaluate, lambda at, k, s: check.answers(at, k, None, s)
    )  # fmt: skip
    theorem3 = settled.answers[0]
    assert theorem3.status == UNDECIDED_AT_BRACKETS
    assert theorem3.why.startswith("does not apply to these data at λ* = -0.001, λ_min(NTK)")
    assert "; holds for these data at λ* = 0.08" in theorem3.why
    statement = next(s for s in settled.statements if s.name.startswith("Theorem 3 (ii)"))
    assert statement.verdict is Verdict.NOT_MEASURED
    result = Verification(
        "relu-deq", init.inputs.summary(), {}, settled.numbers, None, settled.statements,
        settled.answers, standins(settled.numbers, None, None), init,
    )  # fmt: skip
    printed = header_lines(result)
    assert any(line.startswith("  Ling et al. 2023, Theorem 3 (ii): λ* > 0: cannot be decided "
                               "at the certified brackets") for line in printed)  # fmt: skip
    start = printed.index("  undecided at these brackets:")
    assert printed[start + 1].startswith("    Theorem 3 (ii): λ* > 0 (K strictly positive")
    assert any(line.startswith("    why: the brackets cannot be") for line in printed[start:])


def _theorem2(init: Toy):
    """Theorem 2's statements as verify makes them at n = 10, m = 40 000, λ_0 = 2971, t = 0.01,
    λ* = ``init.lam``: its width hypotheses, then λ_0 ≥ mλ*/2 guarded by them."""
    n, m, lambda0 = 10, 40_000, 2971.0
    scale = theorem2_scale(n, init.lam, 0.01)
    given = [network.theorem2_width(n, m), network.theorem2_scale(m, scale, t=0.01)]
    check = network.theorem2(lambda0, m * init.lam / 2, given, m=m, seed=0, scale=scale, t=0.01)
    return [*given, check], {"lambda_star": init.lam}


def test_a_guarded_theorem_not_monotone_in_the_bracket_is_undecided():
    """NOT APPLICABLE at both ends of λ* ∈ [0.148378, 0.148601] (below: the width hypothesis
    unmet; above: a FAIL resting on the constant the paper does not give), PASS inside: the
    corners agreeing decided NOT APPLICABLE; the theorem's check alone and the hypothesis now
    differ between them, so it is undecided."""
    verdicts = [_theorem2(Toy(lam, _toy(lam, lam).bracket))[0][-1].verdict for lam in LAMBDAS]
    assert verdicts == [Verdict.NOT_APPLICABLE, Verdict.PASS, Verdict.NOT_APPLICABLE]
    settled = precision.settle(_toy(LAMBDAS[0], LAMBDAS[-1]), _theorem2, _no_answer)
    theorem = settled.statements[-1]
    assert theorem.verdict is Verdict.NOT_MEASURED
    assert "its check alone PASS" in theorem.detail and "its check alone FAIL" in theorem.detail
    assert settled.undecided[-2].startswith("Theorem 2: λ_0 ≥ mλ*/2: NOT APPLICABLE (its check")


def test_a_guarded_theorem_decided_at_every_corner_stays_decided():
    """Both ends above the window: the hypotheses hold and the check fails throughout."""
    settled = precision.settle(_toy(0.1487, 0.1488), _theorem2, _no_answer)
    assert settled.statements[-1].verdict is Verdict.NOT_APPLICABLE and settled.undecided == []


#: λ* below, inside and above the window where Theorem 2 PASSes (n = 10, m = 40 000).
LAMBDAS = (0.148378, 0.148482, 0.148601)


def _no_answer(init: Toy, numbers: dict, statements) -> list[Answer]:
    return []
