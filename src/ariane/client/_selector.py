"""Queue selectors for ordered sends (RocketMQ ``MessageQueueSelector``,
``SelectMessageQueueByHash``, ``SelectMessageQueueByRandom``).

A selector picks the queue of one send from the topic's writable queues; all messages that
pick the same queue are stored, and consumed by an orderly consumer, in send order. A send
with a selector is never retried on another queue (that would break the order), as in
RocketMQ. ``SelectMessageQueueByHash`` hashes strings with Java's ``String.hashCode`` so a
Python and a Java producer put the same sharding key on the same queue.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Protocol, TypeAlias

from ariane.common.hashing import consistent_hash, java_string_hash
from ariane.common.message import Message
from ariane.common.properties import SHARDING_KEY
from ariane.errors import InvalidArgumentError
from ariane.remoting.protocol.client_bodies import MessageQueue

__all__ = [
    "MessageQueueSelector",
    "SelectMessageQueueByGroup",
    "SelectMessageQueueByHash",
    "SelectMessageQueueByRandom",
    "SelectorLike",
    "SendTarget",
    "java_hash_code",
]


class MessageQueueSelector(Protocol):
    """Chooses the queue of an ordered send."""

    def select(self, mqs: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
        """Return one of ``mqs`` for ``msg``; ``arg`` is what the caller passed to ``send``."""
        ...


#: A selector object, or a plain function with the same signature.
SelectorLike: TypeAlias = (
    MessageQueueSelector | Callable[[Sequence[MessageQueue], Message, Any], MessageQueue]
)

_I32 = 2**32


def java_hash_code(value: Any) -> int:
    """Java's ``hashCode`` for the argument types an order key usually has.

    ``str`` uses ``String.hashCode``, ``int`` ``Integer``/``Long.hashCode``, ``bool``
    ``Boolean.hashCode``, ``bytes`` ``Arrays.hashCode``; anything else its ``str()``'s.
    """
    if isinstance(value, bool):
        return 1231 if value else 1237
    if isinstance(value, int):
        if -(2**31) <= value < 2**31:
            return value
        bits = value & 0xFFFFFFFFFFFFFFFF  # two's complement, so >> is Java's >>>
        folded = (bits ^ (bits >> 32)) & 0xFFFFFFFF  # Long.hashCode
        return folded - _I32 if folded >= 2**31 else folded
    if isinstance(value, bytes):
        h = 1
        for b in value:
            h = (31 * h + (b - 256 if b > 127 else b)) & 0xFFFFFFFF
        return h - _I32 if h >= 2**31 else h
    return java_string_hash(value if isinstance(value, str) else str(value))


class SelectMessageQueueByHash:
    """``abs(arg.hashCode() % len(mqs))``, exactly as Java's ``SelectMessageQueueByHash``."""

    def select(self, mqs: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
        """Pick by the Java hash of ``arg``."""
        code = java_hash_code(arg)
        # Java's % truncates toward zero; then a negative remainder is made positive
        value = abs(code) % len(mqs)
        return mqs[value]


class SelectMessageQueueByGroup:
    """RocketMQ 5's queue of a message group: Guava's consistent hash of the group's Java
    hash over the queues (what the gRPC proxy picks, so both protocols agree)."""

    def select(self, mqs: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
        """Pick by the message group ``arg``."""
        return mqs[consistent_hash(java_string_hash(str(arg)), len(mqs))]


class SelectMessageQueueByRandom:
    """A uniformly random queue."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()

    def select(self, mqs: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
        """Pick at random."""
        return mqs[self._rng.randrange(len(mqs))]


def apply_selector(
    selector: SelectorLike, mqs: Sequence[MessageQueue], msg: Message, arg: Any
) -> MessageQueue:
    """Call a selector object or function."""
    select = getattr(selector, "select", None)
    if select is not None:
        result = select(mqs, msg, arg)
    else:
        assert callable(selector)
        result = selector(mqs, msg, arg)
    if not isinstance(result, MessageQueue):
        raise TypeError(f"the queue selector returned {type(result).__name__}, not a MessageQueue")
    return result


class SendTarget(NamedTuple):
    """Where an ordered or pinned send goes: a queue, or a selector and its argument."""

    queue: MessageQueue | None
    selector: SelectorLike | None
    arg: Any

    @classmethod
    def for_message(
        cls,
        msg: Message,
        queue: MessageQueue | None,
        selector: SelectorLike | None,
        arg: Any,
        sharding_key: str | None,
    ) -> SendTarget | None:
        """``of``, and a RocketMQ 5 message group's queue when nothing else is given."""
        target = cls.of(queue, selector, arg, sharding_key)
        if target is None:
            group = msg.properties.get(SHARDING_KEY)
            if group:
                return cls(None, _BY_GROUP, group)
        return target

    @classmethod
    def of(
        cls,
        queue: MessageQueue | None,
        selector: SelectorLike | None,
        arg: Any,
        sharding_key: str | None,
    ) -> SendTarget | None:
        """``None`` for a normal send (round robin with retries).

        Raises:
            InvalidArgumentError: more than one of ``queue``, ``selector``, ``sharding_key``.
        """
        if queue is None and selector is None and sharding_key is None:
            return None  # the common case first: this runs for every send
        if (queue is not None) + (selector is not None) + (sharding_key is not None) > 1:
            raise InvalidArgumentError("give at most one of queue, selector and sharding_key")
        if sharding_key is not None:
            return cls(queue, SelectMessageQueueByHash(), sharding_key)
        return cls(queue, selector, arg)


_BY_GROUP = SelectMessageQueueByGroup()
