"""What verify's work on n points needs of memory, and what it does past it: each check's
n×n computations (:class:`Square`) refused in one line before anything runs
(:func:`check_memory`, :mod:`deqlab._memory`), a width whose m×m arrays would not fit
(:func:`check_width_fits`), and past memory the subsample a check answers from
(:func:`draw_subsample`, :mod:`deqlab.verification.subsample`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from deqlab._memory import (
    HEADROOM,
    MemoryRefusal,
    available_bytes,
    check_square,
    largest_square,
    nbytes,
    square_bytes,
)
from deqlab.verification import subsample

if TYPE_CHECKING:
    from deqlab.verification.checks import Check


@dataclass(frozen=True)
class Square:
    """An n×n computation verify would make: ``what`` it is, its n×n float64 ``buffers`` and
    its ``per_point`` bytes, on ``device`` (:func:`deqlab._memory.check_square`)."""

    what: str
    buffers: float
    per_point: int
    device: str = "cpu"


def check_memory(
    check: Check, n: int, d: int, *, train: int, subject: str, device: str = "cpu"
) -> None:
    """Refuse, before anything n×n is computed, what would not fit in memory (one line with
    the largest n that fits: :func:`deqlab._memory.check_square`); ``subject`` names the
    argument ("`--n`", "`--input` 'file'", "`X`"); no points: nothing to check (the data
    checks say what is wrong). Past memory a check that answers from a subsample
    (``sample_size``) passes, unless it is to be trained: then the refusal says that
    without ``train`` it would be answered."""
    if n < 1:
        return
    try:
        for square in check.memory_need(n, d, train=train, device=device):
            device_of = None if square.device == "cpu" else square.device
            check_square(
                subject,
                n,
                square.what,
                buffers=square.buffers,
                per_point=square.per_point,
                device=device_of,
            )
    except MemoryRefusal as err:
        if train and check.sample_size(n, d, device) is not None:
            raise MemoryRefusal(
                f"{err}; --train needs the full data (λ_τ and H(τ) are n×n): without it, "
                "verify answers from a subsample (certified one-sided bounds)"
            ) from None
        raise


def draw_subsample(check: Check, n: int, d: int, *, seed: int, device: str = "cpu"):
    """The subsample S ``check`` answers from past memory (``sample_size``, drawn with
    ``seed``: :func:`deqlab.verification.subsample.draw`); None where the data fit."""
    size = check.sample_size(n, d, device)
    return None if size is None else subsample.draw(n, size, seed)


def check_width_fits(width: int, arrays: int, what: str) -> None:
    """Refuse a width whose ``arrays`` m×m float64 arrays would not fit, naming the largest
    width that does (:mod:`deqlab._memory`'s measure of what is available)."""
    available = available_bytes()
    if available is None:
        return
    usable = max(0, available - HEADROOM)
    need = square_bytes(width, arrays)
    if need > usable:
        raise MemoryRefusal(
            f"`width`: m = {width} needs {nbytes(need)} for {what} ({arrays} m×m float64 "
            f"arrays), but {nbytes(available)} of memory is available; the largest width that "
            f"fits is {largest_square(arrays, usable)}"
        )
