"""Subscription expressions: TAG and SQL92 (RocketMQ's ``ExpressionType`` and ``FilterAPI``).

How it works: a TAG expression ``"TagA || TagB"`` is split on ``||``, each part trimmed
(Java ``String.trim``) and empty parts dropped; the broker matches the ConsumeQueue's tag hash
against the tags' Java hash codes and the client re-checks the tag string (hash collisions).
``"*"``, ``""`` and None subscribe to everything. A SQL92 expression is compiled once with
:func:`ariane.filter.sql92.compile` and evaluated on each message's properties.

:func:`build_subscription` gives the broker and the client one immutable value with both
forms, and the three matching stages RocketMQ applies:

* :meth:`Subscription.matches_tags_code` - broker, ConsumeQueue stage
  (``ExpressionMessageFilter.isMatchedByConsumeQueue`` without the bloom filter);
* :meth:`Subscription.matches_properties` - broker, CommitLog stage (``isMatchedByCommitLog``);
* :meth:`Subscription.matches_tag` - client re-filter by tag string
  (``PullAPIWrapper.processPullResult``).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from ariane.common.hashing import tags_code
from ariane.errors import InvalidArgumentError
from ariane.filter.javatypes import java_trim
from ariane.filter.sql92 import CompiledFilter, compile

__all__ = [
    "SUB_ALL",
    "ExpressionType",
    "Subscription",
    "build_subscription",
    "parse_tag_expression",
]

SUB_ALL = "*"
"""The TAG expression that subscribes to every message (``SubscriptionData.SUB_ALL``)."""


class ExpressionType(enum.StrEnum):
    """How a subscription expression is written (the wire values are these strings)."""

    TAG = "TAG"
    SQL92 = "SQL92"

    @classmethod
    def parse(cls, value: str | None) -> ExpressionType:
        """The type for a wire value; None and ``""`` mean TAG (``ExpressionType.isTagType``).

        Raises:
            InvalidArgumentError: any other value than "TAG" or "SQL92" (case-sensitive).
        """
        if not value:
            return cls.TAG
        try:
            return cls(value)
        except ValueError:
            raise InvalidArgumentError(f"unsupported expression type {value[:64]!r}") from None


def parse_tag_expression(expression: str | None) -> tuple[frozenset[str], frozenset[int]] | None:
    """Split a TAG expression into its tags and their Java hash codes.

    Returns:
        ``(tags, codes)``, or None when the expression subscribes to all (None, ``""``,
        ``"*"``). An expression of blanks only, such as ``" || "``, gives two empty sets
        (it matches no tagged message), as in RocketMQ.

    Raises:
        InvalidArgumentError: the expression is only ``||`` separators (``"||"``,
            ``"||||"``), which RocketMQ refuses ("subString split error").
    """
    if not expression or expression == SUB_ALL:
        return None
    parts = expression.split("||")
    while parts and not parts[-1]:
        parts.pop()  # Java's String.split drops trailing empty strings
    if not parts:
        raise InvalidArgumentError(
            f"tag expression {expression!r} has no tags (subString split error)"
        )
    tags = frozenset(t for t in map(java_trim, parts) if t)
    return tags, frozenset(tags_code(t) for t in tags)


def _int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


@dataclass(frozen=True, slots=True)
class Subscription:
    """One topic's subscription as the broker and the client both use it.

    Attributes:
        topic: the topic.
        sub_string: the expression (``"*"`` for subscribe-all TAG subscriptions).
        tags_set: TAG mode: the tags; empty for ``"*"`` and for SQL92.
        code_set: TAG mode: the tags' Java hash codes (what the ConsumeQueue stores).
        expression_type: TAG or SQL92.
        sql_filter: SQL92 mode: the compiled filter; None for TAG.
    """

    topic: str
    sub_string: str
    tags_set: frozenset[str]
    code_set: frozenset[int]
    expression_type: ExpressionType
    sql_filter: CompiledFilter | None

    @property
    def subscribes_all(self) -> bool:
        """TAG mode with ``"*"``: every message matches."""
        return self.expression_type is ExpressionType.TAG and self.sub_string == SUB_ALL

    def matches_tags_code(self, tags_code: int | None) -> bool:
        """Broker ConsumeQueue stage: may this entry match? (SQL92 can't tell here: True.)

        Args:
            tags_code: the entry's tags code; None when unknown (matches).
        """
        if self.expression_type is not ExpressionType.TAG or tags_code is None:
            return True
        return self.sub_string == SUB_ALL or _int32(tags_code) in self.code_set

    def matches_properties(self, properties: Mapping[str, str]) -> bool:
        """Broker CommitLog stage: SQL92 evaluates to TRUE on the properties (TAG: True)."""
        f = self.sql_filter
        return True if f is None else f.matches(properties)

    def matches_tag(self, tag: str | None) -> bool:
        """Client stage: an exact tag check that removes hash collisions (TAG mode)."""
        if not self.tags_set:
            return True
        return tag is not None and tag in self.tags_set


def build_subscription(
    topic: str,
    expression: str | None,
    expression_type: ExpressionType | str | None = ExpressionType.TAG,
) -> Subscription:
    """Build a subscription as RocketMQ's ``FilterAPI.build`` does, compiling SQL92 too.

    Args:
        topic: the topic subscribed to.
        expression: the TAG or SQL92 expression (None or ``""`` means ``"*"`` for TAG).
        expression_type: ``ExpressionType`` or its wire string; None or ``""`` mean TAG.

    Raises:
        InvalidArgumentError: unknown type, a TAG expression without tags, an empty SQL92
            expression.
        FilterSyntaxError: a SQL92 expression that does not compile (a subclass of
            InvalidArgumentError).
    """
    kind = ExpressionType.parse(expression_type)
    if kind is ExpressionType.SQL92:
        if not expression:
            raise InvalidArgumentError("a SQL92 subscription needs an expression")
        sql = compile(expression)
        return Subscription(topic, expression, frozenset(), frozenset(), kind, sql)
    parsed = parse_tag_expression(expression)
    if parsed is None or expression is None:
        return Subscription(topic, SUB_ALL, frozenset(), frozenset(), kind, None)
    tags, codes = parsed
    return Subscription(topic, expression, tags, codes, kind, None)
