"""Every number :mod:`deqlab.verification.relu_deq` measured, under the stable keys of
``deqlab verify --json`` (None: not measured): the least eigenvalues with their certified
brackets (``<name>_bounds``, ``brackets`` with the proofs), Condition 1 and the widths it
needs, Eq. (10) and its rates, Theorem 2's width scale, the stand-ins' curvature; past
memory, the subsample and how each one-sided number reads."""

from __future__ import annotations

from deqlab.papers.ling2023 import theory as ling2023
from deqlab.papers.ling2023.theory import (
    EQUATIONS,
    MAX_WIDTH,
    Condition1,
    eq9_margin_bound,
    width_margin,
)
from deqlab.theory.brackets import Bracket
from deqlab.verification import subsample
from deqlab.verification.relu_deq import (
    KERNEL_BUFFERS,
    SCALING,
    THEOREM2_T,
    WIDTH_NEEDED,
    ReLUDEQInit,
    lemma1_value,
    theorem2_scale,
    theorem_eta,
    widths_needed,
)


def bounds(brackets: dict[str, Bracket]) -> dict[str, object]:
    """``<name>_bounds`` = [lower, upper] of each bracket, and ``brackets`` with the proofs."""
    return {
        **{f"{name}_bounds": [b.lower, b.upper] for name, b in brackets.items()},
        "brackets": {name: b.as_dict() for name, b in brackets.items()},
    }


def numbers(init: ReLUDEQInit, eta: float | None) -> dict[str, object]:
    """Every number of the module docstring under stable keys (None: not measured)."""
    K, n, m = init.K, init.inputs.n, init.width
    out: dict[str, object] = {
        "width": m,
        "sigma_w2": init.sigma_w2,
        "seed": init.seed,
        "lambda_star": K.value,
        **bounds(init.bounds()),
        "precision": init.precision,
        "lambda_star_singular": K.singular,
        "lambda_max_K": K.max_eigenvalue,
        "condition_number_K": K.condition_number if init.inputs.sample is None else None,
        "ntk_lambda_min": init.ntk.value,
        "ntk_parameterization": "standard: lim Θ/m = K + P⊙K",
        "W_norm": init.W_norm,
        "lemma1_bound": lemma1_value(init),
        "lambda0": init.lambda0,
        "lambda0_theorem2": init.predicted_lambda0,
        "theorem2_width": {
            "scale": theorem2_scale(n, K.value),
            "t": THEOREM2_T,
            "formula": "n²/λ*² · log(n/(λ*·t))",
            "constant": None,
            "depth_l": ling2023.theorem2_depth(n, K.value, init.sigma_w2),
            "note": "m = Ω(scale): the proof's constants (Bernstein, ε-net) are not given",
        },
    }
    cond = init.cond
    if cond is not None:
        out.update(_condition_numbers(init, cond, eta))
    if init.inputs.sample is not None:
        out.update(subsample.numbers(init.inputs.sample, KERNEL_BUFFERS))
    return out


def _condition_numbers(init: ReLUDEQInit, cond: Condition1, eta: float | None) -> dict:
    k, m = cond.constants, init.width
    eqs = {key: getattr(cond, key) for key in EQUATIONS}
    scaled = init.scaled_constants()
    lam = float(k.lambda0)
    rate = None if eta is None else 1 - eta * lam / 2
    return {
        "lambda0_over_theorem2": lam / init.predicted_lambda0 if init.lambda_star > 0 else None,
        "U_norm": k.U_norm,
        "a_norm": k.a_norm,
        "X_fro": k.X_fro,
        "residual_norm": k.residual_norm,
        "loss0": k.residual_norm**2 / 2,
        "delta": cond.delta,
        "c_w": cond.c_w,
        "c_u": cond.c_u,
        "c_a": cond.c_a,
        "condition1": {
            **{key: {"lhs": q.lhs, "rhs": q.rhs, "margin": q.margin} for key, q in eqs.items()},
            "holds": cond.holds,
        },
        "required_width": {**widths_needed(scaled, m), "scaling": SCALING, "what": WIDTH_NEEDED},
        "eq9_limit": {
            "limit": width_margin(scaled, m, MAX_WIDTH, "eq9"),
            "bound": eq9_margin_bound(scaled),
            "at_width": MAX_WIDTH,
        }
        if scaled.lambda0 > 0
        else None,  # λ* = 0: no width, nothing to bound
        "eq10_bound": cond.lr_bound,
        "eta_theorem": theorem_eta(init),
        "eta": eta,
        "rate_at_bound": 1 - cond.lr_bound * lam / 2,
        "rate_at_eta_theorem": 1 - theorem_eta(init) * lam / 2,
        "rate": rate,
        "curvature": init.curvature,
        "pl_ratio0": init.pl_ratio0,
        "H_lambda_min0": init.h_lambda_min0,
    }
