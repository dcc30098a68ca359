"""Turns a checked filter tree into nested Python closures (RocketMQ's ``Expression.evaluate``).

How it works: each node becomes one closure ``f(properties) -> value`` that calls its
children's closures. Because every node's Java class is known at compile time
(:func:`~ariane.filter.nodes.kind_of`), the Java conversion a comparison needs is chosen once,
here, and the common shapes get closures of their own that read the property directly:
``prop = 'x'``, ``prop <> 'x'``, ``prop > 10``, ``prop IS [NOT] NULL``, ``prop [NOT] IN (...)``,
``prop [NOT] CONTAINS 'x'`` and two- or three-operand AND/OR. Negated literals (``-5``) are
folded.

Values follow Java: ``None`` is null, ``True``/``False`` are Booleans, ``str`` is a String,
``int`` an Integer or Long (the node's kind says which), ``float`` a Double. Evaluation order
and short-circuiting are RocketMQ's, which matters because evaluation can fail: a closure
raises :class:`~ariane.filter.javatypes.JavaValueError` where Java throws (``a = 1`` on
``a='x'``), and the failure ends the whole evaluation unless an OR already found TRUE or an AND
already found FALSE to its left.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any

from ariane.filter.javatypes import (
    java_boolean_value_of,
    java_double_compare,
    java_double_value_of,
    java_int_value_of,
    java_long_value_of,
)
from ariane.filter.nodes import (
    BooleanCast,
    Constant,
    Equal,
    InList,
    Kind,
    Logic,
    Negate,
    Node,
    Not,
    Property,
    Relational,
    StringTest,
    comparator,
    kind_of,
)

__all__ = ["Evaluator", "compile_node", "constant_value"]

Evaluator = Callable[[Mapping[str, str]], Any]

_OPS: dict[str, Callable[[Any, Any], bool]] = {
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
}
_INTEGRAL_PARSERS: dict[Kind, Callable[[str], int]] = {
    Kind.INT: java_int_value_of,
    Kind.LONG: java_long_value_of,
}


def _wrap(value: int, bits: int) -> int:
    half = 1 << (bits - 1)
    return ((value + half) % (1 << bits)) - half


def _negate(kind: Kind, value: Any) -> Any:
    if value is None or not kind.numeric:
        return None
    if kind is Kind.INT:
        return _wrap(-value, 32)
    if kind is Kind.LONG:
        return _wrap(-value, 64)
    return -value


def constant_value(node: Node) -> tuple[bool, Any]:
    """``(True, value)`` when the node's value is fixed (a literal, ``-literal``), else (False, None)."""
    if isinstance(node, Constant):
        return True, node.value
    if isinstance(node, Negate):
        ok, value = constant_value(node.operand)
        if ok:
            return True, _negate(kind_of(node.operand), value)
    return False, None


def compile_node(node: Node) -> Evaluator:
    """Compile a node (and its subtree) into a closure over a property mapping."""
    ok, value = constant_value(node)
    if ok:
        return _const(value)
    if isinstance(node, Property):
        return _property(node.name)
    if isinstance(node, Logic):
        return _logic(node)
    if isinstance(node, Equal):
        return _equal(node)
    if isinstance(node, Relational):
        return _relational(node)
    if isinstance(node, Not):
        return _not(node)
    if isinstance(node, InList):
        return _in(node)
    if isinstance(node, StringTest):
        return _string_test(node)
    if isinstance(node, BooleanCast):
        return _boolean_cast(node.operand.name)
    if isinstance(node, Negate):
        return _negate_node(node)
    raise AssertionError(f"unknown node {node!r}")  # pragma: no cover


def _const(value: Any) -> Evaluator:
    def constant(p: Mapping[str, str]) -> Any:
        return value

    return constant


def _property(name: str) -> Evaluator:
    def prop(p: Mapping[str, str]) -> Any:
        return p.get(name)

    return prop


def _boolean_cast(name: str) -> Evaluator:
    def cast(p: Mapping[str, str]) -> bool | None:
        return None if p.get(name) is None else False

    return cast


