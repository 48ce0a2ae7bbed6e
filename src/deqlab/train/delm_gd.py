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
``history["radius_ok"]`` reports.
"""

from __future__ import annotations

import math

import torch

from deqlab._checks import check_choice, check_int, check_positive, check_real, check_tensor
from deqlab.models.delm import DELM
from deqlab.theory.kawaguchi2021 import (
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

LOSSES = ("square", "logistic")
HISTORY_KEYS = (
    "step", "time", "loss", "lambda_min", "lambda_T", "bound_independent", "bound_dependent",
    "b_norm1", "radius_ok",
)  # fmt: skip


class DELMGradientDescent:
    """Full-batch GD on L(A, B) = Σ_i ℓ(B z*(x_i), y_i) (Eq. 5), recording Theorem 1's bounds.

    Args:
        model: the DELM to train (its parameters are updated in place).
        X: inputs (m_x, n); Y: targets (m_y, n) (labels in {0, 1} and m_y = 1 for logistic).
        lr: step η > 0, the Euler time step of the gradient flow.
        loss: ``"square"`` (Corollary 1) or ``"logistic"`` (Corollary 2).
        tau: weight τ ≥ 0 of the logistic loss's τ‖q‖² term.
        radius: R ∈ (0, ∞] of Corollary 2 (ignored for the square loss).
        record_every: record the history every this many steps (λ_T still uses every step).
    """

    def __init__(
        self,
        model: DELM,
        X: torch.Tensor,
        Y: torch.Tensor,
        *,
        lr: float,
        loss: str = "square",
        tau: float = 0.0,
        radius: float = math.inf,
        record_every: int = 1,
    ) -> None:
        if not isinstance(model, DELM):
            raise TypeError(f"`model` must be a DELM; got {type(model).__name__}")
        self.model = model
        check_parameters(self._parameters(), "DELM")
        self.lr = check_positive("lr", lr)
        self.loss_name = check_choice("loss", loss, LOSSES)
        self.tau = check_real("tau", tau, low=0.0)
        self.radius = check_radius(radius)
        self.record_every = check_int("record_every", record_every, min_value=1)
        self.X = check_tensor("X", X, ndim=2)
        self.Y = check_tensor("Y", Y, shape=(model.m_y, X.shape[1]))
        with torch.no_grad():
            Phi = model.features(X)  # (m, n)
        if self.loss_name == "square":
            self.kappa = corollary1_kappa(Phi)
            self.loss_star = float(square_loss_optimum(Phi, self.Y)[1])
        else:
            self.kappa = corollary2_kappa(Phi, tau=self.tau, radius=radius)
            self.loss_star = float(
                logistic_loss_optimum(Phi, self.Y, tau=self.tau, radius=radius)[1]
            )
        self.lambda_independent = lambda_lower_bound(model.m, model.gamma)
        self.step_count = 0
        self.last_finite: tuple[int, float] | None = None  # (step, loss) of the last finite one
        self.loss_init: float | None = None
        self.lambda_T = math.inf
        self.history: dict[str, list] = {key: [] for key in HISTORY_KEYS}

    def objective(self) -> torch.Tensor:
        """L(A, B) at the current parameters (a differentiable 0-D tensor).

        Raises :class:`~deqlab.train.divergence.DivergenceError` (naming the step and the
        learning rate) when a parameter, the output or the loss is not finite after a step,
        and ValueError naming the parameter when one is not finite before the first step.
        """
        found = non_finite_parameter(self._parameters())
        if found is not None:
            raise self._not_finite(describe_parameter(found, "DELM"))
        Q = self.model(self.X)  # (m_y, n)
        if not bool(torch.isfinite(Q).all()):
            bad = int((~torch.isfinite(Q)).sum())
            raise self._not_finite(f"{bad} of {Q.numel()} outputs of the DELM are NaN/Inf")
        if self.loss_name == "square":
            loss = square_loss(Q, self.Y)
        else:
            loss = logistic_loss(Q, self.Y, self.tau)
        if not math.isfinite(float(loss.detach())):
            raise self._not_finite(f"the loss L(A, B) is {float(loss.detach())}")
        self.last_finite = (self.step_count, float(loss.detach()))
        return loss

    def _parameters(self) -> list[tuple[str, torch.Tensor]]:
        return [("A", self.model.A), ("B", self.model.B)]

    def _not_finite(self, what: str) -> Exception:
        if self.step_count == 0:
            return ValueError(f"{what} before the first gradient step")
        return DivergenceError(diverged(self.step_count, self.lr, what, self.last_finite))

    def run(self, n_steps: int) -> dict[str, torch.Tensor]:
        """Take ``n_steps`` GD steps (recording before each update) and return the history.

        The state after the last update is recorded too, so a run of k steps ends with the
        record of step k.  Calling ``run`` again continues the same trajectory. Raises
        :class:`~deqlab.train.divergence.DivergenceError` when the loss diverges.
        """
        n_steps = check_int("n_steps", n_steps, min_value=0)
        params = (self.model.A, self.model.B)
        for _ in range(n_steps):
            loss = self.objective()
            self._observe(float(loss.detach()))
            grads = torch.autograd.grad(loss, params)
            with torch.no_grad():
                for p, g in zip(params, grads, strict=True):
                    p.sub_(self.lr * g)
            self.step_count += 1
        with torch.no_grad():
            self._observe(float(self.objective()), force=True)
        return self.history_tensors()

    def _observe(self, loss: float, *, force: bool = False) -> None:
        A, B = self.model.A.detach(), self.model.B.detach()
        if self.loss_init is None:
            self.loss_init = loss
        lam = float(lambda_min_dynamics(A, B, self.model.gamma))
        self.lambda_T = min(self.lambda_T, lam)
        k = self.step_count
        last = self.history["step"][-1] if self.history["step"] else -1
        if k == last or not (force or k % self.record_every == 0):
            return
        time = k * self.lr
        b_norm1 = float(B.abs().sum(dim=0).max())
        row = {
            "step": k, "time": time, "loss": loss, "lambda_min": lam, "lambda_T": self.lambda_T,
            "bound_independent": self._bound(self.lambda_independent, time),
            "bound_dependent": self._bound(self.lambda_T, time), "b_norm1": b_norm1,
            "radius_ok": b_norm1 < (1 - self.model.gamma) * self.radius,
        }  # fmt: skip
        for key in HISTORY_KEYS:
            self.history[key].append(row[key])

    def _bound(self, lambda_T: float, time: float) -> float:
        return float(convergence_bound(self.loss_init, self.loss_star, self.kappa, lambda_T, time))

    def history_tensors(self) -> dict[str, torch.Tensor]:
        """The recorded history as float64 tensors (``step`` as int64, ``radius_ok`` as bool)."""
        dtypes = {"step": torch.int64, "radius_ok": torch.bool}
        return {
            k: torch.tensor(v, dtype=dtypes.get(k, torch.float64)) for k, v in self.history.items()
        }

    def state_dict(self) -> dict:
        """Everything needed to resume: model parameters, step, L(A₀, B₀), λ_T, history."""
        return {
            "model": self.model.state_dict(),
            "step_count": self.step_count,
            "loss_init": self.loss_init,
            "lambda_T": self.lambda_T,
            "history": {k: list(v) for k, v in self.history.items()},
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore a state from ``state_dict`` (same model shape, data and settings)."""
        missing = {"model", "step_count", "loss_init", "lambda_T", "history"} - set(state)
        if missing:
            raise ValueError(f"`state` lacks the keys {sorted(missing)}")
        self.model.load_state_dict(state["model"])
        self.step_count = state["step_count"]
        self.loss_init = state["loss_init"]
        self.lambda_T = state["lambda_T"]
        self.history = {k: list(state["history"][k]) for k in HISTORY_KEYS}
