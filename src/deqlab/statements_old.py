"""One type for a checked statement of a paper, from theory to report.

A :class:`Statement` says where it comes from (:class:`Source`: paper and theorem /
equation / figure, with the paper's words for observations), what kind it is
(:class:`Kind`), what was measured, what was expected, the margin, and a :class:`Verdict`.
Verdicts are measurements: a statement is PASS only if it was measured and could have
failed; no data gives NOT MEASURED; a theorem whose hypotheses were measured not to hold
is NOT APPLICABLE, with the failing hypothesis, by how much, and what would satisfy it.

The builders :func:`measure` (one number against a threshold) and :func:`theorem`
(a :func:`measure` guarded by hypothesis statements) are the only places verdicts are
decided, so every statement of every experiment follows the same rules.
"""

from __future__ import annotations

import enum
import itertools
import math
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: Short citation of each paper the project reproduces, by key.
PAPERS: Mapping[str, str] = {
    "ling2023": "Ling, Xie, Wang, Zhang & Lin, Global convergence of over-parameterized "
    "deep equilibrium models (AISTATS 2023)",
    "kawaguchi2021": "Kawaguchi, On the theory of implicit deep learning: global "
    "convergence with implicit layers (ICLR 2021)",
    "hieu2022": "Nguyen Ngoc Hieu, An analysis of applying neural tangent kernels for deep "
    "equilibrium models (thesis, VNU University of Engineering and Technology, 2022)",
    "ours": "deqlab (ours: not a statement of the papers)",
}


class Kind(enum.Enum):
    """What a statement is: a proven result, a condition of one, an observation, or ours."""

    THEOREM = "theorem"
    HYPOTHESIS = "hypothesis"
    OBSERVATION = "observation"
    OURS = "ours"


class Verdict(enum.Enum):
    """The outcome of checking a statement (hypotheses hold or are unmet; never PASS/FAIL)."""

    PASS = "PASS"
    FAIL = "FAIL"
    NOT_APPLICABLE = "NOT APPLICABLE"
    NOT_MEASURED = "NOT MEASURED"
    HOLDS = "HOLDS"
    UNMET = "UNMET"


#: The verdicts each kind may receive (DESIGN: statements and verdicts).
ALLOWED: Mapping[Kind, frozenset[Verdict]] = {
    Kind.THEOREM: frozenset(
        {Verdict.PASS, Verdict.FAIL, Verdict.NOT_APPLICABLE, Verdict.NOT_MEASURED}
    ),
    Kind.HYPOTHESIS: frozenset({Verdict.HOLDS, Verdict.UNMET, Verdict.NOT_MEASURED}),
    Kind.OBSERVATION: frozenset({Verdict.PASS, Verdict.FAIL, Verdict.NOT_MEASURED}),
    Kind.OURS: frozenset({Verdict.PASS, Verdict.FAIL, Verdict.NOT_MEASURED}),
}

