"""Anderson's step written plainly, one sample at a time: the specification of
:class:`deqlab.solvers.anderson.AndersonState` (which updates ``G Gᵀ`` by one row in place,
reuses views of its buffers, and applies the safeguard in numpy on the host).

For one sample with its last ``n`` residuals ``g_i`` (the rows of ``G``, ``n × N``) and damped
images ``x_i + β g_i`` (Walker & Ni 2011; the module docstring of :mod:`.anderson`):

    H = G Gᵀ,   λ = tikhonov · tr(H) / n,   (H + λ I) y = 1,   α = y / 1ᵀy,
    x⁺ = Σ_i α_i (x_i + β g_i),

with ``α = e_newest`` (the plain damped step) where the LU factorisation of ``H + λI`` breaks
down (a zero pivot) or ``α`` is not finite. Why: the tests' oracle for the batched step.
"""

from __future__ import annotations

import torch


def reference_step(
    images: list[torch.Tensor], residuals: list[torch.Tensor], newest: int, tikhonov: float
) -> torch.Tensor:
    """``x⁺`` of one sample from its stored damped images ``x_i + β g_i`` and residuals
    ``g_i`` (``N`` each, in the same order), ``newest`` the index of the latest pair."""
    G, X = torch.stack(residuals), torch.stack(images)  # (n, N)
    work = torch.promote_types(G.dtype, torch.float32)
    H = G.to(work) @ G.to(work).T  # the textbook Gram matrix, O(n² N)
    n = H.shape[0]
    lam = tikhonov * torch.trace(H) / n
    y, info = torch.linalg.solve_ex(
        H + lam * torch.eye(n, dtype=work), torch.ones(n, 1, dtype=work)
    )
    alpha = y[:, 0] / y.sum()
    if info != 0 or not torch.isfinite(alpha).all():
        alpha = torch.zeros(n, dtype=work)
        alpha[newest] = 1.0
    return alpha.to(X.dtype) @ X
