"""A SEND_BATCH body of the common shape put into the CommitLog without a per-message object.

How it works. The bulk path of a batch (``broker/processors/batch_bulk.py`` then
``store/batch_bulk.py``, RocketMQ's ``CommitLog.asyncPutMessages`` with
``MessageExtEncoder.encodeBatch``) still makes, per message, a ``BatchEntry``, a properties dict,
a ``BatchItem``, a ``PreparedRecord`` and a ``DispatchRequest``. For the shape the Spark sink and
``send_batch`` send (every message ASCII properties of well-formed pairs ending in the separator,
with ``UNIQ_KEY``, at most one ``__ARIANE_DEDUP`` and ``KEYS``, no ``TRAN_MSG``, ``DELAY``,
``CLUSTER``, ``MSG_REGION``, ``TRACE_ON`` or ``TAGS``) two calls do the work straight from the
request body: :func:`scan` returns the ids the broker needs (the idempotence window's, the
index's) and the sizes for the checks, or ``None`` for any other batch (a corrupt one too: the
existing path then says why); :func:`write` writes the records (the properties followed by the
broker's ``CLUSTER``/``MSG_REGION``/``TRACE_ON`` text, what the bulk path stores) under the put
lock. The CommitLog queues the batch's dispatch as one
:class:`~ariane.store.dispatch_block.DispatchBlock` (columns, no properties: the arriving
listener then reads the records, as for the timer wheel's blocks). Both have a compiled twin
(``_speedups_batchput.h``); the functions here are the reference and are built from the existing
bulk code (``decode_batch_py``, ``prepare_records``, ``write_records``), so the tests compare the
compiled calls with what the bulk path writes. The on-disk format is unchanged.
"""

from __future__ import annotations

import mmap
import struct
from itertools import accumulate
from typing import NamedTuple, cast

from ariane.common import native
from ariane.common.batch import decode_batch_py
from ariane.common.message import HostPort
from ariane.common.properties import (
    CLUSTER,
    DEDUP,
    DELAY,
    KEYS,
    MSG_REGION,
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    TAGS,
    TRACE_SWITCH,
    TRANSACTION_PREPARED,
    UNIQ_KEY,
    decode_properties_py,
)
from ariane.common.sysflag import enters_consume_queue, with_host_flags
from ariane.common.topics import SCHEDULE_TOPIC
from ariane.errors import CorruptionError
from ariane.store.batch_bulk import prepare_records, write_records
from ariane.store.commit_log import CommitLog, _out_of_range
from ariane.store.dispatch_block import DispatchBlock
from ariane.store.inner import BatchItem, MessageBatchInner
from ariane.store.prepared import PreparedBatch
from ariane.store.results import PutResult, PutStatus

__all__ = [
    "Scan", "ScannedBatch", "check_scanned", "put_scanned", "scan", "scan_py", "write", "write_py",
]  # fmt: skip
_PUT_OK = PutStatus.PUT_OK

#: (UNIQ_KEY of each message, its __ARIANE_DEDUP or None, its KEYS or None, the sum and the
#: largest of body + properties bytes over the messages)
Scan = tuple[list[str], list[str | None], list[str | None], int, int]

_SLOW = frozenset((TRANSACTION_PREPARED, DELAY, CLUSTER, MSG_REGION, TRACE_SWITCH, TAGS))
_ONCE = frozenset((UNIQ_KEY, DEDUP, KEYS))
_PROPS_MAX = 0x7FFF


def _shape(text: str) -> dict[str, str] | None:
    """The properties of ``text`` when they are of the common shape, else None."""
    if not text.endswith(PROPERTY_SEPARATOR) or not text.isascii():
        return None
    props: dict[str, str] = {}
    for segment in text[:-1].split(PROPERTY_SEPARATOR):
        name, _sep, value = segment.partition(NAME_VALUE_SEPARATOR)
        if not name or not value or name in _SLOW or (name in _ONCE and name in props):
            return None
        props[name] = value
    return props if UNIQ_KEY in props else None


def scan_py(data: bytes, stamp_len: int, max_props: int) -> Scan | None:
    """The columns of the batch body ``data`` when every message is of the common shape and
    its properties plus ``stamp_len`` bytes fit ``max_props``; None otherwise."""
    try:
        entries = decode_batch_py(data)
    except CorruptionError:
        return None
    uniq: list[str] = []
    dedup: list[str | None] = []
    keys: list[str | None] = []
    total = top = 0
    for body, _flag, text in entries:
        props = _shape(text)
        if props is None or len(text) + stamp_len > max_props:
            return None
        uniq.append(props[UNIQ_KEY])
        dedup.append(props.get(DEDUP))
        keys.append(props.get(KEYS))
        size = len(body) + len(text)
        total += size
        top = max(top, size)
    return (uniq, dedup, keys, total, top) if uniq else None


