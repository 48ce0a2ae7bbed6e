"""The least-squares line, for the rates and the width fits the claims read off a run."""

from __future__ import annotations

import math
from collections.abc import Sequence


def linear_fit(x: Sequence[float], y: Sequence[float]) -> tuple[float, float, float]:
    """Least-squares line ``y ≈ slope·x + intercept``; returns ``(slope, intercept, r2)``.

    ``r2 = 1 − SS_res / SS_tot`` (1 when ``y`` is constant and fitted exactly).
    """
    n = len(x)
    if n != len(y) or n < 2:
        raise ValueError(f"`x` and `y` must have the same length >= 2; got {n} and {len(y)}")
    mx, my = math.fsum(x) / n, math.fsum(y) / n
    sxx = math.fsum((a - mx) ** 2 for a in x)
    if sxx == 0:
        raise ValueError("`x` must not be constant")
    slope = math.fsum((a - mx) * (b - my) for a, b in zip(x, y, strict=True)) / sxx
    intercept = my - slope * mx
    ss_res = math.fsum((b - slope * a - intercept) ** 2 for a, b in zip(x, y, strict=True))
    ss_tot = math.fsum((b - my) ** 2 for b in y)
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else 1.0
    return slope, intercept, r2
