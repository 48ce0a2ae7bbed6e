"""The gradient flow of a monotone DEQ (thesis, Section 3.3.1), integrated by explicit Euler.

``dθ/dt = −∇L(θ)`` on ``L = ½‖Z*ᵀu − y‖²`` (Eq. 3.4), θ = (A, B, U, u), is integrated by
``θ(t + h) = θ(t) − h∇L(θ(t))`` — GD with step ``h`` — with the exact gradient of the
splitting adjoint (:mod:`deqlab.models.mondeq`), each forward solve warm-started. Euler's
error is first order in ``h``: running ``h`` and ``h/2`` and comparing measures it.

A probe step also checks Proposition 4 (Eq. 3.7) along the run: with ``K`` from the closed
form of :mod:`deqlab.papers.hieu2022.mondeq_kernel` and ``r = ŷ − y``, the finite differences
``D_s = (ŷ(θ − s∇L) − ŷ(θ))/s`` at ``s = h`` (the run's own step) and ``s = h/2`` differ
from ``−K r`` by ``O(s)``; ``2D_{h/2} − D_h`` removes that first-order term (Richardson),
leaving ``O(h²)`` if and only if the identity holds — where ŷ is differentiable: a ReLU
derivative that changes within the step (a kink of ŷ) breaks the expansion, so a probe
whose step crosses one halves its step ``s`` (``prop4_step`` = ``s/h``, 1 for the run's own
step) until ``s`` and ``s/2`` cross none (``prop4_flips`` = 0; else the count at the
smallest step tried). It records, relative to ``‖K r‖``: ``prop4_err_h``,
``prop4_err_h2`` and ``prop4_err_extrap`` (at ``s``, ``s/2``), and ``kernel_lambda_min``
``λ_min(K)`` beside ``sigma_min`` ``σ_min(Z)`` (Eq. 3.14: ``λ_min(K) ≥ σ_min(Z)²``), the
distances ``dist_·`` ``‖·(t) − ·(0)‖_F`` and both sides of Lemmas 3.3.2–3.3.4.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from deqlab._checks import check_positive, check_tensor
from deqlab.models.mondeq import MonDEQ, active_set
from deqlab.papers.hieu2022.mondeq import PARAMETERS, sigma_min
from deqlab.papers.hieu2022.mondeq_kernel import prediction_kernel
from deqlab.papers.hieu2022.mondeq_lemmas import lemma_columns

Record = dict[str, float | int]

#: A probe halves its step at most this many times to find a step that crosses no kink.
MAX_HALVINGS = 10


class MonDEQFlow:
    """Euler steps of size ``h`` of the gradient flow of ``model`` (updated in place).

    ``X`` is ``(d, N)`` (samples as columns), ``y`` is ``(N,)``. :meth:`step` records the
    state at ``t = k h`` and moves to ``t + h``; ``state_dict`` / ``load_state_dict`` resume
    a run with identical numbers.
    """

    def __init__(self, model: MonDEQ, X: torch.Tensor, y: torch.Tensor, *, h: float) -> None:
        if not isinstance(model, MonDEQ):
            raise TypeError(f"`model` must be a MonDEQ; got {type(model).__name__}")
        model.check_unbiased("the gradient flow of Theorem 3.3.1")
        self.model = model
        self.X = check_tensor("X", X, shape=(model.in_features, None))
        self.y = check_tensor("y", y, shape=(X.shape[1],))
        self.h = check_positive("h", h)
        self.params = dict(model.named_parameters())
        self.initial = {k: p.detach().clone() for k, p in self.params.items()}
        with torch.no_grad():
            self.Z0 = model.equilibrium(X)  # Z(0), (n, N)
            self.W0 = model.weight()
        self.Z = self.Z0  # the warm start
        self.records: list[Record] = []
        self.step_count = 0

    def step(self, *, probe: bool = False) -> Record:
        """Record ``t = k h`` (with ``probe``, the checks of the module docstring) and take
        one Euler step. A non-finite loss raises ValueError naming the time."""
        Z = self.model.equilibrium(self.X, self.Z)
        loss = 0.5 * torch.sum((Z.T @ self.model.u - self.y) ** 2)  # Eq. (3.4)
        value = float(loss.detach())
        if not math.isfinite(value):
            raise ValueError(
                f"the flow's loss is {value} at t = {self.step_count * self.h:.4g} "
                f"(step {self.step_count}, h = {self.h:.3g}): take a smaller `h`"
            )
        record: Record = {"step": self.step_count, "t": self.step_count * self.h, "loss": value}
        grads = torch.autograd.grad(loss, list(self.params.values()))
        self.Z = Z.detach()
        if probe:
            record.update(self._probe(grads))
        with torch.no_grad():
            for p, g in zip(self.params.values(), grads, strict=True):
                p -= self.h * g
        self.step_count += 1
        self.records.append(record)
        return record

    def _probe(self, grads: tuple[torch.Tensor, ...]) -> Record:
        """Proposition 4, Eq. (3.14), the distances and Lemmas 3.3.2–3.3.4 at θ(t)."""
        current = {k: p.detach() for k, p in self.params.items()}
        K = prediction_kernel(**current, Z=self.Z, X=self.X, m=self.model.m)["K"]
        yhat = self.Z.T @ current["u"]
        predicted = -K @ (yhat - self.y)
        step, D_h, D_h2, flips = self._smooth_differences(grads, yhat)
        scale = float(torch.linalg.vector_norm(predicted))
        record: Record = {
            "prop4_step": step,
            "prop4_flips": flips,
            "prop4_err_h": float(torch.linalg.vector_norm(D_h - predicted)) / scale,
            "prop4_err_h2": float(torch.linalg.vector_norm(D_h2 - predicted)) / scale,
            "prop4_err_extrap": float(torch.linalg.vector_norm(2 * D_h2 - D_h - predicted)) / scale,
            "kernel_lambda_min": float(torch.linalg.eigvalsh(K)[0]),
            "sigma_min": sigma_min(self.Z),
        }
        for p in PARAMETERS:
            record[f"dist_{p}"] = float(torch.linalg.vector_norm(current[p] - self.initial[p]))
        with torch.no_grad():
            W = (self.model.weight(), self.W0)
        pairs = {"W": W, "Z": (self.Z, self.Z0)}
        record.update(
            lemma_columns(self.X, m=self.model.m, current=current, initial=self.initial, **pairs)
        )
        return record

    def _smooth_differences(self, grads: tuple[torch.Tensor, ...], yhat: torch.Tensor):
        """``(s/h, D_s, D_{s/2}, flips)`` for the largest ``s = h/2^j`` (``j ≤``
        :data:`MAX_HALVINGS`) whose steps ``s`` and ``s/2`` cross no ReLU kink, else for the
        smallest ``s`` tried (``flips > 0``: the ReLU derivatives that changed)."""
        with torch.no_grad():
            here = self._active_set(self.Z)
        s = self.h
        for _ in range(MAX_HALVINGS + 1):
            (D_s, flips_s), (D_s2, flips_s2) = (
                self._difference(grads, yhat, here, t) for t in (s, s / 2)
            )
            if flips_s + flips_s2 == 0:
                break
            s /= 2
        return s / self.h, D_s, D_s2, flips_s + flips_s2

    def _active_set(self, Z: torch.Tensor) -> torch.Tensor:
        """The ReLU derivatives ``W Z + U X > 0`` at the current parameters (n, N)."""
        return active_set(self.model.weight(), Z, self.model.injection(self.X))

    def _difference(
        self, grads: tuple[torch.Tensor, ...], yhat: torch.Tensor, here: torch.Tensor, s: float
    ) -> tuple[torch.Tensor, int]:
        """``(ŷ(θ − s∇L) − ŷ(θ))/s`` and how many ReLU derivatives (entries of ``D``)
        differ between θ (``here``) and θ − s∇L; the parameters are restored after."""
        saved = [p.detach().clone() for p in self.params.values()]
        with torch.no_grad():
            for p, g in zip(self.params.values(), grads, strict=True):
                p -= s * g
            Z = self.model.equilibrium(self.X, self.Z)
            moved = Z.T @ self.model.u
            flips = int((self._active_set(Z) != here).sum())
            for p, value in zip(self.params.values(), saved, strict=True):
                p.copy_(value)
        return (moved - yhat) / s, flips

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume: parameters, warm start, records, step count."""
        return {
            "params": {k: p.detach().clone() for k, p in self.params.items()},
            "Z": self.Z.clone(),
            "records": [dict(r) for r in self.records],
            "step_count": self.step_count,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        with torch.no_grad():
            for k, p in self.params.items():
                p.copy_(state["params"][k])
        self.Z = state["Z"].clone()
        self.records = [dict(r) for r in state["records"]]
        self.step_count = int(state["step_count"])
