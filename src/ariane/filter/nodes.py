"""The expression tree of a SQL92 filter and the Java comparison rules over its values.

The node classes mirror RocketMQ's ``org.apache.rocketmq.filter.expression`` classes closely
enough that the parser can apply the same compile-time checks (``ComparisonExpression.create*``
and ``SelectorParser.asBooleanExpression``) and the evaluator the same run-time rules:

==================  ==========================================================================
node                RocketMQ
==================  ==========================================================================
``Constant``        ``ConstantExpression`` (string, Integer, Long, Double) and
                    ``BooleanConstantExpression`` (TRUE, FALSE, NULL)
``Property``        ``PropertyExpression`` (a message property, always a string or null)
``Negate``          ``UnaryExpression.createNegate``
``Not``             ``UnaryExpression.createNOT``
``BooleanCast``     ``UnaryExpression.createBooleanCast`` (a bare property used as a condition)
``Logic``           ``LogicExpression`` AND/OR; a chain ``a AND b AND c`` is one n-ary node
                    (same result, same evaluation order, no deep nesting)
``Equal``           ``ComparisonExpression.doCreateEqual`` (``=``, and ``IS NULL`` with a NULL
                    constant on the right); ``<>`` and ``IS NOT NULL`` are ``Not(Equal)``
``Relational``      ``>``, ``>=``, ``<``, ``<=``; BETWEEN is ``>= AND <=``, NOT BETWEEN is
                    ``< OR >``
``InList``          ``UnaryInExpression`` (IN / NOT IN on a property)
``StringTest``      ``ContainsExpression``, ``StartsWithExpression``, ``EndsWithExpression``
                    and their NOT forms
==================  ==========================================================================

A node's ``pos`` is where its text starts (0-based; for a parenthesized operand, the first
character inside the parentheses), which error messages report.

Every node has a static :class:`Kind`, the Java class of its non-null values: a property is
always a ``String``, a literal ``5`` an ``Integer``, ``3000000000`` a ``Long``, ``-x`` of a
non-number is always null. Knowing the kinds at compile time lets the evaluator pick Java's
conversion (``__compare``) once instead of per message.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ariane.filter.javatypes import (
    JavaValueError,
    java_boolean_value_of,
    java_double_compare,
    java_double_value_of,
    java_int_value_of,
    java_long_value_of,
    java_string_compare,
)

__all__ = [
    "BooleanCast",
    "Constant",
    "Equal",
    "InList",
    "Kind",
    "Logic",
    "Negate",
    "Node",
    "Not",
    "Property",
    "Relational",
    "StringTest",
    "comparator",
    "is_boolean_expression",
    "kind_of",
]


class Kind(enum.Enum):
    """The Java class of an expression's non-null values."""

    BOOL = "Boolean"
    STR = "String"
    INT = "Integer"
    LONG = "Long"
    DOUBLE = "Double"
    NULL = "null"  # the value is always null

    @property
    def numeric(self) -> bool:
        """Whether values of this kind are ``java.lang.Number``."""
        return self in (Kind.INT, Kind.LONG, Kind.DOUBLE)


@dataclass(frozen=True, slots=True)
class Constant:
    """A literal: a string, an Integer/Long (Python int), a Double, TRUE/FALSE or NULL."""

    pos: int
    value: str | int | float | bool | None
    kind: Kind
    depth: int = 1


@dataclass(frozen=True, slots=True)
class Property:
    """A message property, looked up by its exact (case-sensitive) name."""

    pos: int
    name: str
    depth: int = 1


@dataclass(frozen=True, slots=True)
class Negate:
    """Unary minus; null unless the operand is a number."""

    pos: int
    operand: Node
    depth: int


@dataclass(frozen=True, slots=True)
class Not:
    """Logical NOT of a boolean expression (null stays null)."""

    pos: int
    operand: Node
    depth: int


@dataclass(frozen=True, slots=True)
class BooleanCast:
    """A property used as a condition: null when missing, else FALSE (it is never a Boolean)."""

    pos: int
    operand: Property
    depth: int


@dataclass(frozen=True, slots=True)
class Logic:
    """AND or OR over two or more boolean operands, evaluated left to right."""

    pos: int
    op: str  # "AND" | "OR"
    operands: tuple[Node, ...]
    depth: int


@dataclass(frozen=True, slots=True)
class Equal:
    """Java ``doCreateEqual``: null-aware equality with Java's type conversions."""

    pos: int
    left: Node
    right: Node
    depth: int


