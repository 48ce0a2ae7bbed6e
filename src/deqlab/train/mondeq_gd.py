"""Full-batch gradient descent on a monotone DEQ, instrumented for Theorem 3.3.5 (thesis).

``θ(k+1) = θ(k) − η ∇L(θ(k))`` on ``L(θ) = ½‖Z*ᵀu − y‖²`` (Eq. 3.4), θ = (A, B, U, u), with
the exact gradient of the splitting adjoint (:mod:`deqlab.models.mondeq`). Each forward
solve is warm-started from the previous equilibrium. Step ``k`` records one tidy dict:

    step, loss L(θ(k)), loss_bound (1 − ηλ_0²/4)^k L(θ(0)) (Eq. 3.20), sigma_min σ_min(Z(k)),
    dist_A/dist_B/dist_U/dist_u ‖·(k) − ·(0)‖_F, in_balls (Hypothesis 1), sigma_ok
    (Hypothesis 2: σ_min(Z(k)) ≥ λ_0/2), loss_ok (Hypothesis 3), forward_steps and
    adjoint_steps (splitting iterations of the step's solves; adjoint_steps is 0 for a
    record-only step).

``λ_0 = σ_min(Z(0))``, Conditions 1–2 and the step-size bound of Theorem 3.3.5 are
evaluated once, at initialisation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

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
from deqlab.train.divergence import (
    check_parameters,
    describe_parameter,
    diverged,
    non_finite_parameter,
)

Record = dict[str, float | int | bool]


class MonDEQGD:
    """Full-batch GD on ``model`` (updated in place), one :meth:`step` at a time.

    ``X`` is ``(d, N)`` (samples as columns), ``y`` is ``(N,)``; ``radius`` is the ``R`` of
    the balls of Section 3.3 (one for all four parameters). ``state_dict`` /
    ``load_state_dict`` make a run resumable with identical numbers.
    """

    def __init__(
        self, model: MonDEQ, X: torch.Tensor, y: torch.Tensor, *, lr: float, radius: float = 1.0
    ) -> None:
        if not isinstance(model, MonDEQ):
            raise TypeError(f"`model` must be a MonDEQ; got {type(model).__name__}")
        self.model = model
        check_parameters(model.named_parameters(), "MonDEQ")
        self.X = check_tensor("X", X, shape=(model.in_features, None))
        self.y = check_tensor("y", y, shape=(X.shape[1],))
        self.lr = check_positive("lr", lr)
        self.params = dict(model.named_parameters())
        self.initial = {k: p.detach().clone() for k, p in self.params.items()}
        with torch.no_grad():
            self.Z = model.equilibrium(X)  # Z(0), (n, N); later the warm start
        self.constants: MonDEQConstants = mondeq_constants(
            **self.initial, Z=self.Z, X=X, y=y, m=model.m, radius=radius
        )
        self.records: list[Record] = []
        self.step_count = 0
        self.finite = True
        #: Why the run stopped when ``finite`` is False (the step, the learning rate, what).
        self.message = ""

    @property
    def conditions(self) -> list[Row]:
        """Rows of Conditions 1 and 2 (Eqs. 3.8–3.9, 3.16–3.18) at initialisation."""
        return condition_1(self.constants) + condition_2(self.constants)

    @property
    def eta_max(self) -> float:
        """The step-size bound of Theorem 3.3.5."""
        return step_size_bound(self.constants)

    def step(self, *, update: bool = True) -> Record:
        """Record step ``k`` at θ(k); with ``update``, move to θ(k+1). Returns the record.

        A non-finite loss, or a parameter that a step made non-finite, ends the run: the
        record has a NaN or Inf loss, ``finite`` becomes False and ``message`` says why.
        """
        found = non_finite_parameter(self.params.items())
        if found is not None:  # only a GD step can do this: the constructor checked them
            record: Record = {"step": self.step_count, "loss": math.nan}
            self.records.append(record)
            self.finite = False
            self.message = diverged(
                self.step_count, self.lr, describe_parameter(found, "MonDEQ"), self._last_loss()
            )
            return record
        Z = self.model.equilibrium(self.X, self.Z)  # (n, N), warm-started
        loss = 0.5 * torch.sum((Z.T @ self.model.u - self.y) ** 2)  # Eq. (3.4)
        value = float(loss.detach())
        record: Record = {"step": self.step_count, "loss": value}
        self.records.append(record)
        if not math.isfinite(value):
            self.finite = False
            what = f"the loss is {value}"
            self.message = diverged(self.step_count, self.lr, what, self._last_loss())
            return record
        k, eta = self.step_count, self.lr
        rows = hypotheses(
            self.constants, initial=self.initial, current=self.params, Z=Z, loss=value, k=k, eta=eta
        )
        record["loss_bound"] = rows[-1]["rhs"]
        record["sigma_min"] = rows[-2]["lhs"]
        record.update(
            {f"dist_{p}": row["lhs"] for p, row in zip(PARAMETERS, rows[:4], strict=True)}
        )
        record["in_balls"] = all(row["holds"] for row in rows[:4])
        record["sigma_ok"], record["loss_ok"] = rows[-2]["holds"], rows[-1]["holds"]
        record["forward_steps"] = self.model.last_forward.n_steps
        record["adjoint_steps"] = 0
        self.Z = Z.detach()
        if update:
            grads = torch.autograd.grad(loss, list(self.params.values()))
            record["adjoint_steps"] = self.model.last_backward.n_steps
            with torch.no_grad():
                for p, g in zip(self.params.values(), grads, strict=True):
                    p -= self.lr * g
            self.step_count += 1
        return record

    def _last_loss(self) -> tuple[int, float] | None:
        finite = [r for r in self.records if math.isfinite(r["loss"])]
        return (int(finite[-1]["step"]), float(finite[-1]["loss"])) if finite else None

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume: parameters, warm start, records, step count."""
        return {
            "params": {k: p.detach().clone() for k, p in self.params.items()},
            "Z": self.Z.clone(),
            "records": [dict(r) for r in self.records],
            "step_count": self.step_count,
            "finite": self.finite,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        with torch.no_grad():
            for k, p in self.params.items():
                p.copy_(state["params"][k])
        self.Z = state["Z"].clone()
        self.records = [dict(r) for r in state["records"]]
        self.step_count = int(state["step_count"])
        self.finite = bool(state["finite"])


@dataclass(frozen=True)
class MonDEQGDResult:
    """What :func:`train_mondeq_gd` returns: the records (steps ``0..steps``), the constants
    at initialisation, the rows of Conditions 1–2 and Theorem 3.3.5's step-size bound."""

    records: list[Record]
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
    """Run ``steps`` GD steps (see :class:`MonDEQGD`), recording steps ``0..steps``.

    Stops early, after the record of the first non-finite loss.
    """
    steps = check_int("steps", steps, min_value=0)
    trainer = MonDEQGD(model, X, y, lr=lr, radius=radius)
    while trainer.step_count < steps and trainer.finite:
        trainer.step()
    if trainer.finite:
        trainer.step(update=False)
    return MonDEQGDResult(trainer.records, trainer.constants, trainer.conditions, trainer.eta_max)
