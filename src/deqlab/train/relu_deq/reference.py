"""The GD step on the ReLU DEQ written plainly: the specification of the fast trainer.

Paper layout, columns are samples (Ling et al. 2023): Z = relu(W Z + U X) (Eq. (2)) by
Picard, D = 1[W Z + U X > 0], the adjoint V = a rᵀ + Wᵀ(D ⊙ V) (Lemma 2, r = aᵀZ − y) by
Picard, and the update θ ← θ − η ∇Φ with ∇W = (D⊙V) Zᵀ, ∇U = (D⊙V) Xᵀ, ∇a = Z r (Eq. (3)).
Each solve stops when every column meets ‖x_{k+1,i} − x_{k,i}‖ <= tol ‖x_{k+1,i}‖.
Why: the tests' oracle for :class:`.trainer.GDTrainer` and the benchmark's baseline.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from deqlab.solvers import Solution, SolverError, Status


@dataclass(frozen=True)
class ReferenceStep:
    """Φ(θ) and θ − η∇Φ; Z, V to warm-start the next step; m×m by m×n ``products``."""

    loss: float
    W: torch.Tensor
    U: torch.Tensor
    a: torch.Tensor
    Z: torch.Tensor
    V: torch.Tensor
    products: int


def picard_columns(f, x: torch.Tensor, tol: float, max_iter: int) -> tuple[torch.Tensor, int]:
    """x ← f(x) until every column's relative change is <= tol; (x, evaluations of f)."""
    for k in range(1, max_iter + 1):
        x, previous = f(x), x
        diff = (x - previous).norm(dim=0)
        change = torch.where(diff == 0, 0.0, diff / x.norm(dim=0))  # a column 0 = 0 is still
        if bool((change <= tol).all()):
            return x, k
    residual = float(change.max())
    solution = Solution(x, Status.MAX_STEPS, max_iter, [residual], residual)
    raise SolverError("reference Picard", solution, tol=tol, stop="rel")


def reference_step(
    W, U, a, X, y, lr: float, *, tol: float, max_iter: int = 1000, Z0=None, V0=None
) -> ReferenceStep:
    """One GD step at θ = (W, U, a) on data X (d, n), y (n,), from Z0, V0 (default 0)."""
    B = U @ X
    Z0, V0 = (torch.zeros_like(B) if x is None else x for x in (Z0, V0))
    Z, k_forward = picard_columns(lambda Z: torch.relu(W @ Z + B), Z0, tol, max_iter)
    D = (W @ Z + B > 0).to(W.dtype)  # the mask at Z*: one more product
    r = a @ Z - y
    V, k_adjoint = picard_columns(lambda V: a[:, None] * r + W.T @ (D * V), V0, tol, max_iter)
    G = D * V
    return ReferenceStep(
        loss=0.5 * float(r @ r), W=W - lr * G @ Z.T, U=U - lr * G @ X.T, a=a - lr * Z @ r,
        Z=Z, V=V, products=k_forward + 1 + k_adjoint + 1,
    )  # fmt: skip
