"""Differentiable fixed points: ``z* = f(z*)`` with exact implicit gradients.

By the implicit function theorem (Hieu 2022, Eq. 2.3), for ``z* = f(z*, θ)`` with
``I - J_f(z*)`` invertible, ``∂z*/∂θ = (I - J_f)⁻¹ ∂f/∂θ``. For a loss with gradient
``g = ∂ℓ/∂z*`` the parameter gradient is ``uᵀ ∂f/∂θ`` where the adjoint ``u`` solves
the linear fixed point (Hieu 2022, Eq. 2.4 and the RBP equation after it)

    u = g + J_f(z*)ᵀ u,

one vector-Jacobian product per iteration. :func:`fixed_point` implements this with a
``torch.autograd.Function``: the forward solve runs under ``torch.no_grad``; one tracked
call ``f(z*)`` connects ``z*`` to every tensor ``f`` closes over (module parameters,
inputs), and the Function's backward replaces ``g`` by ``u`` on that edge, so autograd
delivers ``uᵀ ∂f/∂θ`` to all of them. How to differentiate is an object:

* :class:`Implicit` (default) — the exact gradient above.
* :class:`Unrolled` — backpropagation through the forward solver's iterations (memory
  grows with the step count); the test oracle.
* :class:`JacobianFree` — ``u ≈ g`` (Fung et al. 2022, "JFB"): APPROXIMATE, a descent
  direction for contractive ``f`` but not the gradient.

A state may be one tensor or a flat tuple/list of tensors (e.g. a hidden state and a
cell state): :class:`_Packing` concatenates it into one tensor for the solver and splits
the solution back. Splitting is a differentiable view, so the Function sees the packed
problem and the implicit gradient stays exact.

Only first-order gradients are supported (no ``create_graph`` through ``Implicit``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from deqlab._checks import check_bool, check_int, check_tensor
from deqlab.solvers import Anderson, Solution, Solver, SolverError

State = torch.Tensor | Sequence[torch.Tensor]
Map = Callable[[torch.Tensor], torch.Tensor]
Hint = str | Callable[[], str] | None


@dataclass(frozen=True)
class Implicit:
    """Exact implicit gradient: solve the adjoint ``u = g + J_fᵀ u`` with VJPs.

    Args:
        solver: solver of the adjoint fixed point; None uses the forward solver.
        warm_start: start from the previous adjoint stored in the ``stats`` object
            passed to :func:`fixed_point` (when its shape matches), instead of zero.
    """

    solver: Solver | None = None
    warm_start: bool = False

    def __post_init__(self) -> None:
        if self.solver is not None and not isinstance(self.solver, Solver):
            raise TypeError(
                f"`solver` must be a Solver (Picard, Anderson, Broyden) or None; "
                f"got {type(self.solver).__name__}"
            )
        check_bool("warm_start", self.warm_start)


@dataclass(frozen=True)
class Unrolled:
    """Backpropagate through the forward solver's iterations (autograd records each one).

    Args:
        steps: cap on the recorded iterations (replaces the solver's ``max_iter``);
            None keeps the solver's own.
    """

    steps: int | None = None

    def __post_init__(self) -> None:
        if self.steps is not None:
            check_int("steps", self.steps, min_value=1)


@dataclass(frozen=True)
class JacobianFree:
    """APPROXIMATE one-step gradient ``u ≈ g`` (Fung et al. 2022, Jacobian-free backprop).

    Drops the ``(I - J_f)⁻¹`` factor; cheap, and a descent direction when ``f`` is
    contractive, but not the true gradient (the theory in this package needs that).
    """


Backward = Implicit | Unrolled | JacobianFree


@dataclass
class FixedPointStats:
    """Solver statistics of the last solves, filled in by :func:`fixed_point`.

    ``forward``: the Solution of the last forward solve. ``backward``: the Solution of
    the last adjoint solve (``Implicit`` only; its ``z`` is the adjoint ``u``, used by
    ``Implicit(warm_start=True)``).
    """

    forward: Solution | None = None
    backward: Solution | None = None


@dataclass(frozen=True)
class _Spec:
    """Everything the autograd Function needs besides tensors."""

    f: Map
    solver: Solver
    backward: Backward
    stats: FixedPointStats
    hint: Hint


def _solve(solver: Solver, f: Map, z0: torch.Tensor, hint: Hint, what: str) -> Solution:
    """``solver(f, z0)``, adding the caller's hint and which solve failed to a SolverError."""
    try:
        return solver(f, z0)
    except SolverError as err:
        context = hint() if callable(hint) else hint
        context = what if not context else f"{context}; {what}"
        raise err.with_context(context) from None


class _ImplicitGradient(torch.autograd.Function):
    """Identity on values (returns ``z*``); backward maps ``g`` to the adjoint ``u``."""

    @staticmethod
    def forward(ctx: Any, z_out: torch.Tensor, z_star: torch.Tensor, spec: _Spec) -> torch.Tensor:
        # z_out = f(z*) carries the graph to the closed-over tensors; z_star the values.
        ctx.save_for_backward(z_star)
        ctx.spec = spec
        return z_star.clone()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, None, None]:
        spec: _Spec = ctx.spec
        if torch.is_grad_enabled():  # backward(create_graph=True)
            raise RuntimeError(
                "fixed_point supports first-order gradients only with Implicit/JacobianFree "
                "(create_graph=True was requested); use backward=Unrolled() for higher order"
            )
        if isinstance(spec.backward, JacobianFree):
            return grad, None, None
        if not bool(torch.isfinite(grad).all()):
            raise ValueError("the gradient reaching the fixed point z* must be finite; got NaN/Inf")
        (z_star,) = ctx.saved_tensors
        with torch.enable_grad():
            z_leaf = z_star.detach().requires_grad_()
            f_z = spec.f(z_leaf)

        def adjoint_map(u: torch.Tensor) -> torch.Tensor:  # u ↦ g + J_fᵀ u
            (vjp,) = torch.autograd.grad(f_z, z_leaf, u, retain_graph=True, allow_unused=True)
            return grad if vjp is None else grad + vjp

        previous = spec.stats.backward
        warm = (
            spec.backward.warm_start
            and previous is not None
            and previous.z.shape == grad.shape
            and previous.z.dtype == grad.dtype
            and previous.z.device == grad.device
        )
        u0 = previous.z if warm else torch.zeros_like(grad)
        solver = spec.backward.solver or spec.solver
        with torch.no_grad():
            solution = _solve(solver, adjoint_map, u0, spec.hint, "adjoint solve u = g + J_fᵀu")
        spec.stats.backward = solution
        return solution.z, None, None


