"""A DEQ's cell and head on one batch, with the state in one packed per-sample layout.

:func:`deqlab.diagnose` works on tensors ``(n, …)`` whose dim 0 is the sample: a tuple/list
state ``(z_1, …, z_S)`` (a multi-scale cell) is packed into ``(n, Σ_s N_s)`` by
:class:`deqlab.packing.Packing`, as :class:`deqlab.DEQ` packs it for its solver, so the
per-sample Jacobian is over the concatenated state. The input ``X`` may be a tensor or a
tuple/list of tensors, each with the batch as dim 0.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.func import functional_call
from torch.utils._pytree import tree_map

from deqlab._checks import check_tensor
from deqlab.packing import Packing, tensors

Inputs = torch.Tensor | tuple[torch.Tensor, ...] | list[torch.Tensor]


def check_inputs(X: object, dtypes: set[torch.dtype]) -> Inputs:
    """``X``: a finite floating tensor, or tuple/list of them, with one non-empty batch dim 0,
    in the cell's dtype (``dtypes``: those of its parameters)."""
    parts = tensors("X", X) if isinstance(X, tuple | list) else [X]
    names = [f"X[{i}]" for i in range(len(parts))] if isinstance(X, tuple | list) else ["X"]
    if not parts:
        raise ValueError("`X` must hold at least one tensor; got an empty tuple/list")
    for name, part in zip(names, parts, strict=True):
        check_tensor(name, part)
        if part.ndim == 0 or part.shape[0] == 0:
            raise ValueError(
                f"`{name}` must have a non-empty batch dim 0; got shape {tuple(part.shape)}"
            )
        if dtypes and dtypes != {part.dtype}:
            raise ValueError(f"`{name}` must have the cell's dtype {min(dtypes)}; got {part.dtype}")
    if len({p.shape[0] for p in parts}) > 1:
        shapes = [tuple(p.shape) for p in parts]
        raise ValueError(f"the tensors of `X` must share the batch dim 0; got shapes {shapes}")
    return X  # type: ignore[return-value]


def batch_size(X: Inputs) -> int:
    return (X[0] if isinstance(X, tuple | list) else X).shape[0]


def repeat_inputs(X: Inputs, k: int) -> Inputs:
    """``X`` stacked ``k`` times along the batch (sample-major blocks ``[X; X; …]``)."""
    return tree_map(lambda t: t.repeat(k, *([1] * (t.ndim - 1))), X)


@dataclass(frozen=True)
class Layout:
    """How a state is packed: ``packing`` None for a tensor state (then packing is the
    identity), else the per-sample :class:`~deqlab.packing.Packing` of the tuple/list."""

    packing: Packing | None

    @classmethod
    def of(cls, state: Any) -> Layout:
        if isinstance(state, torch.Tensor):
            return cls(None)
        return cls(Packing.of(state, per_sample=True))

    def pack(self, state: Any, name: str = "f(z)") -> torch.Tensor:
        if self.packing is None:
            return state
        parts = list(state) if isinstance(state, tuple | list) else [state]
        rows = parts[0].shape[0] if parts and isinstance(parts[0], torch.Tensor) else 0
        return self.packing.rows(rows).pack(state, name)

    def unpack(self, z: torch.Tensor) -> Any:
        return z if self.packing is None else self.packing.rows(z.shape[0]).unpack(z)


@dataclass(frozen=True)
class PackedDEQ:
    """``f(z) = cell(z, X)`` and ``ŷ = head(z)`` on packed states ``(b, …)``."""

    cell: nn.Module
    head: nn.Module | None
    layout: Layout

    def f(self, X: Inputs) -> Callable[[torch.Tensor], torch.Tensor]:
        """``z ↦ cell(z, X)`` on packed states of ``X``'s batch."""
        return lambda z: self.layout.pack(self.cell(self.layout.unpack(z), X))

    def outputs(self, z: torch.Tensor) -> torch.Tensor:
        """ŷ = head(z) as (b, k); the packed state itself (flattened) without a head."""
        if self.head is None:
            return z.flatten(1)
        return self.head(self.layout.unpack(z)).reshape(z.shape[0], -1)

    def cell_one(self, params: dict, zi: torch.Tensor, xi: Inputs) -> torch.Tensor:
        """``cell`` with ``params`` on one sample (no batch dim), for ``vmap``."""
        x1 = tree_map(lambda t: t[None], xi)
        out = functional_call(self.cell, params, (self.layout.unpack(zi[None]), x1))
        return self.layout.pack(out)[0]

    def head_one(self, params: dict, zi: torch.Tensor) -> torch.Tensor:
        """``head`` with ``params`` on one sample, its outputs flattened, for ``vmap``."""
        return functional_call(self.head, params, (self.layout.unpack(zi[None]),)).reshape(-1)
