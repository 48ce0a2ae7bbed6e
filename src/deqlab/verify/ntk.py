"""The DEQ NTK from an already computed K, without solving Eq. (14) a second time.

:func:`deqlab.theory.ntk.deq_ntk` (standard parameterization) is, entrywise,
``NTK_ij = K_ij (1 + P_ij)`` with ``P = Q'(u) / (2(1 − σ_w² Q'(u)))`` and
``u_ij = σ_w² k_ij + (1 − σ_w²) c_ij``, where ``c`` is the cosine of the inputs and
``k_ij = (1 − σ_w²) K_ij / √(ν_i ν_j)`` (ν_i = ‖x_i‖²/d) the normalised fixed point of
Eq. (14). Solving that fixed point is most of the cost of K; verify has K already, so it
reads k from it: one pass of elementwise work instead of a second Newton solve (at
n = 10⁴, seconds), block by block through
:func:`deqlab.theory.kernels.assemble_gram_blocks`. The tests check it against ``deq_ntk``.
"""

from __future__ import annotations

import torch

from deqlab._checks import check_tensor
from deqlab.theory.kernels import assemble_gram_blocks, check_inputs, check_sigma_w2, q_and_slope


def ntk_from_gram(X: torch.Tensor, K: torch.Tensor, sigma_w2: float) -> torch.Tensor:
    """lim Θ/m = K + P⊙K for inputs X (d, n) whose population Gram matrix is K (n, n)."""
    X = check_inputs(X).to(torch.float64)
    n = X.shape[1]
    K = check_tensor("K", K, shape=(n, n)).to(torch.float64)
    sigma_w2 = check_sigma_w2(sigma_w2)
    scale = X.norm(dim=0) / X.shape[0] ** 0.5  # √ν_i

    def entries(cos: torch.Tensor, rows: slice) -> torch.Tensor:
        """(1 + P_ij) K_ij/√(ν_i ν_j) on the block; assemble_gram_blocks scales it back."""
        unscaled = K[rows, rows.start :] / (scale[rows, None] * scale[None, rows.start :])
        k = unscaled * (1.0 - sigma_w2)
        k.diagonal().fill_(1.0)  # exactly, as Q'(u) has an infinite slope at u = 1
        u = cos.mul_(1.0 - sigma_w2).add_(k.clamp_(0.0, 1.0), alpha=sigma_w2).clamp_(-1.0, 1.0)
        slope = q_and_slope(u, slope=True)[1]  # Q'(u)
        p = slope.div(slope.mul(-2.0 * sigma_w2).add_(2.0))  # Q'/(2(1 − σ² Q'))
        return p.add_(1.0).mul_(unscaled)

    return assemble_gram_blocks(X, entries, 1.0)
