"""The monotone DEQ of the thesis (Hieu 2022, Definition 3.2.1; Winston & Kolter 2020).

``Z* = relu(W Z* + U X + b1ᵀ)`` with ``W = (1 − m) I − AᵀA + B − Bᵀ`` (Eq. 3.3), so that
``I − W ⪰ m I`` and the equilibrium exists and is unique for every parameter value; the output
is ``ŷ = Z*ᵀ u`` (Section 3.2.2). Samples are columns, as in the thesis: ``X`` is ``(d, N)``,
``Z*`` is ``(n, N)`` and ``ŷ`` is ``(N,)``. The bias ``b`` (n,) is Winston & Kolter's fully
connected layer ``z = relu(Wz + Ux + b)``; the thesis has none (``bias=False``, the default:
``b = 0`` and no parameter). With a bias, ``∂ℓ/∂b = Σ_j w_j`` for the adjoint columns ``w_j``
(``C = UX + b1ᵀ`` enters as ``∂ℓ/∂C = w``).
"""

from __future__ import annotations

import torch
from torch import nn

from deqlab._checks import check_bool, check_int, check_positive, check_tensor
from deqlab.implicit import Backward, FixedPointStats, fixed_point
from deqlab.solvers import Solution, Solver
from deqlab.solvers.splitting import ForwardBackward, MonotoneOperator, PeacemanRachford

Splitting = ForwardBackward | PeacemanRachford


def active_set(W: torch.Tensor, Z: torch.Tensor, C: torch.Tensor) -> torch.Tensor:
    """``D = relu'(W Z + C)`` as 0/1 entries (n, N): the ReLU derivative at the equilibrium
    ``Z = relu(W Z + C)`` (``C = U X``; the D of Lemma 3.2.1), the one definition the
    backward pass and the thesis' quantities (kernel, Lemma 3.3.2) share.

    Read from the pre-activation, not from ``Z > 0``: an equilibrium computed to rounding
    can hold positives of 1e-17 where ``W Z + C < 0``, which ``Z > 0`` would count as active.
    """
    return (W @ Z + C > 0).to(Z.dtype)


class _MonotoneEquilibrium(torch.autograd.Function):
    """``Z* = relu(W Z* + C)`` solved by splitting; backward solves the adjoint by splitting."""

    @staticmethod
    def forward(ctx, W, C, op, solver, z0, stats):
        solution = solver.solve(op, C.detach(), z0)
        Z = solution.z  # (n, N)
        mask = active_set(W.detach(), Z, C.detach())  # D = diag(relu'(W Z + C))
        ctx.save_for_backward(Z, mask)
        ctx.op, ctx.solver, ctx.stats = op, solver, stats
        stats.forward = solution
        return Z

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_Z):
        Z, mask = ctx.saved_tensors
        adjoint = ctx.solver.solve_adjoint(ctx.op, mask, grad_Z.contiguous())
        ctx.stats.backward = adjoint
        grad_C = adjoint.z  # (n, N): ∂ℓ/∂(W Z* + C)
        return grad_C @ Z.T, grad_C, None, None, None, None


def monotone_fixed_point(
    W: torch.Tensor,
    C: torch.Tensor,
    *,
    m: float,
    solver: Splitting,
    z0: torch.Tensor | None = None,
    stats: FixedPointStats | None = None,
) -> torch.Tensor:
    """The equilibrium ``Z* = relu(W Z* + C)`` of a monotone DEQ, differentiable in ``W, C``.

    ``W`` (n, n) must satisfy ``I − W ⪰ m I``; ``C = U X`` (n, N) holds one sample per column.
    The forward pass and the adjoint ``w = D(g + Wᵀ w)`` are both solved by ``solver``, on one
    `MonotoneOperator` (one resolvent factorisation); then ``∂ℓ/∂W = w Z*ᵀ`` and
    ``∂ℓ/∂C = w`` (thesis, Lemma 3.2.3). ``stats``, a :class:`deqlab.implicit.FixedPointStats`,
    receives the forward and adjoint `Solution`.
    """
    if not isinstance(solver, ForwardBackward | PeacemanRachford):
        raise TypeError(
            "`solver` must be a splitting solver (ForwardBackward or PeacemanRachford); "
            f"got {type(solver).__name__}"
        )
    op = MonotoneOperator(W, m)
    stats = FixedPointStats() if stats is None else stats
    return _MonotoneEquilibrium.apply(W, C, op, solver, z0, stats)


