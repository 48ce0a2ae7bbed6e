"""``deqlab.diagnose(deq, X, y)``: the convergence theory measured on any DEQ."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterable

import torch
from torch import nn

from deqlab._checks import check_choice, check_int, check_positive, check_real
from deqlab.diagnosis import checks
from deqlab.diagnosis.batch import Inputs, Layout, PackedDEQ, batch_size, check_inputs
from deqlab.diagnosis.implicit_ntk import Trainable, implicit_ntk
from deqlab.diagnosis.pl import LOSSES, BatchRate, batch_rate, loss_geometry
from deqlab.diagnosis.result import Diagnosis, NTKSpectrum
from deqlab.diagnosis.wellposed import well_posedness
from deqlab.implicit import DEQ
from deqlab.sample_coupling import samples_coupled
from deqlab.solvers import Solver
from deqlab.solvers.solution import default_tol, resolve_tol


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


def _gd_step_loss(model: PackedDEQ, x, z_star, gradient, lr, loss, y, solver) -> float:
    """The loss after one GD step ``θ − η ∇L`` on copies of the cell and head, the
    equilibrium re-solved by ``solver`` from the old one."""
    moved = copy.deepcopy(model)
    modules = {"cell": moved.cell, "head": moved.head}
    with torch.no_grad():
        for name, grad in gradient.items():
            where, _, pname = name.partition(".")
            param = modules[where].get_parameter(pname)
            param.sub_(lr * grad.to(param))
        z_new = solver(moved.f(x), z_star.clone()).z
        out = moved.outputs(z_new)
    return loss_geometry(loss, out, y).loss


def diagnose(
    deq: DEQ,
    X: Inputs,
    y: torch.Tensor | None = None,
    *,
    head: nn.Module | None = None,
    z0: torch.Tensor | None = None,
    loss: str = "mse",
    params: Iterable[str] | None = None,
    lr: float | None = None,
    solver: Solver | None = None,
    rtol: float = 0.1,
    max_iter: int = 100,
    chunk: int | None = None,
    seed: int = 0,
) -> Diagnosis:
    """Well-posedness, the NTK at z* and the GD rate of ``head(deq(X))`` on one batch.

    Args:
        deq: a :class:`deqlab.DEQ` whose cell is an ``nn.Module`` treating samples
            independently (dim 0 of ``X`` and of the state is the batch; no BatchNorm in
            training mode). A tuple/list state (a multi-scale cell) is packed per sample,
            as the layer packs it: the per-sample Jacobian is over the concatenated state.
        X: the DEQ's input on the batch, ``(n, ...)`` (what ``deq(X)`` takes), or a
            tuple/list of such tensors.
        y: targets: ``(n, k)`` / ``(n,)`` values for ``"mse"``, class indices ``(n,)`` in
            ``[0, k)`` for ``"cross_entropy"``; None skips the loss part (``rate`` is None).
        head: module mapping ``z*`` (the state, or the tuple/list) to the outputs ``(n, k)``,
            not containing the DEQ; None: the flattened (packed) state.
        z0: the forward solve's starting state, as in ``deq(X, z0)``; None: the layer's
            default (``cell.initial_state(X)`` or zeros like ``X``).
        loss: ``"mse"`` (``Σ_i ½‖ŷ_i − y_i‖²/n``) or ``"cross_entropy"`` (mean).
        params: names of the trained parameters, ``"cell.<name>"`` / ``"head.<name>"``;
            None: every parameter of cell and head that requires grad. The NTK is over
            these: the reading names them.
        lr: step size η: the predicted GD factor, and one real GD step on copies
            (the layer itself is not changed) for the measured one.
        solver: solver that refines z* from the layer's own solve, and solves the
            adjoints and the equilibrium after the GD step; None: the layer's forward
            solver at the dtype's default tolerance (float64 1e-8, float32 9.5e-7) or its
            own if tighter, with at least 200 iterations.
        rtol, max_iter: the per-sample Jacobian estimates iterate until their brackets are
            within ``rtol`` or ``max_iter`` Krylov steps (:func:`deqlab.fixed_point_diagnostics`;
            exact once ``max_iter`` reaches the state's size per sample).
        chunk: rows per vmap chunk of the per-sample Jacobians (None: all at once).
        seed: seed of the Krylov start vectors.

    Returns:
        :class:`~deqlab.diagnosis.result.Diagnosis`; ``print`` it for the reading, or show it
        (``_repr_html_`` in Jupyter, ``to_html(path)``).

    Raises:
        TypeError / ValueError: bad arguments, a head containing the DEQ, a cell mixing the
            samples, a non-finite equilibrium; ``MemoryRefusal`` (a ValueError) when the
            Krylov bases or the NTK would not fit in memory.
    """
    deq = checks.check_deq(deq)
    X = check_inputs(X, {p.dtype for p in deq.cell.parameters()})
    n = batch_size(X)
    head = checks.check_head(head, deq)
    loss = check_choice("loss", loss, LOSSES)
    y = None if y is None else checks.check_targets(y, n, loss)
    lr = None if lr is None else check_positive("lr", lr)
    rtol = check_real("rtol", rtol, low=0.0, low_inclusive=False)
    max_iter = check_int("max_iter", max_iter, min_value=2)
    chunk = checks.check_chunk(chunk)
    trainable = Trainable.select(deq.cell, head, params)
    start = deq.initial_state(X) if z0 is None else z0
    model = PackedDEQ(deq.cell, head, Layout.of(start))
    packed_start = model.layout.pack(start, "z0")
    with torch.no_grad():
        k = model.outputs(packed_start[:1]).shape[1]
    checks.check_ntk_memory(
        n * k, trainable.count, packed_start.element_size(), packed_start.device
    )
    precise = _precise_solver(deq, solver, packed_start.dtype)
    z_star, steps, converged = _equilibrium(deq, model, X, z0, precise)
    wellposed = well_posedness(model.f(X), z_star, rtol=rtol, max_iter=max_iter, seed=seed)
    with torch.no_grad():
        outputs = model.outputs(z_star)
    checks.check_against_outputs(y, loss, outputs)
    w = None if y is None else loss_geometry(loss, outputs, y).w
    ntk = implicit_ntk(model, X, z_star, trainable, precise, cotangent=w, chunk=chunk)
    rate = None
    if y is not None:
        rate = batch_rate(loss, ntk.matrix, ntk.outputs, y, lr)
        if lr is not None:
            after = _gd_step_loss(model, X, z_star, ntk.gradient, lr, loss, y, precise)
            rate = _with_measured(rate, after)
    adjoint_ok = None if ntk.adjoint is None else ntk.adjoint.converged
    spectrum = NTKSpectrum.of(ntk.matrix, trainable.counts)
    return Diagnosis(wellposed, spectrum, rate, steps, converged, adjoint_ok)


def _equilibrium(
    deq: DEQ, model: PackedDEQ, X: Inputs, z0, precise: Solver
) -> tuple[torch.Tensor, int, bool]:
    """The packed z* of ``deq(X, z0)`` on a copy of the layer (the user's keeps its statistics
    and warm starts), refined by ``precise`` from there, the layer's own forward steps and
    whether the refinement converged; checks that the cell treats the samples apart and that
    z* is finite."""
    probe = copy.deepcopy(deq)
    f = model.f(X)
    with torch.no_grad():
        try:
            state = probe(X, z0)
        except ValueError as err:
            raise ValueError(f"the forward solve of `deq` on `X` failed: {err}") from err
        z_star = model.layout.pack(state, "z*")
        checks.check_equilibrium(z_star)
        coupled = samples_coupled(deq.cell, (f, z_star))
        if coupled is not None:
            raise ValueError(
                "`deq` must have a cell that treats the samples of a batch apart (no BatchNorm "
                f"in training mode, nothing across dim 0): {coupled}"
            )
        refined = precise(f, z_star)
    checks.check_equilibrium(refined.z)
    return refined.z, probe.last_forward.n_steps, refined.converged


def _with_measured(rate: BatchRate, after: float) -> BatchRate:
    """``rate`` with the measured factor ``L'/L`` of the GD step."""
    return dataclasses.replace(rate, measured=after / rate.loss if rate.loss > 0 else float("nan"))
