"""A batch's records prepared and written in bulk: C-level maps over the batch, no per-record
Python loop (the hot path of SEND_BATCH puts, e.g. the Spark sink's).

How it works: :meth:`CommitLog.prepare_batch` and :meth:`CommitLog._write_batch` (RocketMQ's
``CommitLog.asyncPutMessages`` + ``MessageExtEncoder.encodeBatch``) handle a batch record by
record; their loops stay the reference. For a batch of the common shape (every message has
its encoded properties text, an int flag in range, and a tagsCode known without computing:
no tags, or tags whose code is cached; not ``SCHEDULE_TOPIC_XXXX``) :func:`prepare_records`
builds the same ``PreparedRecord`` tuples with ``map``/``zip`` over the columns, and
:func:`write_records` packs every header, joins headers, bodies and tails into one buffer
copied into the file at once, and makes the ``DispatchRequest`` tuples the same way. Either
returns ``None`` when the batch has another shape, and the caller's loop decides.
"""

from __future__ import annotations

import mmap
import struct
import zlib
from collections.abc import Sequence
from itertools import accumulate, chain, repeat
from operator import add, and_

from ariane.common.properties import KEYS, TAGS, UNIQ_KEY
from ariane.common.record import CRC_MASK
from ariane.store.format import DispatchRequest
from ariane.store.prepared import PreparedBatch, PreparedRecord

__all__ = ["prepare_records", "write_records"]

_I32_MIN, _I32_MAX = -(2**31), 2**31 - 1
_new = tuple.__new__
_U16 = struct.Struct(">H")


def prepare_records(
    items: Sequence[object],
    fixed: int,
    topic_tail: bytes,
    tag_codes: dict[str, int],
    max_props: int,
) -> tuple[list[PreparedRecord], list[int]] | None:
    """The prepared records of the batch ``items`` (``BatchItem``) and their sizes, each
    record ``fixed`` + body + properties bytes; ``None`` for another shape (module docstring)
    or a record the loop must refuse (too long properties, text not encodable)."""
    texts = [item.properties_string for item in items]  # type: ignore[attr-defined]
    if None in texts:
        return None
    flags = [item.flag for item in items]  # type: ignore[attr-defined]
    if set(map(type, flags)) != {int} or min(flags) < _I32_MIN or max(flags) > _I32_MAX:
        return None
    props = [item.properties for item in items]  # type: ignore[attr-defined]
    tags = list(map(dict.get, props, repeat(TAGS)))
    if tags.count(None) == len(tags):
        codes: Sequence[int | None] = [0] * len(tags)
    else:
        codes = [tag_codes.get(t) if t else 0 for t in tags]
        if None in codes:
            return None
    try:
        raw = list(map(str.encode, texts))
    except UnicodeEncodeError:
        return None
    raw_lens = list(map(len, raw))
    if max(raw_lens) > max_props:
        return None
    bodies = [item.body for item in items]  # type: ignore[attr-defined]
    totals = list(map(add, map(add, map(len, bodies), raw_lens), repeat(fixed)))
    heads = map(_U16.pack, raw_lens)  # = len.to_bytes(2, "big")
    rests = map(add, map(add, repeat(topic_tail), heads), raw)
    crcs = map(and_, map(zlib.crc32, bodies), repeat(CRC_MASK))
    fields = zip(bodies, crcs, flags, props, rests, totals, codes, strict=True)
    return list(map(_new, repeat(PreparedRecord), fields)), totals


def write_records(
    prepared: PreparedBatch,
    records: Sequence[PreparedRecord],
    mm: bytearray | mmap.mmap,
    pos: int,
    phys: int,
    queue_offset: int,
    store_ts: int,
) -> tuple[list[int], list[DispatchRequest], int] | None:
    """Write ``records`` from ``pos`` of ``mm`` as ``CommitLog._write_batch`` does; their
    physical offsets, dispatch requests and bytes written, or ``None`` (nothing written)
    when a record's tagsCode is computed at write time."""
    n = len(records)
    body, crc, flag, props, rest, total, code = zip(*records, strict=True)
    if None in code:
        return None
    batch = prepared.batch
    topic, queue_id = batch.topic, batch.queue_id
    born, store = batch.born_host, batch.store_host
    starts = list(accumulate(total[:-1], initial=phys))
    queue_offsets = range(queue_offset, queue_offset + n)
    heads = map(
        prepared.header.pack, total, repeat(prepared.magic), crc, repeat(queue_id), flag,
        queue_offsets, starts, repeat(prepared.sys_flag), repeat(batch.born_timestamp_ms),
        repeat(born.addr), repeat(born.port), repeat(store_ts), repeat(store.addr),
        repeat(store.port), repeat(batch.reconsume_times), repeat(0), map(len, body),
    )  # fmt: skip
    data = b"".join(chain.from_iterable(zip(heads, body, rest, strict=True)))
    mm[pos : pos + len(data)] = data
    fields = zip(
        repeat(topic), repeat(queue_id), starts, total, code, repeat(store_ts), queue_offsets,
        map(dict.get, props, repeat(KEYS)), map(dict.get, props, repeat(UNIQ_KEY)),
        repeat(prepared.sys_flag), props,
    )  # fmt: skip
    requests = list(map(_new, repeat(DispatchRequest), fields))
    return starts, requests, len(data)
