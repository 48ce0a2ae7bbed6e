"""Row-wise Picard for the two structured solves of the ReLU DEQ (Ling et al. 2023).

Both solves iterate ``x ← finish(apply(x))``, where ``apply`` is one m×m by m×n product:

* forward, Eq. (2):   ``Z ← relu(W Z + B)``, B = U X;
* adjoint, Lemma 2:   ``C ← S + Wᵀ(D ⊙ C)``, D = 1[W Z + B > 0]. With S = a 1ᵀ column i is
  c_i = (I − Wᵀ D_i)⁻¹ a and the adjoint V = a rᵀ + Wᵀ(D ⊙ V) of Eq. (3) is C diag(r)
  (C moves only with W, a and D, not with r: it warm-starts better); with S = a rᵀ it is V.

The solves work on *rows*, the transposes (n, m) of the paper's (m, n) matrices, one row per
sample (a sample's vector is contiguous). A solve starts from ``x_in`` *and its product*
``apply(x_in)``, so a warm start already within tolerance costs no product at all.

Stopping per sample, as torchdeq's ``'rel'``: ``‖x_{k+1,i} − x_{k,i}‖ <= tol ‖x_{k+1,i}‖``;
converged rows leave the iteration (:class:`ActiveRows`), so a product over k of the n rows
counts k/n in ``n_products``. Why: late iterations then cost a fraction of a product.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace

import torch

from deqlab._checks import check_int, check_positive
from deqlab.solvers import Solution, SolverError, Status

DEFAULT_MAX_ITER = 1000

#: Converged rows move out of the iteration once they are 1/COMPACT_SHARE of the active
#: rows (and at least one): until then iterating them costs less than gathering the rest
#: (they stay converged: the map contracts).
COMPACT_SHARE = 8


@dataclass(frozen=True, eq=False)
class RowSolution(Solution):
    """A :class:`~deqlab.solvers.Solution` (``z`` = ``x``) with the next solve's warm start.

    ``x_in`` is the input of the last product and ``product`` = apply(x_in); ``n_products``
    counts m×m by m×n products (k of n rows: k/n); ``mask`` is the forward solve's
    D = 1[product + B > 0] = 1[x > 0] (None for the adjoint).
    """

    x_in: torch.Tensor
    product: torch.Tensor
    n_products: float
    tol: float
    mask: torch.Tensor | None = None

    @property
    def x(self) -> torch.Tensor:
        """The solution (rows (n, m), or (m, n) after :meth:`transposed`)."""
        return self.z

    @property
    def Z(self) -> torch.Tensor:
        """The forward solve's equilibrium estimate (same as ``x``)."""
        return self.z

    def raise_if_failed(self, name: str) -> RowSolution:
        """Return ``self``; raise :class:`~deqlab.solvers.SolverError` naming the solve."""
        if not self.converged:
            raise SolverError(f"{name} solve (row-wise Picard)", self, tol=self.tol, stop="rel")
        return self

    def transposed(self) -> RowSolution:
        """The same solution with every matrix transposed: rows ↔ the paper's layout."""
        swap = {
            f.name: getattr(self, f.name).T.contiguous()
            for f in fields(self)
            if isinstance(getattr(self, f.name), torch.Tensor)
        }
        return replace(self, **swap)


