"""Loss-surface grid points evaluated in batches: one vmapped cell, one solve per point.

For ``P`` grid points ``θ_p = θ* + α d₁ + β_p d₂`` of one grid row the parameters are
stacked along a new dim 0 and the network is evaluated for all ``p`` at once with
``torch.func.vmap`` over ``functional_call``. A fixed-point solve cannot run inside
``vmap`` (it stops on a data-dependent test), so for a :class:`~deqlab.models.ConvDEQ`
only the stem, the cell ``f(z_p, x_p; θ_p)`` of Eq. (4.1) and the head are vmapped; the
iteration runs outside on the stacked state ``(P, …)`` (:func:`solve_points`): every point
has its own rows of the solver's stepper (Anderson weights, Broyden matrices), its own
stopping test, best iterate and ``max_iter``, and once it meets ``tol`` its iterate is
frozen and ``f`` is no longer evaluated on it (ours: the same iterates, hence the same
equilibrium, as that point solved alone; a diverging point runs on to ``max_iter``).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.func import functional_call, vmap

from deqlab.implicit import DEQ
from deqlab.models.conv_deq import ConvDEQ
from deqlab.solvers import Solver
from deqlab.solvers.solution import residual_norms, resolve_tol

Params = dict[str, torch.Tensor]
#: ``f(z, index)``: the cell on the iterates ``z`` ``(A, …)`` of the points ``index`` ``(A,)``.
PointMap = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def stacked_parameters(
    center: Params, d1: Params, d2: Params, alpha: float, betas: torch.Tensor
) -> Params:
    """``θ* + α d₁ + β_p d₂`` for every ``β_p`` of ``betas`` ``(P,)``: entries ``(P, …)``."""
    shape = (-1,) + (1,) * 8
    return {
        k: center[k]
        + alpha * d1[k]
        + betas.to(center[k]).reshape(shape[: center[k].ndim + 1]) * d2[k]
        for k in center
    }


def check_batchable(module: nn.Module) -> None:
    """Batched grids need a module without a DEQ (all vmapped) or a ConvDEQ (its cell)."""
    has_deq = any(isinstance(m, DEQ) for m in module.modules())
    if has_deq and not isinstance(module, ConvDEQ):
        raise ValueError(
            "`batch` needs a module without a DEQ or a deqlab.models.ConvDEQ; "
            f"got {type(module).__name__} (evaluate it point by point: batch=None)"
        )


def _vmapped(
    module: nn.Module, params: Params, *args: torch.Tensor, shared: bool = False
) -> torch.Tensor:
    """``module(*args)`` under the stacked ``params``; ``args`` stacked like them (dim 0 the
    point), or with ``shared`` the same for every point."""
    dims = (None if shared else 0,) * len(args)
    call = vmap(lambda p, *a: functional_call(module, p, a), in_dims=(0, *dims))
    return call(params, *args)


def _sub(params: Params, prefix: str) -> Params:
    return {k.removeprefix(prefix): v for k, v in params.items() if k.startswith(prefix)}


def batched_logits(
    module: nn.Module, params: Params, images: torch.Tensor, z0: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
    """Outputs ``(P, B, …)`` of ``module(images)`` at the stacked ``params``, the DEQ's
    equilibria ``(P, …)`` (None without a DEQ) and its evaluations of ``f`` per point ``(P,)``.

    ``z0``: the DEQ's starting iterates ``(P, …)``; None starts from zero, like ConvDEQ.
    """
    points = next(iter(params.values())).shape[0]
    if not isinstance(module, ConvDEQ):
        steps = torch.zeros(points, dtype=torch.int64)
        return _vmapped(module, params, images, shared=True), None, steps
    x = _vmapped(module.stem, _sub(params, "stem."), images, shared=True)
    cell = _sub(params, "deq.cell.")

    def f(z: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        return _vmapped(module.cell, {k: v[index] for k, v in cell.items()}, z, x[index])

    z, steps = solve_points(module.deq.solver, f, torch.zeros_like(x) if z0 is None else z0)
    return _vmapped(module.head, _sub(params, "head."), z), z, steps


def solve_points(
    solver: Solver, f: PointMap, z0: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Solve ``z_p = f(z_p)`` for every point ``p`` of ``z0`` ``(P, …)``, as ``solver`` would
    solve each point alone; returns the best iterates ``(P, …)`` and the evaluations of ``f``
    per point ``(P,)``. A point is one row of the stepper, or one row per sample of dim 1
    with ``solver.per_sample``; it stops when all its rows meet ``solver.tol`` (rule
    ``solver.stop``) or after ``solver.max_iter`` evaluations."""
    points, tol = z0.shape[0], resolve_tol(solver.tol, z0.dtype)
    rows = z0.shape[1] if solver.per_sample else 1
    z = z0.reshape(points * rows, -1)
    fz = f(z0, torch.arange(points)).reshape(z.shape)
    best_z, best_r = z, residual_norms(z, fz, solver.stop)
    steps = torch.ones(points, dtype=torch.int64)
    active = (best_r > tol).reshape(points, rows).any(dim=1) & (steps < solver.max_iter)
    stepper = solver.stepper()
    while bool(active.any()):
        index = active.nonzero()[:, 0]
        moving = active.repeat_interleave(rows)[:, None]  # (P·rows, 1)
        z = torch.where(moving, stepper(z, fz), z)
        update = f(z.reshape(z0.shape)[index], index).reshape(len(index), rows, -1)
        fz = fz.reshape(points, rows, -1).index_copy(0, index, update).reshape(z.shape)
        r = torch.where(moving[:, 0], residual_norms(z, fz, solver.stop), best_r)
        improved = r < best_r
        best_z, best_r = torch.where(improved[:, None], z, best_z), torch.where(improved, r, best_r)
        steps += active
        active = (best_r > tol).reshape(points, rows).any(dim=1) & (steps < solver.max_iter)
    return best_z.reshape(z0.shape), steps
