"""Paper versus run: each experiment's paper setting, and the deviations of a run from it.

An experiment declares, for every field of its config, what the paper used
(:func:`paper`), that the paper gives no value and we chose one (:func:`not_given`), or
that the field only says how we measure and does not change the run (:func:`measurement`).
:func:`deviations` compares a resolved config with that declaration: every substitution,
every changed size and every value we chose is listed, so no report hides a difference.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from deqlab._format import number

#: Kinds of declaration (PaperValue.role).
PAPER, NOT_GIVEN, MEASUREMENT = "paper", "not given", "measurement"


@dataclass(frozen=True)
class PaperValue:
    """What the paper says about one config field.

    ``role``: ``"paper"`` (``value`` is the paper's, given at ``where``), ``"not given"``
    (the paper gives none; ``where`` may say what it does say), ``"measurement"`` (how
    often or how precisely we measure; not part of the paper's setting). ``substitute``
    marks a field whose differing value is a stand-in (a data set, a model construction).
    """

    role: str
    value: Any = None
    where: str = ""
    substitute: bool = False


def paper(value: Any, where: str, *, substitute: bool = False) -> PaperValue:
    """The paper's ``value`` of a field, cited by ``where`` (e.g. "Section 5")."""
    return PaperValue(PAPER, value, where, substitute)


def not_given(where: str = "") -> PaperValue:
    """The paper gives no value for this field: the run's value is our choice."""
    return PaperValue(NOT_GIVEN, None, where)


def measurement() -> PaperValue:
    """A measurement setting (how often / how precisely we measure): never a deviation."""
    return PaperValue(MEASUREMENT)


@dataclass(frozen=True)
class Deviation:
    """One difference of the run from the paper: ``kind`` is ``"substitution"``,
    ``"changed"`` (a paper value the run does not use) or ``"our choice"``."""

    setting: str
    paper: str
    run: str
    kind: str
    where: str

    def as_dict(self) -> dict[str, str]:
        return dataclasses.asdict(self)


def deviations(config: Any, setting: Mapping[str, PaperValue]) -> list[Deviation]:
    """The deviations of ``config`` (a config dataclass) from the paper's ``setting``.

    Raises TypeError naming the config fields that ``setting`` does not declare, and the
    declared names that are not fields: every field must say what the paper used.
    """
    fields = [f.name for f in dataclasses.fields(config)]
    undeclared = [name for name in fields if name not in setting]
    unknown = [name for name in setting if name not in fields]
    if undeclared or unknown:
        raise TypeError(
            f"the paper setting of {type(config).__name__} must declare exactly its fields; "
            f"undeclared: {undeclared}, not fields: {unknown}"
        )
    out = []
    for name in fields:
        declared, value = setting[name], getattr(config, name)
        if declared.role == NOT_GIVEN:
            out.append(Deviation(name, "not given", show(value), "our choice", declared.where))
        elif declared.role == PAPER and not _same(value, declared.value):
            kind = "substitution" if declared.substitute else "changed"
            out.append(Deviation(name, show(declared.value), show(value), kind, declared.where))
    return out


def one_line(found: list[Deviation]) -> str:
    """E.g. "2 settings differ from the paper: n 100 (paper: 1000); …; our choice where the
    paper gives none: eta, seed"."""
    if not found:
        return "no deviations from the paper's setting"
    changed = [d for d in found if d.kind != "our choice"]
    chosen = [d.setting for d in found if d.kind == "our choice"]
    parts = []
    if changed:
        plural = "s differ" if len(changed) > 1 else " differs"
        listed = "; ".join(f"{d.setting} {d.run} (paper: {d.paper})" for d in changed)
        parts.append(f"{len(changed)} setting{plural} from the paper: {listed}")
    if chosen:
        parts.append(f"our choice where the paper gives none: {', '.join(chosen)}")
    return "; ".join(parts)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float | int) and isinstance(b, float | int):
        return math.isclose(a, b, rel_tol=1e-12, abs_tol=0.0)
    return a == b


def show(value: Any) -> str:
    """A config value as the tables write it ("0.01, 0.005", "sphere")."""
    if isinstance(value, list | tuple):
        return ", ".join(show(v) for v in value)
    return number(value, 6) if isinstance(value, float) else str(value)
