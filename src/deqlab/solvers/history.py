"""A ring of the last ``m`` rows of a solve, stored in one preallocated ``(B, m, N)`` buffer."""

from __future__ import annotations

import torch


class History:
    """The last ``capacity`` vectors ``(B, N)`` of a solve (Anderson's iterates and residuals,
    Broyden's rank-one pairs), stored as one ``(B, m, N)`` buffer.

    A ring: :meth:`push` overwrites the oldest slot once full (the solvers' sums are
    order-free). Writes are in place through views made once per buffer, except when autograd
    records the solve (``Unrolled``), where they are out-of-place so that saved tensors stay
    valid.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.count = 0
        self.buffer: torch.Tensor | None = None
        self.slots: list[torch.Tensor] = []  # buffer[:, i] for each slot i

    def push(self, x: torch.Tensor) -> int:
        """Store ``x`` ``(B, N)`` (no copy where ``x`` is :meth:`next_slot` itself); return
        its slot."""
        slot = self.count % self.capacity
        if self.buffer is None:
            self.allocate(x)
        if x is self.slots[slot]:
            pass
        elif torch.is_grad_enabled() and (x.requires_grad or self.buffer.requires_grad):
            index = torch.tensor([slot], device=x.device)
            self.buffer = self.buffer.index_copy(1, index, x[:, None])
            self.slots = list(self.buffer.unbind(1))
        else:
            self.slots[slot].copy_(x)
        self.count += 1
        return slot

    def allocate(self, like: torch.Tensor) -> None:
        """The ``(B, m, N)`` buffer for vectors shaped and typed like ``like`` ``(B, N)``."""
        self.buffer = like.new_empty(like.shape[0], self.capacity, like.shape[1])
        self.slots = list(self.buffer.unbind(1))

    def next_slot(self, like: torch.Tensor) -> torch.Tensor | None:
        """The view the next :meth:`push` stores into (to be written in place), or None
        while autograd records (``like`` may require a gradient) or shapes differ."""
        recorded = self.buffer is not None and self.buffer.requires_grad
        if torch.is_grad_enabled() and (like.requires_grad or recorded):
            return None
        if self.buffer is None:
            self.allocate(like)
        slot = self.slots[self.count % self.capacity]
        return slot if slot.shape == like.shape and slot.dtype == like.dtype else None

    def __len__(self) -> int:
        return min(self.count, self.capacity)

    def stacked(self) -> torch.Tensor:
        """The stored vectors, ``(B, len(self), N)`` (slots ``0 .. len-1``)."""
        assert self.buffer is not None
        return self.buffer if self.count >= self.capacity else self.buffer[:, : len(self)]

    def clear(self) -> None:
        self.count = 0