def _negate_node(node: Negate) -> Evaluator:
    kind = kind_of(node.operand)
    f = compile_node(node.operand)
    if kind.numeric:

        def negate(p: Mapping[str, str]) -> Any:
            return _negate(kind, f(p))

        return negate
    if isinstance(node.operand, Property):
        return _const(None)

    def evaluate_then_null(p: Mapping[str, str]) -> None:
        f(p)  # for its failures only: RocketMQ evaluates the operand, then yields null
        return None

    return evaluate_then_null


def _logic(node: Logic) -> Evaluator:
    fs = tuple(compile_node(o) for o in node.operands)
    # AND stops at the first FALSE, OR at the first TRUE; otherwise any null makes it null.
    stop = node.op == "OR"
    on_stop: bool = stop  # returned values are kept apart from the `is` tests for mypy
    otherwise: bool = not stop
    if len(fs) == 2:
        f0, f1 = fs

        def logic2(p: Mapping[str, str]) -> bool | None:
            a = f0(p)
            if a is stop:
                return on_stop
            b = f1(p)
            if b is stop:
                return on_stop
            if a is None or b is None:
                return None
            return otherwise

        return logic2
    if len(fs) == 3:
        f0, f1, f2 = fs

        def logic3(p: Mapping[str, str]) -> bool | None:
            a = f0(p)
            if a is stop:
                return on_stop
            b = f1(p)
            if b is stop:
                return on_stop
            c = f2(p)
            if c is stop:
                return on_stop
            if a is None or b is None or c is None:
                return None
            return otherwise

        return logic3

    def logic_n(p: Mapping[str, str]) -> bool | None:
        unknown = False
        for f in fs:
            v = f(p)
            if v is stop:
                return on_stop
            if v is None:
                unknown = True
        return None if unknown else otherwise

    return logic_n


def _property_equals(name: str, kind: Kind, c: Any) -> Evaluator:
    """``prop = c`` for a non-null constant ``c`` of the given kind."""
    if kind is Kind.STR:

        def eq_str(p: Mapping[str, str]) -> bool | None:
            v = p.get(name)
            return None if v is None else v == c

        return eq_str
    if kind in _INTEGRAL_PARSERS:
        parse = _INTEGRAL_PARSERS[kind]

        def eq_integral(p: Mapping[str, str]) -> bool | None:
            v = p.get(name)
            return None if v is None else parse(v) == c

        return eq_integral
    if kind is Kind.DOUBLE:

        def eq_double(p: Mapping[str, str]) -> bool | None:
            v = p.get(name)
            return None if v is None else java_double_compare(java_double_value_of(v), c) == 0

        return eq_double

    def eq_bool(p: Mapping[str, str]) -> bool | None:
        v = p.get(name)
        return None if v is None else java_boolean_value_of(v) == c

    return eq_bool


def _equal(node: Equal) -> Evaluator:
    left, right = node.left, node.right
    r_const, c = constant_value(right)
    if r_const and c is None:  # IS NULL, or '= -NULL'-like oddities: true iff left is null
        if isinstance(left, Property):
            name = left.name

            def is_null(p: Mapping[str, str]) -> bool:
                return p.get(name) is None

            return is_null
        lf = compile_node(left)

        def evaluates_to_null(p: Mapping[str, str]) -> bool:
            return lf(p) is None

        return evaluates_to_null
    if r_const and isinstance(left, Property):
        return _property_equals(left.name, kind_of(right), c)
    lk, rk = kind_of(left), kind_of(right)
    lf, rf = compile_node(left), compile_node(right)
    same: Callable[[Any, Any], bool]
    if lk is rk and lk in (Kind.STR, Kind.INT, Kind.LONG, Kind.BOOL):
        same = operator.eq
    else:
        cmp = comparator(lk, rk)

        def same(a: Any, b: Any) -> bool:
            return cmp(a, b) == 0

    def equal(p: Mapping[str, str]) -> bool | None:
        lv = lf(p)
        rv = rf(p)
        if lv is None:
            return True if rv is None else None
        if rv is None:
            return False
        return same(lv, rv)

    return equal


