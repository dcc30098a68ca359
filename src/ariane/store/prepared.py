"""What a put carries from its preparation outside the CommitLog's put lock to the write under
it (:meth:`ariane.store.commit_log.CommitLog.prepare_one` and ``prepare_batch``); a module of its
own so that the record block writer can name them without importing the CommitLog."""

from __future__ import annotations

import struct
from typing import NamedTuple

from ariane.store.inner import MessageBatchInner, MessageInner

__all__ = ["PreparedBatch", "PreparedOne", "PreparedRecord"]


class PreparedOne(NamedTuple):
    """One message validated and encoded outside the put lock (:meth:`CommitLog.prepare_one`):
    the fixed-header struct, magic code, final sysFlag, stored size, body CRC, the bytes after
    the body (topic and properties) and the tagsCode. A tuple built in one C call (hot path)."""

    msg: MessageInner
    header: struct.Struct
    magic: int
    sys_flag: int
    total: int
    crc: int
    rest: bytes
    tags_code: int


class PreparedRecord(NamedTuple):
    """One batch record encoded as far as possible outside the lock: the body, its CRC, the
    user flag, the properties, the bytes after the body (topic and properties), the stored
    size and the tagsCode (``None``: computed when written, the delivery time of a
    ``SCHEDULE_TOPIC_XXXX`` record). A tuple built in one C call (hot path: one per message
    of a batch)."""

    body: bytes
    crc: int
    flag: int
    props: dict[str, str]
    rest: bytes
    total: int
    tags_code: int | None


class PreparedBatch:
    """A batch validated and encoded outside the put lock (:meth:`CommitLog.prepare_batch`)."""

    __slots__ = ("batch", "header", "magic", "records", "sys_flag", "topic_tail", "total")

    def __init__(
        self,
        batch: MessageBatchInner,
        header: struct.Struct,
        magic: int,
        topic_tail: bytes,
        sys_flag: int,
        records: list[PreparedRecord],
        total: int,
    ) -> None:
        self.batch = batch
        self.header = header
        self.magic = magic
        self.topic_tail = topic_tail
        self.sys_flag = sys_flag
        self.records = records
        self.total = total
