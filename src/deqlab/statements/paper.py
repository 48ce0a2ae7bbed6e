"""A paper's record, the only place it is named, and the builders of its statements.

``LING.theorem("Theorem 1 (i)", name=…, value=…, relation="<", threshold=1.0,
measured=…, given=hypotheses)`` is :func:`~deqlab.statements.decide.measure` and
:func:`~deqlab.statements.decide.theorem` with the paper, the kind and the source bound.
The records of the papers deqlab reproduces are in :mod:`deqlab.papers`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from deqlab.statements.decide import Measurement, measure, not_measured, theorem
from deqlab.statements.statement import OURS_KEY, Kind, Source, Statement, register

if TYPE_CHECKING:
    from typing_extensions import Unpack


@dataclass(frozen=True)
class Paper:
    """A paper: ``key`` (``"ling2023"``, also its folder under ``experiments/``), ``short``
    citation (``"Ling et al. 2023"``) and ``full`` citation (authors, title, venue).

    The only place a paper is named. Its builders make statements cited to it:
    :meth:`theorem`, :meth:`hypothesis`, :meth:`observation` and :meth:`not_measured`
    take the location in the paper first and the measurement as keywords
    (:class:`Measurement`, passed on to :func:`measure`; an unknown keyword is a TypeError).
    """

    key: str
    short: str
    full: str

    def __post_init__(self) -> None:
        if not self.key.isidentifier():
            raise ValueError(f"`Paper.key` must be a Python identifier; got {self.key!r}")
        register(self)

    def cite(self, location: str = "") -> str:
        """``"Ling et al. 2023, Theorem 1 (iii)"``; just ``"ours"`` for ours."""
        if self.key == OURS_KEY or not location:
            return self.short
        return f"{self.short}, {location}"

    def source(self, location: str = "", quote: str = "") -> Source:
        return Source(self.key, location, quote)

    def theorem(
        self,
        location: str,
        *,
        name: str,
        given: Sequence[Statement] = (),
        quote: str = "",
        **measurement: Unpack[Measurement],
    ) -> Statement:
        """A proven statement at ``location`` decided on its measurement (:func:`measure`),
        NOT APPLICABLE where one of ``given`` (its hypotheses) is unmet (:func:`theorem`)."""
        check = measure(name, Kind.THEOREM, self.source(location, quote), **measurement)
        return theorem(check, given)

    def hypothesis(
        self, location: str, *, name: str, quote: str = "", **measurement: Unpack[Measurement]
    ) -> Statement:
        """A condition of a theorem: HOLDS or UNMET; ``needs`` (what would satisfy it) is
        kept where it is unmet."""
        return measure(name, Kind.HYPOTHESIS, self.source(location, quote), **measurement)

    def observation(
        self, location: str, *, name: str, quote: str = "", **measurement: Unpack[Measurement]
    ) -> Statement:
        """An empirical statement of the paper's experiment, quoted (``quote``) at its location."""
        return measure(name, Kind.OBSERVATION, self.source(location, quote), **measurement)

    def not_measured(
        self, kind: Kind, location: str, *, name: str, expected: str, why: str, quote: str = ""
    ) -> Statement:
        """A statement the run has no data for; ``why`` says what is missing."""
        return not_measured(name, kind, self.source(location, quote), expected=expected, why=why)


#: The project itself, for the statements it adds (kind OURS, built with ``ours(...)``).
DEQLAB = Paper(OURS_KEY, "ours", "deqlab (ours: not a statement of the papers)")
#: The source of every statement of ours.
OURS = Source(OURS_KEY)
