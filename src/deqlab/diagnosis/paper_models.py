"""The papers' three models as what :func:`deqlab.diagnose` reads: a :class:`deqlab.DEQ` on
row-major samples, a head, the inputs as rows, and the parameters the paper's NTK is over.

The cells and heads hold the models' own ``nn.Parameter`` objects (a diagnosis reads the model
as it is, and sees later training). The papers put samples in columns; ``diagnose`` in rows:

* Ling et al. 2023, Eqs. (1)–(2): ``z = relu(W z + U x)``, ``ŷ = aᵀz``; over (W, U, a) the
  NTK is ``H = H1 + H2 + H3`` of Eq. (4), over ``a`` alone ``G = ZᵀZ`` (λ_min = λ_0 at init);
* the thesis's monotone DEQ (Hieu 2022, Eqs. 3.2–3.3): ``z = relu(W z + U x)`` with
  ``W = (1 − m)I − AᵀA + B − Bᵀ``, ``ŷ = uᵀz``; over (A, B, U, u) the NTK is the kernel
  ``K`` of Proposition 4 (Eq. 3.7);
* Kawaguchi 2021, Eq. (4): ``z = γ σ(A) z + φ(x)``, ``f = B z``; over (A, B) on the inputs
  ``φ(X) = I_m`` the NTK is the matrix ``D_t`` of Eq. (8) (Theorem 1's λ_T is its least
  eigenvalue along the flow); on other features ``(Φᵀ ⊗ I) D_t (Φ ⊗ I)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from deqlab.implicit import DEQ, Implicit
from deqlab.models.delm import DELM, column_softmax
from deqlab.models.mondeq import MonDEQ
from deqlab.models.relu_deq import ReLUDEQ
from deqlab.solvers import Anderson, Solver


@dataclass(frozen=True)
class PaperDEQ:
    """``diagnose(p.deq, p.X, y, head=p.head, params=p.params)`` reads the paper's model."""

    deq: DEQ
    head: nn.Module
    X: torch.Tensor
    params: tuple[str, ...]


class _ReLUCell(nn.Module):
    """``relu(z Wᵀ + x Uᵀ)`` on rows, holding the model's W and U."""

    def __init__(self, W: nn.Parameter, U: nn.Parameter) -> None:
        super().__init__()
        self.W, self.U = W, U

    def forward(self, z: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(z @ self.W.T + x @ self.U.T)

    def initial_state(self, x: torch.Tensor) -> torch.Tensor:
        return x.new_zeros(x.shape[0], self.W.shape[0])


class _MonotoneCell(nn.Module):
    """``relu(z Wᵀ + x Uᵀ [+ b])`` with ``W = (1 − m)I − AᵀA + B − Bᵀ``, holding A, B, U (, b)."""

    def __init__(self, model: MonDEQ) -> None:
        super().__init__()
        self.A, self.B, self.U, self.m = model.A, model.B, model.U, model.m
        self.b = model.b

    def forward(self, z: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        eye = torch.eye(self.A.shape[0], dtype=self.A.dtype, device=self.A.device)
        W = (1.0 - self.m) * eye - self.A.T @ self.A + self.B - self.B.T
        pre = z @ W.T + x @ self.U.T
        return torch.relu(pre if self.b is None else pre + self.b)

    def initial_state(self, x: torch.Tensor) -> torch.Tensor:
        return x.new_zeros(x.shape[0], self.A.shape[0])


class _DELMCell(nn.Module):
    """``γ z σ(A)ᵀ + φ`` on rows (φ = φ(x), given as the input), holding A."""

    def __init__(self, A: nn.Parameter, gamma: float) -> None:
        super().__init__()
        self.A, self.gamma = A, gamma

    def forward(self, z: torch.Tensor, phi: torch.Tensor) -> torch.Tensor:
        return self.gamma * z @ column_softmax(self.A).T + phi


class _Linear(nn.Module):
    """``z ↦ z Vᵀ`` (a matrix V) or ``z ↦ z v`` as one output (a vector v), holding it."""

    def __init__(self, name: str, weight: nn.Parameter) -> None:
        super().__init__()
        self.name = name
        self.register_parameter(name, weight)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        weight = getattr(self, self.name)
        return z @ weight[:, None] if weight.ndim == 1 else z @ weight.T


def _solver(solver: Solver | None, dtype: torch.dtype) -> Solver:
    tight = 1e-13 if dtype == torch.float64 else 1e-6
    return Anderson(tol=tight, max_iter=500) if solver is None else solver


def relu_deq(model: ReLUDEQ, X: torch.Tensor, solver: Solver | None = None) -> PaperDEQ:
    """Ling et al.'s ReLU DEQ on inputs ``X`` (d, n), samples as columns (module docstring)."""
    cell = _ReLUCell(model.W, model.U)
    deq = DEQ(cell, solver=_solver(solver, X.dtype), backward=Implicit())
    return PaperDEQ(deq, _Linear("a", model.a), X.T, ("cell.W", "cell.U", "head.a"))


def mondeq(model: MonDEQ, X: torch.Tensor, solver: Solver | None = None) -> PaperDEQ:
    """The thesis's monotone DEQ on inputs ``X`` (d, N), samples as columns; a bias ``b``
    (Winston & Kolter's layer, not the thesis's) is a trained parameter too."""
    params = ("cell.A", "cell.B", "cell.U") + (() if model.b is None else ("cell.b",))
    deq = DEQ(_MonotoneCell(model), solver=_solver(solver, X.dtype), backward=Implicit())
    return PaperDEQ(deq, _Linear("u", model.u), X.T, (*params, "head.u"))


def delm(model: DELM, X: torch.Tensor, solver: Solver | None = None) -> PaperDEQ:
    """Kawaguchi's DELM on inputs ``X`` (m_x, n), samples as columns: the DEQ's input is
    ``φ(X)ᵀ`` (the feature map has no parameters)."""
    with torch.no_grad():
        phi = model.features(X).T  # (n, m)
    deq = DEQ(_DELMCell(model.A, model.gamma), solver=_solver(solver, X.dtype), backward=Implicit())
    return PaperDEQ(deq, _Linear("B", model.B), phi, ("cell.A", "head.B"))
