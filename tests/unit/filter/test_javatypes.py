import math

import pytest

from ariane.filter.javatypes import (
    JavaValueError,
    java_boolean_value_of,
    java_double_compare,
    java_double_value_of,
    java_int_value_of,
    java_long_value_of,
    java_string_compare,
    java_trim,
)

# Results of Integer.valueOf / Long.valueOf / Double.valueOf on a JDK 17.
INTS = [
    ("0", 0),
    ("-0", 0),
    ("+7", 7),
    ("007", 7),
    ("2147483647", 2147483647),
    ("-2147483648", -2147483648),
    ("\u0663\u0660", 30),
    ("\uff11", 1),
    ("0" * 5000 + "1", 1),
]
NOT_INTS = [
    "",
    "+",
    "-",
    " 1",
    "1 ",
    "1.0",
    "1e3",
    "0x10",
    "1_000",
    "2147483648",
    "\u00b2",
    "\U0001d7ce",
    "--1",
    "+-1",
    "1L",
]
DOUBLES = [
    ("1", 1.0),
    ("1.", 1.0),
    (".5", 0.5),
    ("-.5e1", -5.0),
    ("1e400", math.inf),
    ("-1e400", -math.inf),
    ("1e-400", 0.0),
    (" \t1.5\n\x00", 1.5),
    ("1.5d", 1.5),
    ("1.5F", 1.5),
    ("NaN", math.nan),
    ("-NaN", math.nan),
    ("+Infinity", math.inf),
    ("-Infinity", -math.inf),
    ("0x1p3", 8.0),
    ("0X1.8P1", 3.0),
    ("0x.8p1d", 1.0),
    ("-0x1p99999", -math.inf),
    ("0x1p-99999", 0.0),
    ("1" * 400 + ".5", float("1" * 400 + ".5")),
]
NOT_DOUBLES = [
    "",
    " ",
    "nan",
    "inf",
    "infinity",
    "NaNd",
    "1_0",
    "1e",
    "e1",
    ".",
    "0x1",
    "0x1.8",
    "0xp1",
    "\uff11",
    "\u0663",
    "1,5",
    "1.5dd",
    "\u20031",
]


@pytest.mark.parametrize(("text", "value"), INTS)
def test_int(text: str, value: int) -> None:
    assert java_int_value_of(text) == value
    assert java_long_value_of(text) == value


@pytest.mark.parametrize("text", NOT_INTS)
def test_not_int(text: str) -> None:
    with pytest.raises(JavaValueError):
        java_int_value_of(text)


def test_long_range() -> None:
    assert java_long_value_of("9223372036854775807") == (1 << 63) - 1
    assert java_long_value_of("-9223372036854775808") == -(1 << 63)
    for text in ("9223372036854775808", "-9223372036854775809", "1" * 30):
        with pytest.raises(JavaValueError):
            java_long_value_of(text)
    assert java_long_value_of("2147483648") == 2147483648


@pytest.mark.parametrize(("text", "value"), DOUBLES)
def test_double(text: str, value: float) -> None:
    got = java_double_value_of(text)
    if math.isnan(value):
        assert math.isnan(got)
    else:
        assert got == value


@pytest.mark.parametrize("text", NOT_DOUBLES)
def test_not_double(text: str) -> None:
    with pytest.raises(JavaValueError):
        java_double_value_of(text)


def test_double_compare_is_a_total_order() -> None:
    ordered = [-math.inf, -1.0, -0.0, 0.0, 1e-300, 1.0, math.inf, math.nan]
    for i, a in enumerate(ordered):
        for j, b in enumerate(ordered):
            assert java_double_compare(a, b) == (i > j) - (i < j), (a, b)


def test_boolean_value_of() -> None:
    assert java_boolean_value_of("true")
    assert java_boolean_value_of("TrUe")
    for text in ("", "yes", "1", "true ", "\u0074rue\u0301", "tru\u212a"):
        assert not java_boolean_value_of(text)


def test_string_compare_uses_utf16_order() -> None:
    assert java_string_compare("a", "a") == 0
    assert java_string_compare("a", "b") == -1
    # U+FF5E sorts after U+1F600 by code point but before it by UTF-16 unit (0xD83D).
    assert java_string_compare("\uff5e", "\U0001f600") == 1
    assert java_string_compare("\U0001f600", "\uff5e") == -1


def test_trim_is_java_trim() -> None:
    assert java_trim("\x00 a b\x1f\x20") == "a b"
    assert java_trim("\u00a0a\u2003") == "\u00a0a\u2003"
