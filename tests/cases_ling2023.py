"""The pass and fail cases of Ling et al. (2023)'s claims (tests/test_papers_claims.py)."""

from __future__ import annotations

import math

from cases import Case, call
from deqlab.papers.ling2023.claims import Width
from deqlab.papers.ling2023.theory import Condition1, Constants
from deqlab.statements import Run, Verdict, runs_from_rows

#: Condition 1 at δ = 0.1: all three equations hold (λ_0 large), or none (λ_0 tiny).
HOLDS = Condition1.evaluate(0.1, Constants(1e6, 0.5, 1.0, 0.1, 1.0, 1e-3))
FAILS = Condition1.evaluate(0.1, Constants(1e-6, 0.5, 1.0, 0.1, 1.0, 1e-3))
#: ‖a(0)‖₂ so small that Eq. (9)'s ceiling (1 − ‖W‖₂)²/(4n‖a‖²) is above 1 (n = 10).
TINY_A = Condition1.evaluate(0.1, Constants(1e6, 0.5, 1.0, 0.01, 1.0, 1e-3))


def gd_run(losses, *, W=0.5, grad=10.0, lam=2.0, H=3.0, ok=1.0, key="m") -> Run:
    """A GD run (τ = 0, 1, …) with losses ``losses``, λ_τ = ``lam`` (λ_0 = 2 at τ = 0),
    ‖W(τ)‖₂ = ``W`` (a number or one per step), ‖∇Φ‖ = ``grad``, λ_min(H) = ``H``."""
    n = len(losses)
    Ws = W if isinstance(W, list) else [W] * n
    rows = [
        {
            "task": key,
            "step": s,
            "loss": p,
            "lambda_min": 2.0 if s == 0 else lam,
            "W_norm": Ws[s],
            "W_norm_bound": Ws[s] + 0.01,
            "dist_from_init": 0.0,
            "grad_norm": grad,
            "H_lambda_min": H,
            "ok": ok,
        }
        for s, p in enumerate(losses)
    ]
    return runs_from_rows(rows)[key]


def width(m: int, losses, condition=HOLDS, eta=0.1, **run) -> Width:
    return Width(m, eta, condition, gd_run(losses, key=f"m{m}", **run))


#: η = 0.1 and λ_0 = 2: Theorem 1 (iii)'s factor is 0.9 per step.
CONTRACTS = [width(100, [1.0, 0.8, 0.6, 0.5])]


def draws(**quantities: list[tuple[float, float, float, float, float]]) -> dict[str, Run]:
    """Per quantity, its draws (measured, theory, m, seed, depth)."""
    keys = ("measured", "theory", "m", "seed", "depth")
    return {
        q: Run(
            q, tuple(range(len(points))), dict(zip(keys, zip(*points, strict=True), strict=True))
        )
        for q, points in quantities.items()
    }


def depths(errors, *, m=math.nan, quantity="K_minus_Kl_fro"):
    return draws(**{quantity: [(e, e, m, 0.0, float(d)) for d, e in enumerate(errors, 1)]})


