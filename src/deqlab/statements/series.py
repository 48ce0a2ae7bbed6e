"""The typed measurements a paper's claims are functions of (``deqlab.papers.<key>``).

- :class:`Series`: one quantity at the consecutive points of one run (its steps, probes or
  widths), NaN where it was not measured and ±inf where it overflowed: a tuple of floats;
- :class:`Run`: one run, by its key: its steps, one :class:`Series` per quantity (aligned
  with the steps), its constants (its setting and what was measured once) and its labels.

Both drivers build them: the experiments from their tidy rows (:meth:`Run.from_rows`),
``deqlab verify`` from what it measured on the user's data. A claim reduces a series only
with :func:`~deqlab.statements.worst` or :func:`~deqlab.statements.implication`, so a
measured violation beside a NaN or inf is FAIL. :meth:`Series.extended`, :meth:`Run.extended`
(one more point whose every quantity is a given value) and :meth:`Run.blank` (the run with
nothing measured) put a missing value beside a violation, as the tests of every claim do.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

NAN = math.nan


class Series(tuple[float, ...]):
    """One quantity at consecutive points of a run: NaN where not measured, ±inf where it
    overflowed. Anything that is not a real number (None, a string) reads as NaN."""

    __slots__ = ()

    def __new__(cls, values: Iterable[object] = ()) -> Series:
        return super().__new__(cls, (_real(v) for v in values))

    def extended(self, value: float) -> Series:
        """The series with one more point, ``value``."""
        return Series((*self, value))

    def __repr__(self) -> str:
        return f"Series({list(self)!r})"


@dataclass(frozen=True)
class Run:
    """One run's measurements: ``steps`` in increasing order, and for each quantity of
    ``series`` its value at each step (a quantity measured only every so many steps is NaN
    at the others); ``constants`` (numbers of the run: its setting, what was measured once)
    and ``labels`` (its words: model, data set, why it stopped)."""

    key: str
    steps: tuple[int, ...] = ()
    series: Mapping[str, Series] = field(default_factory=dict)
    constants: Mapping[str, float] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "steps", tuple(int(s) for s in self.steps))
        object.__setattr__(self, "series", {k: Series(v) for k, v in self.series.items()})
        object.__setattr__(self, "constants", {k: _real(v) for k, v in self.constants.items()})
        for name, values in self.series.items():
            if len(values) != len(self.steps):
                raise ValueError(
                    f"series {name!r} of run {self.key!r} must have one value per step "
                    f"({len(self.steps)}); got {len(values)}"
                )

    def __getitem__(self, name: str) -> Series:
        """The series ``name`` (all NaN when the run did not record it)."""
        found = self.series.get(name)
        return found if found is not None else Series([NAN] * len(self.steps))

    def constant(self, name: str) -> float:
        """The constant ``name``, NaN when the run has none."""
        return self.constants.get(name, NAN)

    def label(self, name: str) -> str:
        return self.labels.get(name, "")

    def at(self, name: str, step: int) -> float:
        """``name`` at ``step``: NaN when the run did not record that step."""
        return self[name][self.steps.index(step)] if step in self.steps else NAN

    def points(self, name: str, *, start: int = 0) -> list[tuple[int, float]]:
        """``(step, value)`` of ``name`` at the steps ≥ ``start`` where it was due: every
        value but NaN (a quantity measured every so many steps is NaN where it was not due,
        and ±inf where it overflowed)."""
        return [
            (s, v) for s, v in zip(self.steps, self[name], strict=True) if s >= start and v == v
        ]

    def extended(self, value: float) -> Run:
        """The run with one more step after its last, every quantity ``value`` there."""
        step = self.steps[-1] + 1 if self.steps else 0
        series = {k: v.extended(value) for k, v in self.series.items()}
        return Run(self.key, (*self.steps, step), series, self.constants, self.labels)

    def blank(self, key: str) -> Run:
        """A run under ``key`` with the same steps, series and labels, nothing measured: its
        series and constants NaN."""
        series = {k: Series([NAN] * len(self.steps)) for k in self.series}
        return Run(key, self.steps, series, dict.fromkeys(self.constants, NAN), self.labels)

    @classmethod
    def from_rows(
        cls,
        key: str,
        rows: Sequence[Mapping[str, object]],
        *,
        constants: Iterable[str] = (),
        labels: Iterable[str] = (),
        step: str = "step",
    ) -> Run:
        """The run of tidy ``rows`` (one per step, column ``step``; sorted here): the
        ``constants`` and ``labels`` read from the first row, every other column a series
        (a row without it: NaN)."""
        ordered = sorted(rows, key=lambda r: int(r[step]))  # type: ignore[call-overload]
        first = ordered[0] if ordered else {}
        constants, labels = tuple(constants), tuple(labels)
        columns = dict.fromkeys(c for r in ordered for c in r)
        kept = [c for c in columns if c not in (step, *constants, *labels)]
        return cls(
            key,
            tuple(int(r[step]) for r in ordered),  # type: ignore[call-overload]
            {c: Series(r.get(c) for r in ordered) for c in kept},
            {c: _real(first.get(c)) for c in constants},
            {c: str(first.get(c, "")) for c in labels},
        )


def runs_from_rows(
    rows: Sequence[Mapping[str, object]],
    *,
    key: str = "task",
    constants: Iterable[str] = (),
    labels: Iterable[str] = (),
    step: str = "step",
) -> dict[str, Run]:
    """The rows of each value of column ``key`` as a :class:`Run`, in order of appearance."""
    grouped: dict[str, list[Mapping[str, object]]] = {}
    for row in rows:
        grouped.setdefault(str(row[key]), []).append(row)
    constants, labels = tuple(constants), tuple(labels)
    return {
        k: Run.from_rows(k, v, constants=constants, labels=(key, *labels), step=step)
        for k, v in grouped.items()
    }


def _real(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return NAN
    return float(value)
