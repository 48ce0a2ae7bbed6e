"""Differentiable fixed points: ``z* = f(z*)`` with exact implicit gradients (or cheaper
approximate ones, labelled so).

By the implicit function theorem (Hieu 2022, Eq. 2.3), for ``z* = f(z*, θ)`` with
``I - J_f(z*)`` invertible, ``∂z*/∂θ = (I - J_f)⁻¹ ∂f/∂θ``. For a loss with gradient
``g = ∂ℓ/∂z*`` the parameter gradient is ``uᵀ ∂f/∂θ`` where the adjoint ``u`` solves
the linear fixed point (Hieu 2022, Eq. 2.4 and the RBP equation after it)

    u = g + J_f(z*)ᵀ u,

one vector-Jacobian product per iteration. :func:`fixed_point` implements this with a
``torch.autograd.Function``: the forward solve runs under ``torch.no_grad``; one tracked
call ``f(z*)`` connects ``z*`` to every tensor ``f`` closes over (module parameters,
inputs), and the Function's backward replaces ``g`` by ``u`` on that edge, so autograd
delivers ``uᵀ ∂f/∂θ`` to all of them. How to differentiate is an object
(:mod:`deqlab.backward`): ``Implicit`` (exact, :func:`fixed_point`'s default), ``Phantom``
(approximate, the :class:`DEQ` layer's training default), ``Shine``, ``JacobianFree``
(approximate) and ``Unrolled`` (the oracle).

A solve that does not converge is handled by a policy (:mod:`deqlab.fixed_point_stats`):
:func:`fixed_point` keeps each solver's ``throw`` by default, a :class:`DEQ` layer warns
once and returns its best iterate (``on_failure="raise"`` for strict use). A state may be
one tensor or a flat tuple/list of tensors (:mod:`deqlab.packing`). With a per-sample solver a
:class:`DEQ` evaluates its cell only on the samples still to converge, in the forward and the
adjoint solve (row compaction: :mod:`deqlab.solvers.rows`, :mod:`deqlab.vjp`).

Only first-order gradients are supported (no ``create_graph`` through ``Implicit``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from deqlab._checks import NonFiniteError, check_bool, check_choice
from deqlab.backward import (
    Backward,
    GradientSpec,
    Implicit,
    ImplicitGradient,
    JacobianFree,
    Phantom,
    Shine,
    Unrolled,
    check_backward,
)
from deqlab.fixed_point_diagnostics import FixedPointDiagnostics, fixed_point_diagnostics
from deqlab.fixed_point_stats import (
    ON_FAILURE,
    BackwardRecord,
    FixedPointStats,
    Hint,
    solve,
)
from deqlab.jacobian import jacobian_penalty
from deqlab.layer_inputs import check_same_device, default_z0, explaining_zeros_z0, named_input
from deqlab.packing import Packing
from deqlab.sample_coupling import samples_coupled
from deqlab.solvers import Anderson, Solution, Solver
from deqlab.solvers.rows import RowMap
from deqlab.solvers.solution import training_tol

__all__ = [
    "DEQ",
    "TRAINING_BACKWARD",
    "TRAINING_SOLVER",
    "Backward",
    "BackwardRecord",
    "FixedPointStats",
    "Implicit",
    "JacobianFree",
    "Phantom",
    "Shine",
    "Unrolled",
    "fixed_point",
]

State = torch.Tensor | Sequence[torch.Tensor]
Map = Callable[[torch.Tensor], torch.Tensor]

#: The DEQ layer's default forward solver, sized for training (ours, after the field's
#: practice: torchdeq stops at 1e-3 within 40 iterations): Anderson per sample, relative
#: tolerance 1e-3, at most 40 evaluations; in a low precision its tolerance follows the
#: state's dtype (:func:`~deqlab.solvers.solution.training_tol`: bfloat16 1.6e-2). With
#: ``backward=Implicit()`` the adjoint uses it too.
TRAINING_SOLVER = Anderson(tol=1e-3, max_iter=40, per_sample=True)
#: The DEQ layer's default backward, for training (ours, after the field's practice: torchdeq
#: trains with a 1-step phantom gradient by default): the phantom gradient of Geng et al. 2021
#: with :class:`Phantom`'s own 5 damped steps (λ = 0.5), approximate and labelled so in
#: ``last_backward``. On the conv DEQ of benchmarks/bench_train_conv_deq.py it reaches 97%
#: training accuracy in as many steps as the exact gradient with 4 VJPs per step instead of
#: about 18. ``backward=Implicit()`` gives the exact gradient.
TRAINING_BACKWARD = Phantom()


def _resolve(solver: Solver | None, backward: Backward | None) -> tuple[Solver, Backward]:
    """Defaults (``Anderson()``, ``Implicit()``) and type checks of solver and backward."""
    solver = Anderson() if solver is None else solver
    backward = Implicit() if backward is None else backward
    if not isinstance(solver, Solver):
        raise TypeError(f"`solver` must be a Solver (Picard, Anderson, Broyden); got {solver!r}")
    check_backward(backward, solver)
    return solver, backward


def _packed(
    f: Callable[[Any], Any], z0: State, per_sample: bool
) -> tuple[Map, torch.Tensor, Packing | None]:
    """``f`` and ``z0`` on one tensor, and the packing of a tuple/list state (else None)."""
    if not isinstance(z0, tuple | list):
        return f, z0, None
    packing = Packing.of(z0, per_sample)
    return lambda z: packing.pack(f(packing.unpack(z)), "f(z)"), packing.pack(z0, "z0"), packing


def _unpack(z: torch.Tensor, packing: Packing | None) -> State:
    return z if packing is None else packing.unpack(z)


def fixed_point(
    f: Callable[[Any], Any],
    z0: State,
    *,
    solver: Solver | None = None,
    backward: Backward | None = None,
    stats: FixedPointStats | None = None,
    hint: Hint = None,
    on_failure: str | None = None,
) -> State:
    """The fixed point ``z* = f(z*)``, differentiable w.r.t. every tensor ``f`` closes over.

    Args:
        f: maps a state shaped like ``z0`` to one of that shape; deterministic
            (``Implicit`` evaluates it again at ``z*`` in the backward pass for the VJPs).
        z0: starting point (e.g. the previous equilibrium, to warm-start): a floating
            tensor, or a flat tuple/list of them (one dtype and device), which ``f`` then
            takes and returns; receives no gradient except through ``Unrolled``.
        solver: forward solver; default ``Anderson()``, whose ``tol`` follows the state's
            dtype (:func:`~deqlab.solvers.solution.default_tol`: float64 ``1e-8``, float32
            ``9.5e-7``); an explicit ``tol`` wins.
        backward: ``Implicit()`` (default, exact), ``Phantom(...)``, ``Shine()``,
            ``JacobianFree()`` or ``Unrolled(...)`` (:mod:`deqlab.backward`).
        stats: a :class:`FixedPointStats` to receive the Solutions, the gradient's record
            and the running counts.
        hint: extra context for a failure (a string, or a zero-argument callable evaluated
            only on failure), e.g. ``"‖W‖₂ = 1.3 >= 1"``.
        on_failure: ``"warn"``, ``"raise"`` or ``"record"`` for an unconverged forward or
            adjoint solve (:mod:`deqlab.fixed_point_stats`); None (default): each solver's
            ``throw`` decides (``"raise"`` if set, else ``"record"``).

    Returns:
        ``z*`` with ``z0``'s shape (the forward solver's best iterate); a tuple/list like
        ``z0`` for a tuple/list state (then ``stats`` hold the packed tensor). An empty
        ``z0`` (a batch of 0 samples) is its own equilibrium: ``f(z0)``, empty too.

    Raises:
        TypeError / ValueError: bad arguments (see :meth:`Solver.__call__`); a tuple/list
            ``z0`` or ``f(z)`` that is not tensors of ``z0``'s shapes, dtype and device.
        SolverError: the forward (or, during ``.backward()``, the adjoint) solve failed
            under the policy ``"raise"``.
    """
    solver, backward = _resolve(solver, backward)
    if on_failure is not None:
        check_choice("on_failure", on_failure, ON_FAILURE)
    stats = FixedPointStats() if stats is None else stats
    if not isinstance(stats, FixedPointStats):
        raise TypeError(f"`stats` must be a FixedPointStats; got {type(stats).__name__}")
    f, z0, packing = _packed(f, z0, solver.per_sample)
    if not z0.numel():  # no sample (an empty batch): the empty equilibrium, in the graph of f
        solution = solve(solver, f, z0.detach(), "forward", stats, hint=hint, on_failure=on_failure)
        return _unpack(f(solution.z) if torch.is_grad_enabled() else solution.z, packing)
    if isinstance(backward, Unrolled):
        if backward.steps is not None:
            solver = dataclasses.replace(solver, max_iter=backward.steps)
        solution = solve(solver, f, z0, "forward", stats, hint=hint, on_failure=on_failure)
        _record_unrolled(solution, stats)
        return _unpack(solution.z, packing)
    with torch.no_grad():
        solution = solve(solver, f, z0.detach(), "forward", stats, hint=hint, on_failure=on_failure)
    z_star = solution.z
    if not torch.is_grad_enabled():
        return _unpack(z_star, packing)
    z_out = f(z_star)  # one tracked step: the edge to every tensor f closes over
    if not z_out.requires_grad:
        return _unpack(z_star, packing)
    spec = GradientSpec(f, solver, backward, stats, hint, on_failure, solution)
    return _unpack(ImplicitGradient.apply(z_out, z_star, spec), packing)


def _record_unrolled(solution: Solution, stats: FixedPointStats) -> None:
    """At backward time, record that the gradient went through the solver's iterations."""
    if not solution.z.requires_grad:
        return
    reason = "backpropagation through the solver's iterations (the implicit gradient in the limit)"
    if not solution.converged:
        reason += "; the forward solve did not converge"
    record = BackwardRecord("unrolled", exact=False, reason=reason, vjps=solution.n_steps)

    def hook(grad: torch.Tensor) -> None:
        stats.record_gradient(record)

    solution.z.register_hook(hook)


