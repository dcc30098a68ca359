"""Java's value rules that RocketMQ's filter expressions rely on, in pure Python.

RocketMQ (``ComparisonExpression.__compare``) converts a property string with
``Integer.valueOf``, ``Long.valueOf``, ``Double.valueOf`` or ``Boolean.valueOf`` depending on
the other operand's Java class, and orders doubles with ``Double.compareTo`` (NaN above
everything, ``-0.0 < 0.0``). Python's ``int()``/``float()`` accept more (whitespace,
underscores, ``inf``, full-width digits in ``float``) and less (``0x1p3``, ``1.5d``) than
Java, so each function here checks Java's grammar first.

A failed conversion raises :class:`JavaValueError`, the counterpart of Java's
``NumberFormatException``/``ClassCastException``; the filter evaluator turns it into "this
message does not match", as the broker does.
"""

from __future__ import annotations

import math
import re
from functools import cache

__all__ = [
    "INT_MAX",
    "INT_MIN",
    "LONG_MAX",
    "LONG_MIN",
    "JavaValueError",
    "java_boolean_value_of",
    "java_double_compare",
    "java_double_value_of",
    "java_int_value_of",
    "java_long_value_of",
    "java_string_compare",
    "java_trim",
]

INT_MIN = -(1 << 31)
INT_MAX = (1 << 31) - 1
LONG_MIN = -(1 << 63)
LONG_MAX = (1 << 63) - 1

# Java's String.trim(): every char <= U+0020 at either end.
_JAVA_TRIM = "".join(chr(c) for c in range(0x21))
# Strings made only of these characters parse identically with Python's float() and Java's
# Double.valueOf (decimal digits, one point, an exponent; both grammars agree on them).
_PLAIN_FLOAT_CHARS = frozenset("0123456789.eE+-")
_JAVA_DOUBLE = re.compile(
    r"""
    (?P<sign>[+-]?)
    (?:
        (?P<nan>NaN)
      | (?P<inf>Infinity)
      | (?P<dec>(?:[0-9]++(?:\.[0-9]*+)?+|\.[0-9]++)(?:[eE][+-]?+[0-9]++)?+)[fFdD]?
      | (?P<hex>0[xX](?:[0-9a-fA-F]++\.?+|[0-9a-fA-F]*+\.[0-9a-fA-F]++)[pP][+-]?+[0-9]++)[fFdD]?
    )
    """,
    re.VERBOSE | re.ASCII,
)


@cache
def _bmp_digits_to_ascii() -> dict[int, int]:
    # Every BMP decimal digit (Unicode category Nd, what Character.digit(c, 10) accepts).
    return {c: 0x30 + int(chr(c)) for c in range(0x80, 0x10000) if chr(c).isdecimal()}


class JavaValueError(ValueError):
    """A conversion Java would refuse (``NumberFormatException`` or ``ClassCastException``)."""


def _parse_integral(s: str, lo: int, hi: int, what: str) -> int:
    # Integer.parseInt / Long.parseLong with radix 10: an optional sign, then one or more
    # chars that Character.digit(c, 10) accepts (Unicode Nd digits of the BMP), in range.
    if s.isascii() and s.isdecimal() and len(s) < 10:
        return int(s)
    digits = s[1:] if s[:1] in ("+", "-") else s
    if not digits or not digits.isdecimal():
        raise JavaValueError(f"not {what}: {s[:64]!r}")
    if not digits.isascii():
        if max(digits) > "\uffff":  # Java sees two surrogates there, not a digit
            raise JavaValueError(f"not {what}: {s[:64]!r}")
        digits = digits.translate(_bmp_digits_to_ascii())
    digits = digits.lstrip("0") or "0"
    if len(digits) > 20:
        raise JavaValueError(f"{what} out of range: {s[:64]!r}")
    value = -int(digits) if s[0] == "-" else int(digits)
    if not lo <= value <= hi:
        raise JavaValueError(f"{what} out of range: {s[:64]!r}")
    return value


def java_int_value_of(s: str) -> int:
    """``Integer.valueOf(s)``.

    Raises:
        JavaValueError: ``s`` is not a decimal int in [-2**31, 2**31 - 1].
    """
    return _parse_integral(s, INT_MIN, INT_MAX, "an int")


def java_long_value_of(s: str) -> int:
    """``Long.valueOf(s)``.

    Raises:
        JavaValueError: ``s`` is not a decimal long in [-2**63, 2**63 - 1].
    """
    return _parse_integral(s, LONG_MIN, LONG_MAX, "a long")


def java_double_value_of(s: str) -> float:
    """``Double.valueOf(s)``: decimal or hex float, ``NaN``, ``Infinity``, optional suffix.

    Leading and trailing chars <= U+0020 are ignored, as Java trims them.

    Raises:
        JavaValueError: ``s`` is not in Java's floating-point grammar.
    """
    if s.isascii() and _PLAIN_FLOAT_CHARS.issuperset(s):
        try:
            return float(s)
        except ValueError:
            raise JavaValueError(f"not a double: {s[:64]!r}") from None
    t = java_trim(s)
    m = _JAVA_DOUBLE.fullmatch(t)
    if m is None:
        raise JavaValueError(f"not a double: {s[:64]!r}")
    negative = m["sign"] == "-"
    if m["nan"] is not None:
        return math.nan
    if m["inf"] is not None:
        return -math.inf if negative else math.inf
    if m["dec"] is not None:
        value = float(m["dec"])
    else:
        try:
            value = float.fromhex(m["hex"])
        except OverflowError:
            value = math.inf
    return -value if negative else value


def java_trim(s: str) -> str:
    """``String.trim()``: drop every char <= U+0020 at both ends (not Unicode white space)."""
    return s.strip(_JAVA_TRIM)


def java_boolean_value_of(s: str) -> bool:
    """``Boolean.valueOf(s)``: True only for "true" in any letter case."""
    return len(s) == 4 and s.isascii() and s.lower() == "true"


def java_double_compare(a: float, b: float) -> int:
    """``Double.compare(a, b)``: -1, 0 or 1; NaN is above +Infinity, -0.0 below 0.0."""
    if a < b:
        return -1
    if a > b:
        return 1
    a_nan = a != a
    b_nan = b != b
    if a_nan or b_nan:
        return int(a_nan) - int(b_nan)
    if a == 0.0:  # and b == 0.0: order by sign
        sa = math.copysign(1.0, a)
        sb = math.copysign(1.0, b)
        return (sa > sb) - (sa < sb)
    return 0


def java_string_compare(a: str, b: str) -> int:
    """The sign of ``a.compareTo(b)``: order of UTF-16 code units, not of code points."""
    if a == b:
        return 0
    if a.isascii() and b.isascii():
        return -1 if a < b else 1
    ua = a.encode("utf-16-be", "surrogatepass")
    ub = b.encode("utf-16-be", "surrogatepass")
    return -1 if ua < ub else 1
