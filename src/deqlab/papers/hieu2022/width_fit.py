"""The width a condition of the thesis needs (ours): its margin lhs/rhs taken as a power of
the width n, ``lhs/rhs ∝ n^s``, with the exponent fitted over the measured widths n ≥ 4N
(:class:`WidthFit`); the statements (:mod:`deqlab.papers.hieu2022.claims`) quote it in
their ``needs``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from deqlab._fit import linear_fit
from deqlab.statements import is_measured, number

#: Ours: the width fits of :class:`WidthFit` use only widths ``n ≥ FIT_WIDTH_FACTOR · N``.
FIT_WIDTH_FACTOR = 4


@dataclass(frozen=True)
class WidthFit:
    """``log(lhs/rhs) ≈ slope · log n + intercept``, least squares over ``widths``.

    The scaling assumption behind the width a condition needs: its margin ``lhs/rhs`` is a
    power of the width, with the exponent measured on the run's widths ``n ≫ N`` (ours:
    ``n ≥ 4N``). Near ``n = N``, ``σ_min(Z(0))`` (λ₀) is near zero and grows much faster
    than any power law far from it, so those widths would dominate the slope.
    """

    widths: tuple[int, ...]
    slope: float
    intercept: float

    @classmethod
    def of(
        cls, widths: Sequence[int], ratios: Sequence[float], *, n_samples: int = 1
    ) -> WidthFit | None:
        """The fit over the widths ``≥ FIT_WIDTH_FACTOR · n_samples``, or None for fewer
        than two such widths or a ratio there that is not finite and > 0."""
        kept = [
            (n, r) for n, r in zip(widths, ratios, strict=True) if n >= FIT_WIDTH_FACTOR * n_samples
        ]
        if len(kept) < 2 or not all(is_measured(r) and r > 0 for _, r in kept):
            return None
        logs = [math.log(n) for n, _ in kept]
        slope, intercept, _ = linear_fit(logs, [math.log(r) for _, r in kept])
        return cls(tuple(n for n, _ in kept), slope, intercept)

    def needs(self) -> str:
        """The width at which the fitted ``lhs/rhs`` reaches 1, with the assumption."""
        fitted = (
            f"lhs/rhs ∝ n^{self.slope:.2f} as fitted over n = {_list(self.widths)} "
            f"(widths n ≥ {FIT_WIDTH_FACTOR}N only)"
        )
        if self.slope <= 0:
            return f"no width: {fitted}, which does not grow with n"
        log_n = -self.intercept / self.slope
        return f"n ≥ {number(log_n, log=True)}, if {fitted}"


def _list(widths: Sequence[int]) -> str:
    return ", ".join(str(n) for n in widths)
