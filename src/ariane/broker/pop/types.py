"""The POP operations' requests and results, the Python API of the broker's POP service
(what the remoting processors and the gRPC proxy call).

Outcomes are values, never exceptions: each result carries a remoting ``ResponseCode`` and a
remark (SUCCESS, or the code RocketMQ's processors answer with), so both protocols map one
result the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from ariane.common.message import MessageExt
from ariane.common.pop import ConsumeInitMode, ReceiptHandle, retry_flag_of
from ariane.common.record import decode_record
from ariane.remoting.protocol.codes import ResponseCode

__all__ = [
    "AckResult",
    "ChangeInvisibleResult",
    "NotificationResult",
    "PeekResult",
    "PopEntry",
    "PopRequest",
    "PopResult",
    "PoppedMessage",
]


@dataclass(frozen=True, slots=True)
class PopRequest:
    """One POP (the fields of ``PopMessageRequestHeader``).

    Attributes:
        group: the consumer group.
        topic: the topic (never its retry topic).
        queue_id: one queue, or -1 for every readable queue of the topic on this broker.
        max_msg_nums: at most this many messages (1..32).
        invisible_time_ms: how long the messages stay invisible unless acked.
        poll_time_ms: how long to wait for messages when there are none (0: answer now).
        born_time_ms: the client's send time (0: now); the wait ends at born + poll time.
        init_mode: where a group without an offset starts (MIN or MAX, the newest message).
        expression_type: "TAG" (default) or "SQL92".
        expression: the filter expression (``*`` when empty).
        order: FIFO pop: a queue's batch blocks the queue until acked or invisible no more.
        attempt_id: FIFO: the client's id of this attempt (a retry of a lost answer reuses it).
    """

    group: str
    topic: str
    queue_id: int = -1
    max_msg_nums: int = 32
    invisible_time_ms: int = 60_000
    poll_time_ms: int = 0
    born_time_ms: int = 0
    init_mode: int = ConsumeInitMode.MAX
    expression_type: str | None = None
    expression: str | None = None
    order: bool = False
    attempt_id: str | None = None


class PopEntry(NamedTuple):
    """Where one popped record came from."""

    topic: str
    queue_id: int
    queue_offset: int
    ck_start_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class PoppedMessage:
    """A popped message, decoded, with its receipt handle.

    ``message.topic`` is the topic asked for (retried messages are relabelled), ``queue_id``
    and ``queue_offset`` those of the queue read (the retry queue for retried messages);
    ``message.reconsume_times`` is the count of earlier deliveries (for FIFO pops, the
    broker's count for the offset). ``handle`` carries the CommitLog offset as its 9th field,
    the form the gRPC proxy hands out; ``handle.encode()`` is ready to use.
    """

    message: MessageExt
    handle: ReceiptHandle

    @property
    def receipt_handle(self) -> str:
        """The 9-field receipt handle."""
        return self.handle.encode()

    @property
    def delivery_attempt(self) -> int:
        """1 for the first delivery."""
        return self.message.reconsume_times + 1


@dataclass(slots=True)
class PopResult:
    """The outcome of a POP.

    ``code`` is SUCCESS with messages, POLLING_TIMEOUT when there was nothing (also after a
    wait), POLLING_FULL when the request could not wait, or an error code with ``remark``.
    ``records`` are the stored records as the remoting answer carries them (retried messages
    relabelled to the topic asked for, with their ``POP_CK``), ``entries`` where each came from.
    """

    code: int
    remark: str
    topic: str = ""
    group: str = ""
    broker_name: str = ""
    pop_time: int = 0
    invisible_time: int = 0
    revive_qid: int = 0
    rest_num: int = 0
    start_offset_info: str | None = None
    msg_offset_info: str | None = None
    order_count_info: str | None = None
    records: list[bytes] = field(default_factory=list)
    entries: list[PopEntry] = field(default_factory=list)

    @property
    def found(self) -> bool:
        """Whether messages were popped."""
        return self.code == ResponseCode.SUCCESS and bool(self.records)

    def handle_of(self, entry: PopEntry, commit_log_offset: int = -1) -> ReceiptHandle:
        """The receipt handle of one popped message."""
        return ReceiptHandle(
            entry.ck_start_offset, self.pop_time, self.invisible_time, self.revive_qid,
            retry_flag_of(entry.topic), self.broker_name, entry.queue_id, entry.queue_offset,
            commit_log_offset,
        )  # fmt: skip

    def messages(self) -> list[PoppedMessage]:
        """The popped messages, decoded (the records are trusted: they come from the store).

        Raises:
            CorruptionError: a record does not decode.
        """
        out = []
        for record, entry in zip(self.records, self.entries, strict=True):
            msg, _ = decode_record(record)
            if entry.delivery_count >= 0 and self.revive_qid == _ORDER_QID:
                msg.reconsume_times = entry.delivery_count
            out.append(PoppedMessage(msg, self.handle_of(entry, msg.commit_log_offset)))
        return out


_ORDER_QID = 999


@dataclass(frozen=True, slots=True)
class AckResult:
    """The outcome of an ACK (SUCCESS also when the lease already ended: the message is then
    delivered again, as upstream does)."""

    code: int
    remark: str = ""

    @property
    def ok(self) -> bool:
        """SUCCESS."""
        return self.code == ResponseCode.SUCCESS


@dataclass(frozen=True, slots=True)
class ChangeInvisibleResult:
    """The outcome of CHANGE_MESSAGE_INVISIBLETIME: the new lease and the new handle."""

    code: int
    remark: str = ""
    pop_time: int = 0
    invisible_time: int = 0
    revive_qid: int = 0
    handle: ReceiptHandle | None = None

    @property
    def ok(self) -> bool:
        """SUCCESS."""
        return self.code == ResponseCode.SUCCESS


@dataclass(frozen=True, slots=True)
class PeekResult:
    """The outcome of PEEK_MESSAGE: records read without leasing them."""

    code: int
    remark: str = ""
    rest_num: int = 0
    records: list[bytes] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class NotificationResult:
    """The outcome of NOTIFICATION."""

    code: int
    remark: str = ""
    has_msg: bool = False
    polling_full: bool = False
