"""Stored records to Arrow columns in bulk: the fast path of the ``ariane`` source's reads.

How it works: PULL answers carry CommitLog records as the broker stores them (layout in
:mod:`ariane.common.record`). ``records_to_batch`` takes the raw bodies of many pulls, joined,
and builds one ``pyarrow.RecordBatch`` of the source's schema without a Python object per row:

* one Python step per record reads its TOTALSIZE to find where records start (the only
  per-record loop); the 88 fixed header bytes of every record are gathered into one numpy
  ``(n, 88)`` array and each fixed field is a big-endian view of its columns;
* body, topic and properties are byte ranges of the joined buffer: an Arrow binary array whose
  offsets alternate ``start, end`` of each range makes the wanted ranges its even elements,
  which one ``take`` copies out (the odd elements are the bytes between them);
* properties (``name \\x01 value \\x02``...) are split with Arrow's string kernels into one flat
  list of entries; ``TAGS``, ``KEYS`` and ``UNIQ_KEY`` are scattered back to their rows and the
  ``properties`` map is built from the entries of each row (reserved names dropped in ``user``
  mode);
* hosts are formatted once per distinct (address, port); the offsetMsgId (store host and
  physical offset in upper-case hex) is built with a lookup table.

A read of a few columns (``columns``: a user schema that is a subset of the source's) builds
only those: the compiled call gets their ``fields`` mask, the numpy path skips the properties
split, the hosts and the ids when no wanted column (nor a tag filter) needs them.

When the compiled twin is built, ``ariane.common.record_columns.decode_columns`` does all of the
above in one C call that returns Arrow-layout buffers (``columns_to_batch`` wraps them); the
numpy path stays for the pure-Python build.

Anything this path does not reproduce exactly (IPv6 hosts, compressed bodies, the V2 magic,
a property name twice in one record, bytes that are not UTF-8, malformed records) makes the
whole batch go through the plain path instead (``ariane.common.record.decode_records`` and
``messages_to_batch``), which owns every error message; tests compare both paths row by row.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ariane.common import properties as props
from ariane.common.message import HostPort
from ariane.common.record import MESSAGE_MAGIC_CODE_V1, decode_records
from ariane.common.record_columns import (
    ALL_FIELDS,
    COMPILED,
    FIELD_BITS,
    RecordColumns,
    decode_columns,
)
from ariane.common.sysflag import COMPRESSED_FLAG, host_flags
from ariane.errors import CorruptionError
from ariane.spark._arrow import ARROW_SCHEMA, messages_to_batch
from ariane.spark.options import PropertiesMode

__all__ = [
    "columns_to_batch",
    "decode_plain",
    "fields_of",
    "records_to_batch",
    "try_records_to_batch",
]

_I32 = struct.Struct(">i")
_HEAD = 88  # TOTALSIZE .. BODYLENGTH with IPv4 hosts
_MIN_TOTAL = 91
_REJECT_FLAGS = COMPRESSED_FLAG | host_flags(True, True)
_TS = pa.timestamp("us", tz="UTC")
_HEX = np.frombuffer(b"0123456789ABCDEF", dtype=np.uint8)
_SYSTEM = pa.array(sorted(props.SYSTEM_KEYS), pa.string())
_SYSTEM_NAMES = tuple(sorted(k.encode() for k in props.SYSTEM_KEYS))
_MAP = ARROW_SCHEMA.field("properties").type
#: timestamps whose microseconds do not fit an int64 (the plain path raises on them)
_MAX_MS = (2**63 - 1) // 1000
#: the source's columns, in order (``columns=None``: all of them)
ALL_COLUMNS: tuple[str, ...] = tuple(ARROW_SCHEMA.names)
#: the ``decode_columns`` field behind each column (``brokerName`` is the range's broker, the
#: properties column is ``with_props``)
_FIELD_OF = {
    "topic": "topic", "queueId": "queue_id", "queueOffset": "queue_offset", "msgId": "msg_id",
    "keys": "keys", "tags": "tags", "body": "body", "bornTimestamp": "born_us",
    "storeTimestamp": "store_us", "bornHost": "born_host", "storeHost": "store_host",
    "reconsumeTimes": "reconsume_times",
}  # fmt: skip
#: raw pull bodies: one, or a list (``bytearray`` ones from ``ariane.spark._direct``)
Bodies = bytes | list[bytes] | list[bytes | bytearray]
#: columns read from the properties text
_FROM_PROPERTIES = frozenset({"msgId", "keys", "tags", "properties"})


def fields_of(columns: Sequence[str]) -> int:
    """The ``decode_columns`` fields mask that builds ``columns``."""
    return sum(FIELD_BITS[_FIELD_OF[c]] for c in set(columns) if c in _FIELD_OF)


def _schema(columns: Sequence[str] | None) -> pa.Schema:
    if columns is None:
        return ARROW_SCHEMA
    return pa.schema([ARROW_SCHEMA.field(c) for c in columns])


def decode_plain(
    buf: bytes,
    broker: str,
    mode: PropertiesMode,
    start: int,
    end: int,
    tags: frozenset[str] | None,
    columns: Sequence[str] | None = None,
) -> pa.RecordBatch:
    """The plain path: decode every record into a ``MessageExt``, keep the messages of
    ``[start, end)`` (and of ``tags``), convert them row by row (then keep ``columns``).

    Raises:
        CorruptionError: a record does not decode.
    """
    msgs = [m for m in decode_records(buf, decompress=True) if start <= m.queue_offset < end]
    if tags is not None:
        msgs = [m for m in msgs if m.tags in tags]
    batch = messages_to_batch(msgs, broker, mode)
    return batch if columns is None else batch.select(list(columns))


def records_to_batch(
    buf: Bodies,
    broker: str,
    mode: PropertiesMode,
    start: int,
    end: int,
    tags: frozenset[str] | None = None,
    columns: Sequence[str] | None = None,
) -> pa.RecordBatch:
    """One record batch (``ARROW_SCHEMA``) of the records of ``buf`` (raw pull bodies: one, or
    a list, decoded as their join) whose queue offset lies in ``[start, end)`` and, when
    ``tags`` is given, whose TAGS is one of them; with ``columns`` (names of the source's
    columns, any order), only those columns, in that order, and only they are built.

    Raises:
        CorruptionError: a record does not decode (from the plain path).
    """
    batch = try_records_to_batch(buf, broker, mode, start, end, tags, columns)
    if batch is None:
        return decode_plain(join_bodies(buf), broker, mode, start, end, tags, columns)
    return batch


def _record_starts(buf: bytes) -> np.ndarray | None:
    starts: list[int] = []
    append = starts.append
    unpack = _I32.unpack_from
    size = len(buf)
    pos = 0
    while pos + _HEAD <= size:
        append(pos)
        (total,) = unpack(buf, pos)
        if total < _MIN_TOTAL:
            return None
        pos += total
    if pos != size:
        return None
    return np.array(starts, dtype=np.int64)


def _field(head: np.ndarray, lo: int, hi: int, dtype: str) -> np.ndarray:
    """Big-endian field ``[lo, hi)`` of every header row, as a native int64 array."""
    raw = np.ascontiguousarray(head[:, lo:hi])
    return raw.view(dtype).ravel().astype(np.int64)


def _ranges(buf: pa.Buffer, lo: np.ndarray, hi: np.ndarray, kind: pa.DataType) -> pa.Array:
    """The byte ranges ``[lo[i], hi[i])`` of ``buf`` (ascending, disjoint) as one array."""
    n = len(lo)
    if n == 0:
        return pa.array([], kind)
    offsets = np.empty(2 * n, dtype=np.int32)
    offsets[0::2] = lo
    offsets[1::2] = hi
    spans = pa.Array.from_buffers(kind, 2 * n - 1, [None, pa.py_buffer(offsets), buf])
    return spans.take(pa.array(np.arange(0, 2 * n - 1, 2, dtype=np.int64)))


def _hosts(addr: np.ndarray, port: np.ndarray) -> pa.Array:
    """``a.b.c.d:port`` of every row, formatted once per distinct host."""
    key = (addr.astype(np.uint64) << np.uint64(32)) | (
        port.astype(np.uint64) & np.uint64(0xFFFFFFFF)
    )
    uniq, inverse = np.unique(key, return_inverse=True)
    texts = [
        str(HostPort(int(k >> np.uint64(32)).to_bytes(4, "big"), _signed32(int(k) & 0xFFFFFFFF)))
        for k in uniq
    ]
    return pa.array(texts, pa.string()).take(pa.array(inverse.ravel().astype(np.int64)))


def _signed32(value: int) -> int:
    return value - (1 << 32) if value & 0x80000000 else value


def _offset_msg_ids(head: np.ndarray) -> pa.Array:
    """offsetMsgId: store host (4 + 4 bytes) and physical offset (8) in upper-case hex."""
    raw = np.concatenate([head[:, 64:72], head[:, 28:36]], axis=1)
    n = len(raw)
    text = np.empty((n, 32), dtype=np.uint8)
    text[:, 0::2] = _HEX[raw >> 4]
    text[:, 1::2] = _HEX[raw & 15]
    offsets = np.arange(0, 32 * n + 1, 32, dtype=np.int32)
    return pa.Array.from_buffers(
        pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(text.tobytes())]
    )


def _scatter(n: int, rows: np.ndarray, values: pa.Array, mask: np.ndarray) -> pa.Array:
    """Per row, the value of the (at most one) entry of that row where ``mask`` holds."""
    index = np.full(n, -1, dtype=np.int64)
    index[rows[mask]] = np.nonzero(mask)[0]
    return values.take(pa.array(index, mask=index < 0))


def _validate_utf8(array: pa.Array) -> bool:
    try:
        array.validate(full=True)
    except pa.ArrowInvalid:
        return False
    return True


def _strings(kind: pa.DataType, n: int, cols: tuple[bytes, ...]) -> pa.Array:
    """A string/binary array from (offsets, data) or (validity, offsets, data) buffers."""
    if len(cols) == 2:
        return pa.Array.from_buffers(kind, n, [None, *map(pa.py_buffer, cols)])
    return pa.Array.from_buffers(kind, n, list(map(pa.py_buffer, cols)), null_count=-1)


def _broker_column(broker: str, n: int) -> pa.Array:
    raw = broker.encode()
    offsets = np.arange(n + 1, dtype=np.int32) * np.int32(len(raw))
    return _strings(pa.string(), n, (offsets.tobytes(), raw * n))


def _props_column(cols: RecordColumns, n: int, mode: PropertiesMode) -> pa.Array:
    if cols.properties is None or mode is PropertiesMode.NONE:
        return pa.nulls(n, _MAP)
    entries, *texts = cols.properties
    count = np.frombuffer(entries, dtype=np.int32)[-1]
    names = _strings(pa.string(), count, (texts[0], texts[1]))
    values = _strings(pa.string(), count, (texts[2], texts[3]))
    pairs = pa.StructArray.from_arrays([names, values], fields=[_MAP.key_field, _MAP.item_field])
    return pa.Array.from_buffers(_MAP, n, [None, pa.py_buffer(entries)], children=[pairs])


def columns_to_batch(
    cols: RecordColumns,
    broker: str,
    mode: PropertiesMode,
    columns: Sequence[str] | None = None,
) -> pa.RecordBatch:
    """One record batch (``ARROW_SCHEMA``, or its ``columns``) over the buffers of
    ``decode_columns`` (which must hold those columns)."""
    n = cols.rows

    def build(name: str) -> pa.Array:
        if name == "brokerName":
            return _broker_column(broker, n)
        if name == "properties":
            return _props_column(cols, n, mode)
        kind = ARROW_SCHEMA.field(name).type
        raw = getattr(cols, _FIELD_OF[name])
        if isinstance(raw, tuple):
            return _strings(kind, n, raw)
        return pa.Array.from_buffers(kind, n, [None, pa.py_buffer(raw)])

    names = ALL_COLUMNS if columns is None else columns
    return pa.RecordBatch.from_arrays([build(c) for c in names], schema=_schema(columns))


def _compiled_to_batch(
    buf: Bodies,
    broker: str,
    mode: PropertiesMode,
    start: int,
    end: int,
    tags: frozenset[str] | None,
    columns: Sequence[str] | None = None,
) -> pa.RecordBatch | None:
    wanted = None if tags is None else [t.encode() for t in tags]
    skip = _SYSTEM_NAMES if mode is PropertiesMode.USER else ()
    with_props = mode is not PropertiesMode.NONE and (columns is None or "properties" in columns)
    fields = ALL_FIELDS if columns is None else fields_of(columns)
    try:
        # the compiled call reads any buffer: the bodies may be bytearrays (_direct)
        raw = cast("bytes | list[bytes]", buf)
        cols = decode_columns(raw, start, end, wanted, with_props, skip, fields)
    except CorruptionError:
        return None  # the plain path raises its own error for it
    return None if cols is None else columns_to_batch(cols, broker, mode, columns)


def try_records_to_batch(
    buf: Bodies,
    broker: str,
    mode: PropertiesMode,
    start: int,
    end: int,
    tags: frozenset[str] | None = None,
    columns: Sequence[str] | None = None,
) -> pa.RecordBatch | None:
    """The fast path of ``records_to_batch``; ``None`` when the batch needs the plain path."""
    if COMPILED:
        return _compiled_to_batch(buf, broker, mode, start, end, tags, columns)
    return _numpy_to_batch(join_bodies(buf), broker, mode, start, end, tags, columns)


def _numpy_to_batch(
    buf: bytes,
    broker: str,
    mode: PropertiesMode,
    start: int,
    end: int,
    tags: frozenset[str] | None,
    columns: Sequence[str] | None = None,
) -> pa.RecordBatch | None:
    if len(buf) >= 2**31 - 1:
        return None
    starts = _record_starts(buf)
    if starts is None:
        return None
    n = len(starts)
    if n == 0:
        return pa.RecordBatch.from_pylist([], schema=_schema(columns))
    data = np.frombuffer(buf, dtype=np.uint8)
    head = data[starts[:, None] + np.arange(_HEAD)]
    total = _field(head, 0, 4, ">i4")
    magic = _field(head, 4, 8, ">i4")
    sys_flag = _field(head, 36, 40, ">i4")
    if (magic != MESSAGE_MAGIC_CODE_V1).any() or (sys_flag & _REJECT_FLAGS).any():
        return None
    body_len = _field(head, 84, 88, ">i4")
    body_lo = starts + _HEAD
    body_hi = body_lo + body_len
    record_end = starts + total
    if (body_len < 0).any() or (body_hi + 3 > record_end).any():
        return None
    topic_len = data[body_hi].view(np.int8).astype(np.int64)
    topic_lo = body_hi + 1
    topic_hi = topic_lo + topic_len
    if (topic_len < 0).any() or (topic_hi + 2 > record_end).any():
        return None
    props_len = (data[topic_hi].astype(np.int64) << 8) | data[topic_hi + 1]
    props_lo = topic_hi + 2
    if (props_len > 32767).any() or (props_lo + props_len != record_end).any():
        return None
    born_ms = _field(head, 40, 48, ">i8")
    store_ms = _field(head, 56, 64, ">i8")
    if (np.abs(born_ms) > _MAX_MS).any() or (np.abs(store_ms) > _MAX_MS).any():
        return None
    queue_offset = _field(head, 20, 28, ">i8")

    whole = pa.py_buffer(buf)
    topics = _ranges(whole, topic_lo, topic_hi, pa.string())
    texts = _ranges(whole, props_lo, record_end, pa.string())
    if not (_validate_utf8(topics) and _validate_utf8(texts)):
        return None
    names = ALL_COLUMNS if columns is None else columns
    tag_col = key_col = uniq_col = prop_col = None
    if tags is not None or _FROM_PROPERTIES.intersection(names):
        entries = _entries(texts, n, mode if "properties" in names else PropertiesMode.NONE)
        if entries is None:
            return None
        tag_col, key_col, uniq_col, prop_col = entries
    build: dict[str, Callable[[], pa.Array]] = {
        "topic": lambda: topics,
        "brokerName": lambda: pa.array([broker] * n, pa.string()),
        "queueId": lambda: pa.array(_field(head, 12, 16, ">i4").astype(np.int32), pa.int32()),
        "queueOffset": lambda: pa.array(queue_offset, pa.int64()),
        "msgId": lambda: pc.if_else(pc.is_valid(uniq_col), uniq_col, _offset_msg_ids(head)),
        "keys": lambda: key_col,
        "tags": lambda: tag_col,
        "body": lambda: _ranges(whole, body_lo, body_hi, pa.binary()),
        "properties": lambda: prop_col,
        "bornTimestamp": lambda: pa.array(born_ms * 1000, _TS),
        "storeTimestamp": lambda: pa.array(store_ms * 1000, _TS),
        "bornHost": lambda: _hosts(_field(head, 48, 52, ">u4"), _field(head, 52, 56, ">i4")),
        "storeHost": lambda: _hosts(_field(head, 64, 68, ">u4"), _field(head, 68, 72, ">i4")),
        "reconsumeTimes": lambda: pa.array(
            _field(head, 72, 76, ">i4").astype(np.int32), pa.int32()
        ),
    }
    batch = pa.RecordBatch.from_arrays([build[c]() for c in names], schema=_schema(columns))
    keep = (queue_offset >= start) & (queue_offset < end)
    if tags is not None:
        wanted = pa.array(sorted(tags), pa.string())
        keep &= pc.is_in(tag_col, value_set=wanted).to_numpy(zero_copy_only=False)
    if not keep.all():
        batch = batch.filter(pa.array(keep))
    return batch


def _entries(
    texts: pa.Array, n: int, mode: PropertiesMode
) -> tuple[pa.Array, pa.Array, pa.Array, pa.Array] | None:
    """(tags, keys, UNIQ_KEY, properties map) columns from the properties strings; ``None``
    when a record names a property twice (the plain path's dict keeps the first position
    and the last value)."""
    segments = pc.split_pattern(texts, props.PROPERTY_SEPARATOR)
    rows = pc.list_parent_indices(segments).to_numpy()
    pairs = pc.split_pattern(pc.list_flatten(segments), props.NAME_VALUE_SEPARATOR, max_splits=1)
    two = pc.equal(pc.list_value_length(pairs), 2)
    pairs = pairs.filter(two)
    rows = rows[two.to_numpy(zero_copy_only=False)]
    names = pc.list_element(pairs, 0)
    values = pc.list_element(pairs, 1)
    kept = pc.and_(pc.greater(pc.utf8_length(names), 0), pc.greater(pc.utf8_length(values), 0))
    kept_np = kept.to_numpy(zero_copy_only=False)
    if not kept_np.all():
        names = names.filter(kept)
        values = values.filter(kept)
        rows = rows[kept_np]
    if len(names):
        encoded = names.dictionary_encode()
        key = rows * len(encoded.dictionary) + encoded.indices.to_numpy()
        if len(np.unique(key)) != len(key):
            return None
    tag_col = _scatter(n, rows, values, pc.equal(names, props.TAGS).to_numpy(zero_copy_only=False))
    key_col = _scatter(n, rows, values, pc.equal(names, props.KEYS).to_numpy(zero_copy_only=False))
    uniq_col = _scatter(
        n, rows, values, pc.equal(names, props.UNIQ_KEY).to_numpy(zero_copy_only=False)
    )
    if mode is PropertiesMode.NONE:
        prop_col = pa.nulls(n, ARROW_SCHEMA.field("properties").type)
        return tag_col, key_col, uniq_col, prop_col
    if mode is PropertiesMode.USER and len(names):
        user = pc.invert(pc.is_in(names, value_set=_SYSTEM))
        user_np = user.to_numpy(zero_copy_only=False)
        names = names.filter(user)
        values = values.filter(user)
        rows = rows[user_np]
    counts = np.bincount(rows, minlength=n) if len(rows) else np.zeros(n, dtype=np.int64)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    prop_col = pa.MapArray.from_arrays(pa.array(offsets), names, values)
    return tag_col, key_col, uniq_col, prop_col.cast(ARROW_SCHEMA.field("properties").type)


def join_bodies(bodies: Bodies) -> bytes:
    """Raw pull bodies as one ``bytes`` (one copy; a single ``bytes`` body as it is)."""
    if isinstance(bodies, bytes):
        return bodies
    if len(bodies) == 1:
        return bytes(bodies[0])  # no copy of a bytes body
    return b"".join(bodies)
