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
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch import nn

from deqlab._checks import NonFiniteError, check_bool, check_int, check_real
from deqlab.backward import (
    Backward,
    Implicit,
    JacobianFree,
    Phantom,
    Shine,
    Unrolled,
    check_backward,
)
from deqlab.deq_config import deq_config, deq_options
from deqlab.dropout import reset_dropout
from deqlab.fixed_point_diagnostics import FixedPointDiagnostics, fixed_point_diagnostics
from deqlab.fixed_point_stats import BackwardRecord, FixedPointStats, Hint, OnFailure, solve
from deqlab.gradient import GradientSpec
from deqlab.jacobian import jacobian_penalty
from deqlab.layer_inputs import check_same_device, default_z0, explaining_zeros_z0, named_input
from deqlab.norm import reset_norm
from deqlab.packing import Packing, has_batch
from deqlab.sample_coupling import samples_coupled
from deqlab.solvers import Anderson, Solution, Solver
from deqlab.solvers.rows import cell_row_map
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

#: The DEQ layer's default forward solver, sized for training: Anderson per sample (history
#: 5), relative tolerance 1e-3 (in a low precision it follows the state's dtype:
#: :func:`~deqlab.solvers.solution.training_tol`, bfloat16 1.6e-2), at most 30 evaluations,
#: and stall detection over 8 (a sample that would not reach the tolerance within the 30 at
#: its current rate stops with its best iterate).
#: Reason (ours, benchmarks/bench_train_cells.py, five cells, 3 seeds, CPU time to 90%
#: training accuracy): on the two-resolution and the transformer cells most samples converge
#: slowly or not at all within the cap, and stopping them early cut the forward evaluations
#: from 38 to 18 and from 31 to 18 per step at the same steps to 90%; a cap of 30 was faster
#: than one of 40 on all five cells (multi-scale 1.64× torchdeq's time against 1.06×) at the
#: same gradient accuracy; a fixed-ratio stall rule stopped samples that were converging and
#: slowed training on the tuple cell, this one does not. A cap of 20 is faster still on all
#: five (torchdeq takes 1.13–3.56× its time) but not the default: at the same trained weights
#: its gradient's cosine is lower than torchdeq's on the tuple cell (0.24 against 0.34, mean
#: of 3 seeds). ``fused=True``: the per-sample small systems in one compiled loop (torchdeq
#: takes 1.17–1.91× deqlab's time on the five cells, 0.99–1.79× on the torch path).
#: With ``backward=Implicit()`` the adjoint uses it too.
TRAINING_SOLVER = Anderson(tol=1e-3, max_iter=30, per_sample=True, stall_window=8, fused=True)
#: The DEQ layer's default backward, for training: the phantom gradient of Geng et al. 2021
#: with 3 damped steps (λ = 0.8), 2 VJPs, APPROXIMATE and labelled so in ``last_backward``.
#: Reason (ours, benchmarks/bench_train_cells.py, five cells, 3 seeds): its cosine with the
#: exact gradient at initialisation (0.98 MLP, 0.97 conv, 0.94 tuple, 0.71 multi-scale, 0.81
#: transformer) is that of the former default ``Phantom(5, 0.5)`` (4 VJPs) to 0.06, and above
#: torchdeq's 1-step gradient (0.84, 0.82, 0.76, 0.38, 0.72) on every cell, at the same steps
#: to 90% accuracy; ``Phantom(2, 1.0)`` (1 VJP) fell to 0.90 on the tuple cell and 0.62 on the
#: multi-scale one for no measurable time. ``backward=Implicit()`` gives the exact gradient.
TRAINING_BACKWARD = Phantom(3, 0.8)


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
    on_failure: OnFailure | str | None = None,
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
        on_failure: ``"warn"``, ``"raise"`` or ``"record"`` (or an :class:`OnFailure`) for
            an unconverged forward or adjoint solve (:mod:`deqlab.fixed_point_stats`); None
            (default): the forward solver's ``throw`` decides, here, for both solves
            (``"raise"`` if set, else ``"record"``).

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
    policy = OnFailure.parse(on_failure, solver)
    stats = FixedPointStats() if stats is None else stats
    if not isinstance(stats, FixedPointStats):
        raise TypeError(f"`stats` must be a FixedPointStats; got {type(stats).__name__}")
    f, z0, packing = _packed(f, z0, solver.per_sample)
    if not z0.numel():  # no sample (an empty batch): the empty equilibrium, in the graph of f
        solution = solve(solver, f, z0.detach(), "forward", stats, policy, hint)
        return _unpack(f(solution.z) if torch.is_grad_enabled() else solution.z, packing)
    solution = backward.solve(solver, f, z0, stats, policy, hint)
    spec = GradientSpec(f, solver, backward, stats, hint, policy, solution)
    return _unpack(backward.attach(f, solution, spec), packing)


