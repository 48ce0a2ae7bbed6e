"""The registry of the papers' claims: every function from measurements to statements.

A claim is a function of a paper's package (``deqlab.papers.<key>``) that takes typed
measurements (:mod:`deqlab.statements.series`, numbers, the paper's own measurement
records) and returns a :class:`~deqlab.statements.Statement` or a list of them. It is
declared with :func:`claim`; both drivers (the experiments and ``deqlab verify``) call the
same claims, and the tests call every registered claim (:func:`deqlab.papers.claims`) on a
case where it passes, one where it fails, and that failing case with a NaN or inf beside the
violation, which must stay FAIL.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

Claim = TypeVar("Claim", bound=Callable[..., object])

_CLAIMS: dict[str, Callable[..., object]] = {}


def claim(function: Claim) -> Claim:
    """Register ``function`` as a claim under ``module.qualname`` (a decorator)."""
    _CLAIMS[qualified_name(function)] = function
    return function


def qualified_name(function: Callable[..., object]) -> str:
    """``"deqlab.papers.ling2023.claims.assumption1"``."""
    return f"{function.__module__}.{function.__qualname__}"


def registered() -> dict[str, Callable[..., object]]:
    """The claims registered so far (:func:`deqlab.papers.claims` imports every paper's)."""
    return dict(_CLAIMS)