#: value RELATION threshold, for the relations a statement may assert.
RELATIONS: Mapping[str, Callable[[float, float], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


@dataclass(frozen=True)
class Source:
    """Where a statement comes from: ``paper`` (a key of :data:`PAPERS`), its location
    (``"Theorem 1 (iii)"``, ``"Eq. (10)"``, ``"Figure 1, Section 5"``), and for
    observations the paper's own words."""

    paper: str
    location: str = ""
    quote: str = ""

    def __post_init__(self) -> None:
        if self.paper not in PAPERS:
            raise ValueError(f"`paper` must be one of {', '.join(PAPERS)}; got {self.paper!r}")

    @property
    def citation(self) -> str:
        """``"Ling et al. 2023, Theorem 1 (iii)"``-like short form; ``"ours"`` for ours."""
        if self.paper == "ours":
            return "ours"
        short = {"ling2023": "Ling et al. 2023", "kawaguchi2021": "Kawaguchi 2021"}
        name = short.get(self.paper, "Hieu 2022 (thesis)")
        return f"{name}, {self.location}" if self.location else name


OURS = Source("ours")


@dataclass(frozen=True)
class Statement:
    """A checked statement: name, kind, source, verdict, and what was measured against what.

    ``value`` is the one number the verdict was decided on (``None`` when nothing was
    measured), ``relation``/``threshold`` what it had to satisfy, and ``margin`` the signed
    distance to failure in the units of ``value`` (≥ 0 satisfied, < 0 violated). ``needs``
    says what would satisfy an unmet hypothesis or make a theorem applicable (e.g. "m ≥
    3.2·10⁹"); ``detail`` anything else a reader needs (widths, failing hypotheses).
    """

    name: str
    kind: Kind
    source: Source
    verdict: Verdict
    measured: str
    expected: str
    value: float | None = None
    relation: str = ""
    threshold: float | None = None
    detail: str = ""
    needs: str = ""

    def __post_init__(self) -> None:
        if self.verdict not in ALLOWED[self.kind]:
            raise ValueError(
                f"{_article(self.kind.value)} {self.kind.value} statement cannot be "
                f"{self.verdict.value}; "
                f"allowed: {', '.join(sorted(v.value for v in ALLOWED[self.kind]))}"
            )
        if self.kind is Kind.OURS and self.source.paper != "ours":
            raise ValueError(f"statement {self.name!r} of kind 'ours' must cite Source('ours')")

    @property
    def margin(self) -> float | None:
        """``threshold − value`` for < and <=, ``value − threshold`` for > and >=."""
        if self.value is None or self.threshold is None or not math.isfinite(self.value):
            return None
        if self.relation in ("<", "<="):
            return self.threshold - self.value
        return self.value - self.threshold

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form (the one summary.json, the report and ``--json`` use)."""
        return {
            "name": self.name,
            "kind": self.kind.value,
            "paper": self.source.paper,
            "location": self.source.location,
            "quote": self.source.quote,
            "citation": self.source.citation,
            "verdict": self.verdict.value,
            "measured": self.measured,
            "expected": self.expected,
            "value": _json_number(self.value),
            "relation": self.relation,
            "threshold": _json_number(self.threshold),
            "margin": _json_number(self.margin),
            "detail": self.detail,
            "needs": self.needs,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Statement:
        """Inverse of :meth:`as_dict` (raises ValueError naming a missing or bad field)."""
        try:
            return cls(
                name=str(data["name"]),
                kind=Kind(data["kind"]),
                source=Source(data["paper"], data.get("location", ""), data.get("quote", "")),
                verdict=Verdict(data["verdict"]),
                measured=str(data["measured"]),
                expected=str(data["expected"]),
                value=_from_json_number(data.get("value")),
                relation=str(data.get("relation", "")),
                threshold=_from_json_number(data.get("threshold")),
                detail=str(data.get("detail", "")),
                needs=str(data.get("needs", "")),
            )
        except KeyError as err:
            raise ValueError(f"a statement must have the field {err.args[0]!r}") from None


def _article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def _json_number(x: float | None) -> float | str | None:
    if x is None:
        return None
    return float(x) if math.isfinite(x) else str(x)


def _from_json_number(x: object) -> float | None:
    return None if x is None else float(x)  # float("inf"), float("nan") read back


def is_measured(value: object) -> bool:
    """True for a finite real number (``None``, NaN, ±inf and non-numbers are unmeasured)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def measure(
    name: str,
    kind: Kind,
    source: Source,
    *,
    value: float | None,
    relation: str,
    threshold: float,
    measured: str,
    expected: str,
    detail: str = "",
    needs: str = "",
) -> Statement:
    """The statement ``value relation threshold``, decided on the measured ``value``.

    A missing or non-finite ``value`` gives NOT MEASURED (never PASS). Hypotheses get
    HOLDS / UNMET; ``needs`` (what would satisfy it) is kept only when it is unmet.
    """
    if relation not in RELATIONS:
        raise ValueError(f"`relation` must be one of {', '.join(RELATIONS)}; got {relation!r}")
    if not is_measured(value):
        verdict = Verdict.NOT_MEASURED
        value = None
    else:
        holds = RELATIONS[relation](float(value), threshold)
        if kind is Kind.HYPOTHESIS:
            verdict = Verdict.HOLDS if holds else Verdict.UNMET
        else:
            verdict = Verdict.PASS if holds else Verdict.FAIL
    keep_needs = kind is Kind.HYPOTHESIS and verdict is Verdict.UNMET
    return Statement(
        name, kind, source, verdict, measured, expected,
        value=None if value is None else float(value), relation=relation,
        threshold=threshold, detail=detail, needs=needs if keep_needs else "",
    )  # fmt: skip


def not_measured(name: str, kind: Kind, source: Source, *, expected: str, why: str) -> Statement:
    """A statement for which the run has no data; ``why`` says what is missing."""
    return Statement(name, kind, source, Verdict.NOT_MEASURED, "—", expected, detail=why)


def theorem(check: Statement, hypotheses: Sequence[Statement]) -> Statement:
    """A theorem ``check`` that applies only where every one of ``hypotheses`` holds.

    Any UNMET hypothesis makes it NOT APPLICABLE (the measurement is kept; the detail names
    each unmet hypothesis, reported with its margin in its own statement, and ``needs``
    gathers what would satisfy them); a
    NOT MEASURED hypothesis leaves the theorem NOT MEASURED unless it was already.
    """
    if check.kind is not Kind.THEOREM:
        raise ValueError(f"`check` must be a theorem statement; got {check.kind.value}")
    if any(h.kind is not Kind.HYPOTHESIS for h in hypotheses):
        raise ValueError("`hypotheses` must all be hypothesis statements")
    unmet = [h for h in hypotheses if h.verdict is Verdict.UNMET]
    unknown = [h for h in hypotheses if h.verdict is Verdict.NOT_MEASURED]
    if unmet:
        why = "hypotheses unmet (margins in their own rows): " + "; ".join(h.name for h in unmet)
        needs = "; ".join(h.needs for h in unmet if h.needs)
        return _replace(check, Verdict.NOT_APPLICABLE, why, needs)
    if unknown and check.verdict is not Verdict.NOT_MEASURED:
        why = "; ".join(f"{h.name} not measured" for h in unknown)
        return _replace(check, Verdict.NOT_MEASURED, why, "")
    return check


def _replace(check: Statement, verdict: Verdict, why: str, needs: str) -> Statement:
    detail = f"{why}. {check.detail}".strip() if check.detail else why
    return Statement(
        check.name, check.kind, check.source, verdict, check.measured, check.expected,
        value=check.value, relation=check.relation, threshold=check.threshold,
        detail=detail, needs=needs,
    )  # fmt: skip


def strictly_increasing(values: Iterable[float]) -> bool:
    """True when each value is larger than the one before (ties and NaNs are not)."""
    return all(a < b for a, b in itertools.pairwise(values))


def min_step_gap(values: Sequence[float]) -> float | None:
    """``min_i (v[i+1] − v[i])``: > 0 iff strictly increasing; ``None`` for < 2 values.

    The number an "increases with …" statement is decided on, so a tie (gap 0) or a
    reversal (gap < 0) fails it and a NaN leaves it unmeasured.
    """
    if len(values) < 2:
        return None
    return min(b - a for a, b in itertools.pairwise(values))


@dataclass(frozen=True)
class Counts:
    """Verdicts by kind, for the report header, summary.json and the CLI."""

    by_kind: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    @classmethod
    def of(cls, statements: Iterable[Statement]) -> Counts:
        table: dict[str, dict[str, int]] = {}
        for s in statements:
            row = table.setdefault(s.kind.value, {})
            row[s.verdict.value] = row.get(s.verdict.value, 0) + 1
        return cls(table)

    def count(self, kind: Kind, *verdicts: Verdict) -> int:
        row = self.by_kind.get(kind.value, {})
        return sum(row.get(v.value, 0) for v in verdicts) if verdicts else sum(row.values())

    @property
    def failed(self) -> int:
        """Statements with verdict FAIL (``deqlab reproduce --strict`` exits non-zero)."""
        return sum(row.get(Verdict.FAIL.value, 0) for row in self.by_kind.values())

    def sentence(self) -> str:
        """E.g. "paper observations: 5 of 6 reproduced; theorems: 3 checked (3 pass), 2 not
        applicable; hypotheses: 1 of 3 hold; ours: 2 of 2 pass"."""
        parts = []
        observed = self.count(Kind.OBSERVATION)
        if observed:
            parts.append(
                f"paper observations: {self.count(Kind.OBSERVATION, Verdict.PASS)} of "
                f"{observed} reproduced" + self._unmeasured(Kind.OBSERVATION)
            )
        if self.count(Kind.THEOREM):
            checked = self.count(Kind.THEOREM, Verdict.PASS, Verdict.FAIL)
            passed = self.count(Kind.THEOREM, Verdict.PASS)
            parts.append(
                f"theorems: {checked} checked ({passed} pass), "
                f"{self.count(Kind.THEOREM, Verdict.NOT_APPLICABLE)} not applicable"
                + self._unmeasured(Kind.THEOREM)
            )
        if self.count(Kind.HYPOTHESIS):
            parts.append(
                f"hypotheses: {self.count(Kind.HYPOTHESIS, Verdict.HOLDS)} of "
                f"{self.count(Kind.HYPOTHESIS)} hold (margins shown)"
            )
        if self.count(Kind.OURS):
            parts.append(
                f"ours: {self.count(Kind.OURS, Verdict.PASS)} of {self.count(Kind.OURS)} pass"
                + self._unmeasured(Kind.OURS)
            )
        return "; ".join(parts) or "no statements"

    def _unmeasured(self, kind: Kind) -> str:
        n = self.count(kind, Verdict.NOT_MEASURED)
        return f", {n} not measured" if n else ""

    def as_dict(self) -> dict[str, dict[str, int]]:
        return {kind: dict(row) for kind, row in self.by_kind.items()}
