"""The CommitLog's reads by physical offset (a mixin of :class:`~ariane.store.commit_log.CommitLog`,
RocketMQ ``CommitLog.getMessage``/``getData``/``pickupStoreTimestamp``): the files it needs are
``queue`` (a :class:`~ariane.store.mapped_file_queue.MappedFileQueue`) and ``file_size``."""

from __future__ import annotations

import struct

from ariane.common.sysflag import born_host_v6, host_record_size
from ariane.store.format import MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2, SIZE_MAGIC
from ariane.store.mapped_file import MappedFile
from ariane.store.mapped_file_queue import MappedFileQueue

__all__ = ["CommitLogReads"]

_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")


class CommitLogReads:
    """Reads of the CommitLog's files by physical offset."""

    queue: MappedFileQueue
    file_size: int

    @property
    def max_offset(self) -> int:
        """Physical offset just past the last written byte."""
        return self.queue.max_offset

    @property
    def min_offset(self) -> int:
        """Physical offset of the first retained byte (-1 when there are no files)."""
        first = self.queue.first
        if first is None:
            return -1
        if not first.available:
            return self.roll_next_file(first.file_from_offset)
        return first.file_from_offset

    @property
    def flushed_where(self) -> int:
        """Physical offset up to which the log is durable."""
        return self.queue.flushed_where

    def roll_next_file(self, offset: int) -> int:
        """Start offset of the file after the one holding ``offset``."""
        return offset + self.file_size - offset % self.file_size

    def file_at(self, offset: int) -> MappedFile | None:
        """The file holding physical ``offset``, or None (reads of many records look each
        file up once through this)."""
        return self.queue.find_mapped_file_by_offset(offset)

    def get_message(self, offset: int, size: int) -> bytes | None:
        """The ``size`` bytes at physical ``offset`` (a whole record), or None."""
        mf = self.queue.find_mapped_file_by_offset(offset, offset == 0)
        if mf is None:
            return None
        return mf.read(offset - mf.file_from_offset, size)

    def get_data(self, offset: int, max_bytes: int | None = None) -> bytes | None:
        """Bytes from ``offset`` to the end of written data in that file (capped), or None."""
        mf = self.queue.find_mapped_file_by_offset(offset, offset == 0)
        if mf is None:
            return None
        pos = offset - mf.file_from_offset
        limit = None if max_bytes is None else pos + max_bytes
        return mf.read_from(pos, limit)

    def look_message_by_offset(self, offset: int) -> bytes | None:
        """The whole record at ``offset`` (its size read from TOTALSIZE), or None."""
        head = self.get_message(offset, 8)
        if head is None:
            return None
        size, magic = SIZE_MAGIC.unpack(head)
        if magic not in (MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2) or size < 91:
            return None
        return self.get_message(offset, size)

    def pickup_store_timestamp(self, offset: int, size: int) -> int:
        """Store time of the record at ``offset`` (-1 when it is gone)."""
        if offset < self.min_offset:
            return -1
        head = self.get_message(offset, min(size, 100))
        if head is None or len(head) < 76:
            return -1
        (sys_flag,) = _I32.unpack_from(head, 36)
        pos = 48 + host_record_size(born_host_v6(sys_flag))
        return int(_I64.unpack_from(head, pos)[0])
