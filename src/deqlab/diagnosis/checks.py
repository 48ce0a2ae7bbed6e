"""What :func:`deqlab.diagnose` refuses, before any solve or allocation, in one line each."""

from __future__ import annotations

import torch
from torch import nn

from deqlab._checks import check_int, check_tensor
from deqlab._memory import MemoryRefusal, available_bytes, nbytes
from deqlab.implicit import DEQ

#: The NTK has (n k)² float64 entries: 8192 rows are 512 MiB, refused beyond.
MAX_NTK_ROWS = 8192


def check_deq(deq: object) -> DEQ:
    if not isinstance(deq, DEQ):
        raise TypeError(f"`deq` must be a deqlab.DEQ layer; got {type(deq).__name__}")
    if not isinstance(deq.cell, nn.Module):
        raise TypeError(
            "`deq` must have an nn.Module cell (its parameters are differentiated by name); "
            f"got a {type(deq.cell).__name__}"
        )
    return deq


def check_head(head: object, deq: DEQ) -> nn.Module | None:
    """``head``: None or a module mapping z* to the outputs, without the DEQ inside."""
    if head is None:
        return None
    if not isinstance(head, nn.Module):
        raise TypeError(f"`head` must be an nn.Module or None; got {type(head).__name__}")
    if any(m is deq for m in head.modules()):
        raise ValueError(
            "`head` must map the equilibrium z* to the outputs; it contains the DEQ itself. "
            "Pass the modules after the DEQ as `head` (e.g. net.head) and the DEQ's input as `X`"
        )
    return head


def check_chunk(chunk: object) -> int | None:
    return None if chunk is None else check_int("chunk", chunk, min_value=1)


def check_targets(y: object, n: int, loss: str) -> torch.Tensor:
    y = check_tensor("y", y, floating=loss == "mse")
    if y.ndim == 0 or y.shape[0] != n:
        raise ValueError(
            f"`y` must have shape (n, ...) with n == X.shape[0] == {n}; got {tuple(y.shape)}"
        )
    if loss == "cross_entropy" and (y.dtype.is_floating_point or y.ndim != 1):
        raise ValueError(
            f"`y` must hold class indices, an integer tensor of shape ({n},), for "
            f"loss='cross_entropy'; got {y.dtype} {tuple(y.shape)}"
        )
    return y


def check_against_outputs(y: torch.Tensor | None, loss: str, outputs: torch.Tensor) -> None:
    """``y`` fits the head's outputs (n, k): one target per output for ``"mse"``, class
    indices in ``[0, k)`` for ``"cross_entropy"``."""
    if y is None:
        return
    if loss == "mse" and y.numel() != outputs.numel():
        raise ValueError(
            f"`y` must have one target per output, {tuple(outputs.shape)}; got {tuple(y.shape)}"
        )
    k = outputs.shape[1]
    if loss == "cross_entropy" and (int(y.min()) < 0 or int(y.max()) >= k):
        raise ValueError(
            f"`y` must hold class indices in [0, {k}) for the head's {k} outputs; got "
            f"indices from {int(y.min())} to {int(y.max())}"
        )


def check_equilibrium(z_star: torch.Tensor) -> None:
    """z* finite: the forward solve did not diverge."""
    bad = int((~torch.isfinite(z_star)).sum())
    if bad:
        raise ValueError(
            f"the equilibrium of `deq` on `X` has {bad} non-finite entries of {z_star.numel()}: "
            "the forward solve diverged (check the cell's scale, or pass a `solver` that "
            "converges on it)"
        )


def check_ntk_memory(rows: int, n_params: int, itemsize: int, device: torch.device) -> None:
    """Refuse an NTK of more than :data:`MAX_NTK_ROWS` rows, or one whose per-row parameter
    Jacobians (rows × P in the model's dtype, one float64 copy of the largest block) and Θ
    with its eigen-workspace (2 (rows)² float64) would not fit in memory."""
    if rows > MAX_NTK_ROWS:
        gib = rows**2 * 8 / 2**30
        raise ValueError(
            f"`X` and `head` give an NTK of {rows} rows ({gib:.1f} GiB in float64); at most "
            f"{MAX_NTK_ROWS}: pass fewer samples, or a head with fewer outputs (without a "
            "head every entry of the state is an output)"
        )
    need = rows * n_params * (itemsize + 8) + 2 * rows**2 * 8
    available = available_bytes(device)
    if available is not None and need > available:
        raise MemoryRefusal(
            f"`X`: the NTK over {n_params} parameters on {rows} rows needs {nbytes(need)} for "
            f"the per-row parameter Jacobians and Θ, but {nbytes(available)} of memory is "
            "available; pass fewer samples or fewer parameters (`params`)"
        )
