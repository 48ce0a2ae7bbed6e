"""What the :class:`~deqlab.DEQ` layer checks of its input ``x`` and starting state ``z0``,
and how it names them when a solve rejects them.

The default ``z0`` is ``zeros_like(x)`` (a cell without ``initial_state(x)``): an integer
``x`` is named then, and a cell that rejects the zeros is told where they came from (or,
where ``x``'s dtype is not its parameters', that the dtypes differ). A
``z0`` on another device than ``x`` is refused before any evaluation. A NaN/Inf met at the
solve's first evaluation is blamed on ``x`` where ``x`` holds it, else on the cell.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from deqlab._checks import NonFiniteError
from deqlab.solvers import SolverError

State = torch.Tensor | Sequence[torch.Tensor]


def default_z0(x: torch.Tensor) -> torch.Tensor:
    """``zeros_like(x)``, the starting state of a cell without ``initial_state(x)``."""
    if not x.is_floating_point():
        raise TypeError(
            f"`x` must be a floating-point tensor when the cell has no initial_state(x): "
            f"the default z0 is zeros_like(x); got dtype {x.dtype}. Pass x.float(), or "
            "the starting state as deq(x, z0=...), or give the cell an initial_state(x)"
        )
    return torch.zeros_like(x)


_NOT_SHAPE_ERRORS = (torch.OutOfMemoryError, SolverError)  # never blamed on the zeros z0


def explaining_zeros_z0(
    f: Callable[[Any], Any], z0: torch.Tensor, cell: Any = None
) -> Callable[[Any], Any]:
    """``f`` whose first call, at DEQ's default ``z0 = zeros_like(x)``, turns a rejection
    (a shape error, or an output of another shape) into a ValueError naming ``z0``; where
    ``x``'s dtype is none of the ``cell`` module's parameter dtypes, into a TypeError naming
    both dtypes.

    Reason: a cell whose state is wider than ``x`` otherwise fails with a bare "mat1 and
    mat2 shapes cannot be multiplied" that does not say where the zeros came from, and an
    ``x`` of another dtype than the weights (a layer called with float64 after float32) is
    not a matter of the state's shape.
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
            rejection = f"raised {type(err).__name__}: {err}"
            weights = _parameter_dtypes(cell)
            if weights and z0.dtype not in weights:
                raise TypeError(_dtype_message(z0.dtype, weights, rejection)) from err
            raise ValueError(_zeros_z0_message(z0, rejection)) from err
        if isinstance(fz, torch.Tensor) and fz.shape != z0.shape:
            raise ValueError(_zeros_z0_message(z0, f"returned shape {tuple(fz.shape)}"))
        return fz

    return checked


def _parameter_dtypes(cell: Any) -> list[torch.dtype]:
    """The floating dtypes of ``cell``'s parameters (none for a plain callable)."""
    if not isinstance(cell, torch.nn.Module):
        return []
    found = {p.dtype for p in cell.parameters() if p.is_floating_point()}
    return sorted(found, key=str)


def _dtype_message(dtype: torch.dtype, weights: list[torch.dtype], rejection: str) -> str:
    names = [str(w).removeprefix("torch.") for w in weights]
    return (
        f"`x` is {str(dtype).removeprefix('torch.')} but the cell's parameters are "
        f"{' and '.join(names)}, and the cell rejected the state of x's dtype: it {rejection}. "
        f"Cast x to the parameters' dtype (x.to({weights[0]})) or the layer to x's "
        f"(deq.to({dtype}))"
    )


def _zeros_z0_message(z0: torch.Tensor, rejection: str) -> str:
    return (
        f"the default z0 is zeros shaped like x {tuple(z0.shape)} (the cell has no "
        f"initial_state(x)), and the cell rejected it: it {rejection}. If the state is not "
        "shaped like x, pass the starting state as deq(x, z0=...) (the `z0` argument of "
        "DEQ.forward) or give the cell an initial_state(x) method"
    )


def _tensors(value: Any) -> list[torch.Tensor]:
    parts = list(value) if isinstance(value, tuple | list) else [value]
    return [p for p in parts if isinstance(p, torch.Tensor)]


def check_same_device(z0: State, x: Any) -> None:
    """Refuse a ``z0`` on another device than ``x`` (a tensor, or tensors on one device)."""
    inputs = {p.device for p in _tensors(x)}
    states = {p.device for p in _tensors(z0)}
    if len(inputs) == 1 and states and states != inputs:
        (there,) = inputs
        here = ", ".join(sorted(str(d) for d in states))
        raise ValueError(
            f"`z0` is on {here} and `x` on {there}: the state and the input must be on one "
            f"device; move z0 there (z0.to(x.device))"
        )


def named_input(err: NonFiniteError, x: Any) -> NonFiniteError:
    """A NaN/Inf at the solve's first evaluation, blamed on what holds it: ``x``, else the
    cell (``x`` and ``z0`` finite); other arguments' errors as they are."""
    if err.name != "f(z0)":
        return err
    count = sum(int((~torch.isfinite(p)).sum()) for p in _tensors(x) if p.is_floating_point())
    if count:
        return NonFiniteError(
            "x", count, "`x` must be finite; got {count} NaN/Inf entries (the cell's input)"
        )
    return NonFiniteError(
        "f(z0)",
        err.count,
        "`f(z0)` = cell(z0, x) must be finite; got {count} NaN/Inf entries: x and z0 are "
        "finite, so the cell made them at its first evaluation",
    )
