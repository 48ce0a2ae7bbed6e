"""Constraints declared on config fields, checked once whenever a config is built.

A config dataclass declares what each field may hold beside its type, the way
scikit-learn's estimators declare ``_parameter_constraints``::

    @dataclass(frozen=True)
    class Fig1Config(Config):
        widths: tuple[int, ...] = (1000, 2000)
        n: int = 1000
        eta: float | None = None

        constraints: ClassVar = {
            "widths": (NONEMPTY, Interval(1), INCREASING),
            "n": Interval(2),
            "eta": POSITIVE,
        }

:class:`Config` (the base of every experiment config) checks them in ``__post_init__``, so
a preset, a TOML file, ``--set`` and ``Config(...)`` in Python are all refused alike, with
one line naming the field, what it must be and what it got. ``constraints`` are merged
over the bases, so a shared block of fields (``deqlab.experiments.blocks``) brings its
own. A value constraint (:class:`Interval`, :class:`OneOf`) applies to each element of a
tuple field; ``None`` (an optional field left unset) satisfies every constraint.
"""

from __future__ import annotations

import itertools
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from deqlab.experiments.config import ConfigError, coerce_value, field_types

Bound = float | str | None


class Constraint(ABC):
    """What a field's value must satisfy; :meth:`why_not` says how it does not."""

    #: True: checked on each element of a tuple field (a value constraint).
    elementwise: ClassVar[bool] = False

    @abstractmethod
    def why_not(self, value: Any, config: Any) -> str | None:
        """``None`` when ``value`` (of ``config``) satisfies the constraint, else the
        phrase completing "`key` must …; got …" (e.g. ``"be >= 2"``)."""


@dataclass(frozen=True)
class Interval(Constraint):
    """``low ≤ value ≤ high`` (``closed``: "both", "left", "right" or "neither" end
    included). A bound may name another field (``Interval("n_samples")``: at least the
    config's ``n_samples``); ``None`` is unbounded."""

    low: Bound = None
    high: Bound = None
    closed: str = "both"

    elementwise: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if self.closed not in ("both", "left", "right", "neither"):
            raise ValueError(f"`closed` must be both, left, right or neither; got {self.closed!r}")

    def why_not(self, value: Any, config: Any) -> str | None:
        low, high = _bound(self.low, config), _bound(self.high, config)
        left_in, right_in = self.closed in ("both", "left"), self.closed in ("both", "right")
        too_low = low is not None and (value < low if left_in else value <= low)
        too_high = high is not None and (value > high if right_in else value >= high)
        if not (too_low or too_high) and not (isinstance(value, float) and math.isnan(value)):
            return None
        low_text, high_text = _bound_text(self.low, low), _bound_text(self.high, high)
        if isinstance(value, int) and high is None:  # "`n` must be >= 2" (counts, sizes)
            return f"be {'>=' if left_in else '>'} {low_text}"
        if isinstance(value, int) and low is None:
            return f"be {'<=' if right_in else '<'} {high_text}"
        left = "(-inf" if low is None else f"{'[' if left_in else '('}{low_text}"
        right = "inf)" if high is None else f"{high_text}{']' if right_in else ')'}"
        return f"be in {left}, {right}"


def _bound(bound: Bound, config: Any) -> float | None:
    return getattr(config, bound) if isinstance(bound, str) else bound


def _bound_text(bound: Bound, value: float | None) -> str:
    if value is None:
        return ""
    shown = str(value) if isinstance(value, int) else f"{value:g}"
    return f"{bound} = {shown}" if isinstance(bound, str) else shown


#: A value > 0 (a tolerance, a step size, a standard deviation).
POSITIVE = Interval(0.0, None, "neither")
#: A value >= 0 (a noise level, a count that may be 0, a period where 0 means never).
NONNEGATIVE = Interval(0.0)
#: A probability-like fraction in (0, 1).
FRACTION = Interval(0.0, 1.0, "neither")
#: A random seed: an int >= 0 (the type check keeps it below 2**63).
SEED = Interval(0)


