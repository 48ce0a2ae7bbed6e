"""Operator-splitting solvers for monotone DEQs: forward-backward and Peaceman–Rachford.

The equilibrium ``z = relu(W z + c)`` of a monotone DEQ is the zero of the operator splitting
problem ``0 ∈ F(z) + G(z)`` with ``F(z) = (I − W) z − c`` and ``G`` the normal cone of the
non-negative orthant, whose resolvent is ``relu`` (thesis, Section 2.3.2, Problem 1;
Winston & Kolter 2020). With ``I − W ⪰ m I`` (Eq. 3.3) both iterations converge linearly:

* forward-backward (Eq. 3.5): ``z ← relu(z − α((I − W) z − c))``; the map is a contraction
  with constant ``√(1 − 2αm + α²L²)``, ``L = ‖I − W‖₂`` (Proposition 3), hence for
  ``0 < α < 2m/L²``. ``α = 1`` is the plain fixed-point iteration ``z ← relu(W z + c)``.
* Peaceman–Rachford: ``u½ = 2z − u``, ``z½ = (I + α(I − W))⁻¹(u½ + αc)``, ``u = 2z½ − u½``,
  ``z = relu(u)``; it converges for every ``α > 0``. The resolvent ``(I + α(I − W))⁻¹`` is
  factored once (LU, or Cholesky when ``W`` is symmetric) and reused by every iteration and
  by the adjoint solve, which needs its transpose.

The adjoint of the equilibrium is the same kind of problem. With ``D = diag(1[W z* + c > 0])``
the gradient of a loss with respect to the pre-activation ``a = W z* + c`` is the ``w`` with
``w = D(g + Wᵀ w)``, ``g = ∂ℓ/∂z*``: the zero of ``F(w) = (I − Wᵀ) w − g`` plus the operator
whose resolvent is ``w ↦ D w`` (Winston & Kolter 2020, Section 4), solved by the same splitting.
All tensors hold samples as columns: ``z, c`` of shape ``(n, N)`` (thesis, Eq. 3.6).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass

import torch

from deqlab._checks import check_positive, check_tensor
from deqlab.solvers.options import SolverOptions
from deqlab.solvers.solution import Solution, SolverError, resolve_tol
from deqlab.solvers.trace import IterationTrace

Prox = Callable[[torch.Tensor], torch.Tensor]


class MonotoneOperator:
    """The linear part ``z ↦ (I − W) z`` of a monotone splitting, with cached factorisations.

    ``W`` of shape ``(n, n)`` must satisfy ``I − W ⪰ m I`` (guaranteed by Eq. 3.3); it is
    stored detached. ``lipschitz`` (``L = ‖I − W‖₂``) and the resolvent factorisation of each
    step size are computed on first use and cached, so one operator serves a forward solve
    and its adjoint with a single factorisation.
    """

    def __init__(self, W: torch.Tensor, m: float) -> None:
        W = check_tensor("W", W, ndim=2)
        if W.shape[0] != W.shape[1]:
            raise ValueError(f"`W` must be square; got shape {tuple(W.shape)}")
        self.m = check_positive("m", m)
        self.W = W.detach()
        self.n = W.shape[0]
        self._lipschitz: float | None = None
        self._resolvents: dict[float, tuple[str, tuple[torch.Tensor, ...]]] = {}

    @property
    def lipschitz(self) -> float:
        """``L = ‖I − W‖₂``, the Lipschitz constant of ``F`` (Proposition 3)."""
        if self._lipschitz is None:
            eye = torch.eye(self.n, dtype=self.W.dtype, device=self.W.device)
            self._lipschitz = float(torch.linalg.matrix_norm(eye - self.W, ord=2))
        return self._lipschitz

    def lipschitz_estimate(self, iters: int = 30) -> float:
        """A cheap estimate of ``L`` (power iteration on ``(I − W)ᵀ(I − W)``), for step sizes
        whose convergence does not depend on it (Peaceman–Rachford); a lower bound of ``L``."""
        if self._lipschitz is not None:
            return self._lipschitz
        v = torch.ones(self.n, 1, dtype=self.W.dtype, device=self.W.device)
        for _ in range(iters):
            y = v - self.W @ v  # (I − W) v
            v = y - self.W.T @ y  # (I − W)ᵀ(I − W) v
            v = v / torch.linalg.vector_norm(v)
        return float(torch.linalg.vector_norm(v - self.W @ v))

    @property
    def alpha_max(self) -> float:
        """``2m / L²``: forward-backward contracts for ``0 < α < 2m/L²`` (Proposition 3)."""
        return 2.0 * self.m / self.lipschitz**2

    def contraction_bound(self, alpha: float) -> float:
        """``√(1 − 2αm + α²L²)``, the bound of Proposition 3 on the Lipschitz constant of T_α."""
        return math.sqrt(max(1.0 - 2.0 * alpha * self.m + alpha**2 * self.lipschitz**2, 0.0))

    def affine(self, z: torch.Tensor, c: torch.Tensor, *, transpose: bool = False) -> torch.Tensor:
        """``W z + c`` (or ``Wᵀ z + c``), so that ``F(z) = (I − W) z − c = z − (W z + c)``."""
        return (self.W.T if transpose else self.W) @ z + c

    def factorization(self, alpha: float) -> str:
        """``"cholesky"`` when ``W`` is symmetric (``B = Bᵀ``, to rounding), else ``"lu"``."""
        return self._factor(alpha)[0]

    def _factor(self, alpha: float) -> tuple[str, tuple[torch.Tensor, ...]]:
        """Factorise ``K = I + α(I − W)`` once per α (cached)."""
        if alpha not in self._resolvents:
            eye = torch.eye(self.n, dtype=self.W.dtype, device=self.W.device)
            K = (1.0 + alpha) * eye - alpha * self.W  # (n, n)
            asymmetry = torch.linalg.matrix_norm(K - K.T) / torch.linalg.matrix_norm(K)
            if float(asymmetry) <= 16 * torch.finfo(K.dtype).eps:
                # K + Kᵀ ⪰ 2(1 + αm) I: symmetric positive definite
                self._resolvents[alpha] = ("cholesky", (torch.linalg.cholesky((K + K.T) / 2),))
            else:
                self._resolvents[alpha] = ("lu", torch.linalg.lu_factor(K))
        return self._resolvents[alpha]

    def solve_resolvent(
        self, y: torch.Tensor, alpha: float, *, transpose: bool = False
    ) -> torch.Tensor:
        """``(I + α(I − W))⁻¹ y`` (or its transpose), factorising once per ``alpha``."""
        kind, factors = self._factor(alpha)
        if kind == "cholesky":  # K = Kᵀ: the transpose solve is the same solve
            return torch.cholesky_solve(y, factors[0])
        LU, pivots = factors
        return torch.linalg.lu_solve(LU, pivots, y, adjoint=transpose)


@dataclass(frozen=True)
class SplittingProblem:
    """One solve's data: ``z = prox(W z + c)`` (``Wᵀ`` when ``transpose``, the adjoint) on
    ``op``, with step size ``alpha``; ``prox`` is ``relu`` forward and ``w ↦ D w`` adjoint."""

    op: MonotoneOperator
    c: torch.Tensor  # (n, N)
    alpha: float
    prox: Prox
    transpose: bool

    def affine(self, z: torch.Tensor) -> torch.Tensor:
        """``W z + c`` (or ``Wᵀ z + c``), ``(n, N)``."""
        return self.op.affine(z, self.c, transpose=self.transpose)


@dataclass(frozen=True, kw_only=True)
class _Splitting(SolverOptions, ABC):
    """Options and loop shared by the splitting solvers.

    Args:
        alpha: step size α > 0; None lets the solver choose it from ``m`` and ``L``.
        (others: see :class:`deqlab.solvers.options.SolverOptions`) The residual is the
            one of the DEQ map itself, ``f(z) = relu(W z + c)`` (adjoint:
            ``f(w) = D(g + Wᵀ w)``), under rule ``stop``, with norms over the whole
            ``(n, N)`` tensor; so a splitting `Solution` reads like any other solver's.
            ``tol=None`` takes the per-dtype default of every solver
            (:func:`~deqlab.solvers.solution.default_tol` of ``c``'s dtype).
    """

    alpha: float | None = None

    def __post_init__(self) -> None:
        if self.alpha is not None:
            check_positive("alpha", self.alpha)
        super().__post_init__()

    @abstractmethod
    def step_size(self, op: MonotoneOperator) -> float:
        """The step size α used on ``op`` (validated against the convergent range)."""

    @abstractmethod
    def _init_state(self, problem: SplittingProblem, z0: torch.Tensor, pre0: torch.Tensor):
        """The method's state before the first step from ``z0`` (``pre0 = W z0 + c``)."""

    @abstractmethod
    def _step(self, problem: SplittingProblem, state, z: torch.Tensor, pre: torch.Tensor):
        """``(state, z)`` after one iteration from ``z`` (``pre = W z + c``)."""

    def solve(
        self, op: MonotoneOperator, c: torch.Tensor, z0: torch.Tensor | None = None
    ) -> Solution:
        """The equilibrium ``z* = relu(W z* + c)``; ``c`` and ``z0`` of shape ``(n, N)``."""
        return self._run(op, c, z0, torch.relu, transpose=False, what="forward")

    def solve_adjoint(
        self,
        op: MonotoneOperator,
        mask: torch.Tensor,
        g: torch.Tensor,
        w0: torch.Tensor | None = None,
    ) -> Solution:
        """The adjoint ``w = D(g + Wᵀ w)``, ``D = diag(mask)``, i.e. ``∂ℓ/∂(W z* + c)``.

        ``mask`` (entries in {0, 1}) and ``g = ∂ℓ/∂z*`` have shape ``(n, N)``.
        """
        check_tensor("mask", mask, shape=tuple(g.shape))
        return self._run(op, g, w0, lambda y: mask * y, transpose=True, what="adjoint")

    def _run(self, op, c, z0, prox: Prox, *, transpose: bool, what: str) -> Solution:
        if not isinstance(op, MonotoneOperator):
            raise TypeError(f"`op` must be a MonotoneOperator; got {type(op).__name__}")
        check_tensor("c", c, shape=(op.n, None))
        if z0 is None:
            z0 = torch.zeros_like(c)
        check_tensor("z0", z0, shape=tuple(c.shape))
        problem = SplittingProblem(op, c, self.step_size(op), prox, transpose)
        alpha, tol = problem.alpha, resolve_tol(self.tol, c.dtype)
        z = z0
        pre = problem.affine(z)  # W z + c, (n, N)
        trace = IterationTrace(self, tol, prox(pre).reshape(1, -1), z.reshape(1, -1))
        state = self._init_state(problem, z, pre)
        while not trace.done:
            state, z = self._step(problem, state, z, pre)
            pre = problem.affine(z)
            trace.observe(z.reshape(1, -1), prox(pre).reshape(1, -1))
        solution = trace.solution(z0.shape)
        if self.throw and not solution.converged:
            raise SolverError(
                self.name,
                solution,
                tol=tol,
                stop=self.stop,
                context=(
                    f"{what} solve with α = {alpha:.4g}, m = {op.m:g}, "
                    f"L = ‖I − W‖₂ = {op.lipschitz:.4g}"
                ),
            )
        return solution


@dataclass(frozen=True, kw_only=True)
class ForwardBackward(_Splitting):
    """Forward-backward splitting, Eq. (3.5): ``z ← relu((I − α(I − W)) z + α c)``.

    ``alpha=None`` picks ``α = m / L²``, the minimiser of the Proposition 3 bound
    ``√(1 − 2αm + α²L²)``; an explicit ``alpha`` must lie in ``(0, 2m/L²)`` for the operator
    it is used on, else `ValueError`.
    """

    def step_size(self, op: MonotoneOperator) -> float:
        """α, checked against the convergent range ``(0, 2m/L²)`` of Proposition 3."""
        if self.alpha is None:
            return op.m / op.lipschitz**2
        if self.alpha >= op.alpha_max:
            raise ValueError(
                f"`alpha` = {self.alpha:g} is outside the convergent range (0, 2m/L²) = "
                f"(0, {op.alpha_max:.4g}) of forward-backward splitting (Proposition 3; "
                f"m = {op.m:g}, L = ‖I − W‖₂ = {op.lipschitz:.4g}); use alpha=None for m/L²"
            )
        return float(self.alpha)

    def _init_state(self, problem, z0, pre0):
        return None

    def _step(self, problem, state, z, pre):
        # z − α F(z) with F(z) = (I − W) z − c = z − pre
        alpha = problem.alpha
        return None, problem.prox((1.0 - alpha) * z + alpha * pre)


@dataclass(frozen=True, kw_only=True)
class PeacemanRachford(_Splitting):
    """Peaceman–Rachford splitting with the resolvent ``(I + α(I − W))⁻¹`` factored once.

    ``u½ = 2z − u``, ``z½ = (I + α(I − W))⁻¹(u½ + αc)``, ``u = 2z½ − u½``, ``z = relu(u)``
    (Winston & Kolter 2020, Algorithm 2). Converges for every ``α > 0`` when ``I − W ⪰ mI``
    (thesis, Section 2.3.2); ``alpha=None`` takes ``1/√(mL)``, ``L = ‖I − W‖₂`` (estimated
    by power iteration), the step that optimises the linear rate for a strongly monotone,
    Lipschitz ``F`` (Giselsson & Boyd 2017): e.g. 72 steps instead of 278 with α = 1 at
    L/m = 70. A warm start ``z0`` sets ``u0 = z0 − α F(z0)``, the exact Peaceman–Rachford
    state when ``z0`` is the equilibrium.
    """

    def step_size(self, op: MonotoneOperator) -> float:
        """α; None picks ``1/√(mL)`` (Giselsson & Boyd 2017), every α > 0 converges."""
        if self.alpha is None:
            return 1.0 / math.sqrt(op.m * op.lipschitz_estimate())
        return float(self.alpha)

    def _init_state(self, problem, z0, pre0):
        return (1.0 - problem.alpha) * z0 + problem.alpha * pre0  # u0 = z0 − α F(z0), (n, N)

    def _step(self, problem, state, z, pre):
        alpha, u_half = problem.alpha, 2.0 * z - state
        z_half = problem.op.solve_resolvent(
            u_half + alpha * problem.c, alpha, transpose=problem.transpose
        )
        u = 2.0 * z_half - u_half
        return u, problem.prox(u)
