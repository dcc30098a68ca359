"""On-disk formats of the store, byte by byte (RocketMQ 4.x/5.x compatible, big-endian).

Directory layout (``store_path_root_dir``)::

    commitlog/<20-digit start offset>              CommitLog segments, mapped_file_size_commit_log
    commitlog/<name>.tr<N>                         bytes cut off by recovery (kept, never read)
    consumequeue/<topic>/<queueId>/<20-digit byte offset>   ConsumeQueue segments
    index/<yyyyMMddHHmmssSSS>                      IndexFiles, named by creation time (local)
    checkpoint                                     4096 bytes, see below
    abort                                          empty; exists while the store runs
    lock                                           flock()ed by the running store

File names are the global offset of the file's first byte (CommitLog: physical offset;
ConsumeQueue: byte offset in the logical queue, i.e. entry index * 20), ``f"{offset:020d}"``.
Every CommitLog/ConsumeQueue file has exactly its configured size (created with
``ftruncate`` before ``mmap``); loading stops at the first file of another size.

CommitLog record (``MessageExtEncoder``), IPv4 hosts, magic V1::

    off  size  field
      0     4  TOTALSIZE                 int32, whole record incl. this field
      4     4  MAGICCODE                 V1 0xDAA320A7 (-626843481), V2 0xDAA320AB (-626843477)
      8     4  BODYCRC                   zlib.crc32(body) & 0x7FFFFFFF
     12     4  QUEUEID                   int32
     16     4  FLAG                      int32, application flag
     20     8  QUEUEOFFSET               int64, ConsumeQueue index (0 for PREPARED/ROLLBACK)
     28     8  PHYSICALOFFSET            int64, offset of this record in the CommitLog
     36     4  SYSFLAG                   int32 (bits: 0x1 compressed, 0x2 multi tags,
                                         0xC transaction type, 0x10 born host IPv6,
                                         0x20 store host IPv6, 0x700 compression type)
     40     8  BORNTIMESTAMP             int64 ms
     48     8  BORNHOST                  4 address bytes + int32 port (IPv6: 16 + 4)
     56     8  STORETIMESTAMP            int64 ms, set under the put lock (monotonic)
     64     8  STOREHOSTADDRESS          4 + 4 (IPv6: 16 + 4)
     72     4  RECONSUMETIMES            int32
     76     8  PREPAREDTRANSACTIONOFFSET int64
     84     4  BODYLENGTH                int32
     88     B  BODY
   88+B     1  TOPICLENGTH               signed int8 (V2: int16, 2 bytes)
   89+B     T  TOPIC                     UTF-8
 89+B+T     2  PROPERTIESLENGTH          signed int16
 91+B+T     P  PROPERTIES                UTF-8 "k\\x01v\\x02" repeated

TOTALSIZE = 91 + B + T + P (+1 for V2, +12 per IPv6 host). Records never straddle files.

BLANK (end of file) record: when ``TOTALSIZE + 8 > space left`` the writer fills the rest of
the file with ``int32 space_left, int32 0xCBD43194 (-875286124)`` followed by anything, and
continues at offset 0 of the next file. So every full file ends with a BLANK record.

ConsumeQueue entry (``CQ_STORE_UNIT_SIZE`` = 20)::

      0     8  commit log physical offset   int64
      8     4  message size (TOTALSIZE)     int32
     12     8  tagsCode                     int64: Java String.hashCode(TAGS) sign-extended,
                                            0 without tags; SCHEDULE_TOPIC_XXXX: delivery ms

Entry n of a queue lives at byte n*20 of the queue. A blank filler entry (used when a queue's
first file starts mid-way) is ``(0, 0x7FFFFFFF, 0)``. An entry is valid iff offset >= 0 and
size > 0; zeros mark the end.

IndexFile (``IndexHeader`` + slots + entries), size = 40 + slots*4 + entries*20::

    header  0  8  beginTimestamp   store time of the first entry
            8  8  endTimestamp     store time of the last entry
           16  8  beginPhyOffset
           24  8  endPhyOffset
           32  4  hashSlotCount    incremented on every put
           36  4  indexCount       next entry number; starts at 1 (entry 0 is never used)
    slot i at 40 + i*4: int32 number of the newest entry whose hash % slots == i (0 = empty)
    entry n at 40 + slots*4 + n*20:
            0  4  keyHash          abs(Java hashCode("topic#key")), Integer.MIN_VALUE -> 0
            4  8  phyOffset
           12  4  timeDiff         (storeTimestamp - beginTimestamp) // 1000, seconds, >= 0
           16  4  prevIndex        previous entry in the same slot chain, 0 = none

Keys indexed per record: ``topic#UNIQ_KEY`` and ``topic#k`` for each space-separated KEYS
entry (ROLLBACK transaction records are not indexed).

checkpoint (4096 bytes, only the head used)::

      0  8  physicMsgTimestamp   store time of the last flushed CommitLog record
      8  8  logicsMsgTimestamp   store time of the last ConsumeQueue entry flushed
     16  8  indexMsgTimestamp    endTimestamp of the last fully flushed IndexFile
     24  8  masterFlushedOffset  (5.x; written 0)
     32  8  confirmPhyOffset     (5.x; written 0)

abort: an empty file created by ``start()``; removed by a clean ``shutdown()`` only when the
store is writeable and dispatch has caught up. Its presence at load means recovery must walk
the CommitLog from the checkpoint and re-dispatch.

This module only describes and parses; it does no I/O and logs nothing.
"""

