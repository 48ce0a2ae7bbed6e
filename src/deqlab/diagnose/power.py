"""Per-sample power iteration on the cell's Jacobian at the equilibrium.

For a cell ``f(z, x)`` that treats the samples of a batch independently (GroupNorm,
LayerNorm, convolutions — not BatchNorm), the Jacobian ``J_f(z*)`` of the batched map is
block diagonal: one block ``J_i`` of size N × N per sample. One batched JVP ``v ↦ J v``
and one batched VJP ``u ↦ Jᵀu`` therefore act on every sample at once, and a power
iteration whose vectors are normalised per sample finds every block's top eigenvalue in
one run:

* ``‖J_i‖₂² = λ_max(J_iᵀ J_i)``;
* ``σ_max(I − J_i)² = λ_max(A_iᵀ A_i)`` with ``A_i = I − J_i``;
* ``σ_min(I − J_i)² = c_i − λ_max(c_i I − A_iᵀ A_i)`` with the shift ``c_i = σ_max(A_i)²``.

Power iteration (Golub & Van Loan, *Matrix Computations*, §7.3.1) on a symmetric PSD
operator converges at the rate λ₂/λ₁ of its two top eigenvalues; the Rayleigh quotient
``vᵀ B v`` of the normalised iterate is the estimate, a lower bound of λ_max. The JVP is
forward-mode AD (``torch.func.jvp``), the VJP reverse mode on one retained graph.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

Operator = Callable[[torch.Tensor], torch.Tensor]


class CellJacobian:
    """``J_f(z*)`` of ``fn: z ↦ f(z, x)`` as batched JVPs and VJPs on flat ``(B, N)`` vectors.

    Args:
        fn: the cell with its input fixed, mapping a state shaped like ``z_star`` to one.
        z_star: the equilibrium, ``(B, *S)``; dim 0 is the batch.
    """

    def __init__(self, fn: Callable[[torch.Tensor], torch.Tensor], z_star: torch.Tensor) -> None:
        self.fn = fn
        self.z_star = z_star.detach()
        self.shape = z_star.shape
        with torch.enable_grad():
            self._z_leaf = self.z_star.clone().requires_grad_()
            self._f_z = fn(self._z_leaf)

    def jvp(self, v: torch.Tensor) -> torch.Tensor:
        """``J v`` for ``v`` of shape ``(B, N)``."""
        _, out = torch.func.jvp(self.fn, (self.z_star,), (v.reshape(self.shape),))
        return out.reshape(v.shape)

    def vjp(self, u: torch.Tensor) -> torch.Tensor:
        """``Jᵀ u`` for ``u`` of shape ``(B, N)``."""
        (out,) = torch.autograd.grad(
            self._f_z, self._z_leaf, u.reshape(self.shape), retain_graph=True, allow_unused=True
        )
        return torch.zeros_like(u) if out is None else out.reshape(u.shape)


@dataclass(frozen=True)
class TopEigen:
    """Per-sample result of :func:`top_eigenvalue`: ``values`` (B,), the last relative
    change of each estimate ``change`` (B,), and the iterations run."""

    values: torch.Tensor
    change: torch.Tensor
    iterations: int


def _normalise(v: torch.Tensor) -> torch.Tensor:
    return v / torch.linalg.vector_norm(v, dim=1, keepdim=True).clamp_min(1e-300)


def top_eigenvalue(
    op: Operator, v0: torch.Tensor, *, tol: float = 1e-6, max_iter: int = 200
) -> TopEigen:
    """λ_max of a per-sample symmetric PSD operator ``op: (B, N) → (B, N)`` by power iteration.

    Stops when every sample's Rayleigh quotient changed by at most ``tol`` (relative) in the
    last iteration, or after ``max_iter`` applications of ``op``.
    """
    v = _normalise(v0)
    value = torch.zeros(v.shape[0], dtype=v.dtype, device=v.device)
    change = torch.full_like(value, float("inf"))
    iteration = 0
    while iteration < max_iter:
        iteration += 1
        w = op(v)  # (B, N)
        new = (v * w).sum(dim=1)  # Rayleigh quotient vᵀ B v, ‖v‖ = 1
        change = (new - value).abs() / new.abs().clamp_min(1e-300)
        value, v = new, _normalise(w)
        if bool((change <= tol).all()):
            break
    return TopEigen(value, change, iteration)


@dataclass(frozen=True)
class Spectra:
    """Per-sample ``‖J_f‖₂``, ``σ_max(I − J_f)``, ``σ_min(I − J_f)`` (each (B,)) and whether
    every power iteration met its tolerance."""

    jacobian_norm: torch.Tensor
    sigma_max: torch.Tensor
    sigma_min: torch.Tensor
    converged: bool
    iterations: int


def jacobian_spectra(
    jac: CellJacobian, *, tol: float = 1e-6, max_iter: int = 200, seed: int = 0
) -> Spectra:
    """``‖J_f‖₂`` and the extreme singular values of ``I − J_f``, per sample (module docstring)."""
    batch = jac.shape[0]
    gen = torch.Generator(device="cpu").manual_seed(seed)
    v0 = torch.randn(batch, jac.z_star[0].numel(), generator=gen, dtype=torch.float64)
    v0 = v0.to(dtype=jac.z_star.dtype, device=jac.z_star.device)

    def gram_j(v: torch.Tensor) -> torch.Tensor:  # J_iᵀ J_i v
        return jac.vjp(jac.jvp(v))

    def gram_a(v: torch.Tensor) -> torch.Tensor:  # A_iᵀ A_i v, A = I − J
        av = v - jac.jvp(v)
        return av - jac.vjp(av)

    norm_j = top_eigenvalue(gram_j, v0, tol=tol, max_iter=max_iter)
    top_a = top_eigenvalue(gram_a, v0, tol=tol, max_iter=max_iter)
    shift = top_a.values[:, None]  # c_i = σ_max(A_i)²

    def shifted(v: torch.Tensor) -> torch.Tensor:  # (c_i I − A_iᵀ A_i) v
        return shift * v - gram_a(v)

    low = top_eigenvalue(shifted, v0, tol=tol, max_iter=max_iter)
    runs = (norm_j, top_a, low)
    return Spectra(
        jacobian_norm=norm_j.values.clamp_min(0).sqrt(),
        sigma_max=top_a.values.clamp_min(0).sqrt(),
        sigma_min=(top_a.values - low.values).clamp_min(0).sqrt(),
        converged=all(bool((r.change <= tol).all()) for r in runs),
        iterations=sum(r.iterations for r in runs),
    )
