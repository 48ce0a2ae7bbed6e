"""The synthetic setting shared by the thesis' Chapter 3 experiments (Hieu 2022).

``hieu2022-mondeq-gd`` and ``hieu2022-gradflow`` train the monotone DEQ of Section 3.2.1,
``z* = relu(W z* + U x)`` with ``W = (1 − m) I − AᵀA + B − Bᵀ`` (Eq. 3.3), on N points
uniform on the sphere of radius √d with N(0, 1) labels, at widths n ≥ N, from entries
``A ~ N(0, σ_A²/n)``, ``B ~ N(0, σ_B²/n)``, ``U ~ N(0, σ_U²/d)``, ``u ~ N(0, σ_u²/n)``, with
balls of radii R_A, R_B, R_U, R_u around the initial parameters (Section 3.3; one R for all
four unless set apart). :class:`MonDEQSetting` holds
those fields and their constraints; :func:`build_model` builds the seeded model of a width.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch

from deqlab.experiments.base import Row
from deqlab.experiments.constraints import (
    INCREASING,
    NONEMPTY,
    POSITIVE,
    SEED,
    Config,
    Interval,
)
from deqlab.models.mondeq import MonDEQ
from deqlab.papers.hieu2022.mondeq import EQ_3_17_AS_PROVED, PARAMETERS, Inequality, inequality
from deqlab.solvers.splitting import PeacemanRachford

#: Condition 1 (Theorem 3.3.1) and Condition 2 (Theorem 3.3.5), as row-column prefixes.
CONDITION_1_KEYS = ("eq3_8", "eq3_9")
CONDITION_KEYS = ("eq3_8", "eq3_9", "eq3_16", "eq3_17", "eq3_18")

#: Ours: Eq. (3.17) as the proof of Proposition 6 needs it
#: (:func:`deqlab.papers.hieu2022.mondeq.eq_3_17_as_proved`).
AS_PROVED_KEY = "eq3_17_proof"

#: The equation each key of :data:`CONDITION_KEYS` (and :data:`AS_PROVED_KEY`) names.
CONDITION_LABELS = {
    "eq3_8": "Eq. (3.8)",
    "eq3_9": "Eq. (3.9)",
    "eq3_16": "Eq. (3.16)",
    "eq3_17": "Eq. (3.17)",
    AS_PROVED_KEY: EQ_3_17_AS_PROVED,
    "eq3_18": "Eq. (3.18)",
}

SCALES = ("sigma_A", "sigma_B", "sigma_U", "sigma_u")
RADII = tuple(f"radius_{p}" for p in PARAMETERS)


def condition(row: Row, key: str) -> Inequality:
    """Condition ``key`` (e.g. ``"eq3_16"``) at initialisation, ``lhs ≥ rhs``, from the
    columns ``<key>_lhs`` / ``<key>_rhs`` of a row of its width."""
    lhs, rhs = float(row[f"{key}_lhs"]), float(row[f"{key}_rhs"])
    return inequality(CONDITION_LABELS[key], lhs, ">=", rhs)


def has_condition(row: Row, key: str) -> bool:
    """Whether a row holds both sides of condition ``key`` (rows of older runs lack
    :data:`AS_PROVED_KEY`)."""
    return row.get(f"{key}_lhs") is not None and row.get(f"{key}_rhs") is not None


def margin(row: Row, key: str) -> float:
    """``lhs / rhs`` of condition ``key`` (≥ 1 exactly when it holds; inf for rhs ≤ 0)."""
    rhs = float(row[f"{key}_rhs"])
    return float(row[f"{key}_lhs"]) / rhs if rhs > 0 else math.inf


@dataclass(frozen=True)
class MonDEQSetting(Config):
    """N = ``n_samples`` points in dimension ``d``; monotone DEQs of the ``widths`` (all
    ``≥ N``: the thesis assumes n ≥ N) with monotonicity ``m``, balls of radius ``radius``
    (``radius_A`` … ``radius_u``, when set, the radius of one parameter's ball: the thesis
    has R_A, R_B, R_U, R_u) and the initial scales ``sigma_*``; ``seed`` draws the models,
    ``data_seed`` the data."""

    n_samples: int = 50
    d: int = 10
    widths: tuple[int, ...] = (50, 100, 200, 400)
    m: float = 0.2
    radius: float = 1.0
    radius_A: float | None = None
    radius_B: float | None = None
    radius_U: float | None = None
    radius_u: float | None = None
    sigma_A: float = 1.0
    sigma_B: float = 1.0
    sigma_U: float = 1.0
    sigma_u: float = 1.0
    tol: float = 1e-10  # relative residual of the forward and adjoint splitting solves
    seed: int = 0
    data_seed: int = 0

    constraints: ClassVar = {
        "n_samples": Interval(2),
        "d": Interval(1),
        "widths": (NONEMPTY, Interval("n_samples"), INCREASING),
        "m": POSITIVE,
        "radius": POSITIVE,
        **dict.fromkeys(RADII, POSITIVE),
        **dict.fromkeys(SCALES, POSITIVE),
        "tol": POSITIVE,
        "seed": SEED,
        "data_seed": SEED,
    }

    @property
    def radii(self) -> dict[str, float]:
        """``R_·`` of each parameter's ball (Section 3.3): ``radius_·``, else ``radius``."""
        own = {p: getattr(self, f"radius_{p}") for p in PARAMETERS}
        return {p: self.radius if r is None else r for p, r in own.items()}

    def radii_text(self) -> str:
        """``"R = 0.1"``, or ``"R_A/R_B/R_U/R_u = 0.85/0.018/0.037/0.05"`` when they differ."""
        values = list(self.radii.values())
        if len(set(values)) == 1:
            return f"R = {values[0]:g}"
        return f"R_A/R_B/R_U/R_u = {'/'.join(f'{r:g}' for r in values)}"


def build_model(config: MonDEQSetting, width: int, device: str | torch.device) -> MonDEQ:
    """The float64 monotone DEQ of ``width`` (seeded by ``seed`` and the width), solved by
    Peaceman–Rachford to ``tol``."""
    generator = torch.Generator().manual_seed(config.seed * 100_003 + width)
    solver = PeacemanRachford(tol=config.tol, max_iter=5000)
    scales = {k: getattr(config, k) for k in SCALES}
    model = MonDEQ(
        config.d,
        width,
        m=config.m,
        solver=solver,
        generator=generator,
        dtype=torch.float64,
        **scales,
    )
    return model.to(device)