def _relational(node: Relational) -> Evaluator:
    op = _OPS[node.op]
    left, right = node.left, node.right
    lk, rk = kind_of(left), kind_of(right)
    r_const, c = constant_value(right)
    if r_const and c is not None and isinstance(left, Property):
        name = left.name
        if rk in _INTEGRAL_PARSERS:
            parse = _INTEGRAL_PARSERS[rk]

            def prop_vs_integral(p: Mapping[str, str]) -> bool | None:
                v = p.get(name)
                return None if v is None else op(parse(v), c)

            return prop_vs_integral
        if rk is Kind.DOUBLE:

            def prop_vs_double(p: Mapping[str, str]) -> bool | None:
                v = p.get(name)
                if v is None:
                    return None
                return op(java_double_compare(java_double_value_of(v), c), 0)

            return prop_vs_double
    cmp: Callable[[Any, Any], int]
    if lk is Kind.STR and rk is Kind.STR:

        def cmp(a: Any, b: Any) -> int:  # two strings: RocketMQ compares them as doubles
            return java_double_compare(java_double_value_of(a), java_double_value_of(b))

    else:
        cmp = comparator(lk, rk)
    lf, rf = compile_node(left), compile_node(right)

    def relational(p: Mapping[str, str]) -> bool | None:
        lv = lf(p)
        if lv is None:
            return None
        rv = rf(p)
        if rv is None:
            return None
        return op(cmp(lv, rv), 0)

    return relational


def _not(node: Not) -> Evaluator:
    inner = node.operand
    if isinstance(inner, Equal) and isinstance(inner.left, Property):
        name = inner.left.name
        r_const, c = constant_value(inner.right)
        if r_const and c is None:

            def is_not_null(p: Mapping[str, str]) -> bool:
                return p.get(name) is not None

            return is_not_null
        if r_const and kind_of(inner.right) is Kind.STR:

            def ne_str(p: Mapping[str, str]) -> bool | None:
                v = p.get(name)
                return None if v is None else v != c

            return ne_str
    f = compile_node(inner)

    def negation(p: Mapping[str, str]) -> bool | None:
        v = f(p)
        return None if v is None else not v

    return negation


def _in(node: InList) -> Evaluator:
    name = node.operand.name
    values = frozenset(node.values)
    if node.negated:

        def not_in(p: Mapping[str, str]) -> bool | None:
            v = p.get(name)
            return None if v is None else v not in values

        return not_in

    def in_(p: Mapping[str, str]) -> bool | None:
        v = p.get(name)
        return None if v is None else v in values

    return in_


_STRING_METHODS: dict[str, Callable[[str, str], bool]] = {
    "CONTAINS": operator.contains,
    "STARTSWITH": str.startswith,
    "ENDSWITH": str.endswith,
}


def _string_test(node: StringTest) -> Evaluator:
    search, negated = node.search, node.negated
    test = _STRING_METHODS[node.op]
    if not search:  # RocketMQ answers FALSE without evaluating the operand
        return _const(False)
    ok, value = constant_value(node.operand)
    if ok:
        return _const(isinstance(value, str) and test(value, search) != negated)
    if isinstance(node.operand, Property):
        name = node.operand.name
        if node.op == "CONTAINS":
            if negated:

                def not_contains(p: Mapping[str, str]) -> bool:
                    v = p.get(name)
                    return v is not None and search not in v

                return not_contains

            def contains(p: Mapping[str, str]) -> bool:
                v = p.get(name)
                return v is not None and search in v

            return contains

        def prop_test(p: Mapping[str, str]) -> bool:
            v = p.get(name)
            return v is not None and test(v, search) != negated

        return prop_test
    # Any other operand is a condition or a negation: never a String, so the answer is FALSE
    # once the operand has been evaluated (for its failures).
    assert kind_of(node.operand) is not Kind.STR
    f = compile_node(node.operand)

    def evaluate_then_false(p: Mapping[str, str]) -> bool:
        f(p)
        return False

    return evaluate_then_false