@dataclass(frozen=True)
class OneOf(Constraint):
    """One of ``choices`` (the message lists them)."""

    choices: tuple[str, ...]

    elementwise: ClassVar[bool] = True

    def __init__(self, choices: Iterable[str]) -> None:
        object.__setattr__(self, "choices", tuple(choices))

    def why_not(self, value: Any, config: Any) -> str | None:
        if value in self.choices:
            return None
        return f"be one of {', '.join(repr(c) for c in self.choices)}"


@dataclass(frozen=True)
class Increasing(Constraint):
    """Strictly increasing (so no value repeats): a sweep whose values name its tasks."""

    def why_not(self, value: Any, config: Any) -> str | None:
        ok = all(a < b for a, b in itertools.pairwise(value))
        return None if ok else "be strictly increasing"


@dataclass(frozen=True)
class Distinct(Constraint):
    """No value twice: each value names a task, and two equal tasks would share one
    checkpoint and write their rows twice."""

    def why_not(self, value: Any, config: Any) -> str | None:
        repeated = sorted({repr(v) for v in value if list(value).count(v) > 1})
        if not repeated:
            return None
        return f"not repeat a value (each names a task; repeated: {', '.join(repeated)})"


@dataclass(frozen=True)
class Length(Constraint):
    """At least ``low`` values (and at most ``high`` when given)."""

    low: int = 1
    high: int | None = None

    def why_not(self, value: Any, config: Any) -> str | None:
        if len(value) >= self.low and (self.high is None or len(value) <= self.high):
            return None
        if self.high is None:
            return f"hold at least {self.low} value{'s' if self.low > 1 else ''}"
        return f"hold {self.low} to {self.high} values"


INCREASING = Increasing()
DISTINCT = Distinct()
NONEMPTY = Length(1)


@dataclass(frozen=True)
class Rule(Constraint):
    """A relation between fields: ``holds(config)`` is True, else "`key` must ``text``"
    (e.g. ``Rule(lambda c: (c.n_train == 0) == (c.n_test == 0), "be 0 exactly when
    n_test is 0")``); ``text`` may be a function of the config, for a bound it computes
    (``lambda c: f"be 0 or >= d + k = {2 * c.d}"``)."""

    holds: Callable[[Any], bool]
    text: str | Callable[[Any], str]

    def why_not(self, value: Any, config: Any) -> str | None:
        if self.holds(config):
            return None
        return self.text if isinstance(self.text, str) else self.text(config)


def declared(config_cls: type) -> dict[str, tuple[Constraint, ...]]:
    """The constraints of ``config_cls`` merged over its bases (a base's come first)."""
    merged: dict[str, tuple[Constraint, ...]] = {}
    for klass in reversed(config_cls.__mro__):
        for key, found in vars(klass).get("constraints", {}).items():
            found = found if isinstance(found, tuple) else (found,)
            merged[key] = (*merged.get(key, ()), *found)
    return merged


def check_constraints(config: Any) -> None:
    """Raise TypeError for a field of ``config`` whose value is not of its annotated type,
    and :class:`ConfigError` (a ValueError) with one line for the first field that breaks
    a declared constraint ("`widths` must be strictly increasing; got [64, 64]")."""
    types = field_types(type(config))
    constraints = declared(type(config))
    unknown = sorted(set(constraints) - set(types))
    if unknown:
        raise TypeError(f"{type(config).__name__} declares constraints on non-fields {unknown}")
    for key, tp in types.items():
        value = getattr(config, key)
        try:
            coerce_value(key, value, tp)
        except ConfigError as err:
            raise TypeError(str(err)) from None
        if value is None:
            continue
        for constraint in constraints.get(key, ()):
            items = value if constraint.elementwise and isinstance(value, tuple) else (value,)
            for item in items:
                why = constraint.why_not(item, config)
                if why is not None:
                    shown = list(value) if isinstance(value, tuple) else value
                    got = item if item is not value else shown
                    raise ConfigError(f"`{key}` must {why}; got {_show(got)}", key=key)


def _show(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else repr(value)


@dataclass(frozen=True)
class Config:
    """The base of every experiment config: checks the declared ``constraints`` on
    creation. A subclass with its own ``__post_init__`` calls ``super().__post_init__()``."""

    constraints: ClassVar[Mapping[str, Constraint | tuple[Constraint, ...]]] = {}

    def __post_init__(self) -> None:
        check_constraints(self)