def _tensors(name: str, value: object) -> list[torch.Tensor]:
    """The tensors of a tuple/list state; TypeError naming ``name`` for anything else."""
    if isinstance(value, tuple | list) and all(isinstance(v, torch.Tensor) for v in value):
        return list(value)
    got = type(value).__name__
    if isinstance(value, tuple | list):
        got += " of " + ", ".join(type(v).__name__ for v in value)
    raise TypeError(f"`{name}` must be a flat tuple/list of tensors; got {got}")


@dataclass(frozen=True)
class _Packing:
    """A tuple/list state ``(z_1, …, z_k)`` as one tensor for the solver, and back.

    Packed shape ``(B, Σ_i N_i)`` when every ``z_i`` has the same dim 0 ``B`` (``N_i`` its
    size per sample), so ``per_sample`` still sees the samples; else ``(Σ_i numel z_i,)``.
    ``unpack(pack(z)) = z``; both are differentiable (concatenation, split views).
    """

    container: type  # tuple or list
    shapes: tuple[torch.Size, ...]
    batch: int | None

    @classmethod
    def of(cls, z0: Sequence[torch.Tensor], per_sample: bool) -> _Packing:
        """The packing of ``z0``: non-empty, floating tensors of one dtype and device."""
        parts = _tensors("z0", z0)
        if not parts:
            raise ValueError("`z0` must hold at least one tensor; got an empty tuple/list")
        for i, part in enumerate(parts):
            check_tensor(f"z0[{i}]", part, finite=False)
            if (part.dtype, part.device) != (parts[0].dtype, parts[0].device):
                raise TypeError(
                    f"the tensors of `z0` must share one dtype and device; z0[0] is "
                    f"{parts[0].dtype} on {parts[0].device}, z0[{i}] {part.dtype} on {part.device}"
                )
        leads = {part.shape[0] if part.ndim else None for part in parts}
        batch = leads.pop() if len(leads) == 1 else None
        shapes = tuple(part.shape for part in parts)
        if per_sample and batch is None:
            raise ValueError(
                "per_sample=True needs every tensor of `z0` to have the same batch dim 0; "
                f"got shapes {[tuple(s) for s in shapes]}"
            )
        return cls(tuple if isinstance(z0, tuple) else list, shapes, batch)

    @property
    def sizes(self) -> list[int]:
        """Entries of each part per sample (``batch`` set) or in all (``batch`` None)."""
        skip = 0 if self.batch is None else 1
        return [math.prod(shape[skip:]) for shape in self.shapes]

    def pack(self, state: object, name: str) -> torch.Tensor:
        """``state``, parts shaped ``self.shapes``, concatenated into one tensor."""
        parts = _tensors(name, state)
        if [p.shape for p in parts] != list(self.shapes):
            raise ValueError(
                f"`{name}` must hold tensors shaped {[tuple(s) for s in self.shapes]} (like "
                f"`z0`); got {[tuple(p.shape) for p in parts]}"
            )
        lead = () if self.batch is None else (self.batch,)
        return torch.cat([p.reshape(*lead, n) for p, n in zip(parts, self.sizes, strict=True)], -1)

    def unpack(self, z: torch.Tensor) -> Sequence[torch.Tensor]:
        """The parts of a packed tensor, as views shaped ``self.shapes``."""
        parts = torch.split(z, self.sizes, dim=-1)
        return self.container(p.reshape(s) for p, s in zip(parts, self.shapes, strict=True))


