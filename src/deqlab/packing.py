"""A tuple/list state ``(z_1, …, z_k)`` as one tensor for the solver, and back.

Splitting is a differentiable view, so the implicit-gradient Function sees the packed
problem and the gradient stays exact.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from deqlab._checks import check_tensor


def tensors(name: str, value: object) -> list[torch.Tensor]:
    """The tensors of a tuple/list state; TypeError naming ``name`` for anything else."""
    if isinstance(value, tuple | list) and all(isinstance(v, torch.Tensor) for v in value):
        return list(value)
    got = type(value).__name__
    if isinstance(value, tuple | list):
        got += " of " + ", ".join(type(v).__name__ for v in value)
    raise TypeError(f"`{name}` must be a flat tuple/list of tensors; got {got}")


@dataclass(frozen=True)
class Packing:
    """A tuple/list state ``(z_1, …, z_k)`` as one tensor for the solver, and back.

    Packed shape ``(B, Σ_i N_i)`` when every ``z_i`` has the same dim 0 ``B`` (``N_i`` its
    size per sample), so ``per_sample`` still sees the samples; else ``(Σ_i numel z_i,)``.
    ``unpack(pack(z)) = z``; both are differentiable (concatenation, split views).
    """

    container: type  # tuple or list
    shapes: tuple[torch.Size, ...]
    batch: int | None

    @classmethod
    def of(cls, z0: Sequence[torch.Tensor], per_sample: bool) -> Packing:
        """The packing of ``z0``: non-empty, floating tensors of one dtype and device."""
        parts = tensors("z0", z0)
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

    @functools.cached_property
    def sizes(self) -> list[int]:
        """Entries of each part per sample (``batch`` set) or in all (``batch`` None)."""
        skip = 0 if self.batch is None else 1
        return [math.prod(shape[skip:]) for shape in self.shapes]

    def pack(self, state: object, name: str) -> torch.Tensor:
        """``state``, parts shaped ``self.shapes``, concatenated into one tensor."""
        parts = tensors(name, state)
        if [p.shape for p in parts] != list(self.shapes):
            raise ValueError(
                f"`{name}` must hold tensors shaped {[tuple(s) for s in self.shapes]} (like "
                f"`z0`); got {[tuple(p.shape) for p in parts]}"
            )
        lead = () if self.batch is None else (self.batch,)
        return torch.cat([p.reshape(*lead, n) for p, n in zip(parts, self.sizes, strict=True)], -1)

    @functools.lru_cache(maxsize=64)  # noqa: B019 (a packing lives as long as its solve)
    def rows(self, k: int) -> Packing:
        """The packing of ``k`` of the samples (a packing with a ``batch``); one per ``k``."""
        shapes = tuple(torch.Size((k, *shape[1:])) for shape in self.shapes)
        return dataclasses.replace(self, shapes=shapes, batch=k)

    def unpack(self, z: torch.Tensor) -> Sequence[torch.Tensor]:
        """The parts of a packed tensor, as views shaped ``self.shapes``."""
        parts = torch.split(z, self.sizes, dim=-1)
        return self.container(p.reshape(s) for p, s in zip(parts, self.shapes, strict=True))


def has_batch(z0: torch.Tensor | Sequence[torch.Tensor]) -> bool:
    """``z0`` has a dim 0 shared by all its tensors (what a per-sample solve needs)."""
    parts = list(z0) if isinstance(z0, tuple | list) else [z0]
    leads = {p.shape[0] if isinstance(p, torch.Tensor) and p.ndim else None for p in parts}
    return len(leads) == 1 and None not in leads
