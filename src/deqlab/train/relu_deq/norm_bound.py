"""A cheap upper bound on ‖W(τ)‖₂ along GD, measured exactly only when it matters.

Theorem 1 of Ling et al. (2023) needs ‖W(τ)‖₂ < 1 at every step. Weyl's inequality gives
``‖W(τ)‖₂ <= ‖W(s)‖₂ + δ`` with s the last Lanczos measurement and δ >= ‖W(τ) − W(s)‖_F,
δ the sum of η‖G‖_F‖Z‖_F (>= ‖η G Zᵀ‖_F) over the steps since s. When the bound reaches 1,
δ is first tightened to the exact distance, then ‖W‖₂ is measured. Why: a Lanczos solve per
step would cost more than the step.
"""

from __future__ import annotations

import math

import torch

from deqlab.theory.spectra import spectral_norm_lanczos

LANCZOS_MAX_ITER = 300


class NormBound:
    """‖W(s)‖₂ (``ref_norm``) at the last measurement s, W(s) and the drift δ since."""

    def __init__(self, W: torch.Tensor) -> None:
        self.W_ref, self.ref_norm, self.drift = W.clone(), math.nan, 0.0
        self.v_W: torch.Tensor | None = None  # Lanczos warm starts
        self.v_U: torch.Tensor | None = None

    def bound(self, W: torch.Tensor) -> float:
        """‖W(s)‖₂ + δ, with δ tightened to ‖W − W(s)‖_F when the bound is not below 1."""
        if not self.ref_norm + self.drift < 1.0:
            self.drift = float(torch.dist(W, self.W_ref))
        return self.ref_norm + self.drift

    def measure(self, W: torch.Tensor, U: torch.Tensor, tol: float) -> tuple[float, float]:
        """‖W‖₂ and ‖U‖₂ by warm-started Lanczos; W becomes the reference (δ = 0)."""
        W_norm, self.v_W = spectral_norm_lanczos(W, self.v_W, tol=tol, max_iter=LANCZOS_MAX_ITER)
        U_norm, self.v_U = spectral_norm_lanczos(U, self.v_U, tol=tol, max_iter=LANCZOS_MAX_ITER)
        self.W_ref, self.ref_norm, self.drift = W.clone(), W_norm, 0.0
        return W_norm, U_norm

    def moved(self, frobenius_bound: float) -> None:
        """W moved by at most ``frobenius_bound`` in Frobenius norm."""
        self.drift += frobenius_bound

    def state_dict(self) -> dict:
        clone = [None if v is None else v.clone() for v in (self.v_W, self.v_U)]
        return {"W_ref": self.W_ref.clone(), "ref_norm": self.ref_norm, "drift": self.drift,
                "v_W": clone[0], "v_U": clone[1]}  # fmt: skip

    def load_state_dict(self, state: dict) -> None:
        self.W_ref, self.ref_norm = state["W_ref"].clone(), state["ref_norm"]
        self.drift = state["drift"]
        self.v_W, self.v_U = (
            None if state[k] is None else state[k].clone() for k in ("v_W", "v_U")
        )
