"""The PL ratio, the curvature and the gradient-descent rate on a batch, from the NTK.

With the output Jacobian ``J`` (n k × P) and ``Θ = J Jᵀ`` (:mod:`.implicit_ntk`), a loss
``L(ŷ)`` with output gradient ``w = ∂L/∂ŷ`` and output Hessian ``H_ℓ`` has

    ∇_θ L = Jᵀ w,   ‖∇_θ L‖² = wᵀ Θ w,   Gauss–Newton  G = Jᵀ H_ℓ J,
    λ_max(G) = λ_max(H_ℓ^{1/2} Θ H_ℓ^{1/2})   (same non-zero spectrum).

Losses: ``"mse"`` ``L = Σ_i ½‖ŷ_i − y_i‖² / n`` (``w = r/n``, ``H_ℓ = I/n``), and
``"cross_entropy"`` ``L = Σ_i CE(ŷ_i, y_i) / n`` (``w_i = (p_i − e_{y_i})/n``,
``H_ℓ,i = (diag p_i − p_i p_iᵀ)/n``).

* PL ratio ``μ = ‖∇L‖² / (2L)``; for ``"mse"`` ``μ = rᵀΘr / (n ‖r‖²) ≥ λ_min(Θ)/n``, the
  floor that makes the PL inequality hold for every target (Ling et al. 2023, Eq. (4)–(5),
  with their Φ = n L).
* One GD step ``θ' = θ − η∇L`` on a β-smooth loss gives ``L' ≤ L − η(1 − βη/2)‖∇L‖²``,
  i.e. ``L'/L ≤ 1 − 2ημ(1 − βη/2)`` (Karimi, Nutini & Schmidt 2016, proof of Theorem 1),
  a decrease iff ``η < 2/β``. Here β is the Gauss–Newton curvature ``λ_max(G)`` at θ
  (ours: for MSE it is the Hessian minus the residual term ``Σ r_ic ∇²ŷ_ic``, exact for
  a model linear in θ), so the rate is a prediction, not a bound.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

LOSSES = ("mse", "cross_entropy")


@dataclass(frozen=True)
class LossGeometry:
    """``loss``, the output gradient ``w`` (n, k) and ``sqrt_hessian`` (n, k, k), the
    per-sample symmetric square root of ``n H_ℓ,i`` (so ``H_ℓ^{1/2} = sqrt_hessian/√n``)."""

    loss: float
    w: torch.Tensor
    sqrt_hessian: torch.Tensor


def loss_geometry(kind: str, outputs: torch.Tensor, y: torch.Tensor) -> LossGeometry:
    """:class:`LossGeometry` of ``kind`` at ``outputs`` (n, k) for targets ``y``, in float64."""
    out = outputs.detach().to(torch.float64)
    n, k = out.shape
    if kind == "mse":
        r = out - y.detach().to(out).reshape(n, k)
        eye = torch.eye(k, dtype=out.dtype, device=out.device).expand(n, k, k)
        return LossGeometry(float(r.square().sum() / (2 * n)), r / n, eye)
    logp = torch.log_softmax(out, dim=1)
    p = logp.exp()
    target = torch.nn.functional.one_hot(y.long().reshape(n), k).to(out)
    hess = torch.diag_embed(p) - p[:, :, None] * p[:, None, :]  # (n, k, k)
    vals, vecs = torch.linalg.eigh(hess)
    root = vecs @ torch.diag_embed(vals.clamp_min(0).sqrt()) @ vecs.transpose(1, 2)
    return LossGeometry(float(-(logp * target).sum() / n), (p - target) / n, root)


@dataclass(frozen=True)
class BatchRate:
    """PL ratio and GD geometry on a batch (module docstring). ``pl_floor`` is
    λ_min(Θ)/n for ``"mse"`` (None otherwise); ``eta_max = 2/curvature``; ``predicted``
    is the factor ``L'/L`` at ``lr`` (None without ``lr``), ``measured`` the factor of one
    real GD step (filled in by :func:`deqlab.diagnose`)."""

    loss: float
    grad_sq: float
    pl_ratio: float
    pl_floor: float | None
    curvature: float
    eta_max: float
    lr: float | None
    predicted: float | None
    measured: float | None = None

    def to_dict(self) -> dict:
        return {
            "loss": self.loss,
            "grad_sq": self.grad_sq,
            "pl_ratio": self.pl_ratio,
            "pl_floor": self.pl_floor,
            "curvature": self.curvature,
            "curvature_kind": "Gauss-Newton λ_max (exact, from the NTK)",
            "eta_max": self.eta_max,
            "lr": self.lr,
            "predicted_factor": self.predicted,
            "measured_factor": self.measured,
        }


def predicted_factor(lr: float, pl_ratio: float, curvature: float) -> float:
    """``1 − 2ημ(1 − βη/2)``: the loss factor of one GD step (module docstring)."""
    return 1.0 - 2.0 * lr * pl_ratio * (1.0 - curvature * lr / 2.0)


def batch_rate(
    kind: str, theta: torch.Tensor, outputs: torch.Tensor, y: torch.Tensor, lr: float | None
) -> BatchRate:
    """:class:`BatchRate` from the NTK ``theta`` (n k, n k) and the outputs (n, k)."""
    geo = loss_geometry(kind, outputs, y)
    n = geo.w.shape[0]
    w = geo.w.reshape(-1)
    grad_sq = float(w @ theta.to(w) @ w)
    root = torch.block_diag(*geo.sqrt_hessian).to(theta)  # (n k, n k) = √n H_ℓ^{1/2}
    curvature = float(torch.linalg.eigvalsh(root @ theta @ root)[-1]) / n
    pl_ratio = grad_sq / (2.0 * geo.loss) if geo.loss > 0 else float("inf")
    floor = float(torch.linalg.eigvalsh(theta)[0]) / n if kind == "mse" else None
    eta_max = 2.0 / curvature if curvature > 0 else float("inf")
    predicted = None if lr is None else predicted_factor(lr, pl_ratio, curvature)
    return BatchRate(geo.loss, grad_sq, pl_ratio, floor, curvature, eta_max, lr, predicted)
