"""The pass and fail cases of Hieu (2022)'s claims (tests/test_papers_claims.py)."""

from __future__ import annotations

import math

import torch

from cases import Case, call
from deqlab.landscape import LossSurface
from deqlab.papers.hieu2022.conjecture import stable_step_hypothesis
from deqlab.papers.hieu2022.flow import FlowTrace
from deqlab.papers.hieu2022.gd_proof import STEP_COLUMNS, GDTrace
from deqlab.papers.hieu2022.mondeq import EQ_3_17_AS_PROVED, PARAMETERS, inequality
from deqlab.statements import Run, Series

N = 8  # the width of every case
RADII = dict.fromkeys(PARAMETERS, 1.0)
HOLDS = [inequality("Eq. (3.16)", 2.0, ">=", 1.0), inequality("Eq. (3.17)", 3.0, ">=", 1.0)]
UNMET = [inequality("Eq. (3.16)", 0.5, ">=", 1.0), inequality("Eq. (3.17)", 3.0, ">=", 1.0)]
FITS = dict.fromkeys(("Eq. (3.16)", "Eq. (3.17)", "Eq. (3.8)", "Eq. (3.9)"))
AS_PROVED = inequality(EQ_3_17_AS_PROVED, 2.0, ">=", 1.0)  # ours: Theorem 3.3.5 decided twice
STABLE = stable_step_hypothesis(1e-3, 1500.0, 1000.0, width=N)  # η·λ_max(K(0)) = 1.5 < 2


def series(*values: float) -> Series:
    return Series(values)


def distances(last: float) -> dict[str, Series]:
    return {p: series(0.0, last / 2, last) for p in PARAMETERS}


def sides(lhs: float, rhs: float, steps: int = 3) -> dict:
    """Every per-step inequality of the proof at lhs/rhs, the last step not measured."""
    one = (series(*[lhs] * (steps - 1), math.nan), series(*[rhs] * (steps - 1), math.nan))
    found = dict.fromkeys((c for cs in STEP_COLUMNS.values() for c in cs), one)
    negative = (series(*[-rhs] * (steps - 1), math.nan), series(*[-lhs] * (steps - 1), math.nan))
    return {**found, "lemma3_3_10": negative}  # its bound is negative: lhs/rhs ≥ 1


def gd(losses=(1.0, 0.5, 0.25), sigmas=(1.0, 0.9, 0.8), reach=0.5, lemma=(0.5, 1.0)) -> GDTrace:
    """A GD run of 2 steps (λ₀ = 1, η = 0.4: the factor 1 − ηλ₀²/4 = 0.9)."""
    return GDTrace(
        N, 0.4, 1.0, 1.0, RADII, series(*losses), series(*sigmas), distances(reach), sides(*lemma)
    )


def flow(losses=(1.0, 0.5, 0.2), reach=0.5, sigmas=(1.0, 0.9, 0.8)) -> FlowTrace:
    """A flow sampled at t = 0, 1, 2 (λ₀ = 1: the bound exp(−t/2))."""
    times = [0.0, 1.0, 2.0]
    bound = series(*(math.exp(-t / 2) for t in times))
    return FlowTrace(
        N,
        1.0,
        RADII,
        times,
        series(*losses),
        series(*losses),
        bound,
        series(*sigmas),
        distances(reach),
    )


def surface(losses: list[list[float]]) -> LossSurface:
    grid = torch.linspace(-1.0, 1.0, len(losses), dtype=torch.float64)
    return LossSurface(grid, grid.clone(), torch.tensor(losses, dtype=torch.float64), ({}, {}))


