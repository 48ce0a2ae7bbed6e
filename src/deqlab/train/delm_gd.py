"""Full-batch gradient descent on a DELM with the convergence bounds of Kawaguchi (2021).

Gradient flow (Eq. 6) is approximated by its explicit Euler discretization, plain GD
θ_{k+1} = θ_k − η ∇L(θ_k) on θ = (A, B): after k steps the flow time is T = k η.  The
approximation error is O(η) per unit time, so η must be small against 1/‖∇²L‖ for the
trajectory to follow the flow (the tests use steps well inside that regime).  The
infimum λ_T = inf_{t≤T} λ_min(D_t) is taken over the GD iterates t = 0, η, …, kη.

At every step the trainer evaluates λ_min(D_k) (Eq. 8) and records, at ``record_every``
steps, the loss, λ_min(D_k), λ_T, ‖B_k‖₁ and the two bounds of Theorem 1 (Eq. 7):

* initialization-independent: λ_T replaced by 1/(m(1+γ)²) (Eq. 33);
* initialization-dependent: λ_T = min_{j≤k} λ_min(D_j).

Square loss: Corollary 1 (κ = 2σ_min(Φ)², L*_R = L*_{0,R} = L*).  Logistic loss with
weight τ and radius R: Corollary 2 (κ = (2τ + ρ(R))σ_min(Φ)², L*_{0,R} in both places, which
Eq. (31) of the proof allows); the bound needs ‖B_t‖₁ < (1 − γ)R along the run, which
each record's ``radius_ok`` reports.  Where Φ is below the corollary's rank (or the logistic
loss has τ = 0 and R = ∞) κ = 0: the run trains as any other, and its bounds are vacuous
(L*_R + L(A₀, B₀) − L*_{0,R}); the corollary's rank hypothesis, measured by the claims,
says it does not apply.

Divergence: Eq. (33) (Appendix A.1) gives λ_min(D) ≥ 1/(m(1+γ)²) > 0 for every (A, B),
so a computed λ_min(D_k) ≤ 0 means D_k was lost to rounding — the iterates blew up — and
the run stops there as a divergence, like a non-finite loss.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from deqlab._checks import check_choice, check_int, check_positive, check_real, check_tensor
from deqlab.models.delm import DELM
from deqlab.papers.kawaguchi2021.theory import (
    check_radius,
    convergence_bound,
    corollary1_kappa,
    corollary2_kappa,
    lambda_lower_bound,
    lambda_min_dynamics,
    logistic_loss,
    logistic_loss_optimum,
    square_loss,
    square_loss_optimum,
)
from deqlab.train.divergence import (
    DivergenceError,
    check_parameters,
    describe_parameter,
    diverged,
    non_finite_parameter,
)
from deqlab.train.protocol import Record, Trainer

LOSSES = ("square", "logistic")
HISTORY_KEYS = (
    "step", "time", "loss", "lambda_min", "lambda_T", "bound_independent", "bound_dependent",
    "b_norm1", "radius_ok",
)  # fmt: skip


@dataclass(frozen=True)
class DELMGDConfig:
    """Hyper-parameters of full-batch GD on a DELM.

    ``lr``: step η > 0, the Euler time step of the gradient flow; ``loss``: ``"square"``
    (Corollary 1) or ``"logistic"`` (Corollary 2); ``tau``: weight τ ≥ 0 of the logistic
    loss's τ‖q‖² term; ``radius``: R ∈ (0, ∞] of Corollary 2 (ignored for the square loss);
    ``record_every``: keep the record of every this many steps (λ_T still uses every step).
    """

    lr: float
    loss: str = "square"
    tau: float = 0.0
    radius: float = math.inf
    record_every: int = 1

    def __post_init__(self) -> None:
        check_positive("lr", self.lr)
        check_choice("loss", self.loss, LOSSES)
        check_real("tau", self.tau, low=0.0)
        check_radius(self.radius)
        check_int("record_every", self.record_every, min_value=1)


class DELMGradientDescent(Trainer):
    """Full-batch GD on L(A, B) = Σ_i ℓ(B z*(x_i), y_i) (Eq. 5), recording Theorem 1's bounds.

    ``model`` is the DELM to train (its parameters are updated in place); ``X`` the inputs
    (m_x, n); ``Y`` the targets (m_y, n) (labels in {0, 1} and m_y = 1 for logistic).
    :meth:`evaluate` records the current step whatever ``config.record_every``.

    A step that diverges (a non-finite parameter, output or loss, or λ_min(D_k) ≤ 0) stops
    the run and raises :class:`~deqlab.train.divergence.DivergenceError` naming the step
    and the learning rate.
    """

    def __init__(self, model: DELM, X: torch.Tensor, Y: torch.Tensor, config: DELMGDConfig):
        super().__init__()
        if not isinstance(model, DELM):
            raise TypeError(f"`model` must be a DELM; got {type(model).__name__}")
        if not isinstance(config, DELMGDConfig):
            raise TypeError(f"`config` must be a DELMGDConfig; got {type(config).__name__}")
        self.model, self.config = model, config
        check_parameters(self._parameters(), "DELM")
        self.X = check_tensor("X", X, ndim=2)
        self.Y = check_tensor("Y", Y, shape=(model.m_y, X.shape[1]))
        with torch.no_grad():
            Phi = model.features(X)  # (m, n)
        self.kappa, self.loss_star = self._corollary(Phi)
        self.lambda_independent = lambda_lower_bound(model.m, model.gamma)
        self.last_finite: tuple[int, float] | None = None  # (step, loss) of the last finite one
        self.loss_init: float | None = None
        self.lambda_T = math.inf

    def _corollary(self, Phi: torch.Tensor) -> tuple[float, float]:
        """κ and L* of Corollary 1 (square loss) or Corollary 2 (logistic loss)."""
        if self.config.loss == "square":
            return corollary1_kappa(Phi), float(square_loss_optimum(Phi, self.Y)[1])
        tau, radius = self.config.tau, self.config.radius
        optimum = logistic_loss_optimum(Phi, self.Y, tau=tau, radius=radius)
        return corollary2_kappa(Phi, tau=tau, radius=radius), float(optimum[1])

    def objective(self) -> torch.Tensor:
        """L(A, B) at the current parameters (a differentiable 0-D tensor).

        Raises :class:`~deqlab.train.divergence.DivergenceError` (naming the step and the
        learning rate) when a parameter, the output or the loss is not finite after a step,
        and ValueError naming the parameter when one is not finite before the first step.
        """
        found = non_finite_parameter(self._parameters())
        if found is not None:
            raise self._diverged("parameter_not_finite", describe_parameter(found, "DELM"))
        Q = self.model(self.X)  # (m_y, n)
        if not bool(torch.isfinite(Q).all()):
            bad = int((~torch.isfinite(Q)).sum())
            what = f"{bad} of {Q.numel()} outputs of the DELM are NaN/Inf"
            raise self._diverged("output_not_finite", what)
        if self.config.loss == "square":
            loss = square_loss(Q, self.Y)
        else:
            loss = logistic_loss(Q, self.Y, self.config.tau)
        if not math.isfinite(float(loss.detach())):
            raise self._diverged("loss_not_finite", f"the loss L(A, B) is {float(loss.detach())}")
        self.last_finite = (self.step_count, float(loss.detach()))
        return loss

    def _parameters(self) -> list[tuple[str, torch.Tensor]]:
        return [("A", self.model.A), ("B", self.model.B)]

    def _diverged(self, reason: str, what: str) -> Exception:
        """The error to raise; after a step, the run stops with ``reason`` first."""
        if self.step_count == 0:
            return ValueError(f"{what} before the first gradient step")
        message = diverged(self.step_count, self.config.lr, what, self.last_finite)
        self.stop(reason, message)
        return DivergenceError(message)

    def step(self) -> Record:
        """Record step k at θ_k (kept every ``record_every`` steps), then take the GD step."""
        self.check_running()
        params = (self.model.A, self.model.B)
        loss = self.objective()
        record = self._observe(float(loss.detach()))
        grads = torch.autograd.grad(loss, params)
        with torch.no_grad():
            for p, g in zip(params, grads, strict=True):
                p.sub_(self.config.lr * g)
        self.step_count += 1
        return record

    def evaluate(self) -> Record:
        """Record θ_k without a step: the last record of a run of ``k`` steps."""
        self.check_running()
        with torch.no_grad():
            return self._observe(float(self.objective()), force=True)

    def _observe(self, loss: float, *, force: bool = False) -> Record:
        """The record of step k (λ_T updated); kept when due and not yet kept."""
        A, B = self.model.A.detach(), self.model.B.detach()
        if self.loss_init is None:
            self.loss_init = loss
        lam = float(lambda_min_dynamics(A, B, self.model.gamma))
        if not lam > 0:
            what = f"λ_min(D) = {lam:.6g}, which Eq. (33) bounds below by 1/(m(1+γ)²) > 0"
            raise self._diverged("lambda_min_not_positive", what)
        self.lambda_T = min(self.lambda_T, lam)
        k, time = self.step_count, self.step_count * self.config.lr
        b_norm1 = float(B.abs().sum(dim=0).max())
        record = {
            "step": k, "time": time, "loss": loss, "lambda_min": lam, "lambda_T": self.lambda_T,
            "bound_independent": self._bound(self.lambda_independent, time),
            "bound_dependent": self._bound(self.lambda_T, time), "b_norm1": b_norm1,
            "radius_ok": b_norm1 < (1 - self.model.gamma) * self.config.radius,
        }  # fmt: skip
        kept = self.records and self.records[-1]["step"] == k
        if not kept and (force or k % self.config.record_every == 0):
            self.records.append(record)
        return record

    def _bound(self, lambda_T: float, time: float) -> float:
        return float(convergence_bound(self.loss_init, self.loss_star, self.kappa, lambda_T, time))

    def history_tensors(self) -> dict[str, torch.Tensor]:
        """The records as columns: float64 tensors (``step`` int64, ``radius_ok`` bool)."""
        dtypes = {"step": torch.int64, "radius_ok": torch.bool}
        return {
            k: torch.tensor([r[k] for r in self.records], dtype=dtypes.get(k, torch.float64))
            for k in HISTORY_KEYS
        }

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume: model parameters, records, step, L(A₀, B₀), λ_T."""
        return {
            **self.protocol_state(),
            "model": self.model.state_dict(),
            "loss_init": self.loss_init,
            "lambda_T": self.lambda_T,
            "last_finite": self.last_finite,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a state from ``state_dict`` (same model shape, data and settings)."""
        keys = {"model", "records", "step_count", "loss_init", "lambda_T", "last_finite"}
        missing = keys - set(state)
        if missing:
            raise ValueError(f"`state` lacks the keys {sorted(missing)}")
        self.model.load_state_dict(state["model"])
        self.load_protocol_state(state)
        self.loss_init = state["loss_init"]
        self.lambda_T = state["lambda_T"]
        self.last_finite = state["last_finite"]
