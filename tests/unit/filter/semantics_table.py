"""Expected results of RocketMQ's SQL92 filters: (expression, properties, result).

``ERR`` means RocketMQ's evaluation throws (the broker logs it and the message does not match);
``None`` means the expression evaluates to null (no match either). Every row was checked
against RocketMQ's own ``SelectorParser`` and expression classes (apache/rocketmq, filter
module) during development.
"""

from __future__ import annotations

from typing import Final

ERR: Final = "error"

Row = tuple[str, dict[str, str], bool | str | None]

NONE: dict[str, str] = {}

ROWS: list[Row] = [
    # ---- string equality and inequality
    ("a = 'x'", {"a": "x"}, True),
    ("a = 'x'", {"a": "y"}, False),
    ("a = 'x'", NONE, None),
    ("a = 'X'", {"a": "x"}, False),
    ("a = ''", {"a": ""}, True),
    ("a <> 'x'", {"a": "y"}, True),
    ("a <> 'x'", {"a": "x"}, False),
    ("a <> 'x'", NONE, None),
    ("'x' = a", NONE, False),  # a null right side is FALSE, a null left side null
    ("'x' <> a", NONE, True),
    ("a = 'it''s'", {"a": "it's"}, True),
    ("TAGS = '''''tag'''''", {"TAGS": "''tag''"}, True),
    ("a = b", {"a": "1", "b": "1"}, True),
    ("a = b", {"a": "1", "b": "01"}, False),
    ("a = b", NONE, True),  # null = null is TRUE in RocketMQ
    ("a = b", {"a": "1"}, False),
    ("a = b", {"b": "1"}, None),
    ("a <> b", {"a": "3.14", "b": "3.141"}, True),
    # ---- string property against numbers: Integer.valueOf / Long.valueOf / Double.valueOf
    ("a = 1", {"a": "1"}, True),
    ("a = 1", {"a": "01"}, True),
    ("a = 1", {"a": "+1"}, True),
    ("a = 1", {"a": "1.0"}, ERR),
    ("a = 1", {"a": "x"}, ERR),
    ("a = 1", {"a": " 1"}, ERR),
    ("a = 1", {"a": ""}, ERR),
    ("a = 1", NONE, None),
    ("a <> 1", {"a": "x"}, ERR),
    ("a = 1.0", {"a": "1"}, True),
    ("a = 1.0", {"a": " 1 "}, True),  # Double.valueOf trims
    ("a = 1.0", {"a": "1d"}, True),
    ("a = 1.0", {"a": "0x1p0"}, True),
    ("a = 1.0", {"a": "1_0"}, ERR),
    ("1 = a", {"a": "1"}, True),
    ("1 = a", {"a": "x"}, ERR),
    ("a > 1", {"a": "2"}, True),
    ("a > 1", {"a": "1"}, False),
    ("a > 1", {"a": "-5"}, False),
    ("a > 1", {"a": "\u0663"}, True),  # Arabic-Indic three: Character.digit accepts it
    ("a > 1", {"a": "2.5"}, ERR),
    ("a > 1", {"a": "3000000000"}, ERR),  # not an int
    ("a > 2147483648", {"a": "3000000000"}, True),  # a Long literal: Long.valueOf
    ("a > 2147483648", {"a": "9223372036854775808"}, ERR),
    ("a > 1", NONE, None),
    ("a >= 1", {"a": "1"}, True),
    ("a < 1", {"a": "0"}, True),
    ("a <= 1", {"a": "2"}, False),
    ("a > 1.5", {"a": "2"}, True),
    ("a > 1.5", {"a": "1.5"}, False),
    ("a >= 1.5", {"a": "1.5"}, True),
    ("a > 1.5", {"a": "abc"}, ERR),
    ("a > 1.5", {"a": "NaN"}, True),  # Double.compareTo puts NaN above everything
    ("a < 1.5", {"a": "NaN"}, False),
    ("a > 1.5", {"a": "Infinity"}, True),
    ("a < -1.5", {"a": "-Infinity"}, True),
    ("a < 1.5", {"a": "-0.0"}, True),
    ("a >= -0.5", {"a": "-0.0"}, True),
    ("a > 3.1E10", {"a": "3.1415E10"}, True),
    ("5 < a", {"a": "6"}, True),
    ("a > -5", {"a": "-4"}, True),
    ("a > - -5", {"a": "6"}, True),
    ("a > -2147483648", {"a": "-2147483649"}, False),  # -(Long) stays a Long
    # ---- two properties: both parsed as doubles for >, <, >=, <=
    ("a > b", {"a": "20", "b": "10"}, True),
    ("a > b", {"a": "10", "b": "20"}, False),
    ("a > b", {"a": "1.5", "b": "1"}, True),
    ("a > b", {"a": "x", "b": "1"}, ERR),
    ("a > b", {"a": "1"}, None),
    ("a > b", {"b": "x"}, None),  # left null: the right side is not even converted
    # ---- booleans
    ("a = TRUE", {"a": "true"}, True),
    ("a = TRUE", {"a": "TRUE"}, True),
    ("a = TRUE", {"a": "yes"}, False),
    ("a = FALSE", {"a": "false"}, True),
    ("a = FALSE", {"a": "anything"}, True),  # Boolean.valueOf is false for any non-"true"
    ("a = TRUE", NONE, None),
    ("TRUE = a", {"a": "true"}, ERR),  # Boolean on the left of a String: ClassCastException
    ("TRUE = TRUE", NONE, True),
    ("TRUE = FALSE", NONE, False),
    ("1 = TRUE", NONE, False),
    ("'x' = TRUE", NONE, False),
    ("(a > 1) = TRUE", {"a": "2"}, True),
    ("(a > 1) = 'true'", {"a": "2"}, ERR),
    ("(a > 1) = 1", {"a": "2"}, False),
    ("TRUE", NONE, True),
    ("FALSE", NONE, False),
    ("NULL", NONE, None),
    # ---- a bare property as a condition: null if missing, else FALSE (never a Boolean)
    ("a", {"a": "true"}, False),
    ("a", NONE, None),
    ("NOT a", {"a": "true"}, True),
    ("NOT a", NONE, None),
    ("a OR TRUE", NONE, True),
    ("a AND TRUE", {"a": "x"}, False),
    # ---- IS NULL / IS NOT NULL
    ("a IS NULL", NONE, True),
    ("a IS NULL", {"a": ""}, False),
    ("a IS NOT NULL", {"a": ""}, True),
    ("a IS NOT NULL", NONE, False),
    ("NULL IS NULL", NONE, True),
    ("5 IS NULL", NONE, False),
    ("(a > 1) IS NULL", NONE, True),
    ("(a > 1) IS NULL", {"a": "x"}, ERR),
    ("NOT a IS NULL", NONE, True),  # (NOT a) IS NULL
    ("a IS NULL IS NULL", NONE, False),
    ("a = -NULL", NONE, True),  # -NULL is not the NULL literal, so '=' accepts it
    ("a = -'x'", {"a": "x"}, False),
    # ---- BETWEEN
    ("a BETWEEN 2 AND 10", {"a": "2"}, True),
    ("a BETWEEN 2 AND 10", {"a": "10"}, True),
    ("a BETWEEN 2 AND 10", {"a": "1"}, False),
    ("a BETWEEN 2 AND 10", {"a": "11"}, False),
    ("a BETWEEN 2 AND 10", NONE, None),
    ("a BETWEEN 2 AND 10", {"a": "x"}, ERR),
    ("a BETWEEN 1 AND 3000000000", {"a": "2"}, True),
    ("a BETWEEN 1 AND 3000000000", {"a": "2.5"}, ERR),
    ("a BETWEEN 1.5 AND 2.5", {"a": "2"}, True),
    ("a BETWEEN -5 AND -1", {"a": "-3"}, True),
    ("a BETWEEN 5 AND -5", {"a": "0"}, False),  # -5 is no literal: the order is not checked
    ("a BETWEEN b AND c", {"a": "2", "b": "1", "c": "3"}, True),
    ("a NOT BETWEEN 2 AND 10", {"a": "1"}, True),
    ("a NOT BETWEEN 2 AND 10", {"a": "5"}, False),
    ("a NOT BETWEEN 2 AND 10", NONE, None),
    ("a NOT BETWEEN 10 AND 2", {"a": "5"}, True),  # NOT BETWEEN never checks the order
    ("5 BETWEEN 1 AND 10", NONE, True),
    # ---- IN / NOT IN (strings only)
    ("a IN ('3', '4', '5')", {"a": "4"}, True),
    ("a IN ('3', '4', '5')", {"a": "8"}, False),
    ("a IN ('3', '4', '5')", NONE, None),
    ("a IN ('x', 'x', 'y', 'z', 'w', 'v')", {"a": "v"}, True),
    ("a NOT IN ('3', '4', '5')", {"a": "8"}, True),
    ("a NOT IN ('3', '4', '5')", {"a": "3"}, False),
    ("a NOT IN ('3', '4', '5')", NONE, None),
    ("NOT (a IN ('x'))", NONE, None),
    ("(a) IN ('x')", {"a": "x"}, True),
    # ---- CONTAINS / STARTSWITH / ENDSWITH
    ("a CONTAINS 'x'", {"a": "axb"}, True),
    ("a CONTAINS 'x'", {"a": "abb"}, False),
    ("a CONTAINS 'x'", NONE, False),  # FALSE, not null
    ("a NOT CONTAINS 'x'", NONE, False),
    ("NOT (a CONTAINS 'x')", NONE, True),
    ("a NOT CONTAINS 'x'", {"a": "abb"}, True),
    ("a CONTAINS ''", {"a": "axb"}, False),
    ("a NOT CONTAINS ''", {"a": "axb"}, False),
    ("a STARTSWITH 'ax'", {"a": "axb"}, True),
    ("a NOT STARTSWITH 'ax'", {"a": "axb"}, False),
    ("a ENDSWITH 'xb'", {"a": "axb"}, True),
    ("a NOT ENDSWITH 'x'", {"a": "abb"}, True),
    ("a STARTSWITH ''", {"a": "axb"}, False),
    ("'axb' CONTAINS 'x'", NONE, True),
    ("5 CONTAINS '5'", NONE, False),
    ("NOT a CONTAINS 'x'", {"a": "x"}, False),  # (NOT a) is a Boolean, never a String
    ("(a = 1) CONTAINS 'x'", {"a": "y"}, ERR),  # the operand is still evaluated
    ("a CONTAINS 'x' CONTAINS 'y'", {"a": "x"}, False),
    ("a CONTAINS '\U0001f600'", {"a": "a\U0001f600b"}, True),
    # ---- AND / OR / NOT with null (three-valued logic) and evaluation errors
    ("a = '1' AND b = '1'", {"a": "1", "b": "1"}, True),
    ("a = '1' AND b = '1'", {"a": "1"}, None),
    ("a = '1' AND b = '1'", {"a": "2"}, False),
    ("a = '1' AND b = '1'", {"b": "2"}, False),
    ("a = '1' OR b = '1'", {"b": "1"}, True),
    ("a = '1' OR b = '1'", {"a": "2"}, None),
    ("a = '1' OR b = '1'", {"a": "2", "b": "2"}, False),
    ("NOT (a = '1')", NONE, None),
    ("NOT (a = '1')", {"a": "2"}, True),
    ("a IS NULL OR a = 'hello'", NONE, True),
    ("a IS NULL OR a = 'hello'", {"a": "abc"}, False),
    ("a = 1 OR b = 'y'", {"a": "x", "b": "y"}, ERR),  # the failure ends the evaluation
    ("b = 'y' OR a = 1", {"a": "x", "b": "y"}, True),  # ... unless OR is already TRUE
    ("b = 'n' AND a = 1", {"a": "x", "b": "y"}, False),  # ... or AND already FALSE
    ("a = 1 AND b = 'n'", {"a": "x", "b": "y"}, ERR),
    ("a IS NOT NULL AND a > 0", {"a": "x"}, ERR),
    ("a > 10 OR a < 2 OR a = 5", {"a": "5"}, True),
    ("a = '1' OR b = '1' OR c = '1' OR d = '1'", {"d": "1"}, True),
    ("a = '1' OR b = '1' OR c = '1' OR d = '1'", {"a": "0", "b": "0", "c": "0", "d": "0"}, False),
    ("a = '1' AND b = '1' AND c = '1' AND d = '1'", {"a": "1", "b": "1", "c": "1"}, None),
    # ---- precedence: NOT > comparisons > '='/'<>'/IS > AND > OR
    ("a = '1' OR b = '1' AND c = '1'", {"a": "1", "c": "0"}, True),
    ("(a = '1' OR b = '1') AND c = '1'", {"a": "1", "c": "0"}, False),
    ("NOT a = '1' OR TRUE", {"a": "1"}, ERR),  # (NOT a) = '1': Boolean vs String throws
    ("NOT a = '1' OR TRUE", NONE, True),
    ("NOT (a = '1') AND b = '2'", {"a": "0", "b": "2"}, True),
    ("a > 1 = TRUE", {"a": "2"}, True),  # (a > 1) = TRUE
    ("a = 1 = TRUE", {"a": "1"}, True),  # (a = 1) = TRUE
    ("a BETWEEN 1 AND 3 AND b = 'x'", {"a": "2", "b": "x"}, True),
    ("a = 'x' OR NOT b = 'y'", {"a": "z", "b": "y"}, ERR),
    ("a = 'x' OR NOT (b = 'y')", {"a": "z", "b": "y"}, False),
    # ---- literals
    ("a = 7L", {"a": "7"}, True),
    ("a = 0", {"a": "0"}, True),
    ("a > 1E1", {"a": "11"}, True),
    ("a < .5", {"a": "0.25"}, True),
    ("a < 5.", {"a": "4.9"}, True),
    ("a = 9223372036854775807", {"a": "9223372036854775807"}, True),
    ("a = -9223372036854775807", {"a": "-9223372036854775807"}, True),
    # ---- comments, white space, letter case
    ("a = 'x' -- trailing comment\n", {"a": "x"}, True),
    ("/* c */ a /**/ = /* ** */ 'x'", {"a": "x"}, True),
    ("a\t=\r\n'x'\f", {"a": "x"}, True),
    ("a is not null and A is null", {"a": "1"}, True),
    ("a Between 1 aNd 3", {"a": "2"}, True),
    ("$a_1 = 'x'", {"$a_1": "x"}, True),
    # ---- text after a complete expression is ignored, as RocketMQ's parser does
    ("a = 1 b", {"a": "1"}, True),
    ("(a = 1))", {"a": "1"}, True),
    ("a --1", {"a": "1"}, False),  # '--' without a line end is two minus signs
    ("a = --1\n5", {"a": "5"}, True),
]
