"""The Jacobian ``J = ∂f/∂z`` of a map at a point as two products, ``u ↦ Jᵀ u`` and
``v ↦ J v``, by whichever route the map's operations allow.

One graph of ``f(z)`` is stored; ``Jᵀ u`` is one backward through it (every differentiable
op has one). ``J v`` has three routes, tried in this order on the first product, the first
that runs kept (:attr:`Linearization.route` says which):

1. ``"double backward"``: ``g(u) = Jᵀ u`` is linear in ``u``, so ``J v = (∂g/∂u)ᵀ v``;
   the graph of ``g`` is built once (``create_graph``) and each ``J v`` is one backward
   through it. Needs every op's backward to be differentiable;
2. ``"forward-mode"``: ``torch.func.jvp``, one dual evaluation of ``f`` (for ops, e.g. a
   custom ``autograd.Function`` with ``jvp`` but a once-differentiable backward);
3. ``"forward-mode, math attention"``: the same with attention evaluated by its formula.

The graph is recorded under ``torch.nn.attention.sdpa_kernel(SDPBackend.MATH)``: the fused
CPU kernels of ``scaled_dot_product_attention`` (what ``nn.MultiheadAttention`` calls) have
neither a forward derivative nor a derivative of their backward; the math backend evaluates
the same function, ``softmax(QKᵀ/√d) V``, with other rounding, and has both.

Route 1 first (ours, measured: benchmarks/bench_jvp_routes.py): on CPU a product through
the stored double-backward graph cost 1.0–3.3 evaluations of ``f`` where ``torch.func.jvp``
cost 4.6–13 (a tanh layer, conv + GroupNorm cells, a transformer block).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

Map = Callable[[torch.Tensor], torch.Tensor]

ROUTES = ("double backward", "forward-mode", "forward-mode, math attention")
#: What torch raises for a route an op lacks: NotImplementedError for a missing forward
#: derivative, RuntimeError for a missing derivative of a backward.
_UNSUPPORTED = (NotImplementedError, RuntimeError)


class Linearization:
    """``J v`` and ``Jᵀ u`` of ``f`` at ``z`` (module docstring); ``count`` products so far.

    Args:
        f: map of tensors shaped like ``z`` to tensors of the same shape.
        z: the point (detached here).
        route: one of :data:`ROUTES` to force it; None: the first that runs.
    """

    def __init__(self, f: Map, z: torch.Tensor, route: str | None = None) -> None:
        if route is not None and route not in ROUTES:
            raise ValueError(f"`route` must be one of {ROUTES} or None; got {route!r}")
        self.f, self.z, self.count = f, z.detach(), 0
        self.route: str | None = route
        self._u: torch.Tensor | None = None  # the dummy cotangent of route 1
        self._tangent: torch.Tensor | None = None  # Jᵀ u, with its graph in u
        with torch.enable_grad(), sdpa_kernel(SDPBackend.MATH):
            self._z_leaf = self.z.clone().requires_grad_()
            self._fz = f(self._z_leaf)

    def vjp(self, u: torch.Tensor) -> torch.Tensor:
        """``Jᵀ u`` (u shaped like ``z``)."""
        self.count += 1
        if not self._fz.requires_grad:
            return torch.zeros_like(u)
        with torch.enable_grad():
            (out,) = torch.autograd.grad(
                self._fz, self._z_leaf, u, retain_graph=True, allow_unused=True
            )
        return torch.zeros_like(u) if out is None else out

    def row_jacobians(self, rows: int) -> torch.Tensor:
        """The Jacobians of ``f`` on each of ``rows`` rows of ``z`` (``f`` acting on each row
        alone, so that ``J`` is block diagonal), ``(rows, n, n)`` with ``n = z.numel() / rows``:
        row ``j`` of every block is ``J_rᵀ e_j`` (``e_j`` in every row at once), n VJPs."""
        n = self.z.numel() // rows
        blocks = self.z.new_empty(rows, n, n)
        basis = self.z.new_zeros(rows, n)
        for j in range(n):
            basis[:, j] = 1
            blocks[:, j] = self.vjp(basis.reshape(self.z.shape)).reshape(rows, n)
            basis[:, j] = 0
        return blocks

    def jvp(self, v: torch.Tensor) -> torch.Tensor:
        """``J v`` (v shaped like ``z``), by :attr:`route` (chosen at the first call)."""
        self.count += 1
        if not self._fz.requires_grad:
            return torch.zeros_like(v)
        if self.route is not None:
            return self._by_route(self.route, v)
        failures = []
        for route in ROUTES:
            try:
                out = self._by_route(route, v)
            except _UNSUPPORTED as err:
                failures.append(f"{route}: {type(err).__name__}: {str(err).splitlines()[0]}")
                continue
            self.route = route
            return out
        raise RuntimeError(
            "no route computes the Jacobian-vector product J_f v of this map; tried "
            + "; ".join(failures)
        )

    def _by_route(self, route: str, v: torch.Tensor) -> torch.Tensor:
        if route == ROUTES[0]:
            return self._double_backward(v)
        with torch.no_grad():
            if route == ROUTES[1]:
                return torch.func.jvp(self.f, (self.z,), (v,))[1]
            with sdpa_kernel(SDPBackend.MATH):
                return torch.func.jvp(self.f, (self.z,), (v,))[1]

    def _double_backward(self, v: torch.Tensor) -> torch.Tensor:
        with torch.enable_grad():
            if self._tangent is None:
                u = torch.zeros_like(self._fz, requires_grad=True)
                (tangent,) = torch.autograd.grad(
                    self._fz, self._z_leaf, u, create_graph=True, retain_graph=True
                )
                self._u, self._tangent = u, tangent
            (out,) = torch.autograd.grad(self._tangent, self._u, v, retain_graph=True)
        return out
