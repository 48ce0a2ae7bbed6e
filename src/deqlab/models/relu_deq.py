"""The over-parameterized ReLU DEQ of Ling et al. (2023), Eqs. (1)–(2).

``Z = relu(W Z + U X)``, ``ŷ = aᵀ Z``, no biases. Data are **columns**: ``X`` is d×n
(sample i is ``X[:, i]``), ``Z`` is m×n, ``y`` and ``ŷ`` have shape (n,).
Loss: Φ(θ) = ½‖ŷ − y‖² (Section 2.1, the equation after Eq. (2)).

Parameters are initialized per Assumption 1 (``ReLUDEQ.init``); the structured solves
(no autograd) live in :mod:`deqlab.models.relu_deq_solve`.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch
from torch import nn

from deqlab._checks import check_int, check_real, check_tensor
from deqlab.implicit import Backward, fixed_point
from deqlab.models.relu_deq_solve import DEFAULT_MAX_ITER, RowSolution, solve_adjoint, solve_forward
from deqlab.solvers import Picard, Solver

#: Assumption 1 requires σ_w² < 1/8 (then ‖W(0)‖₂ ≤ 2√2 σ_w < 1 w.h.p., Lemma 1).
SIGMA_W2_LIMIT = 1.0 / 8.0


@dataclass(frozen=True)
class Gradients:
    """∇Φ of Lemma 2 / Eq. (3) with the loss, residual and the solves that produced it."""

    loss: float
    residual: torch.Tensor  # (n,) r = ŷ − y
    W: torch.Tensor  # (m, m) (D⊙V) Zᵀ
    U: torch.Tensor  # (m, d) (D⊙V) Xᵀ
    a: torch.Tensor  # (m,)   Z r
    forward: RowSolution
    adjoint: RowSolution


class ReLUDEQ(nn.Module):
    """Ling et al. (2023) DEQ ``Z = relu(W Z + U X)``, ``ŷ = aᵀ Z`` (Eqs. (1)–(2)).

    Args:
        W: (m, m) recurrent weight.
        U: (m, d) input weight.
        a: (m,) read-out vector.
    """

    def __init__(self, W: torch.Tensor, U: torch.Tensor, a: torch.Tensor) -> None:
        super().__init__()
        W = check_tensor("W", W, ndim=2)
        m = W.shape[0]
        check_tensor("W", W, shape=(m, m))
        U = check_tensor("U", U, shape=(m, None))
        a = check_tensor("a", a, shape=(m,))
        if not (W.dtype == U.dtype == a.dtype and W.device == U.device == a.device):
            raise ValueError(
                "`W`, `U`, `a` must share dtype and device; got "
                f"{W.dtype}/{W.device}, {U.dtype}/{U.device}, {a.dtype}/{a.device}"
            )
        self.W = nn.Parameter(W.detach().clone())
        self.U = nn.Parameter(U.detach().clone())
        self.a = nn.Parameter(a.detach().clone())

    @classmethod
    def init(
        cls,
        d: int,
        m: int,
        *,
        sigma_w2: float = 0.08,
        seed: int = 0,
        dtype: torch.dtype = torch.float64,
        device: torch.device | str | None = None,
    ) -> ReLUDEQ:
        """Assumption 1: W_ij ~ N(0, 2σ_w²/m), U_ij ~ N(0, 2/d), a_i ~ N(0, 1/m), i.i.d.

        Sampled on the CPU in float64 from ``seed`` and then cast, so a seed gives the
        same weights on every device and dtype. ``sigma_w2 >= 1/8`` is allowed but warns
        (Assumption 1 is violated and ‖W(0)‖₂ < 1 is no longer guaranteed).
        """
        d = check_int("d", d, min_value=1)
        m = check_int("m", m, min_value=1)
        sigma_w2 = check_real("sigma_w2", sigma_w2, low=0.0)
        seed = check_int("seed", seed, min_value=0)
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise TypeError(f"`dtype` must be a floating torch.dtype; got {dtype!r}")
        if sigma_w2 >= SIGMA_W2_LIMIT:
            warnings.warn(
                f"sigma_w2={sigma_w2:g} >= 1/8 violates Assumption 1 of Ling et al. (2023); "
                "‖W(0)‖₂ < 1 (well-posedness) is no longer guaranteed",
                UserWarning,
                stacklevel=2,
            )
        gen = torch.Generator(device="cpu").manual_seed(seed)
        W = torch.randn(m, m, generator=gen, dtype=torch.float64) * (2.0 * sigma_w2 / m) ** 0.5
        U = torch.randn(m, d, generator=gen, dtype=torch.float64) * (2.0 / d) ** 0.5
        a = torch.randn(m, generator=gen, dtype=torch.float64) * (1.0 / m) ** 0.5
        return cls(*(t.to(dtype=dtype, device=device) for t in (W, U, a)))

    @property
    def m(self) -> int:
        """Width (number of hidden units)."""
        return self.W.shape[0]

    @property
    def d(self) -> int:
        """Input dimension."""
        return self.U.shape[1]

    def check_data(self, X: object, y: object | None = None) -> tuple[torch.Tensor, ...]:
        """Validate ``X`` (d, n) and optionally ``y`` (n,) against this model."""
        X = check_tensor("X", X, ndim=2)
        if X.shape[0] != self.d:
            raise ValueError(
                f"`X` must have shape (d, n) with d == U.shape[1] == {self.d} (samples are "
                f"columns); got {tuple(X.shape)}"
            )
        if X.dtype != self.W.dtype or X.device != self.W.device:
            raise ValueError(
                f"`X` must have the model's dtype/device {self.W.dtype}/{self.W.device}; "
                f"got {X.dtype}/{X.device}"
            )
        if y is None:
            return (X,)
        y = check_tensor("y", y, ndim=1)
        if y.shape[0] != X.shape[1]:
            raise ValueError(
                f"`y` must have shape (n,) with n == X.shape[1] == {X.shape[1]}; "
                f"got {tuple(y.shape)}"
            )
        if y.dtype != X.dtype or y.device != X.device:
            raise ValueError(f"`y` must have dtype/device {X.dtype}/{X.device}")
        return X, y

    def layer(self, Z: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
        """One layer of Eq. (1): relu(W Z + U X), differentiable by autograd."""
        return torch.relu(self.W @ Z + self.U @ X)

    def predict(self, Z: torch.Tensor) -> torch.Tensor:
        """ŷ = aᵀ Z, shape (n,)."""
        return self.a @ Z

    def forward(
        self, X: torch.Tensor, *, solver: Solver | None = None, backward: Backward | None = None
    ) -> torch.Tensor:
        """ŷ = aᵀ Z* (n,), differentiable by autograd through the generic engine.

        Z* = relu(W Z* + U X) is solved by :func:`deqlab.fixed_point` (default
        ``Picard(tol=1e-10)`` from Z = 0; gradients by its exact implicit ``backward``).
        For training, :meth:`gradients` (structured, no autograd) is much faster.
        """
        (X,) = self.check_data(X)
        Z0 = torch.zeros(self.m, X.shape[1], dtype=X.dtype, device=X.device)
        solver = Picard(tol=1e-10, max_iter=DEFAULT_MAX_ITER) if solver is None else solver
        Z = fixed_point(lambda Z: self.layer(Z, X), Z0, solver=solver, backward=backward)
        return self.predict(Z)

    @torch.no_grad()
    def equilibrium(
        self,
        X: torch.Tensor,
        *,
        tol: float = 1e-6,
        max_iter: int = DEFAULT_MAX_ITER,
        Z0: torch.Tensor | None = None,
    ) -> RowSolution:
        """Solve Eq. (2) for the whole batch with warm-startable Picard iteration."""
        (X,) = self.check_data(X)
        if Z0 is not None:
            check_tensor("Z0", Z0, shape=(self.m, X.shape[1]))
        B = self.U @ X  # (m, n)
        if Z0 is None:  # Z = 0 has the product W Z = 0 for free
            Z_in, P = torch.zeros_like(B), torch.zeros_like(B)
        else:
            Z_in = Z0.to(B)
            P = self.W @ Z_in  # (m, n)
        return solve_forward(self.W, B, Z_in, P, tol=tol, max_iter=max_iter)

    @torch.no_grad()
    def gradients(
        self,
        X: torch.Tensor,
        y: torch.Tensor,
        *,
        tol: float = 1e-6,
        max_iter: int = DEFAULT_MAX_ITER,
    ) -> Gradients:
        """Φ and its exact implicit gradient by the structured adjoint (Lemma 2, Eq. (3)).

        ``C = a 1ᵀ + Wᵀ (D ⊙ C)`` (so that V = C diag(r) for the adjoint
        ``V = a rᵀ + Wᵀ(D⊙V)``), then ∇W = (D⊙V) Zᵀ, ∇U = (D⊙V) Xᵀ, ∇a = Z r.
        Raises :class:`deqlab.solvers.SolverError` if a solve does not converge.
        """
        X, y = self.check_data(X, y)
        fwd = self.equilibrium(X, tol=tol, max_iter=max_iter).raise_if_failed("forward")
        zeros = torch.zeros_like(fwd.Z)  # C = 0 has the product Wᵀ(D⊙C) = 0 for free
        adj = solve_adjoint(
            self.W, fwd.mask, self.a[:, None], zeros, zeros, tol=tol, max_iter=max_iter
        ).raise_if_failed("adjoint")
        r = self.predict(fwd.Z) - y  # (n,)
        G = adj.x * fwd.mask * r  # (m, n) = D ⊙ V
        return Gradients(
            loss=0.5 * float(r @ r),
            residual=r,
            W=G @ fwd.Z.T,
            U=G @ X.T,
            a=fwd.Z @ r,
            forward=fwd,
            adjoint=adj,
        )
