"""Verdicts counted by kind, for the report header, summary.json and the CLI."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from deqlab.statements.statement import Kind, Statement, Verdict


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