class DEQ(nn.Module):
    """Deep equilibrium layer ``z* = cell(z*, x)`` (Hieu 2022, §2.1), training-grade.

    Args:
        cell: callable ``cell(z, x) -> z``; ``z`` a tensor or a flat tuple/list of tensors
            (as in :func:`fixed_point`). An ``nn.Module`` is registered as a submodule. A
            plain callable (a lambda closing over modules) gets gradients too, since
            autograd reaches every tensor it uses, but its modules are not registered:
            ``deq.parameters()``, ``.to()`` and ``state_dict()`` do not see them.
        solver: default :data:`TRAINING_SOLVER` (Anderson per sample, rel tol 1e-3 or, in
            bfloat16 and float16, what their rounding lets a solve reach, 40 evaluations; per
            sample assumes the cell treats each sample alone, and falls back to one problem
            for a state without a common batch dim 0 or a cell module holding a BatchNorm in
            training mode).
        backward: default :data:`TRAINING_BACKWARD`, the phantom gradient ``Phantom()``
            (APPROXIMATE: 5 damped steps; ``last_backward.exact`` is False);
            ``Implicit(init="grad")`` gives the exact implicit gradient (to the adjoint
            solver's tolerance), its solve started at ``g``.
        hint: as in :func:`fixed_point`.
        on_failure: what an unconverged forward or adjoint solve does: ``"warn"`` (default:
            return the best iterate, count it in ``stats``, warn once per layer),
            ``"raise"`` (strict: :class:`~deqlab.solvers.SolverError`) or ``"record"``.
        row_compaction: with a per-sample solver and an input ``x`` whose dim 0 is the
            batch, evaluate the cell only on the samples still to converge (the others are
            frozen at their iterate that met the tolerance; :mod:`deqlab.solvers.rows`).
            Needs a cell that treats each sample alone, wherever it sits in the batch; off
            for a cell module holding a BatchNorm in training mode.

    ``forward(x, z0=None)``: if ``z0`` is None the starting point is
    ``cell.initial_state(x)`` when the cell defines that method, else ``zeros_like(x)``
    (for cells whose state has the input's shape; a cell that rejects it raises a
    ValueError naming ``z0``; an integer ``x`` then raises a TypeError naming ``x``). A
    ``z0`` on another device than ``x`` is refused; NaN/Inf in ``x`` is named as such; a
    batch of 0 samples gives the empty equilibrium.

    After a forward: ``last_forward`` (Solution: status, residuals, per-sample
    ``sample_residuals`` / ``sample_steps``), after a backward ``last_backward``
    (:class:`BackwardRecord`: method, ``exact``, VJPs, adjoint Solution); ``stats`` holds
    the running counts (``stats.unconverged_forward`` ...). Opt-in, on the last forward's
    ``z*``: :meth:`jacobian_penalty` (a loss term) and :meth:`diagnostics`.
    """

    def __init__(
        self,
        cell: Callable[[Any, Any], Any],
        *,
        solver: Solver | None = None,
        backward: Backward | None = None,
        hint: Hint = None,
        on_failure: str = "warn",
        row_compaction: bool = True,
    ) -> None:
        super().__init__()
        if not callable(cell):
            raise TypeError(f"`cell` must be callable as cell(z, x); got {type(cell).__name__}")
        self.cell = cell
        self._default_solver = solver is None
        backward = TRAINING_BACKWARD if backward is None else backward
        self.solver, self.backward = _resolve(
            TRAINING_SOLVER if solver is None else solver, backward
        )
        self.hint = hint
        self.on_failure = check_choice("on_failure", on_failure, ON_FAILURE)
        self.row_compaction = check_bool("row_compaction", row_compaction)
        self.stats = FixedPointStats()
        self._last: tuple[Map, torch.Tensor, Solver] | None = None

    @property
    def _cell_init(self) -> Callable[[Any], State] | None:
        init = getattr(self.cell, "initial_state", None)
        return init if callable(init) else None

    def initial_state(self, x: Any) -> State:
        """Default ``z0``: ``cell.initial_state(x)`` if defined, else ``zeros_like(x)``."""
        if self._cell_init is not None:
            return self._cell_init(x)
        if not isinstance(x, torch.Tensor):
            raise TypeError(
                "`z0` is needed: the cell has no initial_state(x) and `x` is not a tensor "
                f"(got {type(x).__name__})"
            )
        return default_z0(x)

    def forward(self, x: Any, z0: State | None = None) -> State:
        def f(z: State) -> State:
            return self.cell(z, x)

        if z0 is None:
            z0 = self.initial_state(x)
            if self._cell_init is None:
                f = explaining_zeros_z0(f, z0)
        check_same_device(z0, x)
        mixes = samples_coupled(self.cell) is not None
        solver = self.solver
        if self._default_solver and (mixes or not _has_batch(z0)):
            solver = dataclasses.replace(solver, per_sample=False)
        f_packed, z0_packed, packing = _packed(f, z0, solver.per_sample)
        if self._default_solver and solver.tol != training_tol(z0_packed.dtype):
            solver = dataclasses.replace(solver, tol=training_tol(z0_packed.dtype))
        if solver.per_sample and self.row_compaction and not mixes:
            f_packed = _row_map(self.cell, x, f_packed, packing, z0_packed.shape[0])
        try:
            z = fixed_point(
                f_packed,
                z0_packed,
                solver=solver,
                backward=self.backward,
                stats=self.stats,
                hint=self.hint,
                on_failure=self.on_failure,
            )
        except NonFiniteError as err:
            raise named_input(err, x) from None
        self._last = (f_packed, z.detach(), solver)
        return _unpack(z, packing)

    def __getstate__(self) -> dict[str, Any]:
        """Picklable without the last forward's closure (it holds ``x``; rebuilt by a forward)."""
        return {**super().__getstate__(), "_last": None}

    def _last_solve(self, what: str) -> tuple[Map, torch.Tensor, Solver]:
        if self._last is None:
            raise RuntimeError(f"DEQ.{what}() reads the last forward's z*: call deq(x) first")
        return self._last

    def jacobian_penalty(
        self, k: int = 1, *, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """Hutchinson estimate of ``‖J_f(z*)‖_F² / dim`` at the last forward's ``z*``, with
        ``k`` Gaussian probes; differentiable: add ``γ ·`` it to the loss (Bai, Koltun &
        Kolter 2021). See :func:`deqlab.jacobian.jacobian_penalty`."""
        f, z_star, _ = self._last_solve("jacobian_penalty")
        return jacobian_penalty(f, z_star, k, generator=generator)

    def diagnostics(
        self,
        *,
        rtol: float = 0.1,
        max_iter: int = 100,
        generator: torch.Generator | None = None,
    ) -> FixedPointDiagnostics:
        """Spectral radius, ``‖J_f‖₂`` and ``σ_min(I − J_f)`` at the last forward's ``z*``
        (per sample with a per-sample solver; a tuple/list state packed per sample), each
        with its bracket and whether it converged within ``max_iter`` Krylov steps, and the
        solve's per-sample steps and residuals.
        See :func:`deqlab.fixed_point_diagnostics.fixed_point_diagnostics`."""
        f, z_star, solver = self._last_solve("diagnostics")
        rows = z_star.shape[0] if solver.per_sample else 1
        return fixed_point_diagnostics(
            f, z_star, rows, rtol=rtol, max_iter=max_iter, forward=self.last_forward,
            generator=generator,
        )  # fmt: skip

    @property
    def last_forward(self) -> Solution | None:
        return self.stats.forward

    @property
    def last_backward(self) -> BackwardRecord | None:
        return self.stats.gradient


def _row_map(
    cell: Callable[[Any, Any], Any], x: Any, f: Map, packing: Packing | None, batch: int
) -> Map:
    """``f`` as a :class:`~deqlab.solvers.rows.RowMap` (the cell on some samples, with
    their rows of ``x``) when ``x`` is a tensor, or tuple/list of tensors, of batch dim 0;
    else ``f`` unchanged."""
    parts = list(x) if isinstance(x, tuple | list) else [x]
    if not all(isinstance(p, torch.Tensor) and p.ndim and p.shape[0] == batch for p in parts):
        return f

    def rows(z_sub: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        x_sub = [p.index_select(0, index) for p in parts]
        x_sub = type(x)(x_sub) if isinstance(x, tuple | list) else x_sub[0]
        if packing is None:
            return cell(z_sub, x_sub)
        sub = packing.rows(len(index))
        return sub.pack(cell(sub.unpack(z_sub), x_sub), "f(z)")

    return RowMap(f, rows)


def _has_batch(z0: State) -> bool:
    """``z0`` has a dim 0 shared by all its tensors (what a per-sample solve needs)."""
    parts = list(z0) if isinstance(z0, tuple | list) else [z0]
    leads = {p.shape[0] if isinstance(p, torch.Tensor) and p.ndim else None for p in parts}
    return len(leads) == 1 and None not in leads