from __future__ import annotations

import mmap
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, NamedTuple

from ariane.common import native
from ariane.common.hashing import tags_code as _tags_code
from ariane.common.properties import DELAY, KEYS, TAGS, UNIQ_KEY, decode_properties
from ariane.common.record import (
    BLANK_MAGIC_CODE,
    CRC_MASK,
    MESSAGE_MAGIC_CODE_V1,
    MESSAGE_MAGIC_CODE_V2,
)
from ariane.common.sysflag import born_host_v6, host_record_size, store_host_v6
from ariane.common.topics import SCHEDULE_TOPIC

__all__ = [
    "BLANK_MAGIC_CODE",
    "CQ_BLANK_ENTRY",
    "CQ_UNIT",
    "CQ_UNIT_SIZE",
    "END_FILE_MIN_BLANK_LENGTH",
    "MESSAGE_MAGIC_CODE_V1",
    "MESSAGE_MAGIC_CODE_V2",
    "Corrupt",
    "Decoded",
    "DispatchRequest",
    "EndOfSegment",
    "ReadableBuffer",
    "check_record",
    "delivery_timestamp",
    "file_name",
    "parse_file_name",
    "record_route",
    "tags_code_of",
]

#: What the record parsers accept: file maps and byte strings.
ReadableBuffer = bytes | bytearray | memoryview | mmap.mmap

END_FILE_MIN_BLANK_LENGTH: Final = 8
CQ_UNIT_SIZE: Final = 20
CQ_UNIT: Final = struct.Struct(">qiq")
CQ_BLANK_ENTRY: Final = CQ_UNIT.pack(0, 0x7FFFFFFF, 0)
OS_PAGE_SIZE: Final = 4096
MIN_RECORD_SIZE: Final = 91

INDEX_HEADER: Final = struct.Struct(">qqqqii")
INDEX_HEADER_SIZE: Final = 40
INDEX_SLOT: Final = struct.Struct(">i")
INDEX_ENTRY: Final = struct.Struct(">iqii")
INDEX_ENTRY_SIZE: Final = 20

CHECKPOINT: Final = struct.Struct(">qqqqq")
CHECKPOINT_FILE_SIZE: Final = 4096

RECORD_HEAD: Final = struct.Struct(">iiiiiqqiq")  # TOTALSIZE .. BORNTIMESTAMP (48 bytes)
SIZE_MAGIC: Final = struct.Struct(">ii")
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_I8 = struct.Struct(">b")

#: Where the store timestamp of the first record sits in a file (IPv4 born host).
STORE_TIMESTAMP_POS: Final = 56


class DispatchRequest(NamedTuple):
    """One dispatch unit, handed from the writer (or recovery) to the ConsumeQueue and index
    builders (RocketMQ ``DispatchRequest``)."""

    topic: str
    queue_id: int
    commit_log_offset: int
    msg_size: int
    tags_code: int
    store_timestamp_ms: int
    consume_queue_offset: int
    keys: str | None
    uniq_key: str | None
    sys_flag: int
    #: None when the producer of the request did not keep them.
    properties: dict[str, str] | None

    @property
    def end_offset(self) -> int:
        """Physical offset just past the record."""
        return self.commit_log_offset + self.msg_size


@dataclass(frozen=True, slots=True)
class Decoded:
    """A valid message record of ``size`` bytes (``dispatch`` filled when requested)."""

    size: int
    dispatch: DispatchRequest | None
    #: ``(topic, queue id, sysflag, store time)`` when asked for (``want_route``)
    route: tuple[str, int, int, int] | None = None