@dataclass(frozen=True, slots=True)
class Relational:
    """``>``, ``>=``, ``<`` or ``<=``."""

    pos: int
    op: str
    left: Node
    right: Node
    depth: int


@dataclass(frozen=True, slots=True)
class InList:
    """``prop IN ('a', 'b')`` or ``prop NOT IN (...)``."""

    pos: int
    operand: Property
    values: tuple[str, ...]
    negated: bool
    depth: int = 2


@dataclass(frozen=True, slots=True)
class StringTest:
    """CONTAINS / STARTSWITH / ENDSWITH (``negated`` for the NOT forms)."""

    pos: int
    op: str  # "CONTAINS" | "STARTSWITH" | "ENDSWITH"
    operand: Node
    search: str
    negated: bool
    depth: int


Node = (
    Constant
    | Property
    | Negate
    | Not
    | BooleanCast
    | Logic
    | Equal
    | Relational
    | InList
    | StringTest
)

_BOOLEAN_NODES = (Not, BooleanCast, Logic, Equal, Relational, InList, StringTest)


def is_boolean_expression(node: Node) -> bool:
    """Whether RocketMQ's counterpart implements ``BooleanExpression``."""
    if isinstance(node, Constant):
        return node.kind in (Kind.BOOL, Kind.NULL)
    return isinstance(node, _BOOLEAN_NODES)


def kind_of(node: Node) -> Kind:
    """The static :class:`Kind` of a node's values."""
    if isinstance(node, Constant):
        return node.kind
    if isinstance(node, Property):
        return Kind.STR
    if isinstance(node, Negate):
        k = kind_of(node.operand)
        return k if k.numeric else Kind.NULL
    return Kind.BOOL


Comparator = Callable[[Any, Any], int]


def _sign(a: Any, b: Any) -> int:
    return int(a > b) - int(a < b)


def _double_of_first(a: int, b: float) -> int:
    return java_double_compare(float(a), b)


def _double_of_second(a: float, b: int) -> int:
    return java_double_compare(a, float(b))


def _class_cast(a: Any, b: Any) -> int:
    # Boolean compared with a String: RocketMQ casts the Boolean to String (a Java bug).
    raise JavaValueError("java.lang.ClassCastException: Boolean cannot be cast to String")


def _not_comparable(a: Any, b: Any) -> int:
    return -1  # __compare's answer for classes it cannot convert between


def _never(a: Any, b: Any) -> int:
    raise AssertionError("a null value reached a comparison")


def _comparators() -> dict[tuple[Kind, Kind], Comparator]:
    s, b, i, lg, d = Kind.STR, Kind.BOOL, Kind.INT, Kind.LONG, Kind.DOUBLE
    table: dict[tuple[Kind, Kind], Comparator] = {
        (s, s): java_string_compare,
        (b, b): _sign,
        (i, i): _sign,
        (lg, lg): _sign,
        (d, d): java_double_compare,
        (b, s): _class_cast,
        (i, lg): _sign,
        (lg, i): _sign,
        (i, d): _double_of_first,
        (lg, d): _double_of_first,
        (d, i): _double_of_second,
        (d, lg): _double_of_second,
        (i, s): lambda x, y: _sign(x, java_int_value_of(y)),
        (lg, s): lambda x, y: _sign(x, java_long_value_of(y)),
        (d, s): lambda x, y: java_double_compare(x, java_double_value_of(y)),
        (s, b): lambda x, y: _sign(java_boolean_value_of(x), y),
        (s, i): lambda x, y: _sign(java_int_value_of(x), y),
        (s, lg): lambda x, y: _sign(java_long_value_of(x), y),
        (s, d): lambda x, y: java_double_compare(java_double_value_of(x), y),
    }
    for left in Kind:
        for right in Kind:
            if left is Kind.NULL or right is Kind.NULL:
                table[left, right] = _never
            else:
                table.setdefault((left, right), _not_comparable)
    return table


_COMPARATORS = _comparators()


def comparator(left: Kind, right: Kind) -> Comparator:
    """Java's ``ComparisonExpression.__compare`` for non-null values of the given kinds.

    The result's sign orders the values; the comparator raises
    :class:`~ariane.filter.javatypes.JavaValueError` where Java throws (a string that does not
    parse as the other side's number class; a Boolean on the left of a String).
    """
    return _COMPARATORS[left, right]
