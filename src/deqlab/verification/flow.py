"""The one flow every :class:`~deqlab.verification.checks.Check` goes through
(:func:`run_check`): measure at initialization, pick the step size (given, else the
model's default, and why: the theorem's where it applies), the paper's claims on it,
optionally train and the claims on the run, then the claims, numbers and one-line answers
(:mod:`deqlab.verification.answers`) at the best estimates and at the certified brackets'
corners (:mod:`deqlab.verification.precision`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from deqlab.statements import Statement
from deqlab.verification import answers, precision
from deqlab.verification.checks import Check
from deqlab.verification.inputs import Inputs
from deqlab.verification.progress import Progress


@dataclass(frozen=True, eq=False)
class Outcome:
    """What :func:`run_check` found (:class:`~deqlab.verification.api.Verification` is built
    from it)."""

    init: Any
    eta: float | None
    statements: list[Statement]
    numbers: dict[str, Any]
    training: dict[str, Any] | None
    run: Any
    answers: list[answers.Answer]


def run_check(
    check: Check,
    inputs: Inputs,
    *,
    seed: int,
    train: int,
    eta: float | None,
    progress: Progress,
    device: str = "cpu",
) -> Outcome:
    """The flow of the module docstring (``device``: where the ReLU DEQ's K and NTK and their
    least eigenvalues are computed; the network and its training stay on the CPU), the
    statements, numbers and answers settled at the certified brackets
    (:func:`deqlab.verification.precision.settle`)."""
    init = check.initialize(inputs, seed, progress, device)
    eta_source = "given (--eta)"
    if train and eta is None:
        eta, eta_source = check.default_eta(init)
    training, run, more = None, None, []
    if train:
        run, more, training = check.train(init, train, eta, progress)
        training = {**training, "eta_source": eta_source}

    def evaluate(at) -> tuple[list[Statement], dict[str, Any]]:
        return check.statements(at, eta), check.numbers(at, eta)

    def answer(at, numbers: dict[str, Any], statements: list[Statement]):
        return check.answers(at, numbers, training, statements)

    def refine(at, width: float):
        return check.refine(at, width, progress, device)

    settled = precision.settle(init, evaluate, answer, refine)
    found = _unique([*settled.statements, *more])
    return Outcome(settled.init, eta, found, settled.numbers, training, run, settled.answers)


def _unique(statements: list[Statement]) -> list[Statement]:
    """One statement per name, the last one measured (training supersedes initialization),
    in the order names first appear."""
    latest = {s.name: s for s in statements}
    seen: list[str] = []
    for s in statements:
        if s.name not in seen:
            seen.append(s.name)
    return [latest[name] for name in seen]
