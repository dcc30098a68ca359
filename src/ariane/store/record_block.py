"""Records packed whole ahead of their put, written many at once (the timer wheel's burst).

How it works. :func:`pack` turns a message prepared by :meth:`CommitLog.prepare_one` into its
whole record, with the three fields only the put can know left zero: QUEUEOFFSET,
PHYSICALOFFSET and STORETIMESTAMP (the BODYCRC, sizes, hosts and sysFlag are final). At the put
(:meth:`CommitLog.put_block`, under the put lock) :func:`write_run` takes a run of such records
that fits the current file: one join and one copy into the mapped file, the three fields filled
for the whole run with a few numpy operations (one store time for the run), the queue offsets
taken from ``topic_queue_table`` in order (ranked per queue in numpy) and the run's dispatch
requests queued as one :class:`~ariane.store.dispatch_block.DispatchBlock` (columns): exactly
the record bytes and requests :meth:`CommitLog.write_one` makes one by one, but for the
requests' properties: None (allowed: the arriving listener then checks the records), so that
neither the packed records nor the requests hold a dict; the packed records are untracked by
the garbage collector at its first pass, and the put makes a few lists per run instead of a
tracked tuple per record (a full collection over 100,000 tracked objects costs hundreds of ms).
The put pays about a microsecond per record instead of several, so a slot of 100,000 timers is
written in a fraction of a second. Records whose dispatch needs the store time (``SCHEDULE_TOPIC``, whose
tagsCode is the delivery time) are not packed: :func:`pack` returns None for them.
"""

from __future__ import annotations

import mmap
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ariane.common.properties import KEYS, UNIQ_KEY
from ariane.common.sysflag import born_host_v6, enters_consume_queue
from ariane.common.topics import SCHEDULE_TOPIC
from ariane.store.dispatch_block import DispatchBlock, Pending
from ariane.store.prepared import PreparedOne

__all__ = ["BlockProgress", "PackedRecord", "pack", "write_run"]

#: QUEUEOFFSET and PHYSICALOFFSET: 16 bytes at 20; STORETIMESTAMP: 8 bytes after the born host
_OFFSETS_AT = 20
_BORN_TS_END = 48  # BORNTIMESTAMP ends here; the born host (8 or 20 bytes) follows
_R16 = np.arange(16)
_R8 = np.arange(8)


#: One record packed whole and what its dispatch request needs: (record, where its
#: STORETIMESTAMP sits, topic, queue id, whether it takes a queue offset (not a prepared or
#: rolled-back transaction), tagsCode, KEYS, UNIQ_KEY, sysFlag). A plain tuple of atomic
#: values, which the garbage collector stops tracking at its first pass (a burst holds 100,000;
#: a NamedTuple or a class would stay tracked, and each full collection walk them all).
PackedRecord = tuple[bytes, int, str, int, bool, int, str | None, str | None, int]


@dataclass(slots=True)
class BlockProgress:
    """How far a :meth:`CommitLog.put_block` got: records written, the physical offset of the
    first and just past the last, the store time of the last run."""

    written: int = 0
    first_offset: int = -1
    end_offset: int = -1
    store_timestamp_ms: int = 0


def pack(one: PreparedOne) -> PackedRecord | None:
    """The whole record of ``one`` (queue offset, physical offset and store time zero), or
    None when its dispatch needs the store time (``SCHEDULE_TOPIC``)."""
    msg = one.msg
    if msg.topic == SCHEDULE_TOPIC:
        return None
    born = msg.born_host
    store = msg.store_host
    body = msg.body
    head = one.header.pack(
        one.total, one.magic, one.crc, msg.queue_id, msg.flag, 0, 0, one.sys_flag,
        msg.born_timestamp_ms, born.addr, born.port, 0, store.addr, store.port,
        msg.reconsume_times, msg.prepared_transaction_offset, len(body),
    )  # fmt: skip
    sys_flag = one.sys_flag
    props = msg.properties
    return (
        b"".join((head, body, one.rest)), _BORN_TS_END + (20 if born_host_v6(sys_flag) else 8),
        msg.topic, msg.queue_id, enters_consume_queue(sys_flag), one.tags_code, props.get(KEYS),
        props.get(UNIQ_KEY), sys_flag,
    )  # fmt: skip


