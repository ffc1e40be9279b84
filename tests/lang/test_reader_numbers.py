"""The reader's value of a numeric literal is Python's ``float`` of its text, bit for bit: the
plain decimals it converts itself (digits, an optional point, no exponent, up to 2^53) and
everything else (exponents, long digit strings) alike."""

from __future__ import annotations

import math
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ndvm.lang.datum import Num
from ndvm.lang.reader import read


def bits(v: float) -> bytes:
    return struct.pack("<d", v)


def value_of(text: str) -> float:
    (datum,) = read(text)
    assert isinstance(datum, Num) and datum.text == text
    return datum.value


EDGES = [
    "0", "-0", "0.0", "-0.0", "+0.5", "1.", "-1.", ".5", "-.5", "+.25", "007", "00.100",
    "0.1", "0.2", "0.3", "-0.7", "3.000001", "1.000000000000000001", "123456789012345678",
    "1234567890123456789", "12345678901234567890", "9007199254740992", "9007199254740993",
    "9007199254740993.0", "-9007199254740992.5", "4503599627370495.5", "0.0000000000000000000001",
    "0.00000000000000000000001", "1.7976931348623157", "2.2250738585072014", "1e3", "-2.5e3",
    "1e-400", "1e400", "123.456e-7", "0.1e1", "5e-324", "99999999999999999999999999.5",
]  # fmt: skip


@pytest.mark.parametrize("text", EDGES)
def test_edges_equal_python_float(text: str) -> None:
    got, want = value_of(text), float(text)
    assert bits(got) == bits(want) or (math.isnan(got) and math.isnan(want)), (text, got, want)


digits = st.text("0123456789", min_size=1, max_size=24)


@settings(max_examples=3000, deadline=None)
@given(
    st.sampled_from(["", "-", "+"]),
    digits,
    st.one_of(st.just(None), st.text("0123456789", max_size=24)),
    st.one_of(st.just(""), st.integers(-30, 30).map(lambda k: f"e{k}")),
)
def test_decimals_equal_python_float(sign: str, whole: str, frac: str | None, exp: str) -> None:
    text = sign + whole + ("" if frac is None else "." + frac) + exp
    assert bits(value_of(text)) == bits(float(text)), text


@settings(max_examples=2000, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_repr_of_any_float_reads_back(v: float) -> None:
    text = repr(v)
    assert bits(value_of(text)) == bits(v), text
