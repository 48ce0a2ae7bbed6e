"""Row compaction: a per-sample solve evaluates ``f`` only on the samples still to converge.

With ``per_sample=True`` every row ``i`` of the ``(B, N)`` iterates is its own problem. Once
row ``i`` meets the tolerance (or stalls) its best iterate is final, so it is frozen (``z_i``
kept, ``f(z_i)`` kept). This needs a map that can be evaluated on some of its samples: a
:class:`RowMap` (``deqlab.DEQ`` builds one when its input ``x`` has the batch as dim 0).
While more than half of the rows are active the whole batch is evaluated and the frozen rows
are put back (:func:`evaluate_frozen`: two selects, cheaper than a gather); from half on, only
the active rows are (:func:`evaluate_pending`, in :func:`bucketed` batch sizes). The cost of a
solve is then the rows evaluated over ``B`` full-batch evaluations (``Solution.evaluations``)
instead of ``max_i steps_i``.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

if TYPE_CHECKING:
    from deqlab.packing import Packing


_ROWS: contextvars.ContextVar[torch.Tensor | None] = contextvars.ContextVar("rows", default=None)


def current_rows() -> torch.Tensor | None:
    """The samples (a 1-d long index into the batch) a cell is being evaluated on, inside
    :meth:`RowMap.rows` of a DEQ; None for a whole-batch evaluation. A layer that holds one
    row per sample (a dropout mask) selects its rows with it."""
    return _ROWS.get()


@contextlib.contextmanager
def evaluating_rows(index: torch.Tensor) -> Iterator[None]:
    """Within: :func:`current_rows` is ``index``."""
    token = _ROWS.set(index)
    try:
        yield
    finally:
        _ROWS.reset(token)


class RowMap:
    """``f`` on a batch, plus ``rows(z_sub, index) = f(z)[index]`` with ``z_sub = z[index]``
    (``index`` a 1-d long tensor of samples): valid for a map acting on each sample alone."""

    def __init__(
        self,
        f: Callable[[torch.Tensor], torch.Tensor],
        rows: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    ) -> None:
        self.f, self.rows = f, rows

    def __call__(self, z: torch.Tensor) -> torch.Tensor:
        return self.f(z)


#: a compacted evaluation takes a multiple of ``min(ROW_BUCKET, B // 4)`` rows (topped up with
#: done rows whose results are dropped): a kernel library that builds a kernel per batch size
#: (oneDNN on the CPU, cuDNN in benchmark mode) then sees a few sizes, not one per count of
#: pending rows (measured: a 3 × 3 conv at a batch size seen for the first time costs twice
#: one at a known size)
ROW_BUCKET = 8


def bucketed(count: int, rows: int) -> int:
    """``count`` rows rounded up to the bucket of a batch of ``rows`` (at most ``rows``)."""
    bucket = max(1, min(ROW_BUCKET, rows // 4))
    return min(rows, -(-count // bucket) * bucket)


def evaluation_rows(
    active: torch.Tensor | np.ndarray, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """For the mask ``active`` ``(B,)`` (numpy on the host, else a tensor): the rows to
    evaluate, the active ones topped up with the first done ones to :func:`bucketed` of their
    count, and the positions of the active ones among them (on ``device``)."""
    rows = active.shape[0]
    if isinstance(active, np.ndarray):
        index = np.flatnonzero(active)
        size = bucketed(len(index), rows)
        chosen = active.copy()
        chosen[np.flatnonzero(~active)[: size - len(index)]] = True
        evaluated = np.flatnonzero(chosen)
        positions = np.flatnonzero(active[evaluated])
        return _on(device, evaluated), _on(device, positions)
    index = active.nonzero()[:, 0]
    size = bucketed(len(index), rows)
    done = (~active).nonzero()[:, 0][: size - len(index)]
    chosen = active.index_fill(0, done, True)
    evaluated = chosen.nonzero()[:, 0]
    return evaluated, active.index_select(0, evaluated).nonzero()[:, 0]


#: from this many entries on, the host selects rows by index (a copy, and a gather of the rows
#: that differ) instead of ``torch.where``, whose CPU kernel is a scalar loop (measured, thread
#: CPU time: 78 µs against 26–51 µs on 64 × 2048 floats, 590 against 153–390 on 64 × 16384,
#: 6.7 against 8.4–9.7 on 64 × 128)
SELECT_BY_INDEX = 1 << 14


def select_rows(mask: torch.Tensor | np.ndarray, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Row ``i`` of ``a`` where ``mask[i]``, else of ``b`` (``a``, ``b`` ``(B, N)``; ``mask``
    ``(B,)``, numpy on the host): ``torch.where(mask[:, None], a, b)``."""
    if isinstance(mask, torch.Tensor):
        return torch.where(mask[:, None], a, b)
    if not a.is_cpu or a.numel() < SELECT_BY_INDEX:  # (the index route is for the CPU's where)
        return torch.where(_on(a.device, mask[:, None]), a, b)
    if 2 * np.count_nonzero(mask) <= mask.shape[0]:  # copy b, put a's rows in
        index = torch.from_numpy(np.flatnonzero(mask))
        return b.index_copy(0, index, a.index_select(0, index))
    index = torch.from_numpy(np.flatnonzero(~mask))
    return a.index_copy(0, index, b.index_select(0, index))


