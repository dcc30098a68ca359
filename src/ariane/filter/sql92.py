"""Compile a SQL92 filter once, evaluate it on every message (RocketMQ's ``SqlFilter``).

How it works: :func:`compile` bounds the text, parses it with RocketMQ's grammar and checks
(:mod:`ariane.filter.parser`), and turns the tree into closures
(:mod:`ariane.filter.evaluator`). The result, a :class:`CompiledFilter`, is immutable and
shared: compiling the same text again returns the cached object, as RocketMQ's
``SelectorParser`` caches its parses.

A message matches only if the filter evaluates to TRUE. FALSE, null (a property it needs is
missing) and an evaluation failure (a property that does not convert the way the comparison
needs) all mean "no match", as in the broker's ``ExpressionMessageFilter.isMatchedByCommitLog``.

Example::

    f = compile("(orderStatus IS NOT NULL AND orderStatus > 0) OR TAGS IN ('urgent')")
    f.matches({"orderStatus": "1"})        # True
    f.evaluate({"TAGS": "normal"})         # None: orderStatus is missing
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

from ariane.errors import FilterEvaluationError, FilterSyntaxError
from ariane.filter.evaluator import Evaluator, compile_node
from ariane.filter.javatypes import JavaValueError
from ariane.filter.nodes import (
    BooleanCast,
    Equal,
    InList,
    Logic,
    Negate,
    Node,
    Not,
    Property,
    Relational,
    StringTest,
)
from ariane.filter.parser import MAX_DEPTH, parse

__all__ = ["MAX_DEPTH", "MAX_EXPRESSION_LENGTH", "CompiledFilter", "compile"]

MAX_EXPRESSION_LENGTH = 64 * 1024
"""The longest expression accepted, in characters."""


class CompiledFilter:
    """A compiled SQL92 filter; immutable, cheap to evaluate, safe to share between threads.

    Attributes:
        expression: the text it was compiled from.
        property_names: the property names it reads.
        ignored_text: trailing text that RocketMQ's parser ignores (``''`` normally): the
            parser stops after the first complete expression, so ``a = 1 b`` is ``a = 1``.
    """

    __slots__ = ("_fn", "expression", "ignored_text", "property_names", "root")

    expression: str
    property_names: frozenset[str]
    ignored_text: str
    root: Node

    def __init__(self, expression: str, root: Node, ignored_from: int | None) -> None:
        self.expression = expression
        self.root = root
        self.ignored_text = "" if ignored_from is None else expression[ignored_from:]
        self.property_names = frozenset(_property_names(root))
        self._fn: Evaluator = compile_node(root)

    def evaluate(self, properties: Mapping[str, str]) -> bool | None:
        """Evaluate on one message's properties.

        Returns:
            True or False; None when the result is unknown (a needed property is missing) or
            the evaluation failed (see :meth:`evaluate_strict`).
        """
        try:
            result: bool | None = self._fn(properties)
        except (JavaValueError, RecursionError):
            return None
        return result

    def evaluate_strict(self, properties: Mapping[str, str]) -> bool | None:
        """Like :meth:`evaluate`, but a failure raises instead of returning None.

        Raises:
            FilterEvaluationError: RocketMQ's expression would throw on these properties
                (e.g. ``a > 1`` with ``a = 'abc'``); the broker logs it and skips the message.
        """
        try:
            result: bool | None = self._fn(properties)
        except JavaValueError as e:
            raise FilterEvaluationError(f"{self.expression[:200]!r}: {e}") from None
        except RecursionError:  # pragma: no cover - depth is bounded at compile time
            raise FilterEvaluationError(f"{self.expression[:200]!r}: too deep") from None
        return result

    def matches(self, properties: Mapping[str, str]) -> bool:
        """Whether the filter evaluates to TRUE (the only result that delivers a message)."""
        try:
            return self._fn(properties) is True
        except (JavaValueError, RecursionError):
            return False

    def __repr__(self) -> str:
        return f"CompiledFilter({self.expression!r})"


def _property_names(root: Node) -> list[str]:
    names: list[str] = []
    stack: list[Node] = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, Property):
            names.append(node.name)
        elif isinstance(node, Logic):
            stack.extend(node.operands)
        elif isinstance(node, Equal | Relational):
            stack.extend((node.left, node.right))
        elif isinstance(node, Negate | Not | BooleanCast | InList | StringTest):
            stack.append(node.operand)
    return names


def compile(expression: str) -> CompiledFilter:
    """Compile a SQL92 filter expression.

    Args:
        expression: the consumer's subscription expression, e.g. ``"a > 5 AND TAGS = 'x'"``.

    Returns:
        The compiled filter (cached: the same text gives the same object).

    Raises:
        FilterSyntaxError: the expression is empty, longer than
            :data:`MAX_EXPRESSION_LENGTH`, nested deeper than :data:`MAX_DEPTH`, or not valid
            RocketMQ SQL92; the message names the problem and its character position.
    """
    if not isinstance(expression, str):
        raise FilterSyntaxError(
            f"a filter expression must be a string, not {type(expression).__name__}", 0
        )
    return _compile_cached(expression)


@lru_cache(maxsize=256)
def _compile_cached(expression: str) -> CompiledFilter:
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise FilterSyntaxError(
            f"expression is {len(expression)} characters long, more than {MAX_EXPRESSION_LENGTH}",
            MAX_EXPRESSION_LENGTH,
        )
    try:
        result = parse(expression)
        return CompiledFilter(expression, result.root, result.ignored_from)
    except RecursionError:  # only if the caller's stack was already nearly exhausted
        raise FilterSyntaxError("expression too deeply nested", 0) from None
