"""The Gauss–Newton curvature and the PL ratio of a least-squares loss at one point, for any
differentiable prediction θ ↦ ŷ(θ) (ours: the stand-ins of ``deqlab verify`` where a
theorem cannot apply).

For Φ(θ) = ½‖ŷ(θ) − y‖² with Jacobian J = ∂ŷ/∂θ (n × p), ∇Φ = Jᵀr (r = ŷ − y) and the
Gauss–Newton part of ∇²Φ is JᵀJ, whose nonzero spectrum is that of H = JJᵀ (n × n):

- λ_max(H) by Lanczos on w ↦ J(Jᵀw): Jᵀw is one reverse pass (autograd), Jv the central
  difference (ŷ(θ + hv) − ŷ(θ − hv))/(2h), exact up to O(h²) (two more forward solves);
- the PL ratio μ = ‖∇Φ‖²/(2Φ) = ‖Jᵀr‖²/‖r‖², between λ_min(H) and λ_max(H).

GD on the quadratic model of Φ is stable for η < 2/λ_max(H); the descent lemma gives
Φ(θ − η∇Φ) ≤ (1 − η(2 − ηλ_max)μ)Φ(θ), largest decrease at η = 1/λ_max: rate 1 − μ/λ_max.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from deqlab.theory.spectra import lanczos_largest

__all__ = ["GaussNewton", "gauss_newton"]

#: The relative step of the central differences, times max(‖θ‖, 1)/‖v‖.
STEP = 1e-6
#: Lanczos stops at this relative change of λ_max (a stand-in, not a certificate).
RTOL = 1e-6


@dataclass(frozen=True)
class GaussNewton:
    """λ_max(JJᵀ) (``curvature``) and μ = ‖Jᵀr‖²/‖r‖² (``pl_ratio``) at θ; ``loss`` = ½‖r‖²."""

    curvature: float
    pl_ratio: float
    loss: float


def gauss_newton(
    predict: Callable[[torch.Tensor], torch.Tensor], theta: torch.Tensor, y: torch.Tensor
) -> GaussNewton:
    """:class:`GaussNewton` of Φ = ½‖predict(θ) − y‖² at ``theta`` (a flat float64 vector)."""
    theta = theta.detach().to(torch.float64)
    y = y.detach().to(torch.float64)
    with torch.no_grad():
        r = predict(theta) - y  # (n,)
    scale = STEP * max(float(theta.norm()), 1.0)

    def vjp(w: torch.Tensor) -> torch.Tensor:
        t = theta.clone().requires_grad_(True)
        return torch.autograd.grad(predict(t) @ w, t)[0]  # Jᵀw, (p,)

    def jvp(v: torch.Tensor) -> torch.Tensor:
        h = scale / max(float(v.norm()), 1e-300)
        with torch.no_grad():
            return (predict(theta + h * v) - predict(theta - h * v)) / (2 * h)  # Jv, (n,)

    def matvec(w: np.ndarray) -> np.ndarray:
        return jvp(vjp(torch.from_numpy(w))).numpy()

    grad = vjp(r)
    top, _ = lanczos_largest(matvec, r.numel(), rtol=RTOL)
    return GaussNewton(top, float(grad @ grad / (r @ r)), float(r @ r) / 2)
