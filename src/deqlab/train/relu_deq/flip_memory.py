"""Memory of the adjoint's recent inputs with their masks, for ReLU flips that GD undoes.

GD moves some units of a sample back and forth across zero: its mask D_i flips and, a few
steps later, flips back. Its c_i = (I − Wᵀ D_i)⁻¹ a jumps with the flip and jumps back, so
the best start for it is its input of the last step that had the same mask (moved by the
trend since), not the extrapolation across the jump. Why: late in the benchmark's run half
of all flips are such returns.
"""

from __future__ import annotations

import torch


class FlipMemory:
    """The last ``size`` + 1 inputs (n, m) with their masks, newest first."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.past: list[tuple[torch.Tensor, torch.Tensor]] = []

    def remember(self, x: torch.Tensor, mask: torch.Tensor) -> None:
        """A solve ended at input ``x`` under ``mask``."""
        self.past = [(x, mask), *self.past][: self.size + 1]

    def returns(self, jumps: torch.Tensor, mask: torch.Tensor):
        """Rows among the ``jumps`` ((n,) bool) whose ``mask`` row equals their mask j + 1
        steps before the newest input (1 <= j + 1 <= ``size``, the most recent such):
        ``(rows, inputs then (k, m), j + 1 (k,))``, or None if there are none."""
        pending = jumps.nonzero().squeeze(1)
        if len(self.past) < 2 or pending.numel() == 0:
            return None
        masks_then = torch.stack([m.index_select(0, pending) for _, m in self.past[1:]])
        same = (masks_then == mask.index_select(0, pending)).all(dim=2)  # (j, pending)
        found = same.any(dim=0)
        if not bool(found.any()):
            return None
        back = same.to(torch.int8).argmax(dim=0)[found]  # the most recent such state
        rows = pending[found]
        inputs_then = torch.stack([x.index_select(0, rows) for x, _ in self.past[1:]])
        return rows, inputs_then[back, torch.arange(rows.numel(), device=rows.device)], back + 1

    def state_dict(self) -> dict:
        return {"size": self.size, "past": [(x.clone(), m.clone()) for x, m in self.past]}

    def load_state_dict(self, state: dict) -> None:
        self.size = state["size"]
        self.past = [(x.clone(), m.clone()) for x, m in state["past"]]
