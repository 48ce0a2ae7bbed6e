"""Deep equilibrium linear model (DELM) of Kawaguchi (ICLR 2021), Section 2.1.

The hidden state is the fixed point of the layer map (Eq. 4)

    h(z; x) = γ σ(A) z + φ(x),     σ(A)_ij = exp(A_ij) / Σ_k exp(A_kj)  (column softmax),

and the output is f(x) = B z*(x).  σ(A) is column-stochastic, so ‖γσ(A)‖₁ = γ < 1 and the
fixed point exists and is unique for every A (Proposition 1):

    z*(x) = U⁻¹ φ(x),     U = I_m − γ σ(A).

Shapes follow the paper: samples are columns.  X is (m_x, n), Φ = φ(X) is (m, n),
Z* = U⁻¹ Φ is (m, n) and f(X) = B Z* is (m_y, n).  Because the model is linear in φ(x),
it represents the linear predictor W = B U⁻¹ (the variable Z_t = B_t U_t⁻¹ of the proof
of Theorem 1, Appendix A.1).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from deqlab._checks import check_choice, check_int, check_real, check_tensor
from deqlab.implicit import FixedPointStats, Implicit, fixed_point
from deqlab.solvers import Solver

FeatureMap = Callable[[torch.Tensor], torch.Tensor]

DELM_INITS = ("normal", "identity")


def check_gamma(gamma: object) -> float:
    """Return γ as a float after checking γ ∈ (0, 1) (Eq. 4)."""
    return check_real("gamma", gamma, low=0.0, high=1.0, low_inclusive=False, high_inclusive=False)


def column_softmax(A: torch.Tensor) -> torch.Tensor:
    """σ(A)_ij = exp(A_ij) / Σ_k exp(A_kj): each column of the result sums to one (Eq. 4)."""
    return torch.softmax(A, dim=0)


def equilibrium_matrix(A: torch.Tensor, gamma: float) -> torch.Tensor:
    """U = I − γσ(A): the equilibrium z* = γσ(A)z* + φ(x) solves U z* = φ(x) (Eq. 4)."""
    return torch.eye(A.shape[0], dtype=A.dtype, device=A.device) - gamma * column_softmax(A)


def identity_features(X: torch.Tensor) -> torch.Tensor:
    """φ(x) = x, the feature map of every experiment of the paper (Section 4, Appendix D)."""
    return X


class DELM(nn.Module):
    """f(x) = B z*(x) with z* = γ σ(A) z* + φ(x) (Kawaguchi 2021, Eqs. 4–5).

    Args:
        m: hidden width = dimension of φ(x).
        m_y: output dimension.
        gamma: γ ∈ (0, 1).
        feature_map: fixed map φ from (m_x, n) inputs to (m, n) features; default φ(x) = x.
        init: ``"normal"`` — entries of A and B drawn i.i.d. N(0, 1/m) (Appendix D.1);
            ``"identity"`` — A = 0 and B = U₀ = I − γσ(0), so that f₀(x) = φ(x): the DELM
            starts at the identity function, like a linear ResNet with identity
            initialization (Section 4, Fig. 2).  Needs m_y == m.
        solver: ``None`` (default) solves (I − γσ(A)) Z = Φ directly for the whole batch;
            otherwise a ``deqlab.solvers`` solver object, used through
            ``deqlab.implicit.fixed_point`` with the exact implicit backward, both solves
            warm-started from the previous ones (``self.stats`` holds their Solutions).
        generator, dtype, device: for the random initialization and the parameters.
    """

    def __init__(
        self,
        m: int,
        m_y: int,
        *,
        gamma: float = 0.8,
        feature_map: FeatureMap | None = None,
        init: str = "normal",
        solver: Solver | None = None,
        generator: torch.Generator | None = None,
        dtype: torch.dtype | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        self.m = check_int("m", m, min_value=1)
        self.m_y = check_int("m_y", m_y, min_value=1)
        self.gamma = check_gamma(gamma)
        if feature_map is not None and not callable(feature_map):
            raise TypeError(
                "`feature_map` must be callable (m_x, n) -> (m, n); "
                f"got {type(feature_map).__name__}"
            )
        self.feature_map = identity_features if feature_map is None else feature_map
        if solver is not None and not isinstance(solver, Solver):
            raise TypeError(
                f"`solver` must be None (direct solve) or a deqlab Solver (Picard, Anderson, "
                f"Broyden); got {type(solver).__name__}"
            )
        self.solver = solver
        self.stats = FixedPointStats()
        check_choice("init", init, DELM_INITS)
        factory = {"dtype": dtype, "device": device}
        if init == "normal":  # drawn where the generator lives, then moved to `device`
            std = 1.0 / math.sqrt(self.m)
            gen_device = None if generator is None else generator.device
            A = torch.randn(self.m, self.m, generator=generator, dtype=dtype, device=gen_device)
            B = torch.randn(self.m_y, self.m, generator=generator, dtype=dtype, device=gen_device)
            A, B = (A * std).to(device), (B * std).to(device)
        else:
            if self.m_y != self.m:
                raise ValueError(
                    "`init='identity'` needs m_y == m (f₀(x) = φ(x)); "
                    f"got m={self.m}, m_y={self.m_y}"
                )
            A = torch.zeros(self.m, self.m, **factory)
            B = equilibrium_matrix(A, self.gamma)
        self.A = nn.Parameter(A)
        self.B = nn.Parameter(B)

    @classmethod
    def from_matrices(
        cls,
        A: torch.Tensor,
        B: torch.Tensor,
        *,
        gamma: float = 0.8,
        feature_map: FeatureMap | None = None,
        solver: Solver | None = None,
    ) -> DELM:
        """A DELM with the given A (m, m) and B (m_y, m), copied into its parameters."""
        check_tensor("A", A, ndim=2)
        m = A.shape[0]
        check_tensor("A", A, shape=(m, m))
        check_tensor("B", B, shape=(None, m))
        model = cls(m, B.shape[0], gamma=gamma, feature_map=feature_map, solver=solver,
                    generator=torch.Generator(), dtype=A.dtype, device=A.device)  # fmt: skip
        with torch.no_grad():
            model.A.copy_(A)
            model.B.copy_(B.to(A.dtype))
        return model

    def sigma(self) -> torch.Tensor:
        """σ(A), column-stochastic (m, m)."""
        return column_softmax(self.A)

    def U(self) -> torch.Tensor:
        """U = I_m − γ σ(A) (m, m), an M-matrix with ‖U⁻¹‖₁ ≤ 1/(1 − γ) (Appendix A.1)."""
        return (
            torch.eye(self.m, dtype=self.A.dtype, device=self.A.device) - self.gamma * self.sigma()
        )

    def features(self, X: torch.Tensor) -> torch.Tensor:
        """Φ = φ(X) (m, n), validated."""
        check_tensor("X", X, ndim=2)
        Phi = self.feature_map(X)
        if not isinstance(Phi, torch.Tensor) or Phi.ndim != 2 or Phi.shape[0] != self.m:
            got = tuple(Phi.shape) if isinstance(Phi, torch.Tensor) else type(Phi).__name__
            raise ValueError(
                f"`feature_map(X)` must have shape (m, n) = ({self.m}, {X.shape[1]}) for X of "
                f"shape {tuple(X.shape)}; got {got}"
            )
        return Phi

    def equilibrium(self, X: torch.Tensor) -> torch.Tensor:
        """Z* = (I − γσ(A))⁻¹ φ(X) (m, n), the fixed point of Eq. (4) for every column."""
        Phi = self.features(X)  # (m, n)
        if self.solver is None:
            return torch.linalg.solve(self.U(), Phi)
        return self._iterative_equilibrium(Phi)

    def _iterative_equilibrium(self, Phi: torch.Tensor) -> torch.Tensor:
        """Z* by the engine's solver, exact implicit backward warm-started from the last adjoint."""
        gamma_sigma = self.gamma * self.sigma()  # (m, m)
        previous = self.stats.forward
        z0 = Phi.detach()
        if previous is not None and previous.z.shape == Phi.shape and previous.z.dtype == Phi.dtype:
            z0 = previous.z  # warm start from the last equilibrium (same batch)
        return fixed_point(
            lambda Z: gamma_sigma @ Z + Phi,  # (m, n)
            z0,
            solver=self.solver,
            backward=Implicit(warm_start=True),
            stats=self.stats,
            hint=f"DELM with γ = {self.gamma:g}: the map is a ‖·‖₁-contraction",
        )

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        """f(X) = B Z* (m_y, n)."""
        return self.B @ self.equilibrium(X)

    def linear_weight(self) -> torch.Tensor:
        """W = B U⁻¹ (m_y, m): the linear model W φ(x) equal to this DELM."""
        return torch.linalg.solve(self.U().mT, self.B.mT).mT

    def extra_repr(self) -> str:
        return f"m={self.m}, m_y={self.m_y}, gamma={self.gamma:g}"
