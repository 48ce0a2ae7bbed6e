"""Full-batch gradient descent on a monotone DEQ, instrumented for Theorem 3.3.5 (thesis).

``θ(k+1) = θ(k) − η ∇L(θ(k))`` on ``L(θ) = ½‖Z*ᵀu − y‖²`` (Eq. 3.4), θ = (A, B, U, u), with
the exact gradient of the splitting adjoint (:mod:`deqlab.models.mondeq`). Each forward
solve is warm-started from the previous equilibrium. Step ``k`` records one tidy dict:

    step, loss L(θ(k)), loss_bound (1 − ηλ_0²/4)^k L(θ(0)) (Eq. 3.20), sigma_min σ_min(Z(k)),
    dist_A/dist_B/dist_U/dist_u ‖·(k) − ·(0)‖_F, in_balls (Hypothesis 1), sigma_ok
    (Hypothesis 2: σ_min(Z(k)) ≥ λ_0/2), loss_ok (Hypothesis 3), forward_steps,
    adjoint_steps (splitting iterations of the step's solves).

``λ_0 = σ_min(Z(0))``, Conditions 1–2 and the step-size bound of Theorem 3.3.5 are
evaluated once, at initialisation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from deqlab._checks import check_int, check_positive, check_tensor
from deqlab.models.mondeq import MonDEQ
from deqlab.theory.mondeq import (
    PARAMETERS,
    MonDEQConstants,
    Row,
    condition_1,
    condition_2,
    hypotheses,
    mondeq_constants,
    step_size_bound,
)


@dataclass(frozen=True)
class MonDEQGDResult:
    """What :func:`train_mondeq_gd` returns.

    Attributes:
        records: one tidy dict per GD step (see the module docstring), steps ``0..steps``.
        constants: λ_0, ‖X‖_F, L(θ(0)) and the λ̄'s at initialisation.
        conditions: rows of Conditions 1 and 2 (Eqs. 3.8–3.9, 3.16–3.18) at initialisation.
        eta_max: the step-size bound of Theorem 3.3.5.
    """

    records: list[dict[str, float | int | bool]]
    constants: MonDEQConstants
    conditions: list[Row]
    eta_max: float


def train_mondeq_gd(
    model: MonDEQ,
    X: torch.Tensor,
    y: torch.Tensor,
    *,
    lr: float,
    steps: int,
    radius: float = 1.0,
) -> MonDEQGDResult:
    """Run ``steps`` full-batch GD steps of size ``lr`` on ``model`` (updated in place).

    ``X`` is ``(d, N)`` (samples as columns), ``y`` is ``(N,)``; ``radius`` is the ``R`` of
    the balls of Section 3.3 (one for all four parameters). Stops early, with a final
    record, if the loss becomes non-finite.
    """
    if not isinstance(model, MonDEQ):
        raise TypeError(f"`model` must be a MonDEQ; got {type(model).__name__}")
    X = check_tensor("X", X, shape=(model.in_features, None))
    y = check_tensor("y", y, shape=(X.shape[1],))
    lr = check_positive("lr", lr)
    steps = check_int("steps", steps, min_value=0)
    params = dict(model.named_parameters())
    initial = {k: p.detach().clone() for k, p in params.items()}
    with torch.no_grad():
        Z_prev = model.equilibrium(X)  # Z(0), (n, N)
    constants = mondeq_constants(**initial, Z=Z_prev, X=X, y=y, m=model.m, radius=radius)
    records: list[dict[str, float | int | bool]] = []
    for k in range(steps + 1):
        Z = model.equilibrium(X, Z_prev)  # (n, N), warm-started
        loss = 0.5 * torch.sum((Z.T @ model.u - y) ** 2)  # Eq. (3.4)
        value = float(loss.detach())
        if not math.isfinite(value):
            records.append({"step": k, "loss": value})
            break
        rows = hypotheses(constants, initial=initial, current=params, Z=Z, loss=value, k=k, eta=lr)
        record: dict[str, float | int | bool] = {"step": k, "loss": value}
        record["loss_bound"] = rows[-1]["rhs"]
        record["sigma_min"] = rows[-2]["lhs"]
        record.update(
            {f"dist_{k}": row["lhs"] for k, row in zip(PARAMETERS, rows[:4], strict=True)}
        )
        record["in_balls"] = all(row["holds"] for row in rows[:4])
        record["sigma_ok"], record["loss_ok"] = rows[-2]["holds"], rows[-1]["holds"]
        record["forward_steps"] = model.last_forward.n_steps
        records.append(record)
        if k == steps:
            break
        grads = torch.autograd.grad(loss, list(params.values()))
        record["adjoint_steps"] = model.last_backward.n_steps
        with torch.no_grad():
            for p, g in zip(params.values(), grads, strict=True):
                p -= lr * g
        Z_prev = Z.detach()
    return MonDEQGDResult(
        records=records,
        constants=constants,
        conditions=condition_1(constants) + condition_2(constants),
        eta_max=step_size_bound(constants),
    )
