"""``deqlab.diagnose(deq, X, y)``: the convergence theory measured on any DEQ."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterable

import torch
from torch import nn

from deqlab._checks import check_choice, check_int, check_positive, check_tensor
from deqlab.diagnosis.implicit_ntk import Trainable, implicit_ntk
from deqlab.diagnosis.pl import LOSSES, BatchRate, batch_rate, loss_geometry
from deqlab.diagnosis.result import Diagnosis, NTKSpectrum
from deqlab.diagnosis.wellposed import well_posedness
from deqlab.implicit import DEQ
from deqlab.sample_coupling import samples_coupled
from deqlab.solvers import Solver
from deqlab.solvers.solution import default_tol, resolve_tol


def _check_deq(deq: object) -> DEQ:
    if not isinstance(deq, DEQ):
        raise TypeError(f"`deq` must be a deqlab.DEQ layer; got {type(deq).__name__}")
    if not isinstance(deq.cell, nn.Module):
        raise TypeError(
            "`deq` must have an nn.Module cell (its parameters are differentiated by name); "
            f"got a {type(deq.cell).__name__}"
        )
    return deq


def _check_targets(y: object, n: int, loss: str) -> torch.Tensor:
    y = check_tensor("y", y, floating=loss == "mse")
    if y.ndim == 0 or y.shape[0] != n:
        raise ValueError(
            f"`y` must have shape (n, ...) with n == X.shape[0] == {n}; got {tuple(y.shape)}"
        )
    if loss == "cross_entropy" and (y.dtype.is_floating_point or y.ndim != 1):
        raise ValueError(
            f"`y` must hold class indices, an integer tensor of shape ({n},), for "
            f"loss='cross_entropy'; got {y.dtype} {tuple(y.shape)}"
        )
    return y


def _precise_solver(deq: DEQ, solver: Solver | None, dtype: torch.dtype) -> Solver:
    """``solver`` if given; else the layer's forward solver at the dtype's default tolerance
    (or its own, if tighter) with at least 200 iterations. Never raising: the Diagnosis
    says whether the solves converged."""
    if solver is not None and not isinstance(solver, Solver):
        raise TypeError(f"`solver` must be a deqlab Solver or None; got {type(solver).__name__}")
    if solver is None:
        own = deq.solver
        tol = min(resolve_tol(own.tol, dtype), default_tol(dtype))
        solver = dataclasses.replace(own, tol=tol, max_iter=max(own.max_iter, 200))
    return dataclasses.replace(solver, throw=False)


def _gd_step_loss(deq, head, x, z_star, gradient, lr, loss, y, solver) -> float:
    """The loss after one GD step ``θ − η ∇L`` on copies of the cell and head, the
    equilibrium re-solved by ``solver`` from the old one."""
    cell, head = copy.deepcopy(deq.cell), copy.deepcopy(head)
    modules = {"cell": cell, "head": head}
    with torch.no_grad():
        for name, grad in gradient.items():
            where, _, pname = name.partition(".")
            param = modules[where].get_parameter(pname)
            param.sub_(lr * grad.to(param))
        z_new = solver(lambda z: cell(z, x), z_star.clone()).z
        out = z_new.flatten(1) if head is None else head(z_new).reshape(z_new.shape[0], -1)
    return loss_geometry(loss, out, y).loss


def diagnose(
    deq: DEQ,
    X: torch.Tensor,
    y: torch.Tensor | None = None,
    *,
    head: nn.Module | None = None,
    z0: torch.Tensor | None = None,
    loss: str = "mse",
    params: Iterable[str] | None = None,
    lr: float | None = None,
    solver: Solver | None = None,
    iters: int = 30,
    chunk: int | None = None,
    seed: int = 0,
) -> Diagnosis:
    """Well-posedness, the NTK at z* and the GD rate of ``head(deq(X))`` on one batch.

    Args:
        deq: a :class:`deqlab.DEQ` whose cell is an ``nn.Module`` treating samples
            independently (dim 0 of ``X`` and of the state is the batch; no BatchNorm).
        X: the DEQ's input on the batch, ``(n, ...)`` (what ``deq(X)`` takes).
        y: targets: ``(n, k)`` / ``(n,)`` values for ``"mse"``, class indices ``(n,)``
            for ``"cross_entropy"``; None skips the loss part (``rate`` is None).
        head: module mapping ``z*`` to the outputs ``(n, k)``; None: the flattened state.
        z0: the forward solve's starting state, as in ``deq(X, z0)``; None: the layer's
            default (``cell.initial_state(X)`` or zeros like ``X``).
        loss: ``"mse"`` (``Σ_i ½‖ŷ_i − y_i‖²/n``) or ``"cross_entropy"`` (mean).
        params: names of the trained parameters, ``"cell.<name>"`` / ``"head.<name>"``;
            None: every parameter of cell and head that requires grad.
        lr: step size η: the predicted GD factor, and one real GD step on copies
            (the layer itself is not changed) for the measured one.
        solver: solver that refines z* from the layer's own solve, and solves the
            adjoints and the equilibrium after the GD step; None: the layer's forward
            solver at the dtype's default tolerance (float64 1e-8, float32 9.5e-7) or its
            own if tighter, with at least 200 iterations.
        iters: Lanczos / power iterations of the per-sample Jacobian estimates
            (:func:`deqlab.fixed_point_diagnostics`; exact once ``iters`` reaches the
            state's size per sample).
        chunk: rows per vmap chunk of the per-sample Jacobians (None: all at once).
        seed: seed of the iterations' start vectors.

    Returns:
        :class:`~deqlab.diagnosis.result.Diagnosis`; ``print`` it for the reading.
    """
    deq = _check_deq(deq)
    X = _check_input(deq, X)
    if head is not None and not isinstance(head, nn.Module):
        raise TypeError(f"`head` must be an nn.Module or None; got {type(head).__name__}")
    loss = check_choice("loss", loss, LOSSES)
    y = None if y is None else _check_targets(y, X.shape[0], loss)
    lr = None if lr is None else check_positive("lr", lr)
    iters = check_int("iters", iters, min_value=2)
    trainable = Trainable.select(deq.cell, head, params)
    _check_ntk_size(deq, head, X, z0)
    precise = _precise_solver(deq, solver, X.dtype)
    z_star, steps = _equilibrium(deq, X, z0, precise)
    wellposed = well_posedness(deq.cell, X, z_star, iters=iters, seed=seed)
    with torch.no_grad():
        outputs = z_star.flatten(1) if head is None else head(z_star).reshape(X.shape[0], -1)
    if y is not None and loss == "mse" and y.numel() != outputs.numel():
        raise ValueError(
            f"`y` must have one target per output, {tuple(outputs.shape)}; got {tuple(y.shape)}"
        )
    w = None if y is None else loss_geometry(loss, outputs, y).w
    ntk = implicit_ntk(
        deq.cell, head, X, z_star, trainable, precise, cotangent=w,
        chunk=chunk,
    )  # fmt: skip
    rate = None
    if y is not None:
        rate = batch_rate(loss, ntk.matrix, ntk.outputs, y, lr)
        if lr is not None:
            after = _gd_step_loss(deq, head, X, z_star, ntk.gradient, lr, loss, y, precise)
            rate = _with_measured(rate, after)
    adjoint_ok = None if ntk.adjoint is None else ntk.adjoint.converged
    trained = tuple(f"cell.{k}" for k in trainable.cell)
    trained += tuple(f"head.{k}" for k in trainable.head)
    spectrum = NTKSpectrum.of(ntk.matrix, ntk.n_params)
    return Diagnosis(wellposed, spectrum, rate, steps, adjoint_ok, trained)


#: The NTK has (n k)² float64 entries: 8192 rows are 512 MiB, refused beyond.
MAX_NTK_ROWS = 8192


@torch.no_grad()
def _check_ntk_size(deq: DEQ, head: nn.Module | None, X: torch.Tensor, z0) -> None:
    """Refuse, before any solve, an NTK over :data:`MAX_NTK_ROWS` rows (k from the head at
    the first sample's starting state)."""
    start = deq.initial_state(X) if z0 is None else z0
    if not isinstance(start, torch.Tensor):
        raise TypeError("`deq` must have a tensor state for diagnose; got a tuple/list state")
    start = start[:1]
    n, k = X.shape[0], start.numel() if head is None else head(start).numel()
    if n * k > MAX_NTK_ROWS:
        gib = (n * k) ** 2 * 8 / 2**30
        raise ValueError(
            f"`X` ({n} samples) and `head` ({k} outputs each) give an NTK of {n * k} rows "
            f"({gib:.1f} GiB in float64); at most {MAX_NTK_ROWS}: pass fewer samples, or a "
            "head with fewer outputs (without a head every entry of the state is an output)"
        )


def _check_input(deq: DEQ, X: object) -> torch.Tensor:
    """``X``: a finite floating tensor with a non-empty batch dim, in the cell's dtype."""
    X = check_tensor("X", X)
    if X.ndim == 0 or X.shape[0] == 0:
        raise ValueError(f"`X` must have a non-empty batch dim 0; got shape {tuple(X.shape)}")
    dtypes = {p.dtype for p in deq.cell.parameters()}
    if dtypes and dtypes != {X.dtype}:
        raise ValueError(f"`X` must have the cell's dtype {dtypes.pop()}; got {X.dtype}")
    return X


def _equilibrium(
    deq: DEQ, X: torch.Tensor, z0: torch.Tensor | None, precise: Solver
) -> tuple[torch.Tensor, int]:
    """z* of ``deq(X, z0)`` on a copy of the layer (the user's keeps its statistics and warm
    starts), refined by ``precise`` from there, and the layer's own forward steps; checks
    that the cell treats the samples apart."""
    probe = copy.deepcopy(deq)
    with torch.no_grad():
        z_star = probe(X, z0)
        coupled = samples_coupled(deq.cell, (lambda z: deq.cell(z, X), z_star))
        if coupled is not None:
            raise ValueError(
                "`deq` must have a cell that treats the samples of a batch apart (no BatchNorm "
                f"in training mode, nothing across dim 0): {coupled}"
            )
        refined = precise(lambda z: deq.cell(z, X), z_star).z
    return refined, probe.last_forward.n_steps


def _with_measured(rate: BatchRate, after: float) -> BatchRate:
    """``rate`` with the measured factor ``L'/L`` of the GD step."""
    return dataclasses.replace(rate, measured=after / rate.loss if rate.loss > 0 else float("nan"))
