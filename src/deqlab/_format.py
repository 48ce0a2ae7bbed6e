"""Text shared by statements, reports and the CLI: numbers and durations as a reader wants them.

:func:`number` is the one number formatter of the project: every measured value a
statement, a report or the terminal shows goes through it, so "not measured" reads the
same ("—") everywhere.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from numbers import Integral, Real

#: What a value that was not measured (None, NaN, not a number) is shown as.
MISSING = "—"
#: From this magnitude on, ``power=True`` writes ``3.6·10¹⁷``; below it, whole digits.
POWER_FROM = 1e5
_SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")


def number(x: object, digits: int = 3, *, power: bool = False, log: bool = False) -> str:
    """``x`` to ``digits`` significant digits; :data:`MISSING` where it was not measured.

    - ``None``, NaN, a bool or a non-number → ``"—"``; ±inf → ``"inf"`` / ``"-inf"``;
      any real number counts (numpy's scalars too);
    - an integer is written whole (``1000``, not ``1e+03``);
    - ``power=True``: from :data:`POWER_FROM` on as ``m·10ᵉ`` (``3.6·10¹⁷``, ``digits``
      significant digits in ``m``), below it as whole digits (a width, a step count);
    - ``log=True``: ``x`` is the natural log of the number to show (``e^x``), for numbers
      beyond the float range (``power`` then writes ``10^(x/ln 10)`` exactly).
    """
    if isinstance(x, bool) or not isinstance(x, Real) or math.isnan(x):
        return MISSING
    if isinstance(x, Integral) and not log:
        return str(int(x))
    x = float(x)
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if log:
        return _power_of_ten(x / math.log(10), digits) if power else _from_log(x, digits)
    if power and abs(x) >= POWER_FROM:
        sign = "-" if x < 0 else ""
        return sign + _power_of_ten(math.log10(abs(x)), digits)
    if power:
        return f"{x:.0f}"
    return f"{x:.{digits}g}"


def numbers(values: Iterable[object], digits: int = 3, *, power: bool = False) -> str:
    """``"0.1, 0.2, —"``: :func:`number` of each value, comma separated."""
    return ", ".join(number(v, digits, power=power) for v in values)


def _power_of_ten(log10: float, digits: int) -> str:
    """``10**log10`` as ``m·10ᵉ`` with ``1 ≤ m < 10`` rounded to ``digits`` digits."""
    exponent = math.floor(log10)
    mantissa = 10 ** (log10 - exponent)
    if float(f"{mantissa:.{digits}g}") >= 10:  # 9.99 rounds to 10: carry into the exponent
        exponent, mantissa = exponent + 1, mantissa / 10
    return f"{mantissa:.{digits}g}·10{str(exponent).translate(_SUPERSCRIPT)}"


def _from_log(log_x: float, digits: int) -> str:
    if log_x < 700:  # e^700 ≈ 1e304: still a float
        return f"{math.exp(log_x):.{digits}g}"
    return _power_of_ten(log_x / math.log(10), digits)


def format_seconds(seconds: float) -> str:
    """``12.3 s``, ``4 min 05 s``, ``2 h 10 min``."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"