class MonDEQ(nn.Module):
    """Monotone DEQ ``f(θ, x) = uᵀ z*``, ``z* = relu(W z* + U x + b)``, θ = (A, B, U, u[, b]).

    Args:
        in_features: input dimension ``d``.
        width: hidden width ``n``.
        m: monotonicity parameter ``m > 0`` of Eq. (3.3).
        solver: `PeacemanRachford` (default, α = 1/√(mL)) or `ForwardBackward`: the adjoint of the
            backward pass is solved by the same splitting, on the same factorisation. Any
            generic `Solver` (e.g. `Anderson`) instead takes the generic path
            :func:`deqlab.fixed_point` on ``Z ↦ relu(W Z + U X)`` with ``backward``.
        backward: the generic path's gradient (default ``Implicit()``); must be None with a
            splitting solver.
        sigma_A, sigma_B, sigma_U, sigma_u: initial entries are ``N(0, σ²/fan_in)``:
            ``A, B ~ N(0, σ²/n)``, ``U ~ N(0, σ_U²/d)``, ``u ~ N(0, σ_u²/n)``.
        generator: optional ``torch.Generator`` for a reproducible initialisation.
        bias: add the trainable bias ``b`` (initialised to 0; Winston & Kolter's layer).
            Without it (the thesis' model) there is no ``b`` parameter.

    ``last_forward`` / ``last_backward`` give the `Solution` of the latest solves.
    """

    def __init__(
        self,
        in_features: int,
        width: int,
        *,
        m: float = 1.0,
        solver: Splitting | Solver | None = None,
        backward: Backward | None = None,
        sigma_A: float = 1.0,
        sigma_B: float = 1.0,
        sigma_U: float = 1.0,
        sigma_u: float = 1.0,
        generator: torch.Generator | None = None,
        dtype: torch.dtype | None = None,
        device: torch.device | str | None = None,
        bias: bool = False,
    ) -> None:
        super().__init__()
        d = check_int("in_features", in_features, min_value=1)
        n = check_int("width", width, min_value=1)
        self.m = check_positive("m", m)
        if solver is None:
            solver = PeacemanRachford()
        if not isinstance(solver, ForwardBackward | PeacemanRachford | Solver):
            raise TypeError(
                "`solver` must be ForwardBackward, PeacemanRachford or a generic Solver "
                f"(e.g. Anderson); got {type(solver).__name__}"
            )
        if backward is not None and not isinstance(solver, Solver):
            raise ValueError(
                "`backward` applies to the generic path only; a splitting solver solves its "
                f"own adjoint (got solver {type(solver).__name__} and backward {backward!r})"
            )
        self.solver = solver
        self.backward = backward

        def normal(shape: tuple[int, ...], sigma: float, fan_in: int, name: str) -> nn.Parameter:
            std = check_positive(name, sigma) / fan_in**0.5
            values = torch.randn(shape, generator=generator, dtype=dtype) * std
            return nn.Parameter(values.to(device))

        self.A = normal((n, n), sigma_A, n, "sigma_A")
        self.B = normal((n, n), sigma_B, n, "sigma_B")
        self.U = normal((n, d), sigma_U, d, "sigma_U")
        self.u = normal((n,), sigma_u, n, "sigma_u")
        bias = check_bool("bias", bias)
        self.b = nn.Parameter(torch.zeros(n, dtype=self.u.dtype, device=device)) if bias else None
        self._stats = FixedPointStats()

    def check_unbiased(self, who: str) -> None:
        """Raise ValueError when the model has a bias: the thesis' theory (``who``) has none."""
        if self.b is not None:
            raise ValueError(
                f"`model` must have no bias for {who}: the thesis analyses z = relu(Wz + Ux) "
                "(MonDEQ(..., bias=False)); got a model with a bias b"
            )

    @property
    def in_features(self) -> int:
        return self.U.shape[1]

    @property
    def width(self) -> int:
        return self.U.shape[0]

    def weight(self) -> torch.Tensor:
        """``W = (1 − m) I − AᵀA + B − Bᵀ`` (Eq. 3.3), differentiable in A and B; (n, n)."""
        eye = torch.eye(self.width, dtype=self.A.dtype, device=self.A.device)
        return (1.0 - self.m) * eye - self.A.T @ self.A + self.B - self.B.T

    def _check_input(self, X: object) -> torch.Tensor:
        X = check_tensor("X", X, ndim=2)
        if X.shape[0] != self.in_features:
            raise ValueError(
                f"`X` must have shape (d, N) with d == U.shape[1] == {self.in_features} "
                f"(samples as columns); got {tuple(X.shape)}"
            )
        return X

    def injection(self, X: torch.Tensor) -> torch.Tensor:
        """``C = U X`` (Eq. 3.2), plus ``b1ᵀ`` with a bias; (n, N)."""
        C = self.U @ X
        return C if self.b is None else C + self.b[:, None]

    def equilibrium(self, X: torch.Tensor, z0: torch.Tensor | None = None) -> torch.Tensor:
        """The fixed point ``Z* = relu(W Z* + U X + b1ᵀ)`` (Eq. 3.2), shape ``(n, N)``.

        ``z0`` (n, N) warm-starts the splitting (e.g. the previous equilibrium in GD).
        """
        X = self._check_input(X)
        if z0 is not None:
            check_tensor("z0", z0, shape=(self.width, X.shape[1]))
        W, C = self.weight(), self.injection(X)  # (n, n), (n, N)
        if isinstance(self.solver, Solver):
            z0 = torch.zeros_like(C) if z0 is None else z0
            return fixed_point(
                lambda Z: torch.relu(W @ Z + C),
                z0,
                solver=self.solver,
                backward=self.backward,
                stats=self._stats,
            )
        return monotone_fixed_point(W, C, m=self.m, solver=self.solver, z0=z0, stats=self._stats)

    @property
    def last_forward(self) -> Solution | None:
        """The `Solution` of the latest forward solve."""
        return self._stats.forward

    @property
    def last_backward(self) -> Solution | None:
        """The `Solution` of the adjoint solve of the latest backward pass."""
        return self._stats.backward

    def forward(self, X: torch.Tensor, z0: torch.Tensor | None = None) -> torch.Tensor:
        """Predictions ``ŷ = Z*ᵀ u`` of shape ``(N,)`` for inputs ``X`` of shape ``(d, N)``."""
        return self.equilibrium(X, z0).T @ self.u
