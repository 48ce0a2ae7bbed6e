"""The measurement the claims of Ling et al. (2023) at initialization take
(:mod:`deqlab.papers.ling2023.initialization`), and how they read it: :data:`Draws`, per
quantity of :mod:`deqlab.papers.ling2023.init_theorems` (``"W_spectral_norm"``,
``"lambda0"``, …) one :class:`~deqlab.statements.Run` whose points are the draws (widths m,
seeds, depths), with the series ``measured``, ``theory``, ``m``, ``seed`` and ``depth``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from deqlab.statements import Run, is_measured

#: Per quantity, its draws.
Draws = Mapping[str, Run]
Point = dict[str, float]


def select(draws: Draws, quantity: str, **where: float) -> list[Point]:
    """The draws of ``quantity`` (``measured``, ``theory``, ``m``, ``seed``, ``depth``)
    whose columns equal ``where``."""
    run = draws.get(quantity)
    if run is None:
        return []
    keys = ("measured", "theory", "m", "seed", "depth")
    columns = zip(*(run[k] for k in keys), strict=True)
    points = [dict(zip(keys, values, strict=True)) for values in columns]
    return [p for p in points if all(p[k] == v for k, v in where.items())]


def largest_width(points: Sequence[Point]) -> int | None:
    """The largest measured width m of ``points``."""
    ms = [p["m"] for p in points if is_measured(p["m"])]
    return int(max(ms)) if ms else None


def seed_mean(points: Sequence[Point], by: str) -> tuple[list[float], list[float]]:
    """The mean of ``measured`` over seeds, grouped by ``by`` (sorted; NaN where a draw of
    the group is NaN or draws overflowed both ways, ±inf where one overflowed)."""
    keys = sorted({p[by] for p in points if is_measured(p[by])})
    means = []
    for k in keys:
        values = [p["measured"] for p in points if p[by] == k]
        both = math.inf in values and -math.inf in values
        means.append(math.nan if both else math.fsum(values) / len(values))
    return keys, means
