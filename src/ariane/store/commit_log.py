"""The CommitLog: every message of every topic appended to one log (RocketMQ ``CommitLog``).

How it works: a put validates and encodes (CRC, properties; outside the lock, or in the one C
call of the compiled single put), then under the put lock it stamps the store time (kept
monotonic), assigns the queue offset from ``topic_queue_table``, writes the record into the
last mapped file and advances the write position. A record that does not fit (with 8 bytes to
spare) makes the writer fill the file with a BLANK record and move to a new file. The writer
appends a ready-made :data:`DispatchRequest` to ``pending`` (a run written by ``put_block``:
one :class:`~ariane.store.dispatch_block.DispatchBlock`), in physical order, so the reput
thread builds ConsumeQueue/index entries without re-parsing the log (recovery parses it).
"""

from __future__ import annotations

import logging
import mmap
import struct
import threading
import time
import zlib
from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Sequence
from itertools import accumulate
from operator import itemgetter

from ariane.common import faults
from ariane.common.clock import Clock, SystemClock
from ariane.common.hashing import tags_code
from ariane.common.histogram import Histogram
from ariane.common.message import HostPort
from ariane.common.properties import KEYS, TAGS, UNIQ_KEY, encode_properties
from ariane.common.record import CRC_MASK
from ariane.common.sysflag import (
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
    enters_consume_queue,
    host_flags,
    with_host_flags,
)
from ariane.common.topics import SCHEDULE_TOPIC
from ariane.store.batch_bulk import prepare_records, write_records
from ariane.store.commit_log_files import delete_expired_files, set_aside
from ariane.store.commit_log_reads import CommitLogReads
from ariane.store.commit_log_state import PutLog, PutState, PutStateView, put_log
from ariane.store.config import FlushDiskType, StoreConfig
from ariane.store.disk import OS_DISK, Disk
from ariane.store.dispatch_block import Pending, drop_topics
from ariane.store.format import (
    BLANK_MAGIC_CODE,
    END_FILE_MIN_BLANK_LENGTH,
    MESSAGE_MAGIC_CODE_V1,
    MESSAGE_MAGIC_CODE_V2,
    SIZE_MAGIC,
    DispatchRequest,
    tags_code_of,
)
from ariane.store.inner import MessageBatchInner, MessageInner
from ariane.store.mapped_file import MappedFile
from ariane.store.mapped_file_queue import MappedFileQueue
from ariane.store.prepared import PreparedBatch, PreparedOne, PreparedRecord
from ariane.store.put_native import HEADERS as _HEADERS
from ariane.store.put_native import prepare as _native_prepare
from ariane.store.put_native import write as _native_write
from ariane.store.record_block import BlockProgress, PackedRecord, write_run
from ariane.store.results import PutResult, PutStatus

__all__ = ["FLUSH_LATENCY_BUCKETS_S", "CommitLog", "PreparedBatch", "PreparedOne"]

#: Buckets of ``CommitLog.flush_latency`` (seconds).
FLUSH_LATENCY_BUCKETS_S = (0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0)

logger = logging.getLogger(__name__)

#: Builds a DispatchRequest from a ready tuple in one C call (a NamedTuple's own
#: constructor costs a Python-level call per record; hot path).
_new_request = tuple.__new__
_new_prepared = tuple.__new__
_I32_MIN, _I32_MAX = -(2**31), 2**31 - 1
#: sysFlag without its host bits (= ``with_host_flags``, inline)
_NOT_HOST_FLAGS = ~host_flags(True, True)
_I16 = struct.Struct(">h")
#: queueId, flag, sysFlag, reconsumeTimes (int32), bornTimestamp, preparedTransactionOffset
#: (int64): packing them is one C call that refuses what the record cannot hold (hot path)
_RANGES = struct.Struct("<iiiiqq")
_PUT_OK = PutStatus.PUT_OK  # an Enum member's class-attribute lookup is slow (hot path)
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")


def _illegal(remark: str) -> PutResult:
    return PutResult(PutStatus.MESSAGE_ILLEGAL, remark=remark)


