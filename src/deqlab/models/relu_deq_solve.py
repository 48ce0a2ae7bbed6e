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

Layout: the solves work on *rows*, one row per sample, i.e. on transposes (n, m) of the
paper's (m, n) matrices, so that a sample's vector is contiguous (selecting the active
samples, per-sample norms and mask flips move contiguous rows). With ``rows=True``
:func:`solve_forward` and :func:`solve_adjoint` take and return rows (the trainer keeps
all its state that way); by default they convert from and to the paper's layout.

Stopping rule, per column (sample) as in torchdeq's ``'rel'`` mode:
``‖x_{k+1,i} − x_{k,i}‖ <= tol · ‖x_{k+1,i}‖`` for every column i; columns that meet it
are soon no longer iterated (see ``COMPACT_SHARE``), so late iterations cost a fraction
of a product. The reported residual is the largest column residual; ``n_products``
counts products in units of a full m×m by m×n product (a product over k of the n
columns counts k/n).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, fields, replace

import torch

from deqlab._checks import check_int, check_positive

DEFAULT_MAX_ITER = 1000

#: A block of rows is compacted once at least 1/COMPACT_SHARE of them (and at least one)
#: have converged: until then the converged rows are iterated on, which costs less than
#: the gathers of a compaction (they stay converged: the iteration contracts).
COMPACT_SHARE = 8


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

    def transposed(self):
        """The same result with every matrix transposed: rows ↔ the paper's layout."""
        return replace(
            self, **{f.name: getattr(self, f.name).T.contiguous() for f in fields(self)
                     if isinstance(getattr(self, f.name), torch.Tensor)}
        )  # fmt: skip


@dataclass(frozen=True)
class ForwardSolve(CachedSolve):
    """Forward solve of Eq. (2); ``mask`` is D = 1[W Z_in + B > 0] of the last step."""

    mask: torch.Tensor

    @property
    def Z(self) -> torch.Tensor:
        """The equilibrium estimate, (m, n) (or (n, m) with ``rows=True``)."""
        return self.x


@dataclass(frozen=True)
class AdjointSolve(CachedSolve):
    """Adjoint solve ``C = S + Wᵀ (D ⊙ C)``; ``x`` is C."""


def _row_residuals(x: torch.Tensor, x_in: torch.Tensor, scratch: torch.Tensor) -> torch.Tensor:
    """‖x_i − x_in,i‖ / ‖x_i‖ per row (0 where x_i = x_in,i, inf where only x_i is 0)."""
    diff = torch.linalg.vector_norm(torch.sub(x, x_in, out=scratch), dim=1)  # (k,)
    same = diff == 0
    return diff.div_(torch.linalg.vector_norm(x, dim=1)).masked_fill_(same, 0.0)


class _Block:
    """Work buffers for k rows: two for x (input and result alternate), one for the
    product, one scratch; reused across iterations, so that no iteration allocates."""

    def __init__(self, like: torch.Tensor, k: int) -> None:
        self.x = [like.new_empty(k, like.shape[1]) for _ in range(2)]
        self.product = like.new_empty(k, like.shape[1])
        self.scratch = like.new_empty(k, like.shape[1])

    def views(self, k: int) -> tuple[list[torch.Tensor], torch.Tensor, torch.Tensor]:
        """The buffers' first k rows (contiguous)."""
        return [x[:k] for x in self.x], self.product[:k], self.scratch[:k]


