"""The strings of POP consumption (RocketMQ 5 ``ExtraInfoUtil``, ``KeyBuilder``,
``ReceiptHandle``, ``BitSetSerializerDeserializer``): pure code shared by the broker, the SDK
and the gRPC proxy.

How it works. A popped message carries a *receipt handle* (``extraInfo``, the ``POP_CK``
property): its checkpoint's start offset, the pop time, the invisible time, the revive queue
(999 for FIFO pops), a retry flag ("0" the topic itself, "1" the v1 POP retry topic
``%RETRY%<group>_<topic>``, "2" the v2 one ``%RETRY%<group>+<topic>``), the broker name, the
queue id and the message's own queue offset, space separated; the gRPC proxy appends the
CommitLog offset as a ninth field. POP answers describe their messages with three strings:
``startOffsetInfo`` (``flag qid ckStart`` per queue), ``msgOffsetInfo`` (``flag qid o1,o2``)
and, for FIFO, ``orderCountInfo`` (``flag qo<qid>%<offset> count`` per re-delivered offset,
then ``flag qid minCount`` per queue), entries joined with ``;``. Batch acks carry a Java
``BitSet.toByteArray()`` in Base64 (bit i = byte i/8, bit i%8; trailing zero bytes dropped).
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from enum import IntEnum

from ariane.common.topics import RETRY_PREFIX
from ariane.errors import InvalidArgumentError

__all__ = [
    "POP_ORDER_REVIVE_QUEUE",
    "RETRY_FLAG_NORMAL",
    "RETRY_FLAG_V1",
    "RETRY_FLAG_V2",
    "REVIVE_GROUP",
    "ConsumeInitMode",
    "OffsetInfo",
    "ReceiptHandle",
    "decode_bitset",
    "encode_bitset",
    "is_pop_retry_topic_v2",
    "order_count_key",
    "original_topic",
    "parse_offset_counts",
    "parse_offset_lists",
    "parse_start_offsets",
    "pop_retry_topic",
    "pop_retry_topic_v1",
    "pop_retry_topic_v2",
    "queue_key",
    "real_topic",
    "retry_flag_of",
    "revive_topic",
]

#: ``reviveQid`` of FIFO pops (``KeyBuilder.POP_ORDER_REVIVE_QUEUE``).
POP_ORDER_REVIVE_QUEUE = 999
#: The consumer group whose offsets are the revive progress.
REVIVE_GROUP = "CID_RMQ_SYS_REVIVE_GROUP"
RETRY_FLAG_NORMAL = "0"
RETRY_FLAG_V1 = "1"
RETRY_FLAG_V2 = "2"
_FLAGS = (RETRY_FLAG_NORMAL, RETRY_FLAG_V1, RETRY_FLAG_V2)


class ConsumeInitMode(IntEnum):
    """Where a POP group without an offset starts (``ConsumeInitMode``)."""

    MIN = 0
    MAX = 1


def revive_topic(cluster: str) -> str:
    """``rmq_sys_REVIVE_LOG_<cluster>``: where checkpoints and acks are written."""
    return f"rmq_sys_REVIVE_LOG_{cluster}"


def pop_retry_topic_v1(topic: str, group: str) -> str:
    """``%RETRY%<group>_<topic>``."""
    return f"{RETRY_PREFIX}{group}_{topic}"


def pop_retry_topic_v2(topic: str, group: str) -> str:
    """``%RETRY%<group>+<topic>``."""
    return f"{RETRY_PREFIX}{group}+{topic}"


def pop_retry_topic(topic: str, group: str, v2: bool) -> str:
    """The POP retry topic of (topic, group), v2 or v1 naming."""
    return pop_retry_topic_v2(topic, group) if v2 else pop_retry_topic_v1(topic, group)


def is_pop_retry_topic_v2(topic: str) -> bool:
    """Whether ``topic`` is a v2 POP retry topic (``%RETRY%`` and a ``+``)."""
    return topic.startswith(RETRY_PREFIX) and "+" in topic


def retry_flag_of(topic: str) -> str:
    """The handle's retry flag for a message read from ``topic``."""
    if not topic.startswith(RETRY_PREFIX):
        return RETRY_FLAG_NORMAL
    return RETRY_FLAG_V2 if "+" in topic else RETRY_FLAG_V1


def real_topic(topic: str, group: str, retry_flag: str) -> str:
    """The topic a handle's message was read from: ``topic`` (the original) for flag "0",
    its v1 or v2 POP retry topic otherwise."""
    if retry_flag == RETRY_FLAG_V1:
        return pop_retry_topic_v1(topic, group)
    if retry_flag == RETRY_FLAG_V2:
        return pop_retry_topic_v2(topic, group)
    return topic


