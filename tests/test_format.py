"""The one number formatter: significant digits, "—" where not measured, powers of ten."""

import math

import numpy as np
import pytest

from deqlab._format import format_seconds, number, numbers


@pytest.mark.parametrize(
    ("x", "kwargs", "text"),
    [
        (0.123456, {}, "0.123"),
        (0.123456, {"digits": 4}, "0.1235"),
        (1 - 1e-12, {"digits": 15}, "0.999999999999"),
        (1000, {}, "1000"),  # an int is written whole
        (np.int64(7), {}, "7"),
        (np.float32(0.25), {}, "0.25"),
        (np.float64("nan"), {}, "—"),
        (12345.6, {}, "1.23e+04"),
        (None, {}, "—"),
        (math.nan, {}, "—"),
        ("0.5", {}, "—"),
        (True, {}, "—"),
        (math.inf, {}, "inf"),
        (-math.inf, {}, "-inf"),
        (3.6e17, {"digits": 2, "power": True}, "3.6·10¹⁷"),
        (9.99e17, {"digits": 2, "power": True}, "1·10¹⁸"),  # the mantissa carries
        (-2.5e-300 * -1e305, {"digits": 2, "power": True}, "2.5·10⁵"),
        (12345.4, {"power": True}, "12345"),  # below 10⁵: whole digits
        (math.log(8980.0), {"log": True}, "8.98e+03"),
        (2000 * math.log(10), {"log": True, "power": True}, "1·10²⁰⁰⁰"),  # beyond floats
        (2000 * math.log(10), {"log": True}, "1·10²⁰⁰⁰"),
    ],
)
def test_number(x, kwargs, text):
    assert number(x, **kwargs) == text


def test_numbers_and_seconds():
    assert numbers([0.1, None, 2]) == "0.1, —, 2"
    assert numbers([]) == ""
    assert format_seconds(12.34) == "12.3 s" and format_seconds(245) == "4 min 05 s"
    assert format_seconds(7800) == "2 h 10 min"
