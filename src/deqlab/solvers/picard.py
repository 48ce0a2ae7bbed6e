"""Damped Picard (fixed-point) iteration ``z ← z + β (f(z) - z)`` (Hieu 2022, §2.1.2)."""

from __future__ import annotations

from dataclasses import dataclass

from deqlab._checks import check_real
from deqlab.solvers.base import Solver, StatelessStep
from deqlab.solvers.solution import register


@register("picard")
@dataclass(frozen=True, kw_only=True)
class Picard(Solver):
    """Damped fixed-point iteration; converges linearly at rate ``1 - β(1 - ρ)`` on a
    contraction of rate ``ρ``.

    Args:
        damping: step size ``β`` in ``(0, 1]``.
        (others: see :class:`deqlab.solvers.base.Solver`)
    """

    damping: float = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        check_real("damping", self.damping, low=0.0, high=1.0, low_inclusive=False)

    def stepper(self) -> StatelessStep:
        """``z + β(f(z) − z)``; no state."""
        if self.damping == 1.0:
            return StatelessStep(lambda z, fz, g: fz)
        return StatelessStep(lambda z, fz, g: z + self.damping * (fz - z if g is None else g))
