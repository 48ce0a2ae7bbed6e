"""The cases of a claim (tests/test_papers_claims.py): a call where it passes, one where it
must not."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from deqlab.statements import Verdict


@dataclass(frozen=True)
class Call:
    """The arguments of one call of a claim."""

    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)

    def __call__(self, claim: Callable[..., Any]) -> Any:
        return claim(*self.args, **self.kwargs)


def call(*args: Any, **kwargs: Any) -> Call:
    return Call(args, kwargs)


@dataclass(frozen=True)
class Case:
    """A call where the claim passes (every statement PASS or HOLDS) and one where it does
    not: a statement ``fails_as`` (FAIL, or UNMET for a hypothesis; NOT APPLICABLE for a
    theorem a rule of deqlab.statements keeps from failing). ``exists``: the claim says
    "at some point", so a PASS beside a missing value stays PASS (and a FAIL needs them all).
    """

    passing: Call
    failing: Call
    fails_as: Verdict | None = None
    exists: bool = False