def _iterate(
    apply: Callable[..., torch.Tensor],
    finish: Callable[..., torch.Tensor],
    x_in: torch.Tensor,
    product: torch.Tensor,
    row_data: tuple[torch.Tensor, ...],
    *,
    tol: float,
    max_iter: int,
    verified_start: bool,
    unknown: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int, float, list[float], bool]:
    """Picard on ``x ← finish(apply(x))`` from ``x_in`` with ``product = apply(x_in)``.

    Columns are independent problems: columns whose relative residual is <= ``tol`` drop
    out, so a product costs (iterated columns)/n of a full one. The loop works on rows
    (n, m), one row per column. It iterates the full arrays until 1/``COMPACT_SHARE`` of
    the rows have converged, then a compact block of the active rows (gathered with their
    ``row_data``, per-row tensors (n, ·) such as B or D), compacted again on the same rule
    and writing converged rows back into the full arrays; a row is returned from the
    iteration where it was last iterated (converged, possibly more than once).
    ``apply(x, *rows_data, out=, scratch=)`` and ``finish(p, *rows_data, out=)`` receive
    blocks (k, m) and write into ``out``. Inputs and results are rows (n, m); the inputs
    are not modified. Without ``verified_start`` (``product`` only approximates
    ``apply(x_in)``) no column may stop before one exact product; the rows ``unknown``
    (indices, only then) have no product at all: their first iterate is x_in itself.
    """
    tol = check_positive("tol", tol)
    max_iter = check_int("max_iter", max_iter, min_value=1)
    if unknown is not None and verified_start:
        raise ValueError("`unknown` rows (no product given) need `verified_start=False`")
    n = x_in.shape[0]
    buffers = _Block(x_in, n)
    xs, pk, scratch = buffers.views(n)
    x = finish(product, *row_data, out=xs[0])  # (n, m)
    if unknown is not None:
        x.index_copy_(0, unknown, x_in.index_select(0, unknown))
    current = 0  # xs[current] holds the latest x
    res = _row_residuals(x, x_in, scratch)  # (k,): the rows being iterated
    residuals = [float(res.max())]  # NaN if any row's is
    settled = 0.0  # the largest residual of the rows no longer iterated (each <= tol)
    n_products, step = 0.0, 1
    rows: torch.Tensor | None = None  # None: every row is active, iterate the full arrays
    xk, xk_in, data_k = x, x_in, row_data
    while True:
        k = xk.shape[0]
        finite = math.isfinite(residuals[-1])
        if verified_start or step > 1:  # an unverified start is not a result
            active = res > tol
            keep = active.nonzero().squeeze(1)
            n_active = keep.numel()
        else:
            n_active = k
        if not finite or n_active == 0 or step == max_iter:
            if rows is not None:  # write the rows still in the compact block back
                x.index_copy_(0, rows, xk)
                x_in.index_copy_(0, rows, xk_in)
                product.index_copy_(0, rows, pk)
            return x, x_in, product, step, n_products, residuals, finite and n_active == 0
        if k - n_active >= max(1, k // COMPACT_SHARE):  # store converged rows, compact the rest
            settled = max(settled, float(res.masked_fill(active, 0.0).max()))
            if step == 1:  # the caller's arrays: copy before writing rows into them
                x_in, product = x_in.clone(), product.clone()
            compact = rows is not None
            if compact:
                done = (~active).nonzero().squeeze(1)
                back = rows.index_select(0, done)
                x.index_copy_(0, back, xk.index_select(0, done))
                x_in.index_copy_(0, back, xk_in.index_select(0, done))
                product.index_copy_(0, back, pk.index_select(0, done))
                rows = rows.index_select(0, keep)
            else:  # leave the full arrays to the results, iterate in a block of its own
                rows, buffers = keep, _Block(x_in, n_active)
            xs, pk, scratch = buffers.views(n_active)
            if compact:  # xk is in xs[current] of this block: gather into the other one
                current = 1 - current
            xk = torch.index_select(xk, 0, keep, out=xs[current])
            data_k = tuple(t.index_select(0, keep) if t.shape[0] > 1 else t for t in data_k)
        step += 1
        xk_in, current = xk, 1 - current
        apply(xk_in, *data_k, out=pk, scratch=scratch)  # (k, m): k/n of a full product
        xk = finish(pk, *data_k, out=xs[current])
        res = _row_residuals(xk, xk_in, scratch)
        n_products += xk.shape[0] / n
        if rows is None:
            x, x_in, product = xk, xk_in, pk
        latest = float(res.max())
        residuals.append(latest if math.isnan(latest) else max(settled, latest))


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
) -> ForwardSolve:
    """Solve Z = relu(W Z + B) (Eq. (2), B = U X) from ``Z_in`` with ``P = W @ Z_in``.

    Shapes: W (m, m); B, Z_in, P (m, n); with ``rows`` all of them and the result are
    transposed, (n, m) (then P = Z_in Wᵀ). ``verified_start=False``: P only approximates
    the product of Z_in, and every column takes at least one exact product.
    """
    if not rows:
        B, Z_in, P = (t.T.contiguous() for t in (B, Z_in, P))
    W_t = W.T

    def apply(Z: torch.Tensor, B: torch.Tensor, *, out, scratch) -> torch.Tensor:
        return torch.mm(Z, W_t, out=out)  # rows of W Z

    def finish(P: torch.Tensor, B: torch.Tensor, *, out) -> torch.Tensor:
        return torch.add(P, B, out=out).relu_()

    x, x_in, P, steps, products, residuals, ok = _iterate(
        apply, finish, Z_in, P, (B,), tol=tol, max_iter=max_iter, verified_start=verified_start
    )
    # x = relu(P + B), so its support is the mask of the last product, 1[P + B > 0]
    solve = ForwardSolve(
        x, x_in, P, steps, products, residuals[-1], tuple(residuals), ok, mask=x > 0
    )
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
) -> AdjointSolve:
    """Solve C = S + Wᵀ (D ⊙ C) from ``C_in`` with ``Q = W.T @ (mask * C_in)``.

    Shapes: W (m, m); mask D (m, n), bool or 0/1; source S (m, 1) or (m, n); C_in, Q
    (m, n); with ``rows`` all of them and the result are transposed (then
    Q = (mask ⊙ C_in) W). With S = a (a column) the solution is C, c_i = (I − Wᵀ D_i)⁻¹ a,
    and the adjoint of Lemma 2 is D⊙V = (D⊙C) diag(r); with S = a rᵀ the solution is V
    itself (r = ŷ − y). ``verified_start`` as in :func:`solve_forward`; with it False,
    ``unknown`` (indices) are the columns whose product Q is not given at all (they start
    from C_in itself).
    """
    if not rows:
        mask, source, C_in, Q = (t.T.contiguous() for t in (mask, source, C_in, Q))
    D = mask.to(W.dtype)  # a float multiplier is faster than a bool one

    def apply(C: torch.Tensor, D: torch.Tensor, S: torch.Tensor, *, out, scratch) -> torch.Tensor:
        return torch.mm(torch.mul(C, D, out=scratch), W, out=out)  # rows of Wᵀ (D ⊙ C)

    def finish(Q: torch.Tensor, D: torch.Tensor, S: torch.Tensor, *, out) -> torch.Tensor:
        return torch.add(Q, S, out=out)

    x, x_in, Q, steps, products, residuals, ok = _iterate(
        apply, finish, C_in, Q, (D, source), tol=tol, max_iter=max_iter,
        verified_start=verified_start, unknown=unknown,
    )  # fmt: skip
    solve = AdjointSolve(x, x_in, Q, steps, products, residuals[-1], tuple(residuals), ok)
    return solve if rows else solve.transposed()


