"""Input validation shared by every public function.

Conventions (docs/architecture.md): ``TypeError`` for a wrong type, ``ValueError`` for a
wrong value or shape; the message names the argument, what was received and what was
expected.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from numbers import Integral, Real

import torch


class NonFiniteError(ValueError):
    """A tensor argument holding NaN/Inf (:func:`check_tensor`); ``name`` names it, so a
    caller that knows where the values came from can say so (the DEQ layer names ``x``, the
    backward pass its adjoint solve)."""

    def __init__(self, name: str, count: int, message: str | None = None) -> None:
        """``message`` (formatted with ``count``) replaces the generic one."""
        self.name, self.count = name, count
        generic = f"`{name}` must be finite; got {count} NaN/Inf entries"
        super().__init__(generic if message is None else message.format(count=count))


def check_tensor(
    name: str,
    x: object,
    *,
    ndim: int | None = None,
    shape: Sequence[int | None] | None = None,
    finite: bool = True,
    floating: bool = True,
) -> torch.Tensor:
    """Return ``x`` if it is a tensor of the expected rank/shape, finite and floating.

    ``shape`` may hold ``None`` for a free dimension, e.g. ``(784, None)``.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"`{name}` must be a torch.Tensor; got {type(x).__name__}")
    if floating and not x.is_floating_point():
        raise TypeError(f"`{name}` must be a floating-point tensor; got dtype {x.dtype}")
    if shape is not None:
        ndim = len(shape)
    if ndim is not None and x.ndim != ndim:
        raise ValueError(
            f"`{name}` must be a {ndim}-D tensor; got {x.ndim}-D with shape {tuple(x.shape)}"
        )
    if shape is not None and any(
        want is not None and got != want for got, want in zip(x.shape, shape, strict=True)
    ):
        expected = tuple("any" if s is None else s for s in shape)
        raise ValueError(f"`{name}` must have shape {expected}; got {tuple(x.shape)}")
    if finite and x.is_meta:
        raise ValueError(
            f"`{name}` is on the meta device: it has a shape but no values to check or use"
        )
    if finite and x.numel() and not _all_finite(x):
        raise NonFiniteError(name, _count_non_finite(x))
    return x


def _all_finite(x: torch.Tensor) -> bool:
    """Whether every entry of the non-empty ``x`` is finite: its least and largest entries
    are, since min and max propagate NaN (one pass, no temporary; ``isfinite(x).all()``
    makes three passes and a float copy of ``x``, 7.2 GB for a 3·10⁴ × 3·10⁴ matrix)."""
    x = torch.view_as_real(x.detach()) if x.is_complex() else x.detach()
    low_high = torch.stack(torch.aminmax(x)).tolist()
    return all(math.isfinite(v) for v in low_high)


#: Entries counted at a time by :func:`_count_non_finite` (no temporary the size of ``x``).
_FINITE_BLOCK = 1 << 20


def _count_non_finite(x: torch.Tensor) -> int:
    """The NaN/Inf entries of ``x``, counted in blocks of leading-dimension slices of about
    :data:`_FINITE_BLOCK` entries."""
    if x.numel() <= _FINITE_BLOCK or x.ndim == 0:
        return int((~torch.isfinite(x)).sum())
    rows = max(1, _FINITE_BLOCK * x.shape[0] // x.numel())
    return sum(int((~torch.isfinite(x[i : i + rows])).sum()) for i in range(0, x.shape[0], rows))


def check_int(name: str, value: object, *, min_value: int | None = None) -> int:
    """Return ``value`` as an int, rejecting bools, floats and values below ``min_value``."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"`{name}` must be an int; got {type(value).__name__} {value!r}")
    if min_value is not None and value < min_value:
        raise ValueError(f"`{name}` must be >= {min_value}; got {value}")
    return int(value)


def check_bool(name: str, value: object) -> bool:
    """Return ``value`` if it is a bool (not merely truthy)."""
    if not isinstance(value, bool):
        raise TypeError(f"`{name}` must be a bool; got {type(value).__name__} {value!r}")
    return value


def check_real(
    name: str,
    value: object,
    *,
    low: float | None = None,
    high: float | None = None,
    low_inclusive: bool = True,
    high_inclusive: bool = True,
) -> float:
    """Return ``value`` as a finite float inside the given (half-)open interval."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"`{name}` must be a real number; got {type(value).__name__} {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"`{name}` must be finite; got {value}")
    too_low = low is not None and (value < low if low_inclusive else value <= low)
    too_high = high is not None and (value > high if high_inclusive else value >= high)
    if too_low or too_high:
        left = "-inf" if low is None else f"{low:g}"
        right = "inf" if high is None else f"{high:g}"
        lb = "[" if low_inclusive and low is not None else "("
        rb = "]" if high_inclusive and high is not None else ")"
        raise ValueError(f"`{name}` must be in {lb}{left}, {right}{rb}; got {value:g}")
    return value


def check_positive(name: str, value: object) -> float:
    """Return ``value`` as a float > 0."""
    return check_real(name, value, low=0.0, low_inclusive=False)


def check_choice(name: str, value: object, choices: Iterable[str]) -> str:
    """Return ``value`` if it is one of ``choices``; the error lists the valid ones."""
    choices = list(choices)
    if value not in choices:
        valid = ", ".join(repr(c) for c in choices)
        raise ValueError(f"`{name}` must be one of {valid}; got {value!r}")
    return value  # type: ignore[return-value]