def write_run(
    recs: Sequence[PackedRecord],
    mm: bytearray | mmap.mmap,
    pos: int,
    phys: int,
    store_ts: int,
    table: dict[tuple[str, int], int],
    staged: deque[Pending],
) -> int:
    """Write ``recs`` (all fitting) at ``pos`` of ``mm``, the first at physical offset
    ``phys``, with store time ``store_ts``; take their queue offsets from ``table`` and append
    their dispatch requests to ``staged`` as one :class:`DispatchBlock`. Returns the bytes
    written."""
    n = len(recs)
    records, ts_in, topics, queue_ids, enters, tags, keys, uniq, flags = zip(*recs, strict=True)
    buf = bytearray().join(records)
    sizes = np.fromiter(map(len, records), dtype=np.int64, count=n)
    starts = np.zeros(n, dtype=np.int64)
    np.cumsum(sizes[:-1], out=starts[1:])
    queue_offsets = _queue_offsets(topics, queue_ids, enters, table)
    fields = np.empty((n, 2), dtype=">i8")
    fields[:, 0] = queue_offsets
    fields[:, 1] = starts + phys
    view = np.frombuffer(buf, dtype=np.uint8)
    view[(starts + _OFFSETS_AT)[:, None] + _R16] = fields.view(np.uint8).reshape(n, 16)
    ts_at = np.array(ts_in, dtype=np.int64) + starts
    view[ts_at[:, None] + _R8] = np.frombuffer(store_ts.to_bytes(8, "big"), dtype=np.uint8)
    del view  # the buffer is exported while a view lives
    size = len(buf)
    mm[pos : pos + size] = buf
    staged.append(
        DispatchBlock(
            list(topics), list(queue_ids), (starts + phys).tolist(), sizes.tolist(), list(tags),
            store_ts, queue_offsets.tolist(), list(keys), list(uniq), list(flags),
        )
    )  # fmt: skip
    return size


def _queue_offsets(
    topics: tuple[str, ...],
    queue_ids: tuple[int, ...],
    enters: tuple[bool, ...],
    table: dict[tuple[str, int], int],
) -> npt.NDArray[np.int64]:
    """Each record's queue offset (0 for one outside the queues), in order, taken from
    ``table`` (advanced): the rank of the record within its (topic, queue) in numpy."""
    n = len(topics)
    if topics.count(topics[0]) == n:
        ids, group = np.unique(np.array(queue_ids, dtype=np.int64), return_inverse=True)
        queues = [(topics[0], q) for q in ids.tolist()]
    else:
        seen: dict[tuple[str, int], int] = {}
        group = np.fromiter(
            (seen.setdefault(k, len(seen)) for k in zip(topics, queue_ids, strict=True)),
            dtype=np.int64,
            count=n,
        )
        queues = list(seen)
    rows = np.flatnonzero(np.fromiter(enters, dtype=bool, count=n))
    group = group.reshape(-1)[rows]
    counts = np.bincount(group, minlength=len(queues))
    first = np.cumsum(counts) - counts  # where each queue's rows start once sorted by queue
    rank = np.empty(len(rows), dtype=np.int64)
    rank[np.argsort(group, kind="stable")] = np.arange(len(rows)) - np.repeat(first, counts)
    get = table.get
    base = np.array([get(q, 0) for q in queues], dtype=np.int64)
    out = np.zeros(n, dtype=np.int64)
    out[rows] = base[group] + rank
    for queue, start, count in zip(queues, base.tolist(), counts.tolist(), strict=True):
        if count:
            table[queue] = start + count
    return out