class ForwardRows:
    """Eq. (2) in rows: apply(Z) = Z Wᵀ (rows of W Z), finish(P) = relu(P + B)."""

    def __init__(self, W: torch.Tensor, B: torch.Tensor) -> None:
        self.W, self.B = W, B

    def apply(self, x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        return torch.mm(x, self.W.T, out=out)

    def finish(self, product: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        return torch.add(product, self.B, out=out).relu_()

    def restrict(self, rows: torch.Tensor) -> ForwardRows:
        """The map of the given rows only."""
        return ForwardRows(self.W, self.B.index_select(0, rows))


class AdjointRows:
    """Lemma 2 in rows: apply(C) = (D ⊙ C) W (rows of Wᵀ(D ⊙ C)), finish(Q) = Q + S."""

    def __init__(self, W: torch.Tensor, D: torch.Tensor, S: torch.Tensor) -> None:
        self.W, self.D, self.S = W, D, S  # D float 0/1 (multiplies faster than bool)
        self._masked = torch.empty_like(D)

    def apply(self, x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        return torch.mm(torch.mul(x, self.D, out=self._masked), self.W, out=out)

    def finish(self, product: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        return torch.add(product, self.S, out=out)

    def restrict(self, rows: torch.Tensor) -> AdjointRows:
        """The map of the given rows only (a source S of one row is shared)."""
        S = self.S if self.S.shape[0] == 1 else self.S.index_select(0, rows)
        return AdjointRows(self.W, self.D.index_select(0, rows), S)


RowMap = ForwardRows | AdjointRows


def row_residuals(x: torch.Tensor, x_in: torch.Tensor) -> torch.Tensor:
    """‖x_i − x_in,i‖ / ‖x_i‖ per row (0 where x_i = x_in,i, inf where only x_i is 0)."""
    diff = torch.linalg.vector_norm(x - x_in, dim=1)
    same = diff == 0
    return diff.div_(torch.linalg.vector_norm(x, dim=1)).masked_fill_(same, 0.0)


class ActiveRows:
    """The rows still iterated (``x_in``, its ``product``, ``x`` = finish(product)) and the
    results of the rows that left.

    While all rows are active the arrays are the full (n, m) ones; :meth:`retire` then moves
    the active rows to a compact block, ``index`` saying where they belong, and writes the
    rows leaving it back into ``full``. A row's result is its last iterate.
    """

    def __init__(self, op: RowMap, x_in: torch.Tensor, product: torch.Tensor) -> None:
        self.op, self.n = op, x_in.shape[0]
        self.x_in, self.product = x_in, product  # the caller's until the first step
        self.x = op.finish(product, out=torch.empty_like(x_in))
        self.index: torch.Tensor | None = None  # None: the arrays are the full ones
        self.full: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None
        self.steps, self.n_products, self.settled = 1, 0.0, 0.0
        self._owned = False  # may x_in and product be overwritten?

    def step(self) -> None:
        """x_in ← x, product ← apply(x_in), x ← finish(product): k/n of a product."""
        out = self.x_in if self._owned else torch.empty_like(self.x)
        product = self.product if self._owned else torch.empty_like(self.x)
        self.x_in = self.x
        self.product = self.op.apply(self.x_in, out=product)
        self.x = self.op.finish(self.product, out=out)
        self._owned = True
        self.steps += 1
        self.n_products += self.x.shape[0] / self.n

    def retire(self, residuals: torch.Tensor, converged: torch.Tensor) -> None:
        """Move the converged rows out once they are 1/COMPACT_SHARE of the active ones
        (``settled`` keeps their largest residual). A step must follow."""
        k, n_done = converged.numel(), int(converged.sum())
        if n_done < max(1, k // COMPACT_SHARE):
            return
        self.settled = max(self.settled, float(residuals.masked_fill(~converged, 0.0).max()))
        keep = (~converged).nonzero().squeeze(1)
        if self.index is None:  # the full arrays become the results
            self.full = (self.x, self.x_in, self.product)
            if not self._owned:  # the caller's: copy before writing rows into them
                self.full = (self.x, self.x_in.clone(), self.product.clone())
            self.index = keep
        else:
            self._write_back(converged.nonzero().squeeze(1))
            self.index = self.index.index_select(0, keep)
        self.x = self.x.index_select(0, keep)
        self.x_in, self.product = torch.empty_like(self.x), torch.empty_like(self.x)
        self.op, self._owned = self.op.restrict(keep), True

    def _write_back(self, rows: torch.Tensor | None = None) -> None:
        """Copy the given block rows (all by default) into ``full``."""
        assert self.full is not None and self.index is not None
        index = self.index if rows is None else self.index.index_select(0, rows)
        for whole, block in zip(self.full, (self.x, self.x_in, self.product), strict=True):
            whole.index_copy_(0, index, block if rows is None else block.index_select(0, rows))

    def results(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(x, x_in, product) of every row."""
        if self.full is None:
            return self.x, self.x_in, self.product
        self._write_back()
        return self.full


def iterate_rows(
    op: RowMap,
    x_in: torch.Tensor,
    product: torch.Tensor,
    *,
    tol: float,
    max_iter: int,
    verified_start: bool = True,
    unknown: torch.Tensor | None = None,
) -> RowSolution:
    """Picard ``x ← op.finish(op.apply(x))`` on rows (n, m) from ``x_in`` with
    ``product = op.apply(x_in)``; the inputs are not modified.

    Without ``verified_start`` (``product`` only approximates apply(x_in)) no row may stop
    before one exact product; the rows ``unknown`` (indices, only then) have no product at
    all: their first iterate is x_in itself.
    """
    tol = check_positive("tol", tol)
    max_iter = check_int("max_iter", max_iter, min_value=1)
    if unknown is not None and verified_start:
        raise ValueError("`unknown` rows (no product given) need `verified_start=False`")
    rows = ActiveRows(op, x_in, product)
    if unknown is not None:
        rows.x.index_copy_(0, unknown, x_in.index_select(0, unknown))
    trace: list[float] = []
    while True:
        res = row_residuals(rows.x, rows.x_in)
        latest = float(res.max())  # NaN if any row's is
        trace.append(latest if math.isnan(latest) else max(rows.settled, latest))
        converged = res <= tol
        may_stop = verified_start or rows.steps > 1  # an unverified start is no result
        done = may_stop and bool(converged.all())
        if done or not math.isfinite(latest) or rows.steps == max_iter:
            return _solution(rows, trace, done, tol)
        if may_stop:
            rows.retire(res, converged)
        rows.step()


def _solution(rows: ActiveRows, trace: list[float], done: bool, tol: float) -> RowSolution:
    x, x_in, product = rows.results()
    finite = math.isfinite(trace[-1])
    status = Status.CONVERGED if done else Status.MAX_STEPS if finite else Status.DIVERGED
    return RowSolution(x, status, rows.steps, trace, trace[-1], x_in, product, rows.n_products, tol)


def solve_forward(
    W: torch.Tensor,
    B: torch.Tensor,
    Z_in: torch.Tensor,
    P: torch.Tensor,
    *,
    tol: float,
    max_iter: int = DEFAULT_MAX_ITER,
    verified_start: bool = True,
    rows: bool = False,
) -> RowSolution:
    """Solve Z = relu(W Z + B) (Eq. (2), B = U X) from ``Z_in`` with ``P = W @ Z_in``.

    Shapes: W (m, m); B, Z_in, P (m, n); with ``rows`` all of them and the result are
    transposed, (n, m) (then P = Z_in Wᵀ). ``verified_start=False``: P only approximates
    the product of Z_in, and every column takes at least one exact product.
    """
    if not rows:
        B, Z_in, P = (t.T.contiguous() for t in (B, Z_in, P))
    solve = iterate_rows(
        ForwardRows(W, B), Z_in, P, tol=tol, max_iter=max_iter, verified_start=verified_start
    )
    solve = replace(solve, mask=solve.x > 0)  # x = relu(P + B): the mask of the last product
    return solve if rows else solve.transposed()


def solve_adjoint(
    W: torch.Tensor,
    mask: torch.Tensor,
    source: torch.Tensor,
    C_in: torch.Tensor,
    Q: torch.Tensor,
    *,
    tol: float,
    max_iter: int = DEFAULT_MAX_ITER,
    verified_start: bool = True,
    unknown: torch.Tensor | None = None,
    rows: bool = False,
) -> RowSolution:
    """Solve C = S + Wᵀ (D ⊙ C) from ``C_in`` with ``Q = W.T @ (mask * C_in)``.

    Shapes: W (m, m); mask D (m, n), bool or 0/1; source S (m, 1) or (m, n); C_in, Q
    (m, n); with ``rows`` all of them and the result are transposed (then
    Q = (mask ⊙ C_in) W). With S = a the adjoint of Lemma 2 is D⊙V = (D⊙C) diag(r); with
    S = a rᵀ the solution is V itself (r = ŷ − y). ``verified_start`` as in
    :func:`solve_forward`; with it False, ``unknown`` (indices) are the columns whose
    product Q is not given at all (they start from C_in itself).
    """
    if not rows:
        mask, source, C_in, Q = (t.T.contiguous() for t in (mask, source, C_in, Q))
    op = AdjointRows(W, mask.to(W.dtype), source)
    solve = iterate_rows(
        op, C_in, Q, tol=tol, max_iter=max_iter, verified_start=verified_start, unknown=unknown
    )
    return solve if rows else solve.transposed()
