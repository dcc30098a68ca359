"""A slow, direct reference for RocketMQ's SQL92 filters, written from the Java classes.

Trees are tuples; values carry their Java class as a tag: ``("S", "x")``, ``("I", 5)``,
``("L", 3000000000)``, ``("D", 1.5)``, ``("B", True)``; ``None`` is null. Evaluation is
binary and recursive like Java's (no n-ary chains, no specialisation, classes checked at run
time), so it shares no structure with the closure compiler it checks. ``RefThrow`` stands for
a Java exception during evaluation, ``RefInvalid`` for a compile-time rejection.

Tree nodes::

    ("prop", name) ("str", s) ("int", n) ("float", x) ("bool", b) ("null",)
    ("paren", e) ("pos", e) ("neg", e) ("not", e)
    ("and", l, r) ("or", l, r) ("eq", l, r) ("ne", l, r)
    ("gt" | "ge" | "lt" | "le", l, r) ("isnull", e) ("isnotnull", e)
    ("between", e, lo, hi, negated) ("in", e, (s, ...), negated)
    ("contains" | "startswith" | "endswith", e, s, negated)
"""

from __future__ import annotations

import math
import re
import unicodedata
from typing import Any

Tree = tuple[Any, ...]
Value = tuple[str, Any] | None


class RefThrow(Exception):
    pass


class RefInvalid(Exception):
    pass


# ---------------------------------------------------------------------------- printing

_LEVEL = {
    "or": 1,
    "and": 2,
    "eq": 3,
    "ne": 3,
    "isnull": 3,
    "isnotnull": 3,
    "gt": 4,
    "ge": 4,
    "lt": 4,
    "le": 4,
    "between": 4,
    "in": 4,
    "contains": 4,
    "startswith": 4,
    "endswith": 4,
    "neg": 5,
    "pos": 5,
    "not": 5,
}
_OPS = {*_LEVEL, "prop", "str", "int", "float", "bool", "null", "paren"}
_SYMBOL = {"gt": ">", "ge": ">=", "lt": "<", "le": "<=", "eq": "=", "ne": "<>"}


