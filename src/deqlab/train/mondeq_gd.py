"""Full-batch gradient descent on a monotone DEQ, instrumented for Theorem 3.3.5 (thesis).

``θ(k+1) = θ(k) − η ∇L(θ(k))`` on ``L(θ) = ½‖Z*ᵀu − y‖²`` (Eq. 3.4), θ = (A, B, U, u), with
the exact gradient of the splitting adjoint (:mod:`deqlab.models.mondeq`). Each forward
solve is warm-started from the previous equilibrium. Step ``k`` records one tidy dict:

    step, loss L(θ(k)), loss_bound (1 − ηλ_0²/4)^k L(θ(0)) (Eq. 3.20), sigma_min σ_min(Z(k)),
    dist_A/dist_B/dist_U/dist_u ‖·(k) − ·(0)‖_F, in_balls (Hypothesis 1), sigma_ok
    (Hypothesis 2: σ_min(Z(k)) ≥ λ_0/2), loss_ok (Hypothesis 3), forward_steps and
    adjoint_steps (splitting iterations of the step's solves; adjoint_steps is 0 for the
    record of :meth:`MonDEQGD.evaluate`, which takes no step).

With ``step_lemmas`` (the default), the record of step ``k`` also holds both sides of the
inequalities the proof of Theorem 3.3.5 states for the step ``k → k+1``
(:mod:`deqlab.papers.hieu2022.mondeq_step`): ``lemma3_3_6_lhs``/``_rhs``,
``lemma3_3_7_<p>_lhs``/``_rhs`` for p in U, u, A, B, W, and ``lemma3_3_8``–``lemma3_3_10``
(the terms I₁, I₂, I₃ of the change of the loss), the last three once θ(k+1)'s equilibrium
is solved.

Any η > 0 trains; Theorem 3.3.5 assumes η ≤ 4/λ_0² (the first term of its bound), beyond
which Eq. (3.20)'s rate 1 − ηλ_0²/4 is negative: there ``loss_bound`` and ``loss_ok`` are
None, and the theorem's statements are NOT APPLICABLE by its step-size hypothesis.

``λ_0 = σ_min(Z(0))``, Conditions 1–2 and the step-size bound of Theorem 3.3.5 are
evaluated once, at initialisation.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch

from deqlab._checks import check_bool, check_positive, check_tensor
from deqlab.models.mondeq import MonDEQ
from deqlab.papers.hieu2022.mondeq import (
    PARAMETERS,
    MonDEQConstants,
    Row,
    condition_1,
    condition_2,
    hypotheses,
    mondeq_constants,
    sides,
    step_size_bound,
)
from deqlab.papers.hieu2022.mondeq_step import (
    STEP_KEYS,
    lemma_3_3_6,
    lemma_3_3_7,
    lemma_3_3_8,
    lemma_3_3_9,
    lemma_3_3_10,
    progress_terms,
)
from deqlab.solvers import SolverError
from deqlab.theory.spectra import spectral_norm
from deqlab.train.divergence import (
    check_parameters,
    describe_parameter,
    diverged,
    non_finite_parameter,
)
from deqlab.train.protocol import Record, Trainer

#: The names :func:`deqlab.papers.hieu2022.mondeq.hypotheses` gives its rows (proof of
#: Theorem 3.3.5).
BALL = "Hypothesis 1 ({})"
SIGMA = "Hypothesis 2"
LOSS = "Hypothesis 3 / Eq. (3.20)"


class MonDEQGD(Trainer):
    """Full-batch GD on ``model`` (updated in place), one :meth:`step` at a time.

    ``X`` is ``(d, N)`` (samples as columns), ``y`` is ``(N,)``; ``radius`` is the ``R`` of
    the balls of Section 3.3: one for all four parameters, or a mapping A, B, U, u → R_·.
    A non-finite loss, or a parameter that a step made non-finite, stops the run (``stop_reason``
    ``"loss_not_finite"`` or ``"parameter_not_finite"``; the record's loss is NaN or ±Inf);
    so does a splitting solve that fails (``"forward_failed"``, the record's loss NaN, or
    ``"adjoint_failed"``, no update), with the solver's message: after too large a step
    the operator ``I − W`` is so ill-conditioned that the solver stalls first.
    """

    def __init__(
        self,
        model: MonDEQ,
        X: torch.Tensor,
        y: torch.Tensor,
        *,
        lr: float,
        radius: float | Mapping[str, float] = 1.0,
        step_lemmas: bool = True,
    ) -> None:
        super().__init__()
        if not isinstance(model, MonDEQ):
            raise TypeError(f"`model` must be a MonDEQ; got {type(model).__name__}")
        model.check_unbiased("GD against Theorem 3.3.5")
        self.model = model
        check_parameters(model.named_parameters(), "MonDEQ")
        self.X = check_tensor("X", X, shape=(model.in_features, None))
        self.y = check_tensor("y", y, shape=(X.shape[1],))
        self.lr = check_positive("lr", lr)
        self.step_lemmas = check_bool("step_lemmas", step_lemmas)
        self.params = dict(model.named_parameters())
        self.initial = {k: p.detach().clone() for k, p in self.params.items()}
        with torch.no_grad():
            self.Z = model.equilibrium(X)  # Z(0), (n, N); later the warm start
            self.yhat: torch.Tensor | None = self.Z.T @ model.u  # ŷ of the last record, (N,)
        self.constants: MonDEQConstants = mondeq_constants(
            **self.initial, Z=self.Z, X=X, y=y, m=model.m, radius=radius
        )

    @property
    def conditions(self) -> list[Row]:
        """Rows of Conditions 1 and 2 (Eqs. 3.8–3.9, 3.16–3.18) at initialisation."""
        return condition_1(self.constants) + condition_2(self.constants)

    @property
    def eta_max(self) -> float:
        """The step-size bound of Theorem 3.3.5."""
        return step_size_bound(self.constants)

    def step(self) -> Record:
        """Record step ``k`` at θ(k) and move to θ(k+1) (no move once the run stopped)."""
        self.check_running()
        record, loss = self._measure()
        if self.stopped:
            return record
        try:
            grads = torch.autograd.grad(loss, list(self.params.values()))
        except SolverError as error:
            self._solver_failed("adjoint_failed", error)
            return record
        record["adjoint_steps"] = self.model.last_backward.n_steps
        with torch.no_grad():
            before = (self.params["A"].clone(), self.model.weight()) if self.step_lemmas else ()
            for p, g in zip(self.params.values(), grads, strict=True):
                p -= self.lr * g
            if before:  # A(k), W(k)
                record.update(self._step_sides(record["loss"], grads, *before))
        self.step_count += 1
        return record

    def _step_sides(
        self, loss: float, grads: tuple[torch.Tensor, ...], A: torch.Tensor, W: torch.Tensor
    ) -> Record:
        """Lemmas 3.3.6–3.3.7 for the step just taken from θ(k) (``A`` = A(k), ``W`` = W(k))."""
        delta = {k: -self.lr * g for k, g in zip(self.params, grads, strict=True)}
        dW = self.model.weight() - W  # W(k+1) − W(k)
        norms = {k: float(torch.linalg.vector_norm(d)) for k, d in delta.items()}
        rows = [lemma_3_3_6(A, delta["A"], delta["B"], dW)]
        rows += lemma_3_3_7(
            self.constants, eta=self.lr, loss=loss, steps={**norms, "W": spectral_norm(dW)}
        )
        keys = ["lemma3_3_6", *(f"lemma3_3_7_{p}" for p in STEP_KEYS)]
        return sides(keys, rows)

    def evaluate(self) -> Record:
        """Record θ(k) without a step: the last record of a run of ``k`` steps."""
        self.check_running()
        return self._measure()[0]

    def _measure(self) -> tuple[Record, torch.Tensor | None]:
        """Append the record of θ(k); return it and the differentiable loss."""
        record: Record = {"step": self.step_count, "loss": math.nan}
        self.records.append(record)
        found = non_finite_parameter(self.params.items())
        if found is not None:  # only a GD step can do this: the constructor checked them
            self._diverged("parameter_not_finite", describe_parameter(found, "MonDEQ"))
            return record, None
        try:
            Z = self.model.equilibrium(self.X, self.Z)  # (n, N), warm-started
        except SolverError as error:
            self._solver_failed("forward_failed", error)
            return record, None
        yhat = Z.T @ self.model.u  # ŷ(k), (N,)
        loss = 0.5 * torch.sum((yhat - self.y) ** 2)  # Eq. (3.4)
        if self.step_lemmas and self.step_count > 0 and self.yhat is not None:
            self.records[-2].update(self._progress_sides(yhat.detach()))
        record["loss"] = float(loss.detach())
        if not math.isfinite(record["loss"]):
            self._diverged("loss_not_finite", f"the loss is {record['loss']}")
            return record, None
        record.update(self._hypotheses(Z, record["loss"]))
        record["forward_steps"] = self.model.last_forward.n_steps
        record["adjoint_steps"] = 0
        self.Z, self.yhat = Z.detach(), yhat.detach()
        return record, loss

    def _progress_sides(self, yhat_next: torch.Tensor) -> Record:
        """Lemmas 3.3.8–3.3.10 for the step from θ(k) (``self.Z``, ``self.yhat``, the last
        record's loss) to θ(k+1) (``yhat_next``, the current u)."""
        g = self.Z.T @ self.model.u.detach()  # Z(k)ᵀu(k+1)
        loss = float(self.records[-2]["loss"])
        c, eta = self.constants, self.lr
        i1, i2, i3 = progress_terms(self.yhat, yhat_next, g, self.y)
        rows = [
            lemma_3_3_8(c, eta=eta, loss=loss, i1=i1),
            lemma_3_3_9(c, eta=eta, loss=loss, i2=i2),
            lemma_3_3_10(c, eta=eta, loss=loss, i3=i3),
        ]
        return sides(["lemma3_3_8", "lemma3_3_9", "lemma3_3_10"], rows)

    def _hypotheses(self, Z: torch.Tensor, loss: float) -> Record:
        """Hypotheses 1–3 of the proof of Theorem 3.3.5 at step ``k``, read by name."""
        rows = hypotheses(
            self.constants,
            initial=self.initial,
            current=self.params,
            Z=Z,
            loss=loss,
            k=self.step_count,
            eta=self.lr,
        )
        named = {row["name"]: row for row in rows}
        balls = {p: named[BALL.format(p)] for p in PARAMETERS}
        bound = named.get(LOSS)  # absent where η > 4/λ_0²: Eq. (3.20) is not defined
        return {
            "loss_bound": None if bound is None else bound["rhs"],
            "sigma_min": named[SIGMA]["lhs"],
            **{f"dist_{p}": row["lhs"] for p, row in balls.items()},
            "in_balls": all(row["holds"] for row in balls.values()),
            "sigma_ok": named[SIGMA]["holds"],
            "loss_ok": None if bound is None else bound["holds"],
        }

    def _diverged(self, reason: str, what: str) -> None:
        finite = [r for r in self.records if math.isfinite(r["loss"])]
        last = (int(finite[-1]["step"]), float(finite[-1]["loss"])) if finite else None
        self.stop(reason, diverged(self.step_count, self.lr, what, last))

    def _solver_failed(self, reason: str, error: SolverError) -> None:
        self.stop(reason, f"step {self.step_count} with learning rate lr = {self.lr:g}: {error}")

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume: parameters, warm start, records, step count."""
        return {
            **self.protocol_state(),
            "params": {k: p.detach().clone() for k, p in self.params.items()},
            "Z": self.Z.clone(),
            "yhat": None if self.yhat is None else self.yhat.clone(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a state from :meth:`state_dict` (same model shape and data)."""
        with torch.no_grad():
            for k, p in self.params.items():
                p.copy_(state["params"][k])
        self.Z = state["Z"].clone()
        self.yhat = state["yhat"].clone() if "yhat" in state else None  # older checkpoints
        self.load_protocol_state(state)