def mask_flips(
    old_mask: torch.Tensor, new_mask: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The entries (i, j) where two (n, m) bool masks differ, and +1 where switched on,
    −1 where switched off."""
    rows, units = torch.nonzero(old_mask != new_mask, as_tuple=True)
    return rows, units, new_mask[rows, units].to(torch.int8) * 2 - 1


def apply_flips(
    W: torch.Tensor,
    C: torch.Tensor,
    flips: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    Q: torch.Tensor,
) -> torch.Tensor:
    """Turn ``Q = (old_mask ⊙ C) W`` into ``(new_mask ⊙ C) W`` in place, in rows, from the
    :func:`mask_flips` of the two masks: ``±C_ij W_j`` (row j of W) is added to row i of
    Q for each flipped entry, O(k m) for k flips instead of O(m² n). Returns Q."""
    rows, units, sign = flips
    contributions = W.index_select(0, units) * (sign * C[rows, units])[:, None]  # (k, m)
    return Q.index_add_(0, rows, contributions)


def remask_product(
    W: torch.Tensor,
    C: torch.Tensor,
    old_mask: torch.Tensor,
    new_mask: torch.Tensor,
    Q: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Turn ``Q = (old_mask ⊙ C) W`` into ``(new_mask ⊙ C) W`` (rows: Q = (Wᵀ(D⊙Cᵀ))ᵀ).

    Shapes: C, masks, Q (n, m), masks bool; Q is updated in place. Returns the new Q and
    the row of every flipped entry (see :func:`apply_flips`).
    """
    flips = mask_flips(old_mask, new_mask)
    return apply_flips(W, C, flips, Q), flips[0]