def write_py(
    mm: bytearray | mmap.mmap,
    pos: int,
    data: bytes,
    stamp: bytes,
    topic_tail: bytes,
    magic: int,
    queue_id: int,
    sys_flag: int,
    born_ts: int,
    born_addr: bytes,
    born_port: int,
    store_addr: bytes,
    store_port: int,
    reconsume: int,
    phys: int,
    queue_offset: int,
    store_ts: int,
) -> list[int]:
    """Write the records of the scanned body ``data`` from ``pos`` of ``mm`` (physical offset
    ``phys``, queue offsets from ``queue_offset``), each message's properties followed by
    ``stamp``; each record's size. Raises ValueError (nothing written) when ``data`` is not a
    batch body, a record's properties would be too long, or the records do not fit."""
    if len(born_addr) not in (4, 16) or len(store_addr) not in (4, 16):
        raise ValueError("batch_write: host addresses are 4 or 16 bytes")
    try:
        entries = decode_batch_py(data)
    except CorruptionError:
        raise ValueError("batch_write: the body is not a scanned batch") from None
    if not entries:
        if pos < 0 or pos > len(mm):
            raise ValueError("batch_write: the records do not fit")
        return []
    extra = stamp.decode()
    items = [BatchItem(b, f, decode_properties_py(t), t + extra) for b, f, t in entries]
    header = struct.Struct(f">iiiiiqqiq{len(born_addr)}siq{len(store_addr)}siiqi")
    fixed = header.size + len(topic_tail) + 2
    bulk = prepare_records(items, fixed, topic_tail, {}, _PROPS_MAX)
    if bulk is None:  # a TAGS or too long properties: not what scan accepts
        raise ValueError("batch_write: the body is not a scanned batch")
    records, sizes = bulk
    if pos < 0 or sum(sizes) > len(mm) - pos:
        raise ValueError("batch_write: the records do not fit")
    batch = MessageBatchInner(
        "", queue_id, items, sys_flag, born_ts, HostPort(born_addr, born_port),
        HostPort(store_addr, store_port), reconsume,
    )  # fmt: skip
    prepared = PreparedBatch(batch, header, magic, topic_tail, sys_flag, records, sum(sizes))
    write_records(prepared, records, mm, pos, phys, queue_offset, store_ts)
    return sizes


_fast = native.speedups
#: the compiled twins when built (and recent enough to have them)
scan = getattr(_fast, "batch_scan", None) or scan_py
write = getattr(_fast, "batch_write", None) or write_py


class ScannedBatch(NamedTuple):
    """A scanned batch checked against the CommitLog's limits, ready for :func:`put_scanned`."""

    topic: str
    queue_id: int
    data: bytes
    stamp: bytes
    uniq: list[str | None]
    keys: list[str | None]
    messages: int
    total: int
    topic_tail: bytes
    magic: int
    sys_flag: int
    born_ts: int
    born: HostPort
    store: HostPort
    reconsume: int


def check_scanned(
    log: CommitLog,
    batch: MessageBatchInner,
    data: bytes,
    stamp: bytes,
    scanned: Scan,
) -> ScannedBatch | None:
    """The batch ``batch`` (its fields; no messages) whose body ``data`` :func:`scan` gave
    ``scanned``, ready to put, or None when ``CommitLog.put_messages`` would refuse it or need
    its own path (a bad topic or host, a transactional sysFlag, a field out of range, a record
    or the batch over ``maxMessageSize``, ``SCHEDULE_TOPIC_XXXX``): it then says why."""
    tail = log._topic_tail(batch.topic)
    hosts = log._hosts(batch.born_host, batch.store_host)
    sys_flag, queue_id = batch.sys_flag, batch.queue_id
    if isinstance(tail, str) or hosts is None or batch.topic == SCHEDULE_TOPIC:
        return None
    if not enters_consume_queue(sys_flag):
        return None
    born_ts, reconsume = batch.born_timestamp_ms, batch.reconsume_times
    if _out_of_range(queue_id, 0, sys_flag, reconsume, born_ts, 0) is not None:
        return None
    uniq, _dedup, keys, payload, top = scanned
    header, host_bits = hosts
    fixed = header.size + len(tail[0]) + 2 + len(stamp)
    count = len(uniq)
    total = payload + count * fixed
    if top + fixed > log._max_size or total > log._max_size:
        return None
    return ScannedBatch(
        batch.topic, queue_id, data, stamp, cast("list[str | None]", uniq), keys, count, total, tail[0], tail[1],
        with_host_flags(sys_flag, host_bits), born_ts, batch.born_host, batch.store_host,
        reconsume,
    )  # fmt: skip


def put_scanned(log: CommitLog, b: ScannedBatch) -> PutResult:
    """Append the checked batch ``b`` contiguously under one hold of the put lock (what
    ``CommitLog.put_messages`` does for its messages), its dispatch queued as one block.

    Raises:
        OSError: a new CommitLog file could not be created.
    """
    key = (b.topic, b.queue_id)
    n = b.messages
    born, store = b.born, b.store
    with log.put_lock:
        store_ts = log.next_store_timestamp()
        mf = log._file_for(b.total)
        pos = mf.wrote_position
        phys = mf.file_from_offset + pos
        first = log.topic_queue_table.get(key, 0)
        sizes = write(
            mf.mm, pos, b.data, b.stamp, b.topic_tail, b.magic, b.queue_id, b.sys_flag,
            b.born_ts, born.addr, born.port, store.addr, store.port, b.reconsume, phys, first,
            store_ts,
        )  # fmt: skip
        mf.wrote_position = pos + b.total
        mf.store_timestamp = store_ts
        log.topic_queue_table[key] = first + n
        starts = list(accumulate(sizes[:-1], initial=phys))
        log.blocks_queued += 1  # before the block is queued (see ReputService)
        log.staged.append(
            DispatchBlock(
                [b.topic] * n, [b.queue_id] * n, starts, sizes, [0] * n, store_ts,
                list(range(first, first + n)), b.keys, b.uniq, [b.sys_flag] * n,
            )
        )  # fmt: skip
        log.put_times_total += n
        log.put_size_total += b.total
    return PutResult(
        _PUT_OK, phys, b.total, store_ts, first, n, store.addr, store.port, tuple(starts)
    )