@dataclass(frozen=True, slots=True)
class EndOfSegment:
    """A BLANK record: the rest of the file is filler; continue in the next file."""

    size: int


@dataclass(frozen=True, slots=True)
class Corrupt:
    """Not a valid record: the end of the valid data."""

    reason: str


def file_name(offset: int) -> str:
    """The 20-digit zero-padded name of the file starting at ``offset``."""
    return f"{offset:020d}"


def parse_file_name(name: str) -> int | None:
    """The start offset encoded in a 20-digit file name, or None for any other name."""
    if len(name) == 20 and name.isdigit():
        return int(name)
    return None


def delivery_timestamp(levels_ms: tuple[int, ...], level: int, store_ts: int) -> int:
    """``computeDeliverTimestamp``: when a delayed message of ``level`` becomes due."""
    if level < 1:
        return store_ts + 1000
    return store_ts + levels_ms[min(level, len(levels_ms)) - 1]


def tags_code_of(
    topic: str, props: dict[str, str], store_ts: int, levels_ms: tuple[int, ...]
) -> int:
    """The ConsumeQueue tagsCode of a record (delivery time for ``SCHEDULE_TOPIC_XXXX``)."""
    if topic == SCHEDULE_TOPIC:
        delay = props.get(DELAY)
        if delay is not None:
            try:
                return delivery_timestamp(levels_ms, int(delay), store_ts)
            except ValueError:
                pass
    return _tags_code(props.get(TAGS))


def check_record(
    buf: ReadableBuffer,
    pos: int,
    limit: int,
    *,
    check_crc: bool,
    want_dispatch: bool,
    levels_ms: tuple[int, ...] = (),
    want_route: bool = False,
) -> Decoded | EndOfSegment | Corrupt:
    """``checkMessageAndReturnSize``: classify the bytes at ``pos`` (never beyond ``limit``).

    Args:
        buf: file contents (an mmap or bytes).
        pos: where the record should start.
        limit: end of the readable data.
        check_crc: verify the body CRC.
        want_dispatch: also decode topic and properties into a :data:`DispatchRequest`.
        levels_ms: delay levels, for the tagsCode of ``SCHEDULE_TOPIC_XXXX`` records.
        want_route: fill ``Decoded.route`` (topic, queue id, sysflag, store time) without
            decoding the properties.

    Returns:
        ``Decoded``, ``EndOfSegment`` for a BLANK record, or ``Corrupt``. Never raises on
        arbitrary bytes.
    """
    limit = min(limit, len(buf))
    if pos < 0 or limit - pos < 8:
        return Corrupt("no room for a record header")
    total, magic = SIZE_MAGIC.unpack_from(buf, pos)
    if magic == BLANK_MAGIC_CODE:
        if total < END_FILE_MIN_BLANK_LENGTH or pos + total > limit:
            return Corrupt(f"bad blank record size {total}")
        return EndOfSegment(total)
    if magic != MESSAGE_MAGIC_CODE_V1 and magic != MESSAGE_MAGIC_CODE_V2:
        return Corrupt(f"bad magic code {magic & 0xFFFFFFFF:#010x}")
    if total < MIN_RECORD_SIZE or pos + total > limit:
        return Corrupt(f"bad total size {total}")
    try:
        return _check_message(
            buf, pos, total, magic, check_crc, want_dispatch, levels_ms, want_route
        )
    except (struct.error, ValueError, UnicodeDecodeError, IndexError) as exc:
        return Corrupt(f"undecodable record: {exc}")


