"""Public consumer types: listener statuses and contexts, selectors, models (RocketMQ
``ConsumeConcurrentlyStatus``, ``ConsumeOrderlyStatus``, ``ConsumeConcurrentlyContext``,
``ConsumeOrderlyContext``, ``MessageSelector``, ``MessageModel``, ``ConsumeFromWhere``).
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ariane.common.message import MessageExt
from ariane.errors import InvalidArgumentError
from ariane.remoting.protocol.client_bodies import (
    EXPRESSION_TYPE_SQL92,
    EXPRESSION_TYPE_TAG,
    ConsumeFromWhere,
    MessageModel,
    MessageQueue,
)

__all__ = [
    "ConcurrentListener",
    "ConsumeConcurrentlyContext",
    "ConsumeConcurrentlyStatus",
    "ConsumeFromWhere",
    "ConsumeOrderlyContext",
    "ConsumeOrderlyStatus",
    "MessageModel",
    "MessageSelector",
    "OrderlyListener",
]


class ConsumeConcurrentlyStatus(enum.Enum):
    """What a concurrent listener returns; ``None`` or an exception counts as
    ``RECONSUME_LATER``."""

    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


class ConsumeOrderlyStatus(enum.Enum):
    """What an orderly listener returns; ``None`` or an exception counts as
    ``SUSPEND_CURRENT_QUEUE_A_MOMENT``. ``COMMIT``/``ROLLBACK`` are the deprecated binlog
    statuses (they matter only with ``auto_commit = False``)."""

    SUCCESS = "SUCCESS"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"
    COMMIT = "COMMIT"
    ROLLBACK = "ROLLBACK"


@dataclass(slots=True)
class ConsumeConcurrentlyContext:
    """Passed to concurrent listeners.

    Attributes:
        message_queue: the queue the messages came from.
        delay_level_when_next_consume: delay level of the retry (0: the broker picks
            ``3 + reconsumeTimes``; -1: straight to the dead-letter queue).
        ack_index: with ``CONSUME_SUCCESS``, messages after this index count as failed
            (default: all succeeded).
    """

    message_queue: MessageQueue
    delay_level_when_next_consume: int = 0
    ack_index: int = 2**31 - 1


@dataclass(slots=True)
class ConsumeOrderlyContext:
    """Passed to orderly listeners.

    Attributes:
        message_queue: the queue the messages came from.
        auto_commit: commit the offset after ``SUCCESS`` (as Java's default).
        suspend_current_queue_time_ms: pause after ``SUSPEND_CURRENT_QUEUE_A_MOMENT``
            (-1: the consumer's ``suspend_current_queue_time_ms``).
    """

    message_queue: MessageQueue
    auto_commit: bool = True
    suspend_current_queue_time_ms: int = -1


#: ``listener(msgs, context)``: a plain function (run in a worker thread) or a coroutine
#: function (awaited on the consumer's loop).
ConcurrentListener = Callable[
    [list[MessageExt], ConsumeConcurrentlyContext],
    ConsumeConcurrentlyStatus | Awaitable[ConsumeConcurrentlyStatus | None] | None,
]
OrderlyListener = Callable[
    [list[MessageExt], ConsumeOrderlyContext],
    ConsumeOrderlyStatus | Awaitable[ConsumeOrderlyStatus | None] | None,
]


@dataclass(frozen=True, slots=True)
class MessageSelector:
    """A subscription expression with its type (``MessageSelector.bySql`` / ``byTag``).

    Attributes:
        expression: ``"TagA || TagB"``, ``"*"``, or SQL92 text (``"a > 5 AND b = 'x'"``).
        type: ``"TAG"`` or ``"SQL92"`` (SQL92 needs ``enablePropertyFilter=true`` on brokers).
    """

    expression: str
    type: str = EXPRESSION_TYPE_TAG

    def __post_init__(self) -> None:
        if self.type not in (EXPRESSION_TYPE_TAG, EXPRESSION_TYPE_SQL92):
            raise InvalidArgumentError(f"unknown expression type {self.type!r}")
        if self.type == EXPRESSION_TYPE_SQL92 and not self.expression.strip():
            raise InvalidArgumentError("an SQL92 selector needs an expression")

    @classmethod
    def by_tag(cls, expression: str | None = "*") -> MessageSelector:
        """A TAG selector (``None`` or empty means ``*``)."""
        return cls(expression or "*", EXPRESSION_TYPE_TAG)

    @classmethod
    def by_sql(cls, expression: str) -> MessageSelector:
        """An SQL92 selector over message properties."""
        return cls(expression, EXPRESSION_TYPE_SQL92)
