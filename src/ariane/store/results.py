"""Outcomes of store calls: RocketMQ's ``PutMessageStatus``/``GetMessageStatus`` and results."""

from __future__ import annotations

import enum
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import overload

from ariane.common.msgid import create_offset_msg_id

__all__ = [
    "GetResult",
    "GetStatus",
    "JoinedRecords",
    "PutResult",
    "PutStatus",
    "QueryResult",
]


class PutStatus(enum.Enum):
    """``PutMessageStatus``. Only ``PUT_OK`` means stored and durable per the flush policy;
    ``FLUSH_DISK_TIMEOUT`` means stored but not confirmed on disk in time."""

    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    CREATE_MAPPED_FILE_FAILED = "CREATE_MAPEDFILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    OS_PAGECACHE_BUSY = "OS_PAGECACHE_BUSY"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"

    @property
    def is_stored(self) -> bool:
        """True when the message is in the CommitLog (``PUT_OK`` or a flush/slave timeout)."""
        return self in (
            PutStatus.PUT_OK,
            PutStatus.FLUSH_DISK_TIMEOUT,
            PutStatus.FLUSH_SLAVE_TIMEOUT,
            PutStatus.SLAVE_NOT_AVAILABLE,
        )


class GetStatus(enum.Enum):
    """``GetMessageStatus``."""

    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"


class PutResult:
    """``PutMessageResult`` with the ``AppendMessageResult`` fields flattened in.

    ``wrote_offset`` is the physical offset of the (first) record, ``wrote_bytes`` the bytes
    of all records, ``logics_offset`` the queue offset of the first message (0 for prepared
    and rollback transaction records), ``msg_num`` the number of records, ``offsets`` each
    record's physical offset. When nothing was stored ``wrote_offset``/``logics_offset`` are
    -1 and ``remark`` explains the refusal (limit hit, store not writeable...).
    """

    __slots__ = (
        "logics_offset",
        "msg_num",
        "offsets",
        "remark",
        "status",
        "store_host",
        "store_port",
        "store_timestamp_ms",
        "wrote_bytes",
        "wrote_offset",
    )

    def __init__(
        self,
        status: PutStatus,
        wrote_offset: int = -1,
        wrote_bytes: int = 0,
        store_timestamp_ms: int = 0,
        logics_offset: int = -1,
        msg_num: int = 0,
        store_host: bytes = b"",
        store_port: int = 0,
        offsets: tuple[int, ...] = (),
        remark: str | None = None,
    ) -> None:
        self.status = status
        self.wrote_offset = wrote_offset
        self.wrote_bytes = wrote_bytes
        self.store_timestamp_ms = store_timestamp_ms
        self.logics_offset = logics_offset
        self.msg_num = msg_num
        self.store_host = store_host
        self.store_port = store_port
        self.offsets = offsets
        self.remark = remark

    def __repr__(self) -> str:
        return (
            f"PutResult({self.status.name}, wrote_offset={self.wrote_offset}, "
            f"wrote_bytes={self.wrote_bytes}, logics_offset={self.logics_offset}, "
            f"msg_num={self.msg_num}, remark={self.remark!r})"
        )

    @property
    def ok(self) -> bool:
        """True for ``PUT_OK``."""
        return self.status is PutStatus.PUT_OK

    @property
    def stored(self) -> bool:
        """True when the record(s) are in the CommitLog (even if the flush timed out)."""
        return self.msg_num > 0

    @property
    def msg_id(self) -> str:
        """The offsetMsgId (32 hex chars for IPv4), comma-joined for a batch; "" if not stored."""
        return ",".join(
            create_offset_msg_id(self.store_host, self.store_port, off) for off in self.offsets
        )


class JoinedRecords(Sequence[bytes]):
    """Records stored back to back in one ``bytes`` (``joined``), cut into one ``bytes``
    each only when one is asked for: a pull answer sends ``joined`` as it is and needs only
    the count. ``ends[i]`` is where record ``i`` ends in ``joined``. Equal to a list (or
    another ``JoinedRecords``) of the same records."""

    __slots__ = ("_cut", "ends", "joined")

    def __init__(self, joined: bytes, ends: list[int]) -> None:
        self.joined = joined
        self.ends = ends
        self._cut: list[bytes] | None = None

    def records(self) -> list[bytes]:
        """The records, each its own ``bytes`` (cut once, then kept)."""
        cut = self._cut
        if cut is None:
            ends = self.ends
            starts = [0, *ends]
            cut = self._cut = list(map(self.joined.__getitem__, map(slice, starts, ends)))
        return cut

    def __len__(self) -> int:
        return len(self.ends)

    @overload
    def __getitem__(self, index: int) -> bytes: ...
    @overload
    def __getitem__(self, index: slice) -> list[bytes]: ...
    def __getitem__(self, index: int | slice) -> bytes | list[bytes]:
        return self.records()[index]

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.records())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, JoinedRecords):
            return self.ends == other.ends and self.joined == other.joined
        if isinstance(other, list):
            return self.records() == other
        return NotImplemented

    def __add__(self, other: Sequence[bytes]) -> list[bytes]:
        return [*self.records(), *other]

    def __radd__(self, other: Sequence[bytes]) -> list[bytes]:
        return [*other, *self.records()]

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"JoinedRecords({len(self.ends)} records, {len(self.joined)} bytes)"


@dataclass(slots=True)
class GetResult:
    """``GetMessageResult``.

    ``messages`` holds each stored record's exact bytes, in queue order, ready to be
    concatenated into a PULL response body (a :class:`JoinedRecords` when the store read them
    as runs of back-to-back records: ``joined`` is then their concatenation).
    ``next_begin_offset`` is where the next pull should start; ``min_offset``/``max_offset``
    are the queue's bounds at the time of the call.
    """

    status: GetStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[bytes] | JoinedRecords = field(default_factory=list)
    buffer_total_size: int = 0
    suggest_pulling_from_slave: bool = False
    max_phy_offset_pulling: int = 0
    message_queue_offsets: list[int] = field(default_factory=list)

    @property
    def joined(self) -> bytes | None:
        """``messages`` joined, when the store read them as runs of back-to-back records
        (``messages`` is then a :class:`JoinedRecords`), else None."""
        messages = self.messages
        return messages.joined if type(messages) is JoinedRecords else None

    @property
    def message_count(self) -> int:
        """Number of records in ``messages``."""
        return len(self.messages)


@dataclass(slots=True)
class QueryResult:
    """``QueryMessageResult``: records found by key, newest first.

    ``index_last_update_timestamp_ms`` / ``index_last_update_phy_offset`` are the newest
    index file's endTimestamp/endPhyOffset (the broker returns them in the response header).
    """

    messages: list[bytes] = field(default_factory=list)
    index_last_update_timestamp_ms: int = 0
    index_last_update_phy_offset: int = 0
    buffer_total_size: int = 0
