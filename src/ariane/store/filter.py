"""Message filters for ``get_message`` (RocketMQ ``MessageFilter``/``ExpressionMessageFilter``).

The store first asks the filter about the ConsumeQueue tag hash; only if that matches and the
filter wants it, about the full record. The broker supplies SQL92 filters later through the
same protocol.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from ariane.common.hashing import tags_code

__all__ = ["MessageFilter", "TagFilter"]


class MessageFilter(Protocol):
    """What ``MessageStore.get_message`` asks of a filter."""

    def is_matched_by_consume_queue(self, tags_code: int) -> bool:
        """True when a message with this ConsumeQueue ``tagsCode`` may match."""
        ...

    def is_matched_by_commit_log(self, record: bytes) -> bool:
        """True when the stored record (exact bytes) matches."""
        ...


class TagFilter:
    """Subscription by tags (``TAG`` expression type): ``"*"`` or ``"a || b"``.

    Like RocketMQ's broker it compares tag *hash codes* only; clients re-check the tag
    strings, so a hash collision only costs a transfer.

    Args:
        tags: the tag strings; empty or containing ``"*"`` means all.
    """

    __slots__ = ("_all", "_codes")

    def __init__(self, tags: Iterable[str]) -> None:
        tag_list = [t.strip() for t in tags if t.strip()]
        self._all = not tag_list or "*" in tag_list
        self._codes = frozenset(tags_code(t) for t in tag_list)

    @classmethod
    def from_expression(cls, expression: str | None) -> TagFilter:
        """Build from a subscription expression such as ``"TagA || TagB"`` (``None``/``*`` = all)."""
        if not expression or expression.strip() == "*":
            return cls([])
        return cls(expression.split("||"))

    @property
    def accepts_all(self) -> bool:
        """True when every message matches (``*``): the store may skip the per-message
        checks (``StoreReads`` reads a contiguous run of records in one copy)."""
        return self._all

    def is_matched_by_consume_queue(self, tags_code: int) -> bool:
        return self._all or tags_code in self._codes

    def is_matched_by_commit_log(self, record: bytes) -> bool:
        return True
