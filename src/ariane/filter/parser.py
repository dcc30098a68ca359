"""Recursive-descent parser for RocketMQ's SQL92 filters (``SelectorParser.jj``).

How it works: one method per grammar rule, in RocketMQ's precedence order (lowest first)::

    selector    := or
    or          := and ( OR and )*
    and         := equality ( AND equality )*
    equality    := comparison ( '=' comparison | '<>' comparison | IS NULL | IS NOT NULL )*
    comparison  := unary ( ('>' | '>=' | '<' | '<=') unary
                         | [NOT] (CONTAINS | STARTSWITH | ENDSWITH) string
                         | [NOT] BETWEEN unary AND unary
                         | [NOT] IN '(' string ( ',' string )* ')' )*
    unary       := '+' unary | '-' unary | NOT unary | primary
    primary     := literal | identifier | '(' or ')'

Consequences worth knowing (all as in RocketMQ): NOT binds tighter than comparisons, so
``NOT a > 1`` is rejected and ``NOT (a > 1)`` is what one means; comparisons chain to the left
(``a = b = c``); and the parser stops after the first complete expression: ``a = 1 b``
compiles to ``a = 1`` (the rest is reported as ignored text), while ``a = 1 AND`` is an error.

While building nodes the parser applies RocketMQ's compile-time checks: ``>``-style operators
take only numbers, properties and negations; ``=`` cannot take the NULL literal; TRUE/FALSE
cannot be compared with a string or number literal; BETWEEN literal bounds must be ordered;
IN needs a property; AND/OR/NOT operands and the whole filter must be conditions. Every error
is a :class:`~ariane.errors.FilterSyntaxError` with the offending character position.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from ariane.errors import FilterSyntaxError
from ariane.filter.javatypes import INT_MAX, LONG_MAX, JavaValueError
from ariane.filter.lexer import Lexer, Token, TokenKind
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
    is_boolean_expression,
)

__all__ = ["MAX_DEPTH", "ParseResult", "parse"]

MAX_DEPTH = 64
"""The deepest nesting accepted: parentheses, prefix operators and tree depth alike."""

_RELATIONAL = {
    TokenKind.GT: ">",
    TokenKind.GE: ">=",
    TokenKind.LT: "<",
    TokenKind.LE: "<=",
}
_STRING_TESTS = {
    TokenKind.CONTAINS: "CONTAINS",
    TokenKind.STARTSWITH: "STARTSWITH",
    TokenKind.ENDSWITH: "ENDSWITH",
}
_AFTER_NOT = (*_STRING_TESTS, TokenKind.BETWEEN, TokenKind.IN)


@dataclass(frozen=True, slots=True)
class ParseResult:
    """A parsed filter.

    Attributes:
        root: the condition (a boolean node).
        ignored_from: where the text RocketMQ's parser ignores starts (None: nothing ignored).
    """

    root: Node
    ignored_from: int | None


def parse(text: str) -> ParseResult:
    """Parse a SQL92 filter expression into a checked tree.

    Raises:
        FilterSyntaxError: the text is not a valid filter.
    """
    return _Parser(text).selector()


def _describe(tok: Token) -> str:
    if tok.kind is TokenKind.EOF:
        return "the end of the expression"
    text = tok.text if len(tok.text) <= 40 else tok.text[:37] + "..."
    if tok.kind in (TokenKind.ID, TokenKind.STRING, TokenKind.DECIMAL, TokenKind.FLOAT):
        return f"{tok.kind.value} {text!r}"
    return repr(text)


def _not_hint(node: Node) -> str:
    if isinstance(node, Not):
        return " (NOT applies to the operand right after it; write NOT (x > 1), not NOT x > 1)"
    return ""


def _show(node: Node) -> str:
    if isinstance(node, Constant):
        if node.kind is Kind.NULL:
            return "NULL"
        if node.kind is Kind.BOOL:
            return "TRUE" if node.value else "FALSE"
        return repr(node.value)
    if isinstance(node, Property):
        return f"property {node.name}"
    return "a condition" if is_boolean_expression(node) else "an expression"


class _Parser:
    __slots__ = ("_buf", "_lexer", "_nesting")

    def __init__(self, text: str) -> None:
        self._lexer = Lexer(text)
        self._buf: list[Token] = []
        self._nesting = 0

    # -- tokens --------------------------------------------------------------------------

    def _peek(self, k: int = 0) -> Token:
        buf = self._buf
        while len(buf) <= k:
            buf.append(self._lexer.next_token())
        return buf[k]

    def _next(self) -> Token:
        tok = self._peek()
        del self._buf[0]
        return tok

    def _expect(self, kind: TokenKind, context: str) -> Token:
        tok = self._next()
        if tok.kind is not kind:
            raise FilterSyntaxError(
                f"expected {kind.value} {context}, found {_describe(tok)}", tok.pos
            )
        return tok

    def _enter(self, tok: Token) -> None:
        self._nesting += 1
        if self._nesting > MAX_DEPTH:
            raise FilterSyntaxError(f"expression nested deeper than {MAX_DEPTH} levels", tok.pos)

    @staticmethod
    def _depth(pos: int, *children: Node) -> int:
        depth = 1 + max(c.depth for c in children)
        if depth > MAX_DEPTH:
            raise FilterSyntaxError(f"expression nested deeper than {MAX_DEPTH} levels", pos)
        return depth

    # -- grammar -------------------------------------------------------------------------

    def selector(self) -> ParseResult:
        root = self._as_condition(self._or(), "the filter")
        tail = self._peek()  # RocketMQ's parser has looked at this token too
        return ParseResult(root, None if tail.kind is TokenKind.EOF else tail.pos)

    def _or(self) -> Node:
        return self._chain(TokenKind.OR, self._and)

    def _and(self) -> Node:
        return self._chain(TokenKind.AND, self._equality)

    def _chain(self, op: TokenKind, operand: Callable[[], Node]) -> Node:
        """``operand (op operand)*`` as one n-ary Logic node (nested same-op nodes inlined)."""
        first = operand()
        if self._peek().kind is not op:
            return first
        word = op.value
        operands: list[Node] = []
        left: Node | None = first
        while self._peek().kind is op:
            tok = self._next()
            right = operand()
            for side in (left, right):
                if side is None:
                    continue
                side = self._as_condition(side, word)
                if isinstance(side, Logic) and side.op == word:
                    operands.extend(side.operands)
                else:
                    operands.append(side)
            left = None
        return Logic(first.pos, word, tuple(operands), self._depth(tok.pos, *operands))

    def _equality(self) -> Node:
        left = self._comparison()
        while True:
            tok = self._peek()
            if tok.kind is TokenKind.EQ:
                self._next()
                left = self._equal(left, self._comparison(), tok)
            elif tok.kind is TokenKind.NE:
                self._next()
                eq = self._equal(left, self._comparison(), tok)
                left = Not(eq.pos, eq, self._depth(tok.pos, eq))
            elif tok.kind is TokenKind.IS:
                self._next()
                negated = self._peek().kind is not TokenKind.NULL
                if negated:
                    self._expect(TokenKind.NOT, "after IS (IS NULL or IS NOT NULL)")
                self._expect(TokenKind.NULL, "after IS NOT" if negated else "after IS")
                null = Constant(tok.pos, None, Kind.NULL)
                left = Equal(left.pos, left, null, self._depth(tok.pos, left))
                if negated:
                    left = Not(left.pos, left, self._depth(tok.pos, left))
            else:
                return left

    def _comparison(self) -> Node:
        left = self._unary()
        while True:
            tok = self._peek()
            kind = tok.kind
            negated = False
            if kind is TokenKind.NOT:
                kind = self._peek(1).kind
                if kind not in _AFTER_NOT:
                    raise FilterSyntaxError(
                        "NOT after an operand must be followed by CONTAINS, STARTSWITH, "
                        f"ENDSWITH, BETWEEN or IN, found {_describe(self._peek(1))}",
                        tok.pos,
                    )
                self._next()
                negated = True
            if kind in _RELATIONAL:
                self._next()
                left = self._relational(_RELATIONAL[kind], left, self._unary(), tok.pos)
            elif kind in _STRING_TESTS:
                self._next()
                search = self._string_literal(f"after {kind.value}")
                depth = self._depth(tok.pos, left)
                left = StringTest(left.pos, _STRING_TESTS[kind], left, search, negated, depth)
            elif kind is TokenKind.BETWEEN:
                self._next()
                low = self._unary()
                self._expect(TokenKind.AND, "between the bounds of BETWEEN")
                high = self._unary()
                left = self._between(left, low, high, negated, tok.pos)
            elif kind is TokenKind.IN:
                self._next()
                left = self._in(left, negated, tok)
            else:
                return left

    def _unary(self) -> Node:
        tok = self._peek()
        kind = tok.kind
        if kind not in (TokenKind.PLUS, TokenKind.MINUS, TokenKind.NOT):
            return self._primary()
        self._next()
        self._enter(tok)
        operand = self._unary()
        self._nesting -= 1
        if kind is TokenKind.PLUS:
            return operand
        if kind is TokenKind.MINUS:
            return Negate(tok.pos, operand, self._depth(tok.pos, operand))
        operand = self._as_condition(operand, "NOT")
        return Not(tok.pos, operand, self._depth(tok.pos, operand))

    def _primary(self) -> Node:
        tok = self._next()
        kind = tok.kind
        if kind is TokenKind.ID:
            return Property(tok.pos, tok.text)
        if kind is TokenKind.STRING:
            return Constant(tok.pos, _decode_string(tok.text), Kind.STR)
        if kind is TokenKind.DECIMAL:
            return _decimal(tok)
        if kind is TokenKind.FLOAT:
            return _float(tok)
        if kind is TokenKind.TRUE or kind is TokenKind.FALSE:
            return Constant(tok.pos, kind is TokenKind.TRUE, Kind.BOOL)
        if kind is TokenKind.NULL:
            return Constant(tok.pos, None, Kind.NULL)
        if kind is TokenKind.LPAREN:
            self._enter(tok)
            inner = self._or()
            self._expect(TokenKind.RPAREN, f"to close the '(' at position {tok.pos}")
            self._nesting -= 1
            return inner
        raise FilterSyntaxError(f"expected an operand, found {_describe(tok)}", tok.pos)

    def _string_literal(self, context: str) -> str:
        return _decode_string(self._expect(TokenKind.STRING, context).text)

    # -- node construction with RocketMQ's checks ----------------------------------------

    def _as_condition(self, node: Node, where: str) -> Node:
        if is_boolean_expression(node):
            return node
        if isinstance(node, Property):
            return BooleanCast(node.pos, node, 2)
        raise FilterSyntaxError(f"{where} needs a condition, not {_show(node)}", node.pos)

    def _equal(self, left: Node, right: Node, tok: Token) -> Equal:
        for side in (left, right):
            if isinstance(side, Constant) and side.kind is Kind.NULL:
                raise FilterSyntaxError(
                    "NULL cannot be compared with '=' or '<>' (use IS NULL / IS NOT NULL)",
                    side.pos,
                )
        if (
            isinstance(left, Constant)
            and isinstance(right, Constant)
            and left.kind is Kind.BOOL
            and right.kind is not Kind.BOOL
        ):
            raise FilterSyntaxError(
                f"{_show(left)} cannot be compared with {_show(right)}", tok.pos
            )
        return Equal(left.pos, left, right, self._depth(tok.pos, left, right))

    def _relational(self, op: str, left: Node, right: Node, pos: int) -> Relational:
        for side in (left, right):
            if (isinstance(side, Constant) and not side.kind.numeric) or is_boolean_expression(
                side
            ):
                raise FilterSyntaxError(
                    f"{_show(side)} cannot be an operand of '{op}' (numbers and properties only)"
                    + _not_hint(side),
                    side.pos,
                )
        return Relational(left.pos, op, left, right, self._depth(pos, left, right))

    def _between(self, value: Node, low: Node, high: Node, negated: bool, pos: int) -> Logic:
        if negated:
            parts = (
                self._relational("<", value, low, pos),
                self._relational(">", value, high, pos),
            )
            return Logic(value.pos, "OR", parts, self._depth(pos, *parts))
        if isinstance(low, Constant) and isinstance(high, Constant):
            if low.kind is Kind.NULL or high.kind is Kind.NULL:
                raise FilterSyntaxError("the bounds of BETWEEN cannot be NULL", pos)
            try:
                order = comparator(high.kind, low.kind)(high.value, low.value)
            except JavaValueError as e:
                raise FilterSyntaxError(
                    f"the bounds of BETWEEN cannot be compared: {e}", pos
                ) from None
            if order < 0:
                raise FilterSyntaxError(
                    f"the lower bound of BETWEEN ({_show(low)}) is above the upper ({_show(high)})",
                    pos,
                )
        parts = (
            self._relational(">=", value, low, pos),
            self._relational("<=", value, high, pos),
        )
        return Logic(value.pos, "AND", parts, self._depth(pos, *parts))

    def _in(self, operand: Node, negated: bool, tok: Token) -> InList:
        if not isinstance(operand, Property):
            raise FilterSyntaxError(
                f"IN needs a property on its left, not {_show(operand)}{_not_hint(operand)}",
                operand.pos,
            )
        self._expect(TokenKind.LPAREN, "after IN")
        values = [self._string_literal("in the IN list (only string literals)")]
        while self._peek().kind is TokenKind.COMMA:
            self._next()
            values.append(self._string_literal("after ',' in the IN list"))
        self._expect(TokenKind.RPAREN, "to close the IN list")
        return InList(operand.pos, operand, tuple(values), negated)


def _decode_string(text: str) -> str:
    return text[1:-1].replace("''", "'")


def _decimal(tok: Token) -> Constant:
    digits = tok.text.rstrip("lL")
    if len(digits) > 19 or int(digits) > LONG_MAX:
        raise FilterSyntaxError(
            f"integer literal {tok.text[:40]!r} is out of the long range", tok.pos
        )
    value = int(digits)
    return Constant(tok.pos, value, Kind.INT if value <= INT_MAX else Kind.LONG)


def _float(tok: Token) -> Constant:
    value = float(tok.text)
    if math.isinf(value):
        raise FilterSyntaxError(f"floating-point literal {tok.text[:40]!r} is too large", tok.pos)
    # RocketMQ also rejects literals below Double.MIN_VALUE, i.e. 0.0 and literals that round
    # to it; Ariane accepts them (docs/filters.md, "Differences").
    return Constant(tok.pos, value, Kind.DOUBLE)
