"""Non-finite parameters and losses, told apart: a model given to a trainer that is already
not finite (a usage error, :class:`ValueError` naming the parameter) or gradient descent
that diverged (:class:`DivergenceError` naming the step and the learning rate)."""

from __future__ import annotations

from collections.abc import Iterable

import torch


class DivergenceError(FloatingPointError):
    """Gradient descent diverged: the loss or a parameter stopped being finite.

    The message names the step, the learning rate and what stopped being finite.
    """


def non_finite_parameter(
    named: Iterable[tuple[str, torch.Tensor]],
) -> tuple[str, int, int] | None:
    """``(name, bad entries, entries)`` of the first parameter with a NaN or ±Inf entry."""
    for name, tensor in named:
        finite = torch.isfinite(tensor.detach())
        if not bool(finite.all()):
            return name, int((~finite).sum()), tensor.numel()
    return None


def describe_parameter(found: tuple[str, int, int], owner: str) -> str:
    """E.g. ``parameter `W` of the ReLUDEQ is not finite (20 of 400 entries NaN/Inf)``."""
    name, bad, total = found
    return f"parameter `{name}` of the {owner} is not finite ({bad} of {total} entries NaN/Inf)"


def check_parameters(named: Iterable[tuple[str, torch.Tensor]], owner: str) -> None:
    """Raise ValueError naming the first non-finite parameter of a model given to a trainer."""
    found = non_finite_parameter(named)
    if found is not None:
        raise ValueError(
            f"{describe_parameter(found, owner)} before training; the trainer needs finite "
            "parameters"
        )


def diverged(step: int, lr: float, what: str, last_loss: tuple[int, float] | None) -> str:
    """The message of a :class:`DivergenceError` at ``step`` with learning rate ``lr``."""
    last = "" if last_loss is None else f"; the last finite loss was {last_loss[1]:.6g} at step "
    last += "" if last_loss is None else f"{last_loss[0]}"
    return (
        f"the loss diverged at step {step} with learning rate lr = {lr:g}: {what}{last}; "
        "lower the learning rate"
    )
