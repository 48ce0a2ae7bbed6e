"""Jacobian regularisation of a DEQ: a Hutchinson estimate of ``‖J_f(z*)‖_F² / d``.

Bai, Koltun & Kolter 2021 ("Stabilizing equilibrium models by Jacobian regularization",
Eq. 4 and §3.2) add ``γ ‖J_f(z*)‖_F² / d`` to the training loss to keep the fixed point
well conditioned, and estimate the Frobenius norm with Hutchinson's trick: for
``ε ~ N(0, I_d)``,

    E_ε ‖εᵀ J_f‖² = tr(J_f J_fᵀ) = ‖J_f‖_F²,

so ``(1/k) Σ_i ‖ε_iᵀ J_f‖² / d`` with ``k`` probes is unbiased, one VJP each (with
``create_graph`` so that the term is differentiable). ``d`` is the number of entries of
``z`` (for a batch, ``‖J_f‖_F² / d`` is then the mean over samples of each sample's
``‖J_i‖_F² / d_i`` when ``f`` acts per sample).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from deqlab._checks import check_int, check_tensor


def jacobian_penalty(
    f: Callable[[torch.Tensor], torch.Tensor],
    z: torch.Tensor,
    k: int = 1,
    *,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Unbiased estimate of ``‖J_f(z)‖_F² / z.numel()`` from ``k`` Gaussian probes.

    Args:
        f: map of tensors shaped like ``z`` (e.g. a DEQ cell with its input bound).
        z: the point, typically ``z*`` (detached here: the term is differentiated with
            respect to what ``f`` closes over, the parameters, at fixed ``z``).
        k: number of probe vectors ``ε ~ N(0, I)`` (the estimator's variance falls as 1/k).
        generator: random generator of the probes (on ``z``'s device).

    Returns:
        a 0-d tensor; differentiable when grad mode is on (one evaluation of ``f`` and
        ``k`` VJPs built with ``create_graph``).
    """
    z = check_tensor("z", z)
    k = check_int("k", k, min_value=1)
    create = torch.is_grad_enabled()
    with torch.enable_grad():
        z_leaf = z.detach().requires_grad_()
        fz = f(z_leaf)
        if fz.shape != z.shape:
            raise ValueError(
                f"`f(z)` must have the shape of `z` {tuple(z.shape)}; got {tuple(fz.shape)}"
            )
        total = fz.new_zeros(())
        for _ in range(k):
            probe = torch.randn(z.shape, generator=generator, dtype=z.dtype, device=z.device)
            (vjp,) = torch.autograd.grad(fz, z_leaf, probe, create_graph=create, retain_graph=True)
            total = total + vjp.square().sum()
    return total / (k * z.numel())