class DEQ(nn.Module):
    """Deep equilibrium layer ``z* = cell(z*, x)`` (Hieu 2022, §2.1), training-grade.

    Args:
        cell: callable ``cell(z, x) -> z``; ``z`` a tensor or a flat tuple/list of tensors
            (as in :func:`fixed_point`). An ``nn.Module`` is registered as a submodule. A
            plain callable (a lambda closing over modules) gets gradients too, since
            autograd reaches every tensor it uses, but its modules are not registered:
            ``deq.parameters()``, ``.to()`` and ``state_dict()`` do not see them.
        solver: default :data:`TRAINING_SOLVER` (Anderson per sample, rel tol 1e-3 or, in
            bfloat16 and float16, what their rounding lets a solve reach, 30 evaluations,
            stall detection over 8, the small systems fused; per sample assumes the cell
            treats each sample alone, and falls back to one problem for a state without a
            common batch dim 0 or a cell module holding a BatchNorm in training mode).
        backward: default :data:`TRAINING_BACKWARD`, the phantom gradient ``Phantom(3, 0.8)``
            (APPROXIMATE: 3 damped steps, 2 VJPs; ``last_backward.exact`` is False);
            ``Implicit(init="grad")`` gives the exact implicit gradient (to the adjoint
            solver's tolerance), its solve started at ``g``.
        hint: as in :func:`fixed_point`.
        on_failure: what an unconverged forward or adjoint solve does: ``"warn"`` (default:
            return the best iterate, count it in ``stats``, warn at the layer's 1st, 2nd,
            4th, … failure with the counts so far),
            ``"raise"`` (strict: :class:`~deqlab.solvers.SolverError`) or ``"record"``.
        row_compaction: with a per-sample solver and an input ``x`` whose dim 0 is the
            batch, evaluate the cell only on the samples still to converge (the others are
            frozen at their iterate that met the tolerance; :mod:`deqlab.solvers.rows`).
            Needs a cell that treats each sample alone, wherever it sits in the batch; off
            for a cell module holding a BatchNorm in training mode.
        eval_factor: in eval mode (``deq.eval()``) the solver may make ``max_iter ×
            eval_factor`` evaluations (torchdeq's ``eval_factor``: a tighter solve at test
            time than the training budget); ``eval_max_iter``: that many instead.

    ``forward(x, z0=None)``: if ``z0`` is None the starting point is
    ``cell.initial_state(x)`` when the cell defines that method, else ``zeros_like(x)``
    (for cells whose state has the input's shape; a cell that rejects it raises a
    ValueError naming ``z0``, or a TypeError naming both dtypes where ``x``'s is none of the
    cell's parameter dtypes; an integer ``x`` then raises a TypeError naming ``x``). A
    ``z0`` on another device than ``x`` is refused; NaN/Inf in ``x`` is named as such; a
    batch of 0 samples gives the empty equilibrium. A cell module's normalised layers
    (:mod:`deqlab.norm`) are recomputed and its variational-dropout masks
    (:mod:`deqlab.dropout`) redrawn at every forward. :meth:`states` returns the iterates of
    a solve in segments, for a fixed-point correction loss
    (:func:`deqlab.correction.fixed_point_correction`). :meth:`from_config` builds a layer
    from a dict or TOML file, :meth:`config` writes its settings back.

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
        on_failure: OnFailure | str = OnFailure.WARN,
        row_compaction: bool = True,
        eval_factor: float = 1.0,
        eval_max_iter: int | None = None,
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
        self.on_failure = OnFailure.parse(on_failure)
        self.row_compaction = check_bool("row_compaction", row_compaction)
        self.eval_factor = check_real("eval_factor", eval_factor, low=0.0, low_inclusive=False)
        if eval_max_iter is not None:
            check_int("eval_max_iter", eval_max_iter, min_value=1)
        self.eval_max_iter = eval_max_iter
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

    @classmethod
    def from_config(
        cls, cell: Callable[[Any, Any], Any], config: Mapping[str, Any] | str | os.PathLike
    ) -> DEQ:
        """A layer for ``cell`` with the settings of ``config`` (a dict, or the path of a TOML
        file; layout in :mod:`deqlab.deq_config`; an unknown key is a ValueError)."""
        return cls(cell, **deq_options(config, TRAINING_SOLVER))

    def config(self) -> dict[str, Any]:
        """This layer's settings as plain data (what :meth:`from_config` reads)."""
        return deq_config(self)

    def forward(self, x: Any, z0: State | None = None) -> State:
        f, z0, packing, solver = self._problem(x, z0)
        return _unpack(self._solve(f, z0, solver, x), packing)

    def states(self, x: Any, n: int, z0: State | None = None) -> list[State]:
        """The solve from ``z0`` in ``n`` segments of ``max_iter // n`` evaluations (the last
        takes the rest), each started at the one before's returned iterate: the ``n``
        segment ends, each joined to autograd through the layer's backward at that point
        (the states a fixed-point correction loss is taken on, Bai et al. 2022, DEQ-Flow;
        torchdeq's ``n_states``). The last is the layer's output; each segment is a
        forward solve in ``stats``."""
        f, z, packing, solver = self._problem(x, z0)
        check_int("n", n, min_value=1)
        if n > solver.max_iter:
            raise ValueError(f"`n` must be <= the solver's max_iter {solver.max_iter}; got {n}")
        sizes = [solver.max_iter // n] * (n - 1)
        sizes.append(solver.max_iter - sum(sizes))
        out = []
        for size in sizes:
            z = self._solve(f, z.detach(), dataclasses.replace(solver, max_iter=size), x)
            out.append(_unpack(z, packing))
        return out

    def _problem(
        self, x: Any, z0: State | None
    ) -> tuple[Map, torch.Tensor, Packing | None, Solver]:
        """The packed map and start of the solve of ``cell(·, x)``, and the solver for it
        (per sample where the cell allows, the eval budget in eval mode)."""
        if isinstance(self.cell, nn.Module):
            reset_norm(self.cell)
            reset_dropout(self.cell)

        def f(z: State) -> State:
            return self.cell(z, x)

        if z0 is None:
            z0 = self.initial_state(x)
            if self._cell_init is None:
                f = explaining_zeros_z0(f, z0, self.cell)
        check_same_device(z0, x)
        mixes = samples_coupled(self.cell) is not None
        solver = self.solver
        if self._default_solver and (mixes or not has_batch(z0)):
            solver = dataclasses.replace(solver, per_sample=False)
        if not self.training and (self.eval_max_iter or self.eval_factor != 1.0):
            budget = self.eval_max_iter or max(1, int(solver.max_iter * self.eval_factor))
            solver = dataclasses.replace(solver, max_iter=budget)
        f_packed, z0_packed, packing = _packed(f, z0, solver.per_sample)
        if self._default_solver and solver.tol != training_tol(z0_packed.dtype):
            solver = dataclasses.replace(solver, tol=training_tol(z0_packed.dtype))
        if solver.per_sample and self.row_compaction and not mixes:
            f_packed = cell_row_map(self.cell, x, f_packed, packing, z0_packed.shape[0])
        return f_packed, z0_packed, packing, solver

    def _solve(self, f: Map, z0: torch.Tensor, solver: Solver, x: Any) -> torch.Tensor:
        try:
            z = fixed_point(
                f,
                z0,
                solver=solver,
                backward=self.backward,
                stats=self.stats,
                hint=self.hint,
                on_failure=self.on_failure,
            )
        except NonFiniteError as err:
            raise named_input(err, x) from None
        self._last = (f, z.detach(), solver)
        return z

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

    def summary(self) -> str:
        """The run-level picture of this layer's solves in one line (``stats.summary()``)."""
        return self.stats.summary()

    @property
    def last_forward(self) -> Solution | None:
        return self.stats.forward

    @property
    def last_backward(self) -> BackwardRecord | None:
        return self.stats.gradient
