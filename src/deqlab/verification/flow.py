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
        eta, eta_source = _default_eta(check, init)
    run = check.train(init, train, eta, progress) if train else None

    def evaluate(at) -> tuple[list[Statement], dict[str, Any]]:
        found, numbers = check.statements(at, eta), check.numbers(at, eta)
        if run is None:
            return found, numbers
        more, trained = check.on_run(at, run, eta)  # at the corners too
        return _unique([*found, *more]), {**numbers, TRAINING: trained}

    def training_of(numbers: dict[str, Any]) -> dict[str, Any] | None:
        trained = numbers.get(TRAINING)
        return None if trained is None else {**trained, "eta_source": eta_source}

    def answer(at, numbers: dict[str, Any], statements: list[Statement]):
        return check.answers(at, numbers, training_of(numbers), statements)

    def refine(at, width: float):
        return check.refine(at, width, progress, device)

    settled = precision.settle(init, evaluate, answer, refine)
    training = training_of(settled.numbers)
    numbers = {k: v for k, v in settled.numbers.items() if k != TRAINING}
    return Outcome(settled.init, eta, settled.statements, numbers, training, run, settled.answers)


#: Where the training's numbers travel with the numbers through the corners.
TRAINING = "training"


def _default_eta(check: Check, init: Any) -> tuple[float, str]:
    """The model's default step size and why, the least over the estimates and the corners of
    ``init``'s brackets (a bound on η there holds wherever the eigenvalues lie in them)."""
    eta, why = check.default_eta(init)
    for corner in precision.corners(init.brackets()):
        try:
            found, said = check.default_eta(init.at(corner))
        except ValueError:  # no default there: the estimate's stands
            continue
        if found < eta:
            eta, why = found, f"{said}, its least over the certified brackets"
    return eta, why


def _unique(statements: list[Statement]) -> list[Statement]:
    """One statement per name, the last one measured (training supersedes initialization),
    in the order names first appear."""
    return list({s.name: s for s in statements}.values())  # a key keeps its first place