def _out_of_range(
    queue_id: int, flag: int, sys_flag: int, reconsume: int, born_ts: int, prepared: int
) -> PutResult | None:
    """MESSAGE_ILLEGAL when a field does not fit its place in the record (or the queue id is
    negative); packing them is one C call that refuses what the record cannot hold."""
    try:
        _RANGES.pack(queue_id, flag, sys_flag, reconsume, born_ts, prepared)
        if queue_id >= 0:
            return None
    except struct.error:  # out of range (or not an integer)
        pass
    return _illegal("queue id, flag, sysFlag, reconsumeTimes or an offset out of range")


def _encode_props(props: dict[str, str]) -> str:
    """``k\x01v\x02...`` (fast path; falls back to the tolerant encoder for None values)."""
    if not props:
        return ""
    try:
        return "\x02".join(map("\x01".join, props.items())) + "\x02"
    except TypeError:
        return encode_properties(props)


_record_bytes = itemgetter(0)


class CommitLog(CommitLogReads, PutStateView):
    """The CommitLog files plus the put path.

    Args:
        config: the store configuration.
        clock: time source for store timestamps.
    """

    def __init__(self, config: StoreConfig, clock: Clock, disk: Disk = OS_DISK) -> None:
        self.config = config
        self.clock = clock
        self._system_clock = type(clock) is SystemClock  # its now_ms read in C by put_log
        self.disk = disk
        self.queue = MappedFileQueue(
            config.commit_log_dir,
            config.mapped_file_size_commit_log,
            populate=True,
            # SYNC_FLUSH: each group commit's fdatasync writes only the pages its records
            # dirtied (single pages); ASYNC_FLUSH keeps the readahead's large folios
            warm_single_pages=config.flush_disk_type is FlushDiskType.SYNC_FLUSH,
            disk=disk,
        )
        self.file_size = config.mapped_file_size_commit_log
        #: next queue offset per (topic, queue_id), rebuilt from the ConsumeQueues at load.
        self.topic_queue_table: dict[tuple[str, int], int] = {}
        #: dispatch requests in physical order, consumed by the reput thread.
        self.pending: deque[Pending] = deque()
        #: blocks (``DispatchBlock``) ever queued (counted before each is queued): while 0,
        #: the reput thread knows ``pending`` holds single requests only
        self.blocks_queued = 0
        #: where the writer queues the dispatch requests of new records: ``pending`` itself
        #: here; a log whose records become visible later (DLedger) stages them apart
        self.staged = self.pending
        self.put_lock = threading.Lock()
        self.on_appended: Callable[[], None] | None = None
        self._topics: dict[str, tuple[bytes, int] | str] = {}
        #: (born, store, header struct, sysFlag host bits) of the last put.
        self._last_hosts: tuple[object, object, struct.Struct, int] = (
            None, None, _HEADERS[(False, False)], 0,
        )  # fmt: skip
        self._levels_ms = config.delay_levels_ms
        self._tag_codes: dict[str, int] = {}
        self._max_props = config.max_properties_length
        self._max_size = config.max_message_size
        #: what every put reads and advances under the put lock: the current file, the last
        #: store time, the counters (the properties below), the caches and limits
        self._state = PutState(
            self._topics, self._tag_codes, self._max_props, self._max_size,
            self.file_size - END_FILE_MIN_BLANK_LENGTH, None if self._system_clock else clock,
        )  # fmt: skip
        #: seconds taken by flushes that made data durable (monitoring)
        self.flush_latency = Histogram(FLUSH_LATENCY_BUCKETS_S)
        #: the compiled single put (None: the pure build, or a test asking for the reference)
        self._fast_prepare = _native_prepare
        self._fast_write = _native_write
        self._fast_put: PutLog | None = put_log

    # -- validation ----------------------------------------------------------------------
    def _topic_tail(self, topic: str) -> tuple[bytes, int] | str:
        """(TOPICLENGTH + TOPIC bytes, magic code) for a legal topic, else why it is not."""
        cached = self._topics.get(topic)
        if cached is not None:
            return cached
        try:
            raw = topic.encode()
        except UnicodeEncodeError:
            return "topic is not valid unicode"
        result: tuple[bytes, int] | str
        if not raw:
            result = "topic is empty"
        elif len(raw) > self.config.max_topic_length:
            result = f"topic longer than {self.config.max_topic_length} bytes"
        elif topic in (".", "..") or any(c in topic for c in "/\\\0") or not topic.isprintable():
            result = f"topic {topic[:40]!r} cannot name a ConsumeQueue directory"
        elif len(raw) > 127:
            result = (_I16.pack(len(raw)) + raw, MESSAGE_MAGIC_CODE_V2)
        else:
            result = (bytes((len(raw),)) + raw, MESSAGE_MAGIC_CODE_V1)
        if len(self._topics) < 100_000:
            self._topics[topic] = result
        return result

    def _props_bytes(self, props: dict[str, str], text: str | None) -> bytes | PutResult:
        """The encoded properties of a message (``text`` when given), or why they cannot be
        stored."""
        if text is None:
            text = _encode_props(props)
        try:
            props_bytes = text.encode()
        except UnicodeEncodeError:
            return _illegal("properties are not valid unicode")
        if len(props_bytes) > self._max_props:
            return PutResult(
                PutStatus.PROPERTIES_SIZE_EXCEEDED,
                remark=f"properties are {len(props_bytes)} bytes, limit {self._max_props}",
            )
        return props_bytes

    def _too_big(self, what: str, total: int) -> PutResult:
        """The answer to ``total`` stored bytes over ``max_message_size``."""
        return _illegal(f"{what} is {total} bytes stored, limit {self._max_size}")

    def _tags_code(self, topic: str, props: dict[str, str], store_ts: int) -> int:
        if topic == SCHEDULE_TOPIC:
            return tags_code_of(topic, props, store_ts, self._levels_ms)
        tags = props.get(TAGS)
        if not tags:
            return 0
        code = self._tag_codes.get(tags)
        if code is None:
            code = tags_code(tags)
            if len(self._tag_codes) < 65536:
                self._tag_codes[tags] = code
        return code

    # -- put -----------------------------------------------------------------------------
    def _hosts(self, born: HostPort, store: HostPort) -> tuple[struct.Struct, int] | None:
        """(header struct, sysFlag host bits) for this pair of hosts, None if one is bad.

        Remembers the last pair by identity: a broker reuses its HostPort objects.
        """
        born6 = len(born.addr) == 16
        store6 = len(store.addr) == 16
        if (not born6 and len(born.addr) != 4) or (not store6 and len(store.addr) != 4):
            return None
        parts = (_HEADERS[(born6, store6)], host_flags(born6, store6))
        self._last_hosts = (born, store, *parts)
        return parts

    def prepare_one(self, msg: MessageInner) -> PreparedOne | PutResult:
        """Validate and encode ``msg`` as far as possible without the put lock (the record
        then goes to any place :meth:`write_one` is given). Never raises for bad input.
        In C for the common shape (``store/put_native.py``), else the reference."""
        fast = self._fast_prepare
        if fast is not None:
            one = fast(msg, self._topics, self._tag_codes, self._max_props, self._max_size)
            if one is not None:
                return one
        return self.prepare_one_py(msg)

    def prepare_one_py(self, msg: MessageInner) -> PreparedOne | PutResult:
        """:meth:`prepare_one` in Python: the reference."""
        topic = msg.topic
        tail = self._topics.get(topic)
        if tail is None:
            tail = self._topic_tail(topic)
        if isinstance(tail, str):
            return _illegal(tail)
        topic_tail, magic = tail
        born = msg.born_host
        store = msg.store_host
        last = self._last_hosts
        if born is last[0] and store is last[1]:
            header, host_bits = last[2], last[3]
        else:
            hosts = self._hosts(born, store)
            if hosts is None:
                return _illegal("born/store host address must be 4 or 16 bytes")
            header, host_bits = hosts
        sys_flag = msg.sys_flag
        bad = _out_of_range(
            msg.queue_id, msg.flag, sys_flag, msg.reconsume_times, msg.born_timestamp_ms,
            msg.prepared_transaction_offset,
        )  # fmt: skip
        if bad is not None:
            return bad
        props = msg.properties
        props_bytes = self._props_bytes(props, msg.properties_string)
        if isinstance(props_bytes, PutResult):
            return props_bytes
        props_len = len(props_bytes)
        total = header.size + len(topic_tail) + 2 + len(msg.body) + props_len
        if total > self._max_size:
            return self._too_big("message", total)
        tags = props.get(TAGS)
        tags_code = self._tag_codes.get(tags) if tags else 0
        if tags_code is None:
            tags_code = self._tags_code(topic, props, 0)
        return _new_prepared(
            PreparedOne,
            (
                msg, header, magic, (sys_flag & _NOT_HOST_FLAGS) | host_bits, total,
                zlib.crc32(msg.body) & CRC_MASK,
                topic_tail + props_len.to_bytes(2, "big") + props_bytes, tags_code,
            ),
        )  # fmt: skip

    def write_one(
        self, one: PreparedOne, mm: bytearray | mmap.mmap, pos: int, phys: int, store_ts: int
    ) -> PutResult:
        """Under the put lock: give ``one`` its queue offset and write it at ``pos`` of ``mm``
        as the record at physical offset ``phys``; queue it for dispatch. In C for the
        common shape (``store/put_native.py``), else the reference."""
        fast = self._fast_write
        if fast is not None:
            result = fast(one, mm, pos, phys, store_ts, self.topic_queue_table, self.staged)
            if result is not None:
                self.put_times_total += 1
                self.put_size_total += one.total
                return result
        return self.write_one_py(one, mm, pos, phys, store_ts)

    def write_one_py(
        self, one: PreparedOne, mm: bytearray | mmap.mmap, pos: int, phys: int, store_ts: int
    ) -> PutResult:
        """:meth:`write_one` in Python: the reference."""
        msg = one.msg
        topic = msg.topic
        queue_id = msg.queue_id
        sys_flag = one.sys_flag
        tx = sys_flag & TRANSACTION_TYPE_MASK  # = enters_consume_queue(sys_flag), inline
        normal = tx != TRANSACTION_PREPARED_TYPE and tx != TRANSACTION_ROLLBACK_TYPE
        key = (topic, queue_id)
        queue_offset = self.topic_queue_table.get(key, 0) if normal else 0
        body = msg.body
        body_len = len(body)
        born = msg.born_host
        store = msg.store_host
        total = one.total
        header = one.header
        header.pack_into(
            mm, pos, total, one.magic, one.crc, queue_id, msg.flag, queue_offset, phys, sys_flag,
            msg.born_timestamp_ms, born.addr, born.port, store_ts, store.addr, store.port,
            msg.reconsume_times, msg.prepared_transaction_offset, body_len,
        )  # fmt: skip
        p = pos + header.size + body_len
        mm[pos + header.size : p] = body
        mm[p : pos + total] = one.rest
        if normal:
            self.topic_queue_table[key] = queue_offset + 1
        props = msg.properties
        tags_code = one.tags_code
        if topic == SCHEDULE_TOPIC:  # tagsCode = delivery time
            tags_code = self._tags_code(topic, props, store_ts)
        self.staged.append(
            _new_request(
                DispatchRequest,
                (
                    topic, queue_id, phys, total, tags_code, store_ts, queue_offset,
                    props.get(KEYS), props.get(UNIQ_KEY), sys_flag, props,
                ),
            )
        )  # fmt: skip
        self.put_times_total += 1
        self.put_size_total += total
        return PutResult(
            _PUT_OK, phys, total, store_ts, queue_offset, 1, store.addr, store.port, (phys,)
        )

    def next_store_timestamp(self) -> int:
        """Under the put lock: now, never before the last store time (kept monotonic)."""
        state = self._state
        now = self.clock.now_ms()
        store_ts = now if now > state.last_store_ts else state.last_store_ts
        state.last_store_ts = store_ts
        return store_ts

    def put_message(self, msg: MessageInner) -> PutResult:
        """Append one message. Never raises for bad input: returns a status instead. One C
        call (``put_log``: the put lock, the store time, ``put_one`` and the bookkeeping) when
        it can, else two steps (the reference). The queue table and ``staged`` are read before
        the lock: only loading (before any put) and the DLedger log, which has its own
        ``put_message``, replace them.

        Raises:
            OSError: a new CommitLog file could not be created (reported by the caller).
        """
        fast = self._fast_put
        if fast is not None:
            result = fast(self._state, msg, self.put_lock, self.topic_queue_table, self.staged)
            if result is not None:
                return result
        return self._put_two_steps(msg)

    def _put_two_steps(self, msg: MessageInner) -> PutResult:
        """:meth:`put_message` by ``prepare_one`` (outside the lock) and ``write_one``."""
        fast = self._fast_prepare  # = prepare_one, inline
        args = (msg, self._topics, self._tag_codes, self._max_props, self._max_size)
        one = fast(*args) if fast else None
        if one is None:
            slow = self.prepare_one_py(msg)
            if not isinstance(slow, PreparedOne):
                return slow
            one = slow
        with self.put_lock:
            return self._write_locked(one)

    def _write_locked(self, one: PreparedOne) -> PutResult:
        """Under the put lock: write ``one`` at the end of the log (rolling the file when it
        does not fit) with the next store time, and advance the put state (as ``put_log``)."""
        state = self._state
        store_ts = self.next_store_timestamp()
        total = one.total
        mf = state.current
        if mf is None or total + END_FILE_MIN_BLANK_LENGTH > self.file_size - mf.wrote_position:
            mf = self._file_for(total)
        pos = mf.wrote_position
        result = self.write_one(one, mf.mm, pos, mf.file_from_offset + pos, store_ts)
        mf.wrote_position = pos + total
        mf.store_timestamp = store_ts
        return result

    def put_prepared(self, ones: Sequence[PreparedOne], out: list[PutResult]) -> None:
        """Append messages prepared by :meth:`prepare_one`, in order, under one hold of the
        put lock; each result is appended to ``out`` as its record is written (so a caller
        knows how far it got when a new file cannot be created).

        Raises:
            OSError: a new CommitLog file could not be created.
        """
        with self.put_lock:
            for one in ones:
                out.append(self._write_locked(one))

    def put_block(self, recs: Sequence[PackedRecord], progress: BlockProgress) -> None:
        """Append records packed by :func:`~ariane.store.record_block.pack`, in order, under
        one hold of the put lock with one store time: each run that fits the current file is
        copied at once (:func:`~ariane.store.record_block.write_run`). ``progress`` says how
        far it got (also when a new file cannot be created).

        Raises:
            OSError: a new CommitLog file could not be created.
        """
        ends = list(accumulate(map(len, map(_record_bytes, recs))))
        n = len(recs)
        with self.put_lock:
            store_ts = self.next_store_timestamp()
            progress.store_timestamp_ms = store_ts
            i = 0
            while i < n:
                done = ends[i - 1] if i else 0
                mf = self._current
                room = -1 if mf is None else self.file_size - mf.wrote_position
                j = bisect_right(ends, done + room - END_FILE_MIN_BLANK_LENGTH, i)
                if mf is None or j == i:
                    self._file_for(ends[i] - done)
                    continue
                pos = mf.wrote_position
                phys = mf.file_from_offset + pos
                self.blocks_queued += 1  # before the block is queued (see ReputService)
                size = write_run(recs[i:j], mf.mm, pos, phys, store_ts, self.topic_queue_table,
                                 self.staged)  # fmt: skip
                mf.wrote_position = pos + size
                mf.store_timestamp = store_ts
                self.put_times_total += j - i
                self.put_size_total += size
                if progress.first_offset < 0:
                    progress.first_offset = phys
                progress.end_offset = phys + size
                progress.written += j - i
                i = j

    def prepare_batch(self, batch: MessageBatchInner) -> PreparedBatch | PutResult:
        """Validate and encode a batch as far as possible without the put lock."""
        tail = self._topic_tail(batch.topic)
        if isinstance(tail, str):
            return _illegal(tail)
        topic_tail, magic = tail
        hosts = self._hosts(batch.born_host, batch.store_host)
        if hosts is None:
            return _illegal("born/store host address must be 4 or 16 bytes")
        header, host_bits = hosts
        if not batch.messages:
            return _illegal("empty batch")
        sys_flag = batch.sys_flag
        if not enters_consume_queue(sys_flag):
            return _illegal("transactional messages cannot be sent in a batch")
        fixed = header.size + len(topic_tail) + 2
        queue_id = batch.queue_id
        reconsume, born_ts = batch.reconsume_times, batch.born_timestamp_ms
        # the fields shared by every record once; each record's flag below
        bad = _out_of_range(queue_id, 0, sys_flag, reconsume, born_ts, 0)
        if bad is not None:
            return bad
        scheduled = batch.topic == SCHEDULE_TOPIC  # tagsCode = delivery time, when written
        tag_codes = self._tag_codes
        max_size = self._max_size
        bulk = None if scheduled else prepare_records(
            batch.messages, fixed, topic_tail, tag_codes, self._max_props
        )  # fmt: skip
        if bulk is not None and max(bulk[1]) <= max_size and sum(bulk[1]) <= max_size:
            return PreparedBatch(
                batch, header, magic, topic_tail, with_host_flags(sys_flag, host_bits), bulk[0],
                sum(bulk[1]),
            )  # fmt: skip
        preps: list[PreparedRecord] = []
        batch_total = 0
        for item in batch.messages:
            flag = item.flag
            if flag.__class__ is not int or not _I32_MIN <= flag <= _I32_MAX:
                bad = _out_of_range(queue_id, flag, sys_flag, reconsume, born_ts, 0)
                if bad is not None:
                    return bad
            props = item.properties
            props_bytes = self._props_bytes(props, item.properties_string)
            if props_bytes.__class__ is not bytes:
                return props_bytes  # type: ignore[return-value]
            body = item.body
            total = fixed + len(body) + len(props_bytes)
            if total > max_size:
                return self._too_big("message", total)
            tags = props.get(TAGS)
            code = None if scheduled else tag_codes.get(tags) if tags else 0
            if code is None and not scheduled:
                code = self._tags_code(batch.topic, props, 0)
            rest = topic_tail + len(props_bytes).to_bytes(2, "big") + props_bytes
            crc = zlib.crc32(body) & CRC_MASK
            preps.append(_new_prepared(PreparedRecord, (body, crc, flag, props, rest, total, code)))
            batch_total += total
        if batch_total > self._max_size:
            return self._too_big("batch", batch_total)
        return PreparedBatch(
            batch, header, magic, topic_tail, with_host_flags(sys_flag, host_bits), preps,
            batch_total,
        )  # fmt: skip

    def write_batch_record(
        self,
        prepared: PreparedBatch,
        prep: PreparedRecord,
        mm: bytearray | mmap.mmap,
        pos: int,
        phys: int,
        queue_offset: int,
        store_ts: int,
    ) -> None:
        """Under the put lock: write one record of a batch and queue it for dispatch (the
        caller assigns the queue offsets and updates ``topic_queue_table``)."""
        self._write_batch(prepared, (prep,), mm, pos, phys, queue_offset, store_ts)

    def _write_batch(
        self,
        prepared: PreparedBatch,
        records: Sequence[PreparedRecord],
        mm: bytearray | mmap.mmap,
        pos: int,
        phys: int,
        queue_offset: int,
        store_ts: int,
    ) -> list[int]:
        """Under the put lock: write ``records`` of ``prepared`` one after the other from
        ``pos`` of ``mm`` (physical offset ``phys``, queue offsets from ``queue_offset``) and
        queue them for dispatch; returns their physical offsets. One loop for a whole batch
        (hot path: no Python call per message; in bulk when it can, ``batch_bulk``)."""
        bulk = write_records(prepared, records, mm, pos, phys, queue_offset, store_ts)
        if bulk is not None:
            starts, requests, written = bulk
            self.staged.extend(requests)
            self.put_times_total += len(starts)
            self.put_size_total += written
            return starts
        batch = prepared.batch
        topic, queue_id = batch.topic, batch.queue_id
        born, store = batch.born_host, batch.store_host
        born_addr, born_port, store_addr, store_port = born.addr, born.port, store.addr, store.port
        born_ts, reconsume = batch.born_timestamp_ms, batch.reconsume_times
        header = prepared.header
        pack, fixed = header.pack_into, header.size
        magic, sys_flag = prepared.magic, prepared.sys_flag
        append = self.staged.append
        offsets: list[int] = []
        written = 0
        for body, crc, flag, props, rest, total, code in records:
            pack(
                mm, pos, total, magic, crc, queue_id, flag, queue_offset, phys, sys_flag, born_ts,
                born_addr, born_port, store_ts, store_addr, store_port, reconsume, 0, len(body),
            )  # fmt: skip
            p = pos + fixed
            end = p + len(body)
            mm[p:end] = body
            mm[end : pos + total] = rest
            if code is None:
                code = self._tags_code(topic, props, store_ts)
            append(
                _new_request(
                    DispatchRequest,
                    (
                        topic, queue_id, phys, total, code, store_ts, queue_offset,
                        props.get(KEYS), props.get(UNIQ_KEY), sys_flag, props,
                    ),
                )
            )  # fmt: skip
            offsets.append(phys)
            pos += total
            phys += total
            queue_offset += 1
            written += total
        self.put_times_total += len(offsets)
        self.put_size_total += written
        return offsets

    def put_messages(self, batch: MessageBatchInner) -> PutResult:
        """Append a batch contiguously under one lock hold (all or nothing).

        Raises:
            OSError: a new CommitLog file could not be created.
        """
        prepared = self.prepare_batch(batch)
        if isinstance(prepared, PutResult):
            return prepared
        key = (batch.topic, batch.queue_id)
        with self.put_lock:
            store_ts = self.next_store_timestamp()
            mf = self._file_for(prepared.total)
            pos = mf.wrote_position
            first_phys = mf.file_from_offset + pos
            first_qoff = self.topic_queue_table.get(key, 0)
            offsets = self._write_batch(
                prepared, prepared.records, mf.mm, pos, first_phys, first_qoff, store_ts
            )
            mf.wrote_position = pos + prepared.total
            mf.store_timestamp = store_ts
            self.topic_queue_table[key] = first_qoff + len(offsets)
        store = batch.store_host
        return PutResult(
            PutStatus.PUT_OK, first_phys, prepared.total, store_ts, first_qoff,
            len(prepared.records), store.addr, store.port, tuple(offsets),
        )  # fmt: skip

    def drop_pending_topics(self, topics: set[str]) -> None:
        """Under the put lock: forget records of deleted ``topics`` not dispatched yet."""
        drop_topics(self.pending, topics)

    def _file_for(self, total: int) -> MappedFile:
        """The file to write ``total`` bytes into, writing a BLANK record when needed."""
        mf = self.queue.get_last_mapped_file(0)
        assert mf is not None
        pos = mf.wrote_position
        remaining = self.file_size - pos
        if total + END_FILE_MIN_BLANK_LENGTH > remaining:
            SIZE_MAGIC.pack_into(mf.mm, pos, remaining, BLANK_MAGIC_CODE)
            mf.wrote_position = self.file_size
            faults.point("commitlog.roll.after_blank")
            mf = self.queue.get_last_mapped_file(0)
            assert mf is not None
            assert mf.wrote_position == 0
        self._current = mf
        return mf

    # -- maintenance ---------------------------------------------------------------------
    def flush(self, least_pages: int) -> bool:
        """Flush one file's worth; True when nothing new was flushed."""
        start = time.perf_counter()
        idle = self.queue.flush(least_pages)
        if not idle:
            self.flush_latency.observe(time.perf_counter() - start)
        return idle

    def set_last_store_timestamp(self, ts: int) -> None:
        """Seed the monotonic store clock after recovery."""
        self._last_store_ts = max(self._last_store_ts, ts)

    def shutdown(self) -> None:
        """Unmap every file."""
        self._current = None
        self.queue.shutdown()

    def delete_expired_files(self, now_ms: int, reserved_ms: int, force: bool, limit: int) -> int:
        """Delete expired files from the oldest on (see ``commit_log_files``); how many."""
        return delete_expired_files(self.queue, self.disk, now_ms, reserved_ms, force, limit)

    def set_aside(self, mf: MappedFile) -> None:
        """Keep a file cut off by recovery as ``<name>.tr<N>`` (see ``commit_log_files``)."""
        set_aside(self.disk, mf)
