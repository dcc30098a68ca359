"""What a single put carries from its preparation outside the CommitLog's put lock to the
write under it (:meth:`ariane.store.commit_log.CommitLog.prepare_one`); a module of its own so
that the record block writer can name it without importing the CommitLog."""

from __future__ import annotations

import struct
from typing import NamedTuple

from ariane.store.inner import MessageInner

__all__ = ["PreparedOne"]


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