BOWL = surface([[3.0, 2.0, 3.0], [2.0, 1.0, 2.0], [3.0, 2.0, 3.0]])
WELLS = surface(  # four wells inside the grid
    [
        [3.0, 3.0, 3.0, 3.0, 3.0],
        [3.0, 1.0, 3.0, 1.0, 3.0],
        [3.0, 3.0, 2.0, 3.0, 3.0],
        [3.0, 1.0, 3.0, 1.0, 3.0],
        [3.0, 3.0, 3.0, 3.0, 3.0],
    ]
)
TIED = ("repeat1", "repeat2")
EXACT = series(1e-4, 1e-4, 1e-4)  # Proposition 4's error at three smooth probes
SMOOTH = {
    "raw": series(1e-2, 1e-2, 1e-2),
    "halved": series(5e-3, 5e-3, 5e-3),
    "flips": series(0, 0, 0),
}
CASES = {
    "deqlab.papers.hieu2022.claims.condition_hypothesis": Case(
        call(HOLDS[0], width=N, condition="Condition 2", fit=None, m=0.1),
        call(UNMET[0], width=N, condition="Condition 2", fit=None, m=0.1),
    ),
    "deqlab.papers.hieu2022.claims.step_size_hypothesis": Case(
        call(0.1, 1.0, width=N), call(2.0, 1.0, width=N)
    ),
    "deqlab.papers.hieu2022.claims.rate_check": Case(
        call(series(1.0, 0.5, 0.25), 0.9, width=N), call(series(1.0, 0.5, 0.6), 0.9, width=N)
    ),
    "deqlab.papers.hieu2022.claims.ball_check": Case(
        call(distances(0.5), RADII, width=N), call(distances(1.5), RADII, width=N)
    ),
    "deqlab.papers.hieu2022.claims.sigma_check": Case(
        call(series(1.0, 0.8), 1.0, width=N), call(series(1.0, 0.3), 1.0, width=N)
    ),
    "deqlab.papers.hieu2022.claims.lemma_check": Case(
        call("lemma3_3_3", series(1.0, 1.0), series(2.0, 2.0), width=N, run="flow"),
        call("lemma3_3_3", series(1.0, 3.0), series(2.0, 2.0), width=N, run="flow"),
    ),
    "deqlab.papers.hieu2022.claims.proposition_3_check": Case(
        call(0.5, 1.0, alpha=0.1, width=N), call(2.0, 1.0, alpha=0.1, width=N)
    ),
    "deqlab.papers.hieu2022.conjecture.conjecture_1_check": Case(
        call(series(*(math.exp(-k) for k in range(5))), width=N, given=[STABLE]),
        call(series(*(1 / (k + 1) for k in range(5))), width=N, given=[STABLE]),  # L ∝ 1/k
    ),
    "deqlab.papers.hieu2022.conjecture.stable_step_hypothesis": Case(
        call(1e-3, 1500.0, 1000.0, width=N), call(1e-3, 6840.0, 6840.0, width=N)
    ),
    "deqlab.papers.hieu2022.gd_proof.step_lemma_check": Case(
        call(gd(), "lemma3_3_7", range(2), ""),
        call(gd(lemma=(3.0, 1.0)), "lemma3_3_7", range(2), ""),
    ),
    "deqlab.papers.hieu2022.gd_proof.theorem_3_3_5": Case(
        call(gd(), HOLDS, fits=FITS, m=0.1, as_proved=AS_PROVED),
        call(gd(losses=(1.0, 0.5, 0.6)), HOLDS, fits=FITS, m=0.1, as_proved=AS_PROVED),
    ),
    "deqlab.papers.hieu2022.flow.proposition_4_check": Case(
        call(EXACT, *SMOOTH.values(), rtol=1e-3, width=N),
        call(series(1e-4, 0.1, 1e-4), *SMOOTH.values(), rtol=1e-3, width=N),
    ),
    "deqlab.papers.hieu2022.flow.kernel_floor_check": Case(
        call(series(1.0, 1.0), series(0.9, 0.9), width=N),
        call(series(1.0, 0.5), series(0.9, 0.9), width=N),
    ),
    "deqlab.papers.hieu2022.flow.feature_learning_check": Case(
        call(series(1.0, 1.2), series(1.0, 1.0), width=N),
        call(series(1.0, 1.0), series(1.0, 1.0), width=N),
        exists=True,
    ),
    "deqlab.papers.hieu2022.flow.step_error_check": Case(
        call(flow(), rtol=1e-2),
        call(
            FlowTrace(
                N,
                1.0,
                RADII,
                [0.0, 1.0],
                series(1.0, 0.9),
                series(1.0, 0.5),
                series(1.0, 0.6),
                series(1.0, 0.9),
                distances(0.5),
            ),
            rtol=1e-2,
        ),
    ),
    "deqlab.papers.hieu2022.flow.flow_rate_check": Case(
        call(flow()), call(flow(losses=(1.0, 0.9, 0.8)))
    ),
    "deqlab.papers.hieu2022.flow.theorem_3_3_1": Case(
        call(flow(), HOLDS, fits=FITS, m=0.1), call(flow(reach=1.5), HOLDS, fits=FITS, m=0.1)
    ),
    "deqlab.papers.hieu2022.dynamics.steadier": Case(
        call(0.1, 1.0, small=0.01, large=1.0), call(1.0, 0.5, small=0.01, large=1.0)
    ),
    "deqlab.papers.hieu2022.dynamics.fewer_steps": Case(
        call(5, 10, small=0.01, large=1.0, max_iter=30),
        call(12, 10, small=0.01, large=1.0, max_iter=30),
    ),
    "deqlab.papers.hieu2022.dynamics.final_residual": Case(
        call(1e-5, small=0.01, large=1.0, tol=1e-4), call(1e-2, small=0.01, large=1.0, tol=1e-4)
    ),
    "deqlab.papers.hieu2022.dynamics.longer": Case(
        call(5, 9, last=3, max_iter=30), call(9, 5, last=3, max_iter=30)
    ),
    "deqlab.papers.hieu2022.dynamics.apart": Case(call(0.5, 2.0, first=1), call(2.0, 0.5, first=1)),
    "deqlab.papers.hieu2022.landscapes.neighbourhood_grows": Case(
        call({"repeat1": 1.0, "repeat2": 2.0}, TIED, "", setting="grid"),
        call({"repeat1": 2.0, "repeat2": 1.0}, TIED, "", setting="grid"),
    ),
    "deqlab.papers.hieu2022.landscapes.deq_largest": Case(
        call({"deq": 3.0, "repeat1": 1.0, "repeat2": 2.0}, TIED, "", setting="grid"),
        call({"deq": 1.5, "repeat1": 1.0, "repeat2": 2.0}, TIED, "", setting="grid"),
    ),
    "deqlab.papers.hieu2022.landscapes.one_minimum": Case(
        call(BOWL, "", setting="grid"), call(WELLS, "", setting="grid")
    ),
    "deqlab.papers.hieu2022.landscapes.flat_minimum": Case(
        call(BOWL, "", delta=1.5, share=0.5, setting="grid"),
        call(BOWL, "", delta=0.5, share=0.5, setting="grid"),
    ),
    "deqlab.papers.hieu2022.landscapes.equilibrium_solved": Case(
        call(Run("solve", (0, 1), {"residual": (0.3, 1e-5)}), epoch=1, tol=1e-4, solver="s"),
        call(Run("solve", (0, 1), {"residual": (0.3, 1e-2)}), epoch=1, tol=1e-4, solver="s"),
    ),
    "deqlab.papers.hieu2022.widths.sweep_statements": Case(
        call(
            {8: 0.1, 16: 0.01},
            {8: 0.5, 16: 1.0},
            {"Eq. (3.16)": {8: 0.5, 16: 2.0}},
            loss_rtol=0.2,
            steps=10,
        ),
        call(
            {8: 0.01, 16: 0.1},
            {8: 0.5, 16: 1.0},
            {"Eq. (3.16)": {8: 0.5, 16: 2.0}},
            loss_rtol=0.2,
            steps=10,
        ),
    ),
}
