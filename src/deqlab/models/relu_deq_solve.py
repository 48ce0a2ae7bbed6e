"""Structured, autograd-free solves of the ReLU DEQ for the whole batch at once.

Both solves are Picard iterations ``x_{k+1} = h(M x_k)`` whose only costly operation is
one m×m by m×n product ``M x_k`` (M = W forward, Wᵀ adjoint):

* forward, Eq. (2):  ``Z_{k+1} = relu(W Z_k + B)`` with ``B = U X``;
* adjoint (Lemma 2): ``C_{k+1} = a 1ᵀ + Wᵀ (D ⊙ C_k)`` with ``D = 1[W Z + B > 0]``.
  Column i is ``c_i = (I − Wᵀ D_i)⁻¹ a``, independent of the residual r, and the adjoint
  ``V = a rᵀ + Wᵀ(D⊙V)`` of Eq. (3) is ``V = C diag(r)``. Warm-starting C (which moves
  only with W, a, D, and continuously: the mask is applied inside the product, so a mask
  flip changes the product by one row of W, see :func:`remask_product`) instead of V
  (which moves with r) is what pays.

A solve starts from an input ``x_in`` *and its product* ``M x_in``: the caller may pass a
product it obtained cheaply (a rank-n update, see :mod:`deqlab.train.gd`), so a warm
start that is already within tolerance costs no m×m product at all. The returned
``x_in``/``product`` pair is the last input and its product; the mask D of the forward
solve is taken from the pre-activation of that last product (no extra product).

Stopping rule, per column (sample) as in torchdeq's ``'rel'`` mode:
``‖x_{k+1,i} − x_{k,i}‖ <= tol · ‖x_{k+1,i}‖`` for every column i; a column that meets it
is not iterated again, so late iterations cost a fraction of a product. The reported
residual is the largest column residual; ``n_products`` counts products in units of a
full m×m by m×n product (a product over k of the n columns counts k/n).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from deqlab._checks import check_int, check_positive

DEFAULT_MAX_ITER = 1000


class SolveError(RuntimeError):
    """A structured solve did not reach its tolerance (or produced NaN/Inf)."""


@dataclass(frozen=True)
class CachedSolve:
    """Result of ``x_{k+1} = h(M x_k)``: the solution and the warm start for the next solve.

    ``x`` = h(product) is the solution; ``x_in`` is the input of the last product and
    ``product`` = M x_in. ``n_steps`` counts evaluations of h, ``n_products`` the m×m by
    m×n products actually computed (the first one may have been supplied by the caller).
    """

    x: torch.Tensor
    x_in: torch.Tensor
    product: torch.Tensor
    n_steps: int
    n_products: float
    residual: float
    residuals: tuple[float, ...]
    converged: bool

    @property
    def message(self) -> str:
        """Human description of the outcome."""
        if self.converged:
            return f"converged in {self.n_steps} steps (residual {self.residual:.3g})"
        if not math.isfinite(self.residual):
            return f"residual became {self.residual} after {self.n_steps} steps"
        return f"not converged after {self.n_steps} steps (residual {self.residual:.3g})"

    def raise_if_failed(self, name: str):
        """Return ``self``; raise :class:`SolveError` naming the solve if it failed."""
        if not self.converged:
            raise SolveError(f"{name} solve {self.message}")
        return self


@dataclass(frozen=True)
class ForwardSolve(CachedSolve):
    """Forward solve of Eq. (2); ``mask`` is D = 1[W Z_in + B > 0] of the last step."""

    mask: torch.Tensor

    @property
    def Z(self) -> torch.Tensor:
        """The equilibrium estimate, (m, n)."""
        return self.x


@dataclass(frozen=True)
class AdjointSolve(CachedSolve):
    """Adjoint solve ``Y = D ⊙ (S + Wᵀ Y)``; ``x`` is Y, (m, n)."""


def _row_residuals(x: torch.Tensor, x_in: torch.Tensor) -> torch.Tensor:
    """‖x_i − x_in,i‖ / ‖x_i‖ per row (0 if both are 0, inf if only x_i is 0)."""
    diff = (x - x_in).square().sum(dim=1).sqrt()  # (n,)
    scale = x.square().sum(dim=1).sqrt()
    return torch.where(scale > 0, diff / scale, torch.where(diff == 0, 0.0, math.inf))


def _iterate(
    apply: Callable[[torch.Tensor, torch.Tensor | None], torch.Tensor],
    finish: Callable[[torch.Tensor, torch.Tensor | None], torch.Tensor],
    x_in: torch.Tensor,
    product: torch.Tensor,
    *,
    tol: float,
    max_iter: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int, float, list[float], bool]:
    """Picard on ``x ← finish(apply(x))`` from ``x_in`` with ``product = apply(x_in)``.

    Columns are independent problems: a column whose relative residual is <= ``tol`` is
    not iterated again, so a product costs (active columns)/n of a full one. The loop
    works on transposes (n, m), one row per column, so that selecting and storing the
    active columns moves contiguous rows: ``apply``/``finish`` receive and return
    transposed blocks (k, m) and the active row indices (None for all). Inputs and
    results are (m, n); the returned input and product are transposed views.
    """
    tol = check_positive("tol", tol)
    max_iter = check_int("max_iter", max_iter, min_value=1)
    n = x_in.shape[1]
    x_in, product = x_in.T.contiguous(), product.T.contiguous()  # (n, m), updated by rows
    x = finish(product, None)  # (n, m)
    res = _row_residuals(x, x_in)  # (n,)
    residuals = [float(res.max())]
    n_products, step = 0.0, 1
    while True:
        active = ~(res <= tol)  # NaN counts as active
        if not math.isfinite(residuals[-1]) or not bool(active.any()) or step == max_iter:
            ok = not bool(active.any())
            # the solution in ordinary layout; x_in, product (warm starts) as views
            return x.T.contiguous(), x_in.T, product.T, step, n_products, residuals, ok
        step += 1
        if bool(active.all()):
            x_in = x
            product = apply(x_in, None)  # (n, m): the m×m by m×n product, transposed
            x = finish(product, None)
            res = _row_residuals(x, x_in)
            n_products += 1.0
        else:
            rows = active.nonzero().squeeze(1)
            x_in_r = x.index_select(0, rows)  # (k, m)
            product_r = apply(x_in_r, rows)  # (k, m): k/n of a product
            x_r = finish(product_r, rows)
            x_in.index_copy_(0, rows, x_in_r)
            product.index_copy_(0, rows, product_r)
            x.index_copy_(0, rows, x_r)
            res[rows] = _row_residuals(x_r, x_in_r)
            n_products += rows.numel() / n
        residuals.append(float(res.max()))


def solve_forward(
    W: torch.Tensor,
    B: torch.Tensor,
    Z_in: torch.Tensor,
    P: torch.Tensor,
    *,
    tol: float,
    max_iter: int = DEFAULT_MAX_ITER,
) -> ForwardSolve:
    """Solve Z = relu(W Z + B) (Eq. (2), B = U X) from ``Z_in`` with ``P = W @ Z_in``.

    Shapes: W (m, m); B, Z_in, P (m, n).
    """
    B_t = B.T.contiguous()  # (n, m)

    def apply(Z_t: torch.Tensor, rows: torch.Tensor | None) -> torch.Tensor:
        return Z_t @ W.T  # (k, m) = (W Z)ᵀ

    def finish(P_t: torch.Tensor, rows: torch.Tensor | None) -> torch.Tensor:
        return torch.relu(P_t + (B_t if rows is None else B_t.index_select(0, rows)))

    x, x_in, P, steps, products, residuals, ok = _iterate(
        apply, finish, Z_in, P, tol=tol, max_iter=max_iter
    )
    return ForwardSolve(
        x, x_in, P, steps, products, residuals[-1], tuple(residuals), ok, mask=(P + B) > 0
    )


def solve_adjoint(
    W: torch.Tensor,
    mask: torch.Tensor,
    source: torch.Tensor,
    C_in: torch.Tensor,
    Q: torch.Tensor,
    *,
    tol: float,
    max_iter: int = DEFAULT_MAX_ITER,
) -> AdjointSolve:
    """Solve C = S + Wᵀ (D ⊙ C) from ``C_in`` with ``Q = W.T @ (mask * C_in)``.

    Shapes: W (m, m); mask D (m, n) bool; source S (m, 1) or (m, n); C_in, Q (m, n).
    With S = a (a column) the solution is C, c_i = (I − Wᵀ D_i)⁻¹ a, and the adjoint of
    Lemma 2 is D⊙V = (D⊙C) diag(r); with S = a rᵀ the solution is V itself (r = ŷ − y).
    """
    D_t = mask.T.to(W.dtype).contiguous()  # (n, m): a float multiplier is faster than a bool one
    S_t = source.T.contiguous()  # (1, m) or (n, m)

    def apply(C_t: torch.Tensor, rows: torch.Tensor | None) -> torch.Tensor:
        return (C_t * (D_t if rows is None else D_t.index_select(0, rows))) @ W  # (Wᵀ(D⊙C))ᵀ

    def finish(Q_t: torch.Tensor, rows: torch.Tensor | None) -> torch.Tensor:
        if rows is None or S_t.shape[0] == 1:
            return Q_t + S_t
        return Q_t + S_t.index_select(0, rows)

    x, x_in, Q, steps, products, residuals, ok = _iterate(
        apply, finish, C_in, Q, tol=tol, max_iter=max_iter
    )
    return AdjointSolve(x, x_in, Q, steps, products, residuals[-1], tuple(residuals), ok)


def remask_product(
    W: torch.Tensor,
    C: torch.Tensor,
    old_mask: torch.Tensor,
    new_mask: torch.Tensor,
    Q: torch.Tensor,
) -> tuple[torch.Tensor, int]:
    """Turn ``Q = Wᵀ (old_mask ⊙ C)`` into ``Wᵀ (new_mask ⊙ C)``; return it and the flip count.

    Only the k entries where the masks differ contribute: ``Wᵀ ((new − old) ⊙ C)`` is a sum
    of k scaled rows of W scattered into their columns, O(k m) instead of O(m² n).
    """
    rows, cols = torch.nonzero(old_mask != new_mask, as_tuple=True)
    sign = new_mask[rows, cols].to(C.dtype) * 2 - 1  # +1 switched on, −1 switched off
    contributions = W[rows] * (sign * C[rows, cols])[:, None]  # (k, m)
    return Q.T.index_add(0, cols, contributions).T, int(rows.numel())
