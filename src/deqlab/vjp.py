"""Vector-Jacobian products ``u ↦ J_f(z*)ᵀ u`` for the backward pass, on all samples or on
the samples an adjoint solve still iterates (row compaction, :mod:`deqlab.solvers.rows`).

One evaluation of ``f`` at ``z*`` records the graph; every VJP backpropagates through it
(``retain_graph``). With row compaction the rows ``S`` of the graph in use only shrink: when
the pending samples fall to ``7/8`` of ``S`` or fewer, the graph is rebuilt on them (one
evaluation of ``f`` on those rows), so a VJP costs ``|S|`` rows, not ``B``. The work is
counted in full batches: ``vjps`` (``Σ |S| / B`` over the calls) and ``evaluations``.
"""

from __future__ import annotations

import torch

from deqlab.solvers.rows import RowMap, bucketed

SHRINK = 7 / 8  # rebuild the graph once the pending rows are this share of it or fewer


class VJP:
    """``J_f(z*)ᵀ u`` for ``z*`` of shape ``(B, …)`` (``__call__``: all rows; ``rows``: the
    rows ``index`` of ``u``, zero elsewhere, for a :class:`RowMap` ``f``)."""

    def __init__(self, f, z_star: torch.Tensor) -> None:
        self.f, self.z_star = f, z_star
        self.batch = z_star.shape[0] if z_star.ndim else 1
        self.leaf, self.out = self._graph(z_star, f)
        self.index = torch.arange(self.batch, device=z_star.device)  # rows of the graph in use
        self.sub = (self.leaf, self.out)
        self.vjps, self.evaluations = 0.0, 1.0

    @staticmethod
    def _graph(z: torch.Tensor, f) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.enable_grad():
            leaf = z.detach().requires_grad_()
            return leaf, f(leaf)

    @staticmethod
    def _backprop(out: torch.Tensor, leaf: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        with torch.enable_grad():
            (vjp,) = torch.autograd.grad(out, leaf, u, retain_graph=True, allow_unused=True)
        return torch.zeros_like(u) if vjp is None else vjp

    def __call__(self, u: torch.Tensor) -> torch.Tensor:
        self.vjps += 1
        return self._backprop(self.out, self.leaf, u)

    def rows(self, u_sub: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """``(J_f(z*)ᵀ u)[index]`` with ``u[index] = u_sub`` and ``u = 0`` on other rows
        (for ``f`` acting on each sample alone, the other rows do not contribute)."""
        if len(index) <= SHRINK * len(self.index):
            self._compact(index)
        position = torch.searchsorted(self.index, index)  # index ⊆ self.index, both sorted
        u = u_sub.new_zeros((len(self.index), *u_sub.shape[1:]))
        u[position] = u_sub
        self.vjps += len(self.index) / self.batch
        return self._backprop(self.sub[1], self.sub[0], u)[position]

    def _compact(self, index: torch.Tensor) -> None:
        """The graph on the rows ``index`` only, topped up with other rows of the current
        graph to :func:`~deqlab.solvers.rows.bucketed` of their count (one evaluation of
        ``f`` on them)."""
        assert isinstance(self.f, RowMap)
        extra = bucketed(len(index), self.batch) - len(index)
        if extra > 0:
            others = self.index[~torch.isin(self.index, index)][:extra]
            index = torch.cat([index, others]).sort().values
        self.index = index
        z = self.z_star.index_select(0, index)
        with torch.enable_grad():
            leaf = z.detach().requires_grad_()
            self.sub = (leaf, self.f.rows(leaf, index))
        self.evaluations += len(index) / self.batch
