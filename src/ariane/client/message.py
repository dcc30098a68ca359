"""The public message model of the client: ``Message`` (what you send), ``MessageExt`` (what
you receive), ``MessageQueue``, and the structured results ``SendResult``,
``TransactionSendResult`` and ``PullResult``.

``Message`` extends :class:`ariane.common.message.Message` (topic, body, flag, properties) with
keyword-only conveniences for the properties RocketMQ reserves (``TAGS``, ``KEYS``, ``DELAY``,
``WAIT``); ``MessageExt`` is the decoded stored record of :mod:`ariane.common.message`.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields

from ariane.common import message as _common
from ariane.common import properties as props
from ariane.common.message import MessageExt
from ariane.errors import InvalidArgumentError
from ariane.remoting.protocol.client_bodies import MessageQueue

__all__ = [
    "LocalTransactionState",
    "Message",
    "MessageExt",
    "MessageQueue",
    "PullResult",
    "PullStatus",
    "SendResult",
    "SendStatus",
    "TransactionSendResult",
]


class Message(_common.Message):
    """A message to send.

    Args:
        topic: the topic.
        body: the payload (at most ``max_message_bytes`` of the producer, 4 MiB by default).
        tags: the tag consumers filter on (property ``TAGS``).
        keys: index keys for lookups by key: one string (space separated) or several strings
            (property ``KEYS``).
        flag: an application-defined integer stored with the message.
        properties: user properties (names must not be RocketMQ's reserved ones unless you
            mean it: ``TAGS``, ``KEYS``, ``DELAY``... are read by brokers and clients).
        delay_level: deliver after the broker's delay level (1..18 by default: 1 s .. 2 h);
            0 means at once.
        deliver_time_ms: deliver at this time (epoch ms; RocketMQ 5 timer messages,
            property ``TIMER_DELIVER_MS``; at most ``timerMaxDelaySec``, 3 days, ahead).
        delay_time_ms: deliver this many ms after the broker stores it (``TIMER_DELAY_MS``).
        message_group: RocketMQ 5 FIFO message group (``__SHARDINGKEY``): the producer sends
            every message of a group to one queue (the queue RocketMQ 5's proxy picks), so a
            FIFO consumer gets them in order.
        wait_store_msg_ok: ``False`` sets ``WAIT=false``: a SYNC_FLUSH broker answers without
            waiting for the flush.

    Raises:
        InvalidArgumentError: a negative delay level.
    """

    __slots__ = ()

    def __init__(
        self,
        topic: str,
        body: bytes = b"",
        *,
        tags: str | None = None,
        keys: str | Iterable[str] | None = None,
        flag: int = 0,
        properties: Mapping[str, str] | None = None,
        delay_level: int = 0,
        wait_store_msg_ok: bool = True,
        deliver_time_ms: int | None = None,
        delay_time_ms: int | None = None,
        message_group: str | None = None,
    ) -> None:
        # the base dataclass's ``__init__``, inline (one frame and a ``super()`` less a message)
        self.topic = topic
        self.body = bytes(body)
        self.flag = flag
        self.properties = dict(properties) if properties else {}
        if tags:
            self.tags = tags
        if keys:
            self.keys = [keys] if isinstance(keys, str) else list(keys)
        if delay_level:
            self.delay_level = delay_level
        if not wait_store_msg_ok:
            self.properties[props.WAIT_STORE_MSG_OK] = "false"
        if deliver_time_ms is not None:
            self.deliver_time_ms = deliver_time_ms
        if delay_time_ms is not None:
            if delay_time_ms < 0:
                raise InvalidArgumentError(f"delay_time_ms must be >= 0, got {delay_time_ms}")
            self.properties[props.TIMER_DELAY_MS] = str(delay_time_ms)
        if message_group:
            self.properties[props.SHARDING_KEY] = message_group

    @property
    def tags(self) -> str | None:
        """The ``TAGS`` property."""
        return self.properties.get(props.TAGS)

    @tags.setter
    def tags(self, value: str | None) -> None:
        if value:
            self.properties[props.TAGS] = value
        else:
            self.properties.pop(props.TAGS, None)

    @property
    def keys(self) -> list[str]:
        """The ``KEYS`` property split on spaces; assign a list to replace it."""
        raw = self.properties.get(props.KEYS)
        return [k for k in raw.split(props.KEY_SEPARATOR) if k] if raw else []

    @keys.setter
    def keys(self, value: Iterable[str]) -> None:
        joined = props.KEY_SEPARATOR.join(k for k in value if k).strip()
        if joined:
            self.properties[props.KEYS] = joined
        else:
            self.properties.pop(props.KEYS, None)

    @property
    def delay_level(self) -> int:
        """The ``DELAY`` level (0 = none)."""
        raw = self.properties.get(props.DELAY)
        try:
            return int(raw) if raw else 0
        except ValueError:
            return 0

    @delay_level.setter
    def delay_level(self, level: int) -> None:
        if level < 0:
            raise InvalidArgumentError(f"delay level must be >= 0, got {level}")
        if level:
            self.properties[props.DELAY] = str(level)
        else:
            self.properties.pop(props.DELAY, None)

    @property
    def message_group(self) -> str | None:
        """The RocketMQ 5 message group (``__SHARDINGKEY``)."""
        return self.properties.get(props.SHARDING_KEY)

    @property
    def deliver_time_ms(self) -> int | None:
        """The ``TIMER_DELIVER_MS`` time (RocketMQ 5 ``setDeliverTimeMs``), None when unset."""
        raw = self.properties.get(props.TIMER_DELIVER_MS)
        try:
            return int(raw) if raw else None
        except ValueError:
            return None

    @deliver_time_ms.setter
    def deliver_time_ms(self, value: int | None) -> None:
        if value is None:
            self.properties.pop(props.TIMER_DELIVER_MS, None)
        elif value < 0:
            raise InvalidArgumentError(f"deliver_time_ms must be >= 0, got {value}")
        else:
            self.properties[props.TIMER_DELIVER_MS] = str(value)

    def put_property(self, name: str, value: str) -> None:
        """Set a user property.

        Raises:
            InvalidArgumentError: ``name`` or ``value`` is empty or contains the separators
                ``\\x01``/``\\x02``, which would corrupt the encoded property string.
        """
        check_property(name, value)
        self.properties[name] = value


def check_property(name: str, value: str) -> None:
    """Raise ``InvalidArgumentError`` if ``name=value`` cannot travel as a property."""
    if not name or not value:
        raise InvalidArgumentError(f"property {name!r} needs a non-empty name and value")
    for text in (name, value):
        if props.NAME_VALUE_SEPARATOR in text or props.PROPERTY_SEPARATOR in text:
            raise InvalidArgumentError(f"property {name!r} contains a \\x01 or \\x02 separator")


class SendStatus(enum.Enum):
    """How a stored message was stored (RocketMQ ``SendStatus``); failures raise instead."""

    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


@dataclass(slots=True)
class SendResult:
    """The broker's answer to a send (a plain value object; not frozen because building frozen
    dataclasses costs a microsecond per send).

    Attributes:
        status: ``SEND_OK`` or one of the "stored, but" statuses.
        msg_id: the client's unique id (``UNIQ_KEY``); comma-joined for a batch.
        offset_msg_id: the broker's id (store host + commit-log offset); comma-joined for a
            batch.
        message_queue: the queue the message went to.
        queue_offset: its offset in that queue (the first one for a batch).
        transaction_id: the broker's transaction id (half messages).
        region_id: the broker's region (``MSG_REGION``).
        trace_on: whether the broker asks for message traces (``TRACE_ON``).
    """

    status: SendStatus
    msg_id: str
    offset_msg_id: str
    message_queue: MessageQueue
    queue_offset: int
    transaction_id: str | None = None
    region_id: str = "DefaultRegion"
    trace_on: bool = True

    @property
    def ok(self) -> bool:
        """Whether the status is ``SEND_OK``."""
        return self.status is SendStatus.SEND_OK


class LocalTransactionState(enum.Enum):
    """The outcome of a local transaction (RocketMQ's spelling ``UNKNOW`` is kept as a value)."""

    COMMIT_MESSAGE = "COMMIT_MESSAGE"
    ROLLBACK_MESSAGE = "ROLLBACK_MESSAGE"
    UNKNOW = "UNKNOW"

    @property
    def sys_flag(self) -> int:
        """The ``commitOrRollback`` value of END_TRANSACTION (8, 12, or 0 for unknown)."""
        return _TRANSACTION_FLAGS[self]


_TRANSACTION_FLAGS = {
    LocalTransactionState.COMMIT_MESSAGE: 0x8,
    LocalTransactionState.ROLLBACK_MESSAGE: 0xC,
    LocalTransactionState.UNKNOW: 0x0,
}


@dataclass(slots=True)
class TransactionSendResult(SendResult):
    """A half message's ``SendResult`` with what the local transaction decided (Java's
    ``TransactionSendResult extends SendResult``): ``status``, ``msg_id``, ``queue_offset``...
    are the half message's.

    Attributes:
        local_transaction_state: the state reported to the broker by END_TRANSACTION.
    """

    local_transaction_state: LocalTransactionState = LocalTransactionState.UNKNOW

    @classmethod
    def of(cls, result: SendResult, state: LocalTransactionState) -> TransactionSendResult:
        """``result`` with the local transaction's ``state`` added."""
        values = {f.name: getattr(result, f.name) for f in fields(SendResult)}
        return cls(**values, local_transaction_state=state)

    @property
    def send_result(self) -> SendResult:
        """The half message's send result (this object; kept for older callers)."""
        return self


class PullStatus(enum.Enum):
    """How a pull ended (RocketMQ ``PullStatus``)."""

    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


@dataclass(slots=True)
class PullResult:
    """The broker's answer to PULL_MESSAGE.

    Attributes:
        status: found, nothing new, nothing matching, or offset illegal (jump to
            ``next_begin_offset``).
        next_begin_offset: where the next pull of this queue starts.
        min_offset: the queue's smallest stored offset.
        max_offset: the queue's next offset to be written.
        messages: the messages (``FOUND`` only), decoded and decompressed.
        suggest_which_broker_id: the broker id the server suggests for the next pull.
    """

    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageExt] = field(default_factory=list)
    suggest_which_broker_id: int = 0
