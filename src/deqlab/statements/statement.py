"""A checked statement: its kind, its source in a paper, its verdict and its margin.

:class:`Statement` is the one type every experiment, ``deqlab verify`` and the report use;
:class:`Source` cites a paper by the key of its :class:`~deqlab.statements.Paper` record
(the records register themselves here when they are created, see :mod:`deqlab.papers`).
"""

from __future__ import annotations

import enum
import math
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deqlab.statements.paper import Paper


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

#: The key of the project itself, for the statements it adds (kind OURS).
OURS_KEY = "ours"

#: Every :class:`Paper` by key (a record registers itself when it is created).
_PAPERS: dict[str, Paper] = {}


def register(paper: Paper) -> None:
    """Record ``paper`` under its key; another record under the same key is an error."""
    known = _PAPERS.setdefault(paper.key, paper)
    if known != paper:
        raise ValueError(f"paper key {paper.key!r} is already the record of {known.full!r}")


def paper_of(key: str) -> Paper:
    """The :class:`Paper` registered under ``key`` (``deqlab.papers`` registers the papers)."""
    if key not in _PAPERS:
        raise ValueError(f"`paper` must be one of {', '.join(_PAPERS)}; got {key!r}")
    return _PAPERS[key]


@dataclass(frozen=True)
class Source:
    """Where a statement comes from: ``paper`` (a :class:`Paper` or its key; kept as the
    key), its location (``"Theorem 1 (iii)"``, ``"Eq. (10)"``, ``"Figure 1, Section 5"``),
    and for observations the paper's own words."""

    paper: str
    location: str = ""
    quote: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.paper, str):  # a Paper record
            object.__setattr__(self, "paper", self.paper.key)
        paper_of(self.paper)

    @property
    def record(self) -> Paper:
        return paper_of(self.paper)

    @property
    def citation(self) -> str:
        """``"Ling et al. 2023, Theorem 1 (iii)"``-like short form; ``"ours"`` for ours."""
        return self.record.cite(self.location)


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
        if self.kind is Kind.OURS and self.source.paper != OURS_KEY:
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
    """True for a finite real number (``None``, NaN, ±inf and non-numbers are unmeasured).

    A claim uses it to compute with numbers; a verdict decides ±inf by
    :func:`deqlab.statements.decide.measures` (an infinity that violates a bound is measured).
    """
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