def quote(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def show(t: Tree, kw: Any = str.upper, sp: str = " ") -> str:
    """SQL text for a tree, with the fewest parentheses the grammar needs."""

    def sub(child: Tree, level: int) -> str:
        text = show(child, kw, sp)
        return f"({text})" if _LEVEL.get(child[0], 6) < level else text

    op = t[0]
    if op == "prop":
        return str(t[1])
    if op == "str":
        return quote(t[1])
    if op in ("int", "float"):
        return str(t[1]) if op == "int" else repr(t[1])
    if op == "bool":
        return kw("true" if t[1] else "false")
    if op == "null":
        return kw("null")
    if op == "paren":
        return "(" + show(t[1], kw, sp) + ")"
    if op == "pos":
        return "+" + sp + sub(t[1], 5)
    if op == "neg":  # never "--": that would start a comment
        return "-" + sp + sub(t[1], 5)
    if op == "not":
        return kw("not") + sp + sub(t[1], 5)
    if op in ("and", "or"):
        level = _LEVEL[op]
        return f"{sub(t[1], level)}{sp}{kw(op)}{sp}{sub(t[2], level + 1)}"
    if op in ("eq", "ne"):
        return f"{sub(t[1], 3)}{sp}{_SYMBOL[op]}{sp}{sub(t[2], 4)}"
    if op in ("gt", "ge", "lt", "le"):
        return f"{sub(t[1], 4)}{sp}{_SYMBOL[op]}{sp}{sub(t[2], 5)}"
    if op in ("isnull", "isnotnull"):
        return (
            f"{sub(t[1], 3)}{sp}{kw('is')}{sp}"
            + (kw("not") + sp if op == "isnotnull" else "")
            + kw("null")
        )
    not_ = kw("not") + sp if t[-1] else ""
    if op == "between":
        return f"{sub(t[1], 4)}{sp}{not_}{kw('between')}{sp}{sub(t[2], 5)}{sp}{kw('and')}{sp}{sub(t[3], 5)}"
    if op == "in":
        return f"{sub(t[1], 4)}{sp}{not_}{kw('in')}{sp}(" + ", ".join(quote(v) for v in t[2]) + ")"
    return f"{sub(t[1], 4)}{sp}{not_}{kw(op)}{sp}{quote(t[2])}"


# ---------------------------------------------------------------------------- checking


def _strip(t: Tree) -> Tree:
    while t[0] in ("paren", "pos"):
        t = t[1]
    return t


def _is_constant(t: Tree) -> bool:
    return _strip(t)[0] in ("str", "int", "float", "bool", "null")


def _is_boolean(t: Tree) -> bool:
    return _strip(t)[0] not in ("prop", "str", "int", "float", "neg")


def _literal_value(t: Tree) -> Value:
    t = _strip(t)
    op = t[0]
    if op == "str":
        return ("S", t[1])
    if op == "int":
        return ("I" if t[1] < 2**31 else "L", t[1])
    if op == "float":
        return ("D", t[1])
    if op == "bool":
        return ("B", t[1])
    return None


def check(t: Tree) -> None:
    """Raise RefInvalid where RocketMQ's parser rejects the tree."""
    _check_condition(t)
    _check(t)


def _check_condition(t: Tree) -> None:
    if not _is_boolean(t) and _strip(t)[0] != "prop":
        raise RefInvalid("not a condition")


def _check_relational(*sides: Tree) -> None:
    for side in sides:
        s = _strip(side)
        if _is_constant(s) and s[0] not in ("int", "float"):
            raise RefInvalid("non-numeric constant")
        if _is_boolean(s):
            raise RefInvalid("boolean operand")


def _check(t: Tree) -> None:
    op = t[0]
    if op == "int" and t[1] >= 2**63:
        raise RefInvalid("long overflow")
    if op == "float" and math.isinf(t[1]):
        raise RefInvalid("float overflow")
    for child in t[1:]:
        if isinstance(child, tuple) and child and child[0] in _OPS:
            _check(child)
    if op in ("and", "or"):
        _check_condition(t[1])
        _check_condition(t[2])
    elif op == "not":
        _check_condition(t[1])
    elif op in ("eq", "ne"):
        left, right = _strip(t[1]), _strip(t[2])
        if left[0] == "null" or right[0] == "null":
            raise RefInvalid("NULL compared")
        if _is_constant(left) and _is_constant(right) and left[0] == "bool" and right[0] != "bool":
            raise RefInvalid("boolean vs non-boolean constant")
    elif op in ("gt", "ge", "lt", "le"):
        _check_relational(t[1], t[2])
    elif op == "between":
        lo, hi = _strip(t[2]), _strip(t[3])
        if not t[4] and _is_constant(lo) and _is_constant(hi):
            lv, hv = _literal_value(lo), _literal_value(hi)
            if lv is None or hv is None:
                raise RefInvalid("null bound")
            try:
                if java_compare(hv, lv) < 0:
                    raise RefInvalid("bounds out of order")
            except RefThrow:
                raise RefInvalid("bounds not comparable") from None
        _check_relational(t[1], t[2], t[3])
    elif op == "in" and _strip(t[1])[0] != "prop":
        raise RefInvalid("IN without a property")


# ---------------------------------------------------------------------------- Java values


def _java_integral(s: str, bits: int) -> int:
    m = re.fullmatch(r"([+-]?)(\d+)", s)
    if m is None or any(ord(c) > 0xFFFF for c in s):
        raise RefThrow("NumberFormatException")
    value = int("".join(str(unicodedata.decimal(c)) for c in m.group(2)))
    if m.group(1) == "-":
        value = -value
    if not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
        raise RefThrow("NumberFormatException")
    return value


def _java_double(s: str) -> float:
    s = s.strip("".join(map(chr, range(33))))
    m = re.fullmatch(
        r"([+-]?)(NaN|Infinity|[0-9.eE+-]+[fFdD]?|0[xX][0-9a-fA-F.]+[pP][+-]?[0-9]+[fFdD]?)", s
    )
    if m is None:
        raise RefThrow("NumberFormatException")
    body = m.group(2).rstrip("fFdD") if not m.group(2).startswith("0x") else m.group(2)
    sign = -1.0 if m.group(1) == "-" else 1.0
    if body == "NaN":
        return math.nan
    if body == "Infinity":
        return sign * math.inf
    if body[:2] in ("0x", "0X"):
        body = body.rstrip("fFdD")
        if not re.fullmatch(
            r"0[xX]([0-9a-fA-F]+\.?|[0-9a-fA-F]*\.[0-9a-fA-F]+)[pP][+-]?[0-9]+", body
        ):
            raise RefThrow("NumberFormatException")
        try:
            return sign * float.fromhex(body)
        except OverflowError:
            return sign * math.inf
    if not re.fullmatch(r"([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?", body):
        raise RefThrow("NumberFormatException")
    return sign * float(body)


def _double_cmp(a: float, b: float) -> int:
    def key(x: float) -> tuple[int, float, float]:
        return (1, 0.0, 0.0) if math.isnan(x) else (0, x, math.copysign(1.0, x))

    ka, kb = key(a), key(b)
    return (ka > kb) - (ka < kb)


def _sign(a: Any, b: Any) -> int:
    return (a > b) - (a < b)


_WIDEN = {"I": 0, "L": 1, "D": 3}


def java_compare(left: Value, right: Value) -> int:
    """``ComparisonExpression.__compare`` with string conversion on."""
    assert left is not None
    assert right is not None
    lc, lv = left
    rc, rv = right
    if lc != rc:
        if lc == "B":
            if rc == "S":
                raise RefThrow("ClassCastException")
            return -1
        if lc == "S":
            if rc == "B":
                lc, lv = "B", lv.lower() == "true" and lv.isascii()
            elif rc == "D":
                lc, lv = "D", _java_double(lv)
            else:
                lc, lv = rc, _java_integral(lv, 32 if rc == "I" else 64)
        elif rc == "S":
            if lc == "D":
                rc, rv = "D", _java_double(rv)
            else:
                rc, rv = lc, _java_integral(rv, 32 if lc == "I" else 64)
        elif rc == "B":
            return -1
        elif _WIDEN[lc] < _WIDEN[rc]:
            lc, lv = rc, (float(lv) if rc == "D" else lv)
        else:
            rc, rv = lc, (float(rv) if lc == "D" else rv)
    if lc == "D":
        return _double_cmp(lv, rv)
    if lc == "S":
        ua, ub = lv.encode("utf-16-be", "surrogatepass"), rv.encode("utf-16-be", "surrogatepass")
        return _sign(ua, ub)
    return _sign(lv, rv)


# ---------------------------------------------------------------------------- evaluation


def evaluate(t: Tree, props: dict[str, str]) -> Value:
    """Evaluate a checked tree; raises RefThrow where Java throws."""
    op = t[0]
    if op in ("paren", "pos"):
        return evaluate(t[1], props)
    if op == "prop":
        v = props.get(t[1])
        return None if v is None else ("S", v)
    if op in ("str", "int", "float", "bool", "null"):
        return _literal_value(t)
    if op == "neg":
        v = evaluate(t[1], props)
        if v is None or v[0] not in _WIDEN:
            return None
        bits = {"I": 32, "L": 64}.get(v[0])
        if bits is None:
            return ("D", -v[1])
        return (v[0], ((-v[1] + 2 ** (bits - 1)) % 2**bits) - 2 ** (bits - 1))
    if op == "not":
        b = _condition(t[1], props)
        return None if b is None else ("B", not b[1])
    if op in ("and", "or"):
        return _logic(op, lambda: _condition(t[1], props), lambda: _condition(t[2], props))
    if op == "eq":
        return _equal(evaluate(t[1], props), evaluate(t[2], props))
    if op == "ne":
        e = _equal(evaluate(t[1], props), evaluate(t[2], props))
        return None if e is None else ("B", not e[1])
    if op in ("gt", "ge", "lt", "le"):
        return _relational(op, t[1], t[2], props)
    if op in ("isnull", "isnotnull"):
        is_null = evaluate(t[1], props) is None
        return ("B", is_null if op == "isnull" else not is_null)
    if op == "between":
        e, lo, hi, negated = t[1:]
        if negated:
            return _logic(
                "or",
                lambda: _relational("lt", e, lo, props),
                lambda: _relational("gt", e, hi, props),
            )
        return _logic(
            "and",
            lambda: _relational("ge", e, lo, props),
            lambda: _relational("le", e, hi, props),
        )
    if op == "in":
        v = evaluate(t[1], props)
        if v is None:
            return None
        return ("B", (v[1] in t[2]) != t[3])
    # contains / startswith / endswith
    search, negated = t[2], t[3]
    if search == "":
        return ("B", False)
    v = evaluate(t[1], props)
    if v is None or v[0] != "S":
        return ("B", False)
    s = v[1]
    hit = (
        search in s
        if op == "contains"
        else s.startswith(search)
        if op == "startswith"
        else s.endswith(search)
    )
    return ("B", hit != negated)


def _condition(t: Tree, props: dict[str, str]) -> Value:
    v = evaluate(t, props)
    if _strip(t)[0] == "prop":  # BooleanCast
        return None if v is None else ("B", False)
    return v


def _logic(op: str, left: Any, right: Any) -> Value:
    lv = left()
    if op == "or":
        if lv is not None and lv[1]:
            return ("B", True)
        rv = right()
        if rv is not None and rv[1]:
            return ("B", True)
        return None if lv is None or rv is None else ("B", False)
    if lv is not None and not lv[1]:
        return ("B", False)
    rv = right()
    if rv is not None and not rv[1]:
        return ("B", False)
    return None if lv is None or rv is None else ("B", True)


def _equal(lv: Value, rv: Value) -> Value:
    if (lv is None) != (rv is None):
        return None if lv is None else ("B", False)
    if lv is None or (lv == rv and lv[0] != "D"):
        return ("B", True)
    assert rv is not None
    return ("B", java_compare(lv, rv) == 0)


def _relational(op: str, left: Tree, right: Tree, props: dict[str, str]) -> Value:
    lv = evaluate(left, props)
    if lv is None:
        return None
    rv = evaluate(right, props)
    if rv is None:
        return None
    if lv[0] == "S" and rv[0] == "S":
        c = _double_cmp(_java_double(lv[1]), _java_double(rv[1]))
    else:
        c = java_compare(lv, rv)
    return ("B", {"gt": c > 0, "ge": c >= 0, "lt": c < 0, "le": c <= 0}[op])


def outcome(t: Tree, props: dict[str, str]) -> object:
    """True/False/None, "error" when Java throws, "invalid" when it does not compile."""
    try:
        check(t)
    except RefInvalid:
        return "invalid"
    try:
        v = _condition(t, props)
    except RefThrow:
        return "error"
    return None if v is None else v[1]
