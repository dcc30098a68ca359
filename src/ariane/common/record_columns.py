"""Stored records to column buffers in one call: the bulk read decoder (issue 19).

How it works: a PULL answer's body is a concatenation of CommitLog records (layout in
:mod:`ariane.common.record`, mirroring RocketMQ's ``MessageDecoder.decodesBatch``).
``decode_columns`` walks all of them once and returns, for the records whose queue offset lies
in ``[start, end)`` (and whose ``TAGS`` is one of ``tags``, when given), the columns as raw
buffers in Arrow's layouts, so a caller wraps them (``pyarrow.Array.from_buffers``) without a
Python object per row:

* fixed-width columns: native-endian ``int32``/``int64`` arrays (timestamps in microseconds);
* string/binary columns: ``(offsets, data)`` with ``int32`` offsets (``n + 1`` of them);
  ``tags`` and ``keys`` add a validity bitmap (LSB first): ``(validity, offsets, data)``;
* ``msgId`` is ``UNIQ_KEY`` when the record has one, else the offsetMsgId (store host and
  physical offset in upper-case hex); hosts are ``a.b.c.d:port`` text;
* properties, when asked for: ``(entry offsets, key offsets, key data, value offsets, value
  data)``, the entries of each row as ``decode_properties`` leaves them (a name twice keeps its
  first position and last value; empty names or values dropped), without the ``skip`` names.

``fields`` (a mask of ``FIELD_BITS``) names the columns built; the others come back empty
(``b""`` buffers) and cost nothing: without ``tags``, ``keys``, ``msg_id``, a tag filter and the
properties column, no record's properties are even split (a Spark read of a few columns).

Every record is checked, kept or not: a malformed one raises :class:`CorruptionError` naming
it (truncated, trailing bytes, bad sizes, text that is not UTF-8). Records that are well formed
but not handled here (IPv6 hosts, compressed bodies, timestamps whose microseconds overflow
int64) make it return ``None``: the caller decodes that buffer message by message.

``decode_columns_py`` is the reference; ``decode_columns`` is the compiled twin in
``src/ariane/_speedups_columns.h`` when built (same results, same errors), else the reference.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Collection
from typing import Any, NamedTuple

from ariane.common import native
from ariane.common.properties import KEYS, TAGS, UNIQ_KEY
from ariane.errors import CorruptionError

__all__ = ["ALL_FIELDS", "FIELD_BITS", "RecordColumns", "decode_columns", "decode_columns_py"]

MAGIC_V1 = -626843481
MAGIC_V2 = -626843477
_MIN_TOTAL = 91
_FIXED = 88  # TOTALSIZE .. BODYLENGTH with two IPv4 hosts
_V6_FLAGS = 0x10 | 0x20
_COMPRESSED = 0x1
_MAX_MS = (2**63 - 1) // 1000
_HEAD = struct.Struct(">iiiiiqqiq4siq4siiqi")
_I16 = struct.Struct(">h")
_TAGS, _KEYS, _UNIQ = TAGS.encode(), KEYS.encode(), UNIQ_KEY.encode()

Strings = tuple[bytes, bytes]  # offsets, data
Nullable = tuple[bytes, bytes, bytes]  # validity, offsets, data
Props = tuple[bytes, bytes, bytes, bytes, bytes]  # entries, key offsets/data, value offsets/data


class RecordColumns(NamedTuple):
    """The kept records' columns (see the module docstring for the layouts)."""

    rows: int
    queue_id: bytes  # int32
    queue_offset: bytes  # int64
    commit_log_offset: bytes  # int64
    sys_flag: bytes  # int32
    born_us: bytes  # int64
    store_us: bytes  # int64
    reconsume_times: bytes  # int32
    body: Strings
    topic: Strings
    tags: Nullable
    keys: Nullable
    msg_id: Strings
    born_host: Strings
    store_host: Strings
    properties: Props | None


