"""What the broker hands the store to append (RocketMQ ``MessageExtBrokerInner``/``MessageExtBatch``).

``properties`` is a ``dict[str, str]``: the store encodes it (``k\\x01v\\x02``...) into the
record, reads ``TAGS``/``KEYS``/``UNIQ_KEY``/``DELAY`` from it for dispatch, and passes it to
the arriving listener. The store does not copy it: do not mutate it after submitting.
``properties_string`` may carry the already-encoded form (e.g. the SEND header's
``properties`` field): when set it is written as is and must describe the same map.

Hosts are :class:`~ariane.common.message.HostPort` (packed 4- or 16-byte address + port); the
store sets the IPv6 sysFlag bits from the address lengths.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ariane.common.message import HostPort

__all__ = ["BatchItem", "MessageBatchInner", "MessageInner"]

_ANY4 = HostPort(b"\x7f\0\0\x01", 0)


@dataclass(slots=True)
class MessageInner:
    """One message to append.

    Args:
        topic: the topic (at most ``max_topic_length`` UTF-8 bytes, no path separators).
        queue_id: the queue (>= 0).
        body: the body as sent (already compressed when ``sys_flag`` bit 0 is set).
        flag: the application flag (int32).
        properties: the property map (see module docs).
        sys_flag: ``MessageSysFlag`` bits (transaction type, compression...).
        born_timestamp_ms: producer send time.
        born_host: producer address.
        store_host: this broker's address (goes into the offsetMsgId).
        reconsume_times: retry count.
        prepared_transaction_offset: CommitLog offset of the half message (COMMIT/ROLLBACK).
        properties_string: optional pre-encoded properties (see module docs).
    """

    topic: str
    queue_id: int
    body: bytes
    flag: int = 0
    properties: dict[str, str] = field(default_factory=dict)
    sys_flag: int = 0
    born_timestamp_ms: int = 0
    born_host: HostPort = _ANY4
    store_host: HostPort = _ANY4
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    properties_string: str | None = None


@dataclass(slots=True)
class BatchItem:
    """One message of a batch (decoded from a SEND_BATCH_MESSAGE body, D.3)."""

    body: bytes
    flag: int = 0
    properties: dict[str, str] = field(default_factory=dict)
    properties_string: str | None = None


@dataclass(slots=True)
class MessageBatchInner:
    """A batch appended atomically and contiguously: shared fields plus the messages.

    Transaction types PREPARED/ROLLBACK are not allowed in a batch (``MESSAGE_ILLEGAL``).
    """

    topic: str
    queue_id: int
    messages: list[BatchItem]
    sys_flag: int = 0
    born_timestamp_ms: int = 0
    born_host: HostPort = _ANY4
    store_host: HostPort = _ANY4
    reconsume_times: int = 0
