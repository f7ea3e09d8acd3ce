"""utils.check_real: the one validator of real-valued arguments (type, finiteness, interval)."""

import math

import numpy as np
import pytest

from flkit.utils import FlkitError, check_real


def test_accepts_reals_in_range_and_returns_a_float():
    assert check_real("x", 3, low=0) == 3.0 and type(check_real("x", 3, low=0)) is float
    assert check_real("x", np.float32(0.5), low=0, high=1) == 0.5
    assert check_real("x", np.int64(2), high=2) == 2.0  # closed bound included
    assert check_real("x", 0, low=0) == 0.0


@pytest.mark.parametrize(
    "value, kw, interval",
    [
        (0, {"low": 0, "low_open": True}, r"\(0, inf\)"),
        (1, {"high": 1, "high_open": True}, r"\(-inf, 1\)"),
        (-0.1, {"low": 0}, r"\[0, inf\)"),
        (1.5, {"low": 0, "high": 1, "low_open": True}, r"\(0, 1\]"),
        (math.nan, {}, r"\(-inf, inf\)"),
        (math.inf, {"low": 0}, r"\[0, inf\)"),
        (True, {}, r"\(-inf, inf\)"),
        ("3", {}, r"\(-inf, inf\)"),
        (None, {}, r"\(-inf, inf\)"),
    ],
)
def test_refuses_naming_the_value_and_the_interval(value, kw, interval):
    with pytest.raises(
        FlkitError, match=rf"x={value!r}; accepted: a finite real number in {interval}"
    ):
        check_real("x", value, **kw)