def _resolve(solver: Solver | None, backward: Backward | None) -> tuple[Solver, Backward]:
    """Defaults (``Anderson()``, ``Implicit()``) and type checks of solver and backward."""
    solver = Anderson() if solver is None else solver
    backward = Implicit() if backward is None else backward
    if not isinstance(solver, Solver):
        raise TypeError(f"`solver` must be a Solver (Picard, Anderson, Broyden); got {solver!r}")
    if not isinstance(backward, Implicit | Unrolled | JacobianFree):
        raise TypeError(
            f"`backward` must be Implicit(), Unrolled() or JacobianFree(); got {backward!r}"
        )
    return solver, backward


def fixed_point(
    f: Callable[[Any], Any],
    z0: State,
    *,
    solver: Solver | None = None,
    backward: Backward | None = None,
    stats: FixedPointStats | None = None,
    hint: Hint = None,
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
        backward: ``Implicit()`` (default, exact), ``Unrolled(...)`` or ``JacobianFree()``.
        stats: a :class:`FixedPointStats` to receive the forward / backward Solutions.
        hint: extra context for a :class:`SolverError` (a string, or a zero-argument
            callable evaluated only on failure), e.g. ``"‖W‖₂ = 1.3 >= 1"``.

    Returns:
        ``z*`` with ``z0``'s shape (the forward solver's best iterate); a tuple/list like
        ``z0`` for a tuple/list state (then ``stats`` hold the packed tensor, see
        :class:`_Packing`).

    Raises:
        TypeError / ValueError: bad arguments (see :meth:`Solver.__call__`); a tuple/list
            ``z0`` or ``f(z)`` that is not tensors of ``z0``'s shapes, dtype and device.
        SolverError: the forward (or, during ``.backward()``, the adjoint) solve failed
            and the solver has ``throw=True``.
    """
    solver, backward = _resolve(solver, backward)
    if isinstance(z0, tuple | list):
        packing = _Packing.of(z0, solver.per_sample)
        z_star = fixed_point(
            lambda z: packing.pack(f(packing.unpack(z)), "f(z)"),
            packing.pack(z0, "z0"),
            solver=solver,
            backward=backward,
            stats=stats,
            hint=hint,
        )
        return packing.unpack(z_star)
    stats = FixedPointStats() if stats is None else stats
    if not isinstance(stats, FixedPointStats):
        raise TypeError(f"`stats` must be a FixedPointStats; got {type(stats).__name__}")
    if isinstance(backward, Unrolled):
        if backward.steps is not None:
            solver = dataclasses.replace(solver, max_iter=backward.steps)
        stats.forward = _solve(solver, f, z0, hint, "forward solve (unrolled)")
        return stats.forward.z
    with torch.no_grad():
        stats.forward = _solve(solver, f, z0.detach(), hint, "forward solve")
    z_star = stats.forward.z
    if not torch.is_grad_enabled():
        return z_star
    z_out = f(z_star)  # one tracked step: the edge to every tensor f closes over
    if not z_out.requires_grad:
        return z_star
    return _ImplicitGradient.apply(z_out, z_star, _Spec(f, solver, backward, stats, hint))


_NOT_SHAPE_ERRORS = (torch.OutOfMemoryError, SolverError)  # never blamed on the zeros z0


def _explaining_zeros_z0(f: Callable[[Any], Any], z0: torch.Tensor) -> Callable[[Any], Any]:
    """``f`` whose first call, at DEQ's default ``z0 = zeros_like(x)``, turns a rejection
    (a shape error, or an output of another shape) into a ValueError naming ``z0``.

    Reason: a cell whose state is wider than ``x`` otherwise fails with a bare "mat1 and
    mat2 shapes cannot be multiplied" that does not say where the zeros came from.
    """
    called = False

    def checked(z: Any) -> Any:
        nonlocal called
        if called:
            return f(z)
        called = True
        try:
            fz = f(z)
        except _NOT_SHAPE_ERRORS:
            raise
        except (RuntimeError, IndexError) as err:
            raise ValueError(_zeros_z0_message(z0, f"raised {type(err).__name__}: {err}")) from err
        if isinstance(fz, torch.Tensor) and fz.shape != z0.shape:
            raise ValueError(_zeros_z0_message(z0, f"returned shape {tuple(fz.shape)}"))
        return fz

    return checked


def _zeros_z0_message(z0: torch.Tensor, rejection: str) -> str:
    return (
        f"the default z0 is zeros shaped like x {tuple(z0.shape)} (the cell has no "
        f"initial_state(x)), and the cell rejected it: it {rejection}. If the state is not "
        "shaped like x, pass the starting state as deq(x, z0=...) (the `z0` argument of "
        "DEQ.forward) or give the cell an initial_state(x) method"
    )


class DEQ(nn.Module):
    """Deep equilibrium layer ``z* = cell(z*, x)`` (Hieu 2022, §2.1).

    Args:
        cell: callable ``cell(z, x) -> z``; ``z`` a tensor or a flat tuple/list of tensors
            (as in :func:`fixed_point`). An ``nn.Module`` is registered as a submodule. A
            plain callable (a lambda closing over modules) gets exact gradients too, since
            autograd reaches every tensor it uses, but its modules are not registered:
            ``deq.parameters()``, ``.to()`` and ``state_dict()`` do not see them.
        solver, backward, hint: as in :func:`fixed_point`; the default ``Anderson()``
            stops at the state dtype's tolerance (float32 ``9.5e-7``, float64 ``1e-8``).

    ``forward(x, z0=None)``: if ``z0`` is None the starting point is
    ``cell.initial_state(x)`` when the cell defines that method, else ``zeros_like(x)``
    (for cells whose state has the input's shape; a cell that rejects it raises a
    ValueError naming ``z0``). The Solutions of the last solves are ``.last_forward`` and
    ``.last_backward``; ``Implicit(warm_start=True)`` reuses the previous adjoint across
    calls.
    """

    def __init__(
        self,
        cell: Callable[[Any, Any], Any],
        *,
        solver: Solver | None = None,
        backward: Backward | None = None,
        hint: Hint = None,
    ) -> None:
        super().__init__()
        if not callable(cell):
            raise TypeError(f"`cell` must be callable as cell(z, x); got {type(cell).__name__}")
        self.cell = cell
        self.solver, self.backward = _resolve(solver, backward)
        self.hint = hint
        self.stats = FixedPointStats()

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
        return torch.zeros_like(x)

    def forward(self, x: Any, z0: State | None = None) -> State:
        def f(z: State) -> State:
            return self.cell(z, x)

        if z0 is None:
            z0 = self.initial_state(x)
            if self._cell_init is None:
                f = _explaining_zeros_z0(f, z0)
        return fixed_point(
            f,
            z0,
            solver=self.solver,
            backward=self.backward,
            stats=self.stats,
            hint=self.hint,
        )

    @property
    def last_forward(self) -> Solution | None:
        return self.stats.forward

    @property
    def last_backward(self) -> Solution | None:
        return self.stats.backward