def _check_message(
    buf: ReadableBuffer,
    pos: int,
    total: int,
    magic: int,
    check_crc: bool,
    want_dispatch: bool,
    levels_ms: tuple[int, ...],
    want_route: bool = False,
) -> Decoded | Corrupt:
    _, _, crc, queue_id, _flag, queue_offset, phys, sys_flag, _born = RECORD_HEAD.unpack_from(
        buf, pos
    )
    p = pos + 48 + host_record_size(born_host_v6(sys_flag))
    (store_ts,) = _I64.unpack_from(buf, p)
    p += 8 + host_record_size(store_host_v6(sys_flag)) + 12
    (body_len,) = _I32.unpack_from(buf, p)
    p += 4
    end = pos + total
    if body_len < 0 or p + body_len > end:
        return Corrupt(f"bad body length {body_len}")
    if check_crc and body_len > 0 and (zlib.crc32(buf[p : p + body_len]) & CRC_MASK) != crc:
        return Corrupt("body CRC mismatch")
    p += body_len
    if magic == MESSAGE_MAGIC_CODE_V2:
        if p + 2 > end:
            return Corrupt("no room for topic length")
        (topic_len,) = _I16.unpack_from(buf, p)
        p += 2
    else:
        if p + 1 > end:
            return Corrupt("no room for topic length")
        (topic_len,) = _I8.unpack_from(buf, p)
        p += 1
    if topic_len < 0 or p + topic_len + 2 > end:
        return Corrupt(f"bad topic length {topic_len}")
    topic_at = p
    p += topic_len
    (props_len,) = _I16.unpack_from(buf, p)
    p += 2
    if props_len < 0 or p + props_len != end:
        return Corrupt(f"record length mismatch (properties length {props_len})")
    if phys < 0 or queue_offset < 0:
        return Corrupt("negative offset")
    if not want_dispatch:
        if want_route:
            topic = bytes(buf[topic_at : topic_at + topic_len]).decode()
            return Decoded(total, None, (topic, queue_id, sys_flag, store_ts))
        return Decoded(total, None)
    topic = bytes(buf[topic_at : topic_at + topic_len]).decode()
    props = decode_properties(bytes(buf[p:end]).decode()) if props_len else {}
    tags = tags_code_of(topic, props, store_ts, levels_ms)
    request = DispatchRequest(
        topic, queue_id, phys, total, tags, store_ts, queue_offset, props.get(KEYS),
        props.get(UNIQ_KEY), sys_flag, props,
    )  # fmt: skip
    return Decoded(total, request)


def record_dispatch_py(
    buf: ReadableBuffer, pos: int, limit: int, levels_ms: tuple[int, ...] = ()
) -> DispatchRequest | EndOfSegment | Corrupt:
    """The dispatch request of the record at ``pos``: ``check_record(check_crc=False,
    want_dispatch=True)`` without the ``Decoded`` around it (what a DLedger follower asks of
    every record it copies). The reference of the compiled ``dispatch_record``."""
    res = check_record(buf, pos, limit, check_crc=False, want_dispatch=True, levels_ms=levels_ms)
    if type(res) is Decoded:
        assert res.dispatch is not None
        return res.dispatch
    return res  # type: ignore[return-value]


def _with_compiled(
    fast: Callable[[ReadableBuffer, int, int], DispatchRequest | None],
) -> Callable[..., DispatchRequest | EndOfSegment | Corrupt]:
    def record_dispatch_compiled(
        buf: ReadableBuffer, pos: int, limit: int, levels_ms: tuple[int, ...] = ()
    ) -> DispatchRequest | EndOfSegment | Corrupt:
        request = fast(buf, pos, limit)
        if request is None:  # not well-formed, IPv6 hosts, a delayed message: the reference
            return record_dispatch_py(buf, pos, limit, levels_ms)
        return request

    return record_dispatch_compiled


def _record_dispatch() -> Callable[..., DispatchRequest | EndOfSegment | Corrupt]:
    fast = native.speedups
    if fast is None or not hasattr(fast, "dispatch_record"):  # pure, or a stale build
        return record_dispatch_py
    fast.configure_dispatch(DispatchRequest, _tags_code, SCHEDULE_TOPIC.encode())
    return _with_compiled(fast.dispatch_record)


#: :func:`record_dispatch_py`, with the compiled ``ariane._speedups.dispatch_record`` deciding
#: the well-formed records when built
record_dispatch = _record_dispatch()


def record_route(buf: ReadableBuffer, pos: int) -> tuple[str, int, int, int]:
    """``(topic, queue id, sysflag, store time)`` of a record :func:`check_record` accepted,
    without decoding its properties (recovery's quick look for missing dispatch work)."""
    magic = SIZE_MAGIC.unpack_from(buf, pos)[1]
    _, _, _crc, queue_id, _flag, _qo, _phys, sys_flag, _born = RECORD_HEAD.unpack_from(buf, pos)
    p = pos + 48 + host_record_size(born_host_v6(sys_flag))
    (store_ts,) = _I64.unpack_from(buf, p)
    p += 8 + host_record_size(store_host_v6(sys_flag)) + 12
    (body_len,) = _I32.unpack_from(buf, p)
    p += 4 + body_len
    if magic == MESSAGE_MAGIC_CODE_V2:
        (topic_len,) = _I16.unpack_from(buf, p)
        p += 2
    else:
        (topic_len,) = _I8.unpack_from(buf, p)
        p += 1
    return bytes(buf[p : p + topic_len]).decode(), queue_id, sys_flag, store_ts