def _on(device: torch.device, array: np.ndarray) -> torch.Tensor:
    """``array`` as a tensor on ``device`` (on the CPU, its memory)."""
    found = torch.from_numpy(array)
    return found if device.type == "cpu" else found.to(device, non_blocking=True)


def evaluate_frozen(
    f: Callable[[torch.Tensor], torch.Tensor],
    z: torch.Tensor,
    z_next: torch.Tensor,
    fz: torch.Tensor,
    active: torch.Tensor | np.ndarray,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The next iterate and its image ``(B, N)`` with ``f`` evaluated on every row: the
    ``active`` rows step to ``z_next``, the others keep ``z`` and ``f(z)`` (cheaper than
    gathering rows while most are active)."""
    z = select_rows(active, z_next, z)
    return z, select_rows(active, f(z), fz)


def evaluate_pending(
    f: RowMap,
    z: torch.Tensor,
    z_next: torch.Tensor,
    fz: torch.Tensor,
    rows: tuple[torch.Tensor, torch.Tensor],
    shape: torch.Size,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The next iterate and its image ``(B, N)``: of ``rows = (evaluated, positions)``
    (:func:`evaluation_rows`), the rows ``evaluated`` step to ``z_next`` and are evaluated
    (``f.rows``), and the active ones among them (``positions``) keep the result; the others
    keep ``z`` and ``f(z)``."""
    evaluated, positions = rows
    k = len(evaluated)
    z_sub = z_next.index_select(0, evaluated)  # (k, N)
    f_sub = f.rows(z_sub.reshape(k, *shape[1:]), evaluated).reshape(k, -1)
    if len(positions) < k:  # drop the done rows that filled the bucket
        evaluated = evaluated.index_select(0, positions)
        z_sub, f_sub = z_sub.index_select(0, positions), f_sub.index_select(0, positions)
    return z.index_copy(0, evaluated, z_sub), fz.index_copy(0, evaluated, f_sub)


def cell_row_map(
    cell: Callable[[Any, Any], Any],
    x: Any,
    f: Callable[[torch.Tensor], torch.Tensor],
    packing: Packing | None,
    batch: int,
) -> Callable[[torch.Tensor], torch.Tensor]:
    """``f`` as a :class:`~deqlab.solvers.rows.RowMap` (the cell on some samples, with
    their rows of ``x``) when ``x`` is a tensor, or tuple/list of tensors, of batch dim 0;
    else ``f`` unchanged."""
    parts = list(x) if isinstance(x, tuple | list) else [x]
    if not all(isinstance(p, torch.Tensor) and p.ndim and p.shape[0] == batch for p in parts):
        return f

    def rows(z_sub: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        x_sub = [p.index_select(0, index) for p in parts]
        x_sub = type(x)(x_sub) if isinstance(x, tuple | list) else x_sub[0]
        with evaluating_rows(index):
            if packing is None:
                return cell(z_sub, x_sub)
            sub = packing.rows(len(index))
            return sub.pack(cell(sub.unpack(z_sub), x_sub), "f(z)")

    return RowMap(f, rows)