#: the bit of each column of ``RecordColumns`` in the ``fields`` mask (the compiled twin's
#: order: its fixed columns, then its string columns)
FIELD_BITS: dict[str, int] = {
    name: 1 << i
    for i, name in enumerate(
        (
            "queue_id", "sys_flag", "reconsume_times", "queue_offset", "commit_log_offset",
            "born_us", "store_us", "body", "topic", "tags", "keys", "msg_id", "born_host",
            "store_host",
        )
    )
}  # fmt: skip
ALL_FIELDS = sum(FIELD_BITS.values())
_PROP_FIELDS = FIELD_BITS["tags"] | FIELD_BITS["keys"] | FIELD_BITS["msg_id"]
_I32_FIELDS = ("queue_id", "sys_flag", "reconsume_times")
_I64_FIELDS = ("queue_offset", "commit_log_offset", "born_us", "store_us")
_TEXT_FIELDS = ("body", "topic", "tags", "keys", "msg_id", "born_host", "store_host")


class _Text:
    """A growing string column: int32 offsets and data, optionally a validity bitmap."""

    def __init__(self) -> None:
        self.offsets = array("i", [0])
        self.data = bytearray()
        self.valid: list[bool] = []

    def add(self, value: bytes | None) -> None:
        self.valid.append(value is not None)
        if value:
            self.data += value
        self.offsets.append(len(self.data))

    def strings(self) -> Strings:
        return self.offsets.tobytes(), bytes(self.data)

    def nullable(self) -> Nullable:
        bits = bytearray((len(self.valid) + 7) // 8)
        for i, ok in enumerate(self.valid):
            if ok:
                bits[i >> 3] |= 1 << (i & 7)
        return bytes(bits), self.offsets.tobytes(), bytes(self.data)


def _properties(text: bytes) -> dict[bytes, bytes]:
    """``decode_properties`` on bytes (the separators are ASCII: same split as on str)."""
    out: dict[bytes, bytes] = {}
    if not text:
        return out
    for segment in text.split(b"\x02"):
        name, _sep, value = segment.partition(b"\x01")
        if name and value:
            out[name] = value
    return out


class _Record(NamedTuple):
    fields: tuple[Any, ...]
    body: bytes
    topic: bytes
    props: bytes


def _utf8(raw: bytes, message: str, pos: int) -> None:
    try:
        raw.decode()
    except UnicodeDecodeError:
        raise CorruptionError(message, pos=pos) from None


def _parse(buf: bytes, pos: int, base: int) -> _Record | None:
    """One record's fields; ``None``: well formed but IPv6 hosts (left to the caller).
    Errors name the position ``base + pos`` (``base``: where ``buf`` starts in the joined
    bodies)."""
    left = len(buf) - pos
    if left < _MIN_TOTAL:
        raise CorruptionError(f"record truncated: {left} bytes left", pos=base + pos)
    fields = _HEAD.unpack_from(buf, pos)
    total, magic, sys_flag, body_len = fields[0], fields[1], fields[7], fields[16]
    if magic not in (MAGIC_V1, MAGIC_V2):
        raise CorruptionError(f"bad magic code {magic & 0xFFFFFFFF:#010x}", pos=base + pos)
    if total < _MIN_TOTAL:
        raise CorruptionError(f"bad total size {total}", pos=base + pos)
    if total > left:
        raise CorruptionError(
            f"record truncated: total size {total}, {left} bytes left", pos=base + pos
        )
    if sys_flag & _V6_FLAGS:
        return None
    end = pos + total
    width = 2 if magic == MAGIC_V2 else 1
    p = pos + _FIXED
    if body_len < 0 or p + body_len + width + 2 > end:
        raise CorruptionError(f"bad body length {body_len}", pos=base + pos)
    body = buf[p : p + body_len]
    p += body_len
    topic_len = _I16.unpack_from(buf, p)[0] if width == 2 else buf[p] - (buf[p] & 0x80) * 2
    p += width
    if topic_len < 0 or p + topic_len + 2 > end:
        raise CorruptionError(f"bad topic length {topic_len}", pos=base + pos)
    topic = buf[p : p + topic_len]
    p += topic_len
    props_len = _I16.unpack_from(buf, p)[0]
    p += 2
    if props_len < 0 or p + props_len != end:
        raise CorruptionError(
            f"bad properties length {props_len} for total {total}", pos=base + pos
        )
    text = buf[p:end]
    _utf8(topic, "topic is not UTF-8", base + pos)
    _utf8(text, "properties are not UTF-8", base + pos)
    return _Record(fields, body, topic, text)


def _host(addr: bytes, port: int) -> bytes:
    return f"{addr[0]}.{addr[1]}.{addr[2]}.{addr[3]}:{port}".encode()


def _offset_msg_id(addr: bytes, port: int, phys: int) -> bytes:
    return (addr + struct.pack(">iq", port, phys)).hex().upper().encode()


class _Columns:
    """The output columns, filled record by record (only those of ``fields``)."""

    def __init__(self, with_props: bool, fields: int) -> None:
        self.rows = 0
        self.fields = fields
        self.i32 = {n: array("i") for n in _I32_FIELDS if fields & FIELD_BITS[n]}
        self.i64 = {n: array("q") for n in _I64_FIELDS if fields & FIELD_BITS[n]}
        self.text = {n: _Text() for n in _TEXT_FIELDS if fields & FIELD_BITS[n]}
        self.with_props = with_props
        self.entries = array("i", [0])
        self.names = _Text()
        self.values = _Text()

    def needs_props(self, tags: Collection[bytes] | None) -> bool:
        """Whether a kept record's properties must be split."""
        return tags is not None or self.with_props or bool(self.fields & _PROP_FIELDS)

    def add(self, rec: _Record, props: dict[bytes, bytes], skip: Collection[bytes]) -> None:
        (_, _, _, queue_id, _, queue_offset, phys, sys_flag, born_ms, born_addr, born_port,
         store_ms, store_addr, store_port, reconsume, _, _) = rec.fields  # fmt: skip
        self.rows += 1
        ints = {"queue_id": queue_id, "sys_flag": sys_flag, "reconsume_times": reconsume}
        for name, col in self.i32.items():
            col.append(ints[name])
        longs = {
            "queue_offset": queue_offset, "commit_log_offset": phys,
            "born_us": born_ms * 1000, "store_us": store_ms * 1000,
        }  # fmt: skip
        for name, col64 in self.i64.items():
            col64.append(longs[name])
        texts: dict[str, Any] = {
            "body": lambda: rec.body,
            "topic": lambda: rec.topic,
            "tags": lambda: props.get(_TAGS),
            "keys": lambda: props.get(_KEYS),
            "msg_id": lambda: props.get(_UNIQ) or _offset_msg_id(store_addr, store_port, phys),
            "born_host": lambda: _host(born_addr, born_port),
            "store_host": lambda: _host(store_addr, store_port),
        }
        for name, text in self.text.items():
            text.add(texts[name]())
        if self.with_props:
            for name_, value in props.items():
                if name_ not in skip:
                    self.names.add(name_)
                    self.values.add(value)
            self.entries.append(len(self.names.valid))

    def _strings(self, name: str) -> Strings:
        text = self.text.get(name)
        return text.strings() if text is not None else (b"", b"")

    def _nullable(self, name: str) -> Nullable:
        text = self.text.get(name)
        return text.nullable() if text is not None else (b"", b"", b"")

    def _fixed(self, name: str) -> bytes:
        col = self.i32.get(name)
        if col is None:
            col = self.i64.get(name)
        return col.tobytes() if col is not None else b""

    def result(self) -> RecordColumns:
        props: Props | None = None
        if self.with_props:
            props = (self.entries.tobytes(), *self.names.strings(), *self.values.strings())
        fixed, strings = self._fixed, self._strings
        return RecordColumns(
            self.rows, fixed("queue_id"), fixed("queue_offset"), fixed("commit_log_offset"),
            fixed("sys_flag"), fixed("born_us"), fixed("store_us"), fixed("reconsume_times"),
            strings("body"), strings("topic"), self._nullable("tags"), self._nullable("keys"),
            strings("msg_id"), strings("born_host"), strings("store_host"), props,
        )  # fmt: skip


def decode_columns_py(
    buf: bytes | list[bytes],
    start: int,
    end: int,
    tags: Collection[bytes] | None,
    with_props: bool,
    skip: Collection[bytes],
    fields: int = ALL_FIELDS,
) -> RecordColumns | None:
    """The records of ``buf`` in ``[start, end)`` (and of ``tags``) as column buffers.

    Args:
        buf: concatenated records (a PULL body), or a list of such bodies: the same as
            their join when no record spans two of them (a PULL body holds whole records;
            one that does is reported as truncated), without the copy. Error positions
            count from the start of the first.
        start: first queue offset kept.
        end: queue offsets from here on are dropped.
        tags: keep only records whose ``TAGS`` is one of these (``None``: all).
        with_props: build the properties column.
        skip: property names left out of the properties column.
        fields: the columns built (a mask of ``FIELD_BITS``); the others are empty.

    Returns:
        The columns, or ``None`` when a record is well formed but not handled here (IPv6
        hosts, a compressed body, a timestamp beyond int64 microseconds).

    Raises:
        CorruptionError: a record is malformed (every record is checked, kept or not).
    """
    bodies = buf if isinstance(buf, list) else [buf]
    if sum(map(len, bodies)) >= 2**31 - 1:
        return None
    out = _Columns(with_props, fields)
    base = 0
    for body in bodies:
        if not _walk(body, base, out, start, end, tags, skip):
            return None
        base += len(body)
    return out.result()


def _walk(
    buf: bytes,
    base: int,
    out: _Columns,
    start: int,
    end: int,
    tags: Collection[bytes] | None,
    skip: Collection[bytes],
) -> bool:
    """Add the kept records of one body to ``out``; ``False``: one is not handled here."""
    pos = 0
    while pos < len(buf):
        rec = _parse(buf, pos, base)
        if rec is None:
            return False
        pos += rec.fields[0]
        sys_flag, born_ms, store_ms = rec.fields[7], rec.fields[8], rec.fields[11]
        if sys_flag & _COMPRESSED or abs(born_ms) > _MAX_MS or abs(store_ms) > _MAX_MS:
            return False
        if not start <= rec.fields[5] < end:
            continue
        props = _properties(rec.props) if out.needs_props(tags) else {}
        if tags is not None and props.get(_TAGS) not in tags:
            continue
        out.add(rec, props, skip)
    return True


def _compiled() -> Any:
    fast = native.speedups
    return getattr(fast, "decode_columns", None) if fast is not None else None


_FAST = _compiled()


def decode_columns(
    buf: bytes | list[bytes],
    start: int,
    end: int,
    tags: Collection[bytes] | None,
    with_props: bool,
    skip: Collection[bytes],
    fields: int = ALL_FIELDS,
) -> RecordColumns | None:
    """``decode_columns_py`` (same arguments, results and errors), compiled when built.

    Raises:
        CorruptionError: a record is malformed.
    """
    if _FAST is None:
        return decode_columns_py(buf, start, end, tags, with_props, skip, fields)
    tag_set = None if tags is None else tuple(tags)
    try:
        got = _FAST(buf, start, end, tag_set, with_props, tuple(skip), fields)
    except ValueError as exc:
        message, pos = exc.args
        raise CorruptionError(message, pos=pos) from None
    return None if got is None else RecordColumns(*got)


#: whether ``decode_columns`` runs compiled
COMPILED = _FAST is not None
