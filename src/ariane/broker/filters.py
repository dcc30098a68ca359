"""Message filters of pulls and held pulls (RocketMQ ``ExpressionMessageFilter`` and
``ExpressionForRetryMessageFilter``, with ``ConsumerFilterManager``'s compile step).

How it works: a subscription (TAG or SQL92 expression) is compiled once by
:func:`ariane.filter.expression.build_subscription` and cached by (type, expression). The store
asks the filter twice per candidate message (:class:`ariane.store.MessageFilter`):

* ``is_matched_by_consume_queue(tagsCode)``: TAG compares the ConsumeQueue's tag hash with the
  subscribed tags' hash codes; SQL92 cannot tell from the hash and lets everything through
  (Ariane keeps no bloom-filter bitmap).
* ``is_matched_by_commit_log(record)``: TAG checks the exact ``TAGS`` string (so a hash
  collision is not delivered; clients re-check anyway); SQL92 evaluates the compiled
  expression on the record's properties: only TRUE delivers.

Held pulls are also asked ``is_matched_by_properties`` when the store reports an arrival with
its properties, so a SQL92 long poll is not woken by messages it would not receive.

With ``filterSupportRetry`` the messages of ``%RETRY%<group>`` are in addition checked
against the group's subscription to their original topic (the ``RETRY_TOPIC`` property).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from ariane.common.properties import RETRY_TOPIC, TAGS
from ariane.common.record import record_properties, record_property
from ariane.errors import CorruptionError, InvalidArgumentError
from ariane.filter.expression import ExpressionType, Subscription, build_subscription

__all__ = [
    "FilterFactory",
    "PullFilter",
    "RetryPullFilter",
    "SqlPullFilter",
    "TagPullFilter",
    "expression_kind",
]

_MAX_CACHED = 4096


class PullFilter(Protocol):
    """What the store and the pull hold service ask of a filter."""

    @property
    def is_sql(self) -> bool:
        """True for SQL92 filters (they need ``enablePropertyFilter``)."""
        ...

    def is_matched_by_consume_queue(self, tags_code: int) -> bool:
        """True when a message with this ConsumeQueue ``tagsCode`` may match."""
        ...

    def is_matched_by_commit_log(self, record: bytes) -> bool:
        """True when the stored record (one whole record) matches."""
        ...

    def is_matched_by_properties(self, properties: Mapping[str, str]) -> bool:
        """True when a message with these properties matches."""
        ...


class TagPullFilter:
    """TAG subscription: tag hash in the ConsumeQueue, then the exact tag string."""

    __slots__ = ("_all", "_codes", "_tags", "subscription")

    is_sql = False

    def __init__(self, subscription: Subscription) -> None:
        self.subscription = subscription
        self._all = subscription.subscribes_all
        self._tags = subscription.tags_set
        self._codes = subscription.code_set

    @property
    def accepts_all(self) -> bool:
        """True for ``*``: every message matches (the store's contiguous-read fast path)."""
        return self._all

    def is_matched_by_consume_queue(self, tags_code: int) -> bool:
        return self._all or self.subscription.matches_tags_code(tags_code)

    def is_matched_by_commit_log(self, record: bytes) -> bool:
        if self._all:
            return True
        try:
            return record_property(record, TAGS) in self._tags
        except CorruptionError:
            return True  # let the client decide; the store validated the record at put

    def is_matched_by_properties(self, properties: Mapping[str, str]) -> bool:
        return self._all or properties.get(TAGS) in self._tags


class SqlPullFilter:
    """SQL92 subscription: evaluated on the properties of each candidate message."""

    __slots__ = ("subscription",)

    is_sql = True

    def __init__(self, subscription: Subscription) -> None:
        self.subscription = subscription

    def is_matched_by_consume_queue(self, tags_code: int) -> bool:
        return True

    def is_matched_by_commit_log(self, record: bytes) -> bool:
        try:
            props = record_properties(record)
        except CorruptionError:
            return False
        return self.subscription.matches_properties(props)

    def is_matched_by_properties(self, properties: Mapping[str, str]) -> bool:
        return self.subscription.matches_properties(properties)


#: ``lookup(original_topic)``: the group's subscription to its original topic, if any.
OriginalSubscription = Callable[[str], "PullFilter | None"]


class RetryPullFilter:
    """``%RETRY%<group>`` with ``filterSupportRetry``: the retry subscription's own filter,
    then the group's filter of the message's original topic (``RETRY_TOPIC``)."""

    __slots__ = ("_lookup", "inner")

    def __init__(self, inner: PullFilter, lookup: OriginalSubscription) -> None:
        self.inner = inner
        self._lookup = lookup

    @property
    def is_sql(self) -> bool:
        return self.inner.is_sql

    def is_matched_by_consume_queue(self, tags_code: int) -> bool:
        return self.inner.is_matched_by_consume_queue(tags_code)

    def is_matched_by_commit_log(self, record: bytes) -> bool:
        if not self.inner.is_matched_by_commit_log(record):
            return False
        try:
            props = record_properties(record)
        except CorruptionError:
            return True
        return self._original_matches(props)

    def is_matched_by_properties(self, properties: Mapping[str, str]) -> bool:
        return self.inner.is_matched_by_properties(properties) and self._original_matches(
            properties
        )

    def _original_matches(self, props: Mapping[str, str]) -> bool:
        origin = props.get(RETRY_TOPIC)
        original = self._lookup(origin) if origin else None
        return original is None or original.is_matched_by_properties(props)


def expression_kind(expression_type: str | None) -> ExpressionType:
    """The type of a wire value: empty or ``TAG`` (any case) is TAG, ``SQL92`` SQL92.

    Raises:
        InvalidArgumentError: any other type.
    """
    if not expression_type:
        return ExpressionType.TAG
    return ExpressionType.parse(expression_type.upper())


class FilterFactory:
    """Compiles subscriptions into pull filters and caches them by (type, expression).

    Args:
        max_cached: entries kept before the cache is cleared.
    """

    def __init__(self, max_cached: int = _MAX_CACHED) -> None:
        self.max_cached = max_cached
        self._cache: dict[tuple[str | None, str | None], PullFilter] = {}

    def build(self, expression: str | None, expression_type: str | None) -> PullFilter:
        """The filter of one subscription expression (cached by the values as given).

        Raises:
            InvalidArgumentError: unknown type, a TAG expression of separators only, an empty
                SQL92 expression; ``FilterSyntaxError`` (a subclass) for invalid SQL92.
        """
        key = (expression_type, expression)
        flt = self._cache.get(key)
        if flt is not None:
            return flt
        kind = expression_kind(expression_type)
        sub = build_subscription("", expression, kind)
        flt = SqlPullFilter(sub) if kind is ExpressionType.SQL92 else TagPullFilter(sub)
        if len(self._cache) >= self.max_cached:
            self._cache.clear()
        self._cache[key] = flt
        return flt

    def try_build(self, expression: str | None, expression_type: str | None) -> PullFilter | None:
        """Like :meth:`build`, None instead of an error."""
        try:
            return self.build(expression, expression_type)
        except InvalidArgumentError:
            return None