def original_topic(topic: str, group: str) -> str:
    """The topic a POP retry topic of ``group`` retries (``topic`` itself when it is not one
    of that group's): the inverse of ``pop_retry_topic``."""
    for prefix in (f"{RETRY_PREFIX}{group}_", f"{RETRY_PREFIX}{group}+"):
        if topic.startswith(prefix) and len(topic) > len(prefix):
            return topic[len(prefix) :]
    return topic


def _int(text: str, what: str, handle: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise InvalidArgumentError(f"receipt handle {handle!r}: {what} is not a number") from None


@dataclass(frozen=True, slots=True)
class ReceiptHandle:
    """A POP receipt handle (``extraInfo``).

    Attributes:
        ck_start_offset: start offset of the message's checkpoint (not its own offset).
        pop_time: broker time of the pop (ms).
        invisible_time: lease length from ``pop_time`` (ms).
        revive_qid: revive queue of the checkpoint; 999 for FIFO pops.
        retry_flag: "0", "1" or "2" (see the module docs).
        broker_name: the broker that owns the queue.
        queue_id: the queue the message was read from (the retry queue for retries).
        queue_offset: the message's own queue offset (-1 when the handle has only 7 fields).
        commit_log_offset: its CommitLog offset (-1 unless the handle has 9 fields).
    """

    ck_start_offset: int
    pop_time: int
    invisible_time: int
    revive_qid: int
    retry_flag: str
    broker_name: str
    queue_id: int
    queue_offset: int = -1
    commit_log_offset: int = -1

    @property
    def next_visible_time(self) -> int:
        """When the message becomes visible again unless acked (ms)."""
        return self.pop_time + self.invisible_time

    @property
    def is_order(self) -> bool:
        """Whether the handle comes from a FIFO pop."""
        return self.revive_qid == POP_ORDER_REVIVE_QUEUE

    def is_expired(self, now_ms: int) -> bool:
        """``ReceiptHandle.isExpired``: the lease is over."""
        return self.next_visible_time <= now_ms

    def real_topic(self, topic: str, group: str) -> str:
        """The topic the message was read from, given its original topic."""
        return real_topic(topic, group, self.retry_flag)

    def encode(self) -> str:
        """The 8-field form (9 when ``commit_log_offset`` >= 0)."""
        text = (
            f"{self.ck_start_offset} {self.pop_time} {self.invisible_time} {self.revive_qid} "
            f"{self.retry_flag} {self.broker_name} {self.queue_id} {self.queue_offset}"
        )
        if self.commit_log_offset >= 0:
            text += f" {self.commit_log_offset}"
        return text

    def with_commit_log_offset(self, offset: int) -> ReceiptHandle:
        """The same handle with the CommitLog offset field (the gRPC proxy's form)."""
        return ReceiptHandle(
            self.ck_start_offset, self.pop_time, self.invisible_time, self.revive_qid,
            self.retry_flag, self.broker_name, self.queue_id, self.queue_offset, offset,
        )  # fmt: skip

    @classmethod
    def decode(cls, text: str) -> ReceiptHandle:
        """Parse a handle of 7 to 9 fields (extra fields are ignored, as upstream does).

        Raises:
            InvalidArgumentError: fewer than 7 fields, a number that does not parse, or an
                unknown retry flag.
        """
        parts = text.split(" ")
        if len(parts) < 7:
            raise InvalidArgumentError(f"receipt handle {text!r}: fewer than 7 fields")
        flag = parts[4]
        if flag not in _FLAGS:
            raise InvalidArgumentError(f"receipt handle {text!r}: unknown retry flag {flag!r}")
        return cls(
            _int(parts[0], "the checkpoint offset", text),
            _int(parts[1], "the pop time", text),
            _int(parts[2], "the invisible time", text),
            _int(parts[3], "the revive queue", text),
            flag,
            parts[5],
            _int(parts[6], "the queue id", text),
            _int(parts[7], "the queue offset", text) if len(parts) > 7 else -1,
            _int(parts[8], "the commit log offset", text) if len(parts) > 8 else -1,
        )


# -- offset info strings -----------------------------------------------------------------------


def queue_key(retry_flag: str, queue_id: int) -> str:
    """``retryFlag@queueId``: the client's lookup key of a queue's info."""
    return f"{retry_flag}@{queue_id}"


def order_count_key(retry_flag: str, queue_id: int, offset: int) -> str:
    """``retryFlag@qo<queueId>%<offset>``: the client's key of one offset's delivery count."""
    return f"{retry_flag}@qo{queue_id}%{offset}"


class OffsetInfo:
    """Builds the three info strings of one POP answer (``ExtraInfoUtil.build*``)."""

    __slots__ = ("_counts", "_msg", "_start")

    def __init__(self) -> None:
        self._start: list[str] = []
        self._msg: list[str] = []
        self._counts: list[str] = []

    def add_queue(self, retry_flag: str, queue_id: int, ck_start: int, offsets: list[int]) -> None:
        """One queue that returned messages (offsets ascending)."""
        self._start.append(f"{retry_flag} {queue_id} {ck_start}")
        self._msg.append(f"{retry_flag} {queue_id} {','.join(map(str, offsets))}")

    def add_order_counts(self, retry_flag: str, queue_id: int, counts: dict[int, int]) -> None:
        """FIFO: previous delivery counts of a queue's offsets (only non-zero ones are listed),
        then the queue's minimum (for old SDKs)."""
        for offset, count in counts.items():
            if count > 0:
                self._counts.append(f"{retry_flag} qo{queue_id}%{offset} {count}")
        minimum = min(counts.values()) if counts else 0
        self._counts.append(f"{retry_flag} {queue_id} {minimum}")

    @property
    def start_offset_info(self) -> str | None:
        """``startOffsetInfo`` (None when empty)."""
        return ";".join(self._start) or None

    @property
    def msg_offset_info(self) -> str | None:
        """``msgOffsetInfo`` (None when empty)."""
        return ";".join(self._msg) or None

    @property
    def order_count_info(self) -> str | None:
        """``orderCountInfo`` (None when empty)."""
        return ";".join(self._counts) or None


def _entries(text: str | None, what: str) -> list[list[str]]:
    if not text:
        return []
    out = []
    for entry in text.split(";"):
        if not entry:
            continue
        fields = entry.split(" ")
        if len(fields) != 3:
            raise InvalidArgumentError(f"{what} entry {entry!r}: expected 3 fields")
        out.append(fields)
    return out


def parse_start_offsets(text: str | None) -> dict[str, int]:
    """``startOffsetInfo`` -> {``flag@qid``: checkpoint start offset}.

    Raises:
        InvalidArgumentError: malformed entry.
    """
    out: dict[str, int] = {}
    for flag, qid, start in _entries(text, "startOffsetInfo"):
        try:
            out[queue_key(flag, int(qid))] = int(start)
        except ValueError:
            raise InvalidArgumentError(f"startOffsetInfo: bad numbers in {text!r}") from None
    return out


def parse_offset_lists(text: str | None) -> dict[str, list[int]]:
    """``msgOffsetInfo`` -> {``flag@qid``: [offsets]}.

    Raises:
        InvalidArgumentError: malformed entry.
    """
    out: dict[str, list[int]] = {}
    for flag, qid, offsets in _entries(text, "msgOffsetInfo"):
        try:
            out[queue_key(flag, int(qid))] = [int(o) for o in offsets.split(",") if o]
        except ValueError:
            raise InvalidArgumentError(f"msgOffsetInfo: bad numbers in {text!r}") from None
    return out


def parse_offset_counts(text: str | None) -> dict[str, int]:
    """``orderCountInfo`` -> {``flag@qo<qid>%<offset>`` or ``flag@qid``: count}.

    Raises:
        InvalidArgumentError: malformed entry.
    """
    out: dict[str, int] = {}
    for flag, where, count in _entries(text, "orderCountInfo"):
        try:
            out[f"{flag}@{where}"] = int(count)
        except ValueError:
            raise InvalidArgumentError(f"orderCountInfo: bad count in {text!r}") from None
    return out


# -- BitSet --------------------------------------------------------------------------------------


def encode_bitset(indices: list[int] | set[int]) -> str:
    """Base64 of Java's ``BitSet.toByteArray()`` for the set bits ``indices``."""
    if not indices:
        return ""
    top = max(indices)
    if min(indices) < 0:
        raise InvalidArgumentError("bit indices must be >= 0")
    data = bytearray(top // 8 + 1)
    for i in indices:
        data[i >> 3] |= 1 << (i & 7)
    return base64.b64encode(bytes(data)).decode("ascii")


def decode_bitset(text: str, max_bits: int = 1 << 16) -> list[int]:
    """The set bit indices (ascending) of a Base64 ``BitSet.toByteArray()``.

    Raises:
        InvalidArgumentError: not Base64, or more than ``max_bits`` bits.
    """
    if not text:
        return []
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidArgumentError(f"bit set {text[:40]!r} is not Base64") from None
    if len(data) * 8 > max_bits:
        raise InvalidArgumentError(f"bit set longer than {max_bits} bits")
    return [
        byte_index * 8 + bit
        for byte_index, byte in enumerate(data)
        if byte
        for bit in range(8)
        if byte >> bit & 1
    ]