SIGMA_W2 = 0.08
CASES = {
    "deqlab.papers.ling2023.claims.assumption1": Case(call(0.08), call(0.2)),
    "deqlab.papers.ling2023.claims.assumption2": Case(call(0.0, 0.5), call(0.1, 0.5)),
    "deqlab.papers.ling2023.claims.theorem3_ii": Case(call(0.1, 1e-12), call(-1e-3, 1e-12)),
    "deqlab.papers.ling2023.claims.condition1_hypotheses": Case(
        call("", [Width(100, 1e-3, HOLDS)]), call("", [Width(100, 1e-3, FAILS)])
    ),
    "deqlab.papers.ling2023.claims.eq9_unreachable": Case(
        call("", [Width(100, 1e-3, HOLDS)], 10), call("", [Width(100, 1e-3, TINY_A)], 10)
    ),
    "deqlab.papers.ling2023.claims.learning_rate_hypothesis": Case(
        call("", [Width(100, 1e-9, HOLDS)]), call("", [Width(100, 1e9, HOLDS)])
    ),
    "deqlab.papers.ling2023.theorem1.theorem1_statements": Case(
        call("", CONTRACTS, []),
        call("", [width(100, [1.0, 0.8, 0.6, 0.5], W=[0.5, 0.6, 1.2, 0.7])], []),
    ),
    "deqlab.papers.ling2023.theorem1.pl_statements": Case(
        call("", CONTRACTS), call("", [width(100, [1.0, 0.8, 0.6, 0.5], grad=0.1)])
    ),
    "deqlab.papers.ling2023.figure1.observations": Case(
        call("", [width(8, [1.0, 0.5, 0.25]), width(16, [1.0, 0.3, 0.09])]),
        call("", [width(8, [1.0, 0.3, 0.09]), width(16, [1.0, 0.5, 0.25])]),
    ),
    "deqlab.papers.ling2023.figure1.completed": Case(
        call("", [width(8, [1.0, 0.5, 0.25])], 3, [8]),
        call("", [width(8, [1.0, 0.5, 0.25], ok=0.0)], 3, [8]),
    ),
    "deqlab.papers.ling2023.initialization.lemma1_well_posed": Case(
        call(draws(W_spectral_norm=[(0.5, 0.8, 100.0, 0.0, 1.0)])),
        call(draws(W_spectral_norm=[(1.2, 0.8, 100.0, 0.0, 1.0)])),
    ),
    "deqlab.papers.ling2023.initialization.lemma1_finite_m": Case(
        call(draws(W_spectral_norm=[(0.5, 0.8, 100.0, 0.0, 1.0)]), SIGMA_W2),
        call(draws(W_spectral_norm=[(2.0, 0.8, 100.0, 0.0, 1.0)]), SIGMA_W2),
    ),
    "deqlab.papers.ling2023.initialization.theorem3": Case(
        call(depths([SIGMA_W2**d for d in range(1, 5)]), SIGMA_W2),
        call(depths([(2 * SIGMA_W2) ** d for d in range(1, 5)]), SIGMA_W2),
    ),
    "deqlab.papers.ling2023.initialization.theorem3_ii_of": Case(
        call(draws(lambda_star=[(0.1, 1e-12, math.nan, math.nan, math.nan)])),
        call(draws(lambda_star=[(-1.0, 1e-12, math.nan, math.nan, math.nan)])),
    ),
    "deqlab.papers.ling2023.initialization.theorem4": Case(
        call(
            depths([0.5**d for d in range(1, 5)], m=100.0, quantity="G_minus_Gl_fro_over_m"),
            SIGMA_W2,
        ),
        call(
            depths([0.95**d for d in range(1, 5)], m=100.0, quantity="G_minus_Gl_fro_over_m"),
            SIGMA_W2,
        ),
    ),
    "deqlab.papers.ling2023.initialization.theorem5": Case(
        call(draws(Gl_over_m_minus_Kl_fro=[(0.5, 1.0, 100.0, 0.0, 1.0)])),
        call(draws(Gl_over_m_minus_Kl_fro=[(2.0, 1.0, 100.0, 0.0, 1.0)])),
    ),
    "deqlab.papers.ling2023.initialization.theorem2": Case(
        call(draws(lambda0=[(2.0, 1.0, 100.0, 0.0, math.nan)])),
        call(draws(lambda0=[(0.5, 1.0, 100.0, 0.0, math.nan)])),
    ),
    "deqlab.papers.ling2023.initialization.u_norm": Case(
        call(draws(U_spectral_norm=[(1.5 * 10**0.5, 10**0.5, 100.0, 0.0, math.nan)])),
        call(draws(U_spectral_norm=[(5.0 * 10**0.5, 10**0.5, 100.0, 0.0, math.nan)])),
    ),
    "deqlab.papers.ling2023.initialization.initial_loss": Case(
        call(
            draws(
                initial_loss=[(0.5, 1.0, 100.0, 0.0, math.nan)],
                feature_norm_sq=[(1.0, 1.0, 100.0, 0.0, math.nan)],
            )
        ),
        call(
            draws(
                initial_loss=[(500.0, 1.0, 100.0, 0.0, math.nan)],
                feature_norm_sq=[(1.0, 1.0, 100.0, 0.0, math.nan)],
            )
        ),
    ),
    "deqlab.papers.ling2023.initialization.concentration": Case(
        call(
            draws(
                G_over_m_minus_K_fro=[
                    (1.0, 0.0, 100.0, 0.0, math.nan),
                    (0.5, 0.0, 400.0, 0.0, math.nan),
                ]
            )
        ),
        call(
            draws(
                G_over_m_minus_K_fro=[
                    (1.0, 0.0, 100.0, 0.0, math.nan),
                    (1.0, 0.0, 400.0, 0.0, math.nan),
                ]
            )
        ),
    ),
    "deqlab.papers.ling2023.initialization.assumption2_of": Case(
        call(
            draws(
                x_norm_deviation=[(0.0, 0.0, math.nan, math.nan, math.nan)],
                max_abs_cos=[(0.5, 0.0, math.nan, math.nan, math.nan)],
            )
        ),
        call(
            draws(
                x_norm_deviation=[(0.1, 0.0, math.nan, math.nan, math.nan)],
                max_abs_cos=[(0.5, 0.0, math.nan, math.nan, math.nan)],
            )
        ),
    ),
    "deqlab.papers.ling2023.network.lemma1": Case(
        call(0.5, 0.8, m=100, seed=0, p=1e-6), call(0.9, 0.8, m=100, seed=0, p=1e-6)
    ),
    "deqlab.papers.ling2023.network.well_posed": Case(call(0.5), call(1.2)),
    "deqlab.papers.ling2023.network.theorem2_width": Case(call(10, 100), call(100, 10)),
    "deqlab.papers.ling2023.network.theorem2_scale": Case(
        call(100, 50.0, t=0.01), call(100, 500.0, t=0.01)
    ),
    # a width hypothesis with a constant the paper does not give cannot make it FAIL
    "deqlab.papers.ling2023.network.theorem2": Case(
        call(2.0, 1.0, [], m=100, seed=0, scale=50.0, t=0.01),
        call(0.5, 1.0, [], m=100, seed=0, scale=50.0, t=0.01),
        fails_as=Verdict.NOT_APPLICABLE,
    ),
    "deqlab.papers.ling2023.network.ntk_above_kernel": Case(
        call(0.2, 1e-12, 0.1, 1e-12), call(0.05, 1e-12, 0.1, 1e-12)
    ),
}
