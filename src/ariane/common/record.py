"""The stored-record wire codec: one CommitLog record, as PULL/QUERY/VIEW bodies carry them.

Pure code (no I/O): mirrors RocketMQ's ``MessageDecoder.decode``/``decodesBatch`` and the
store's ``MessageExtEncoder``. The byte layout is documented field by field in
:mod:`ariane.store.format`; in short (big-endian, IPv4 hosts, magic V1)::

    0 TOTALSIZE i32 | 4 MAGIC i32 | 8 BODYCRC i32 | 12 QUEUEID i32 | 16 FLAG i32
    20 QUEUEOFFSET i64 | 28 PHYSICALOFFSET i64 | 36 SYSFLAG i32 | 40 BORNTIMESTAMP i64
    48 BORNHOST 4+4 | 56 STORETIMESTAMP i64 | 64 STOREHOST 4+4 | 72 RECONSUMETIMES i32
    76 PREPAREDTRANSACTIONOFFSET i64 | 84 BODYLENGTH i32 | 88 BODY
    TOPICLENGTH i8 (V1) / i16 (V2) | TOPIC | PROPERTIESLENGTH i16 | PROPERTIES

IPv6 hosts (sysFlag bits 0x10 / 0x20) take 16 + 4 bytes each and shift the later fields.
``BODYCRC`` is ``zlib.crc32(body) & 0x7FFFFFFF``. Any malformed input raises
:class:`ariane.errors.CorruptionError` and nothing else.
"""

from __future__ import annotations

import dataclasses
import struct
import zlib
from collections.abc import Iterator
from typing import Any

from ariane.common import native
from ariane.common.message import HostPort, MessageExt
from ariane.common.properties import decode_properties, encode_properties
from ariane.common.sysflag import (
    COMPRESSED_FLAG,
    COMPRESSION_ZLIB,
    born_host_v6,
    clear_compression,
    compression_type,
    host_flags,
    host_record_size,
    store_host_v6,
    with_host_flags,
)
from ariane.errors import CorruptionError

__all__ = [
    "BLANK_MAGIC_CODE",
    "CRC_MASK",
    "MESSAGE_MAGIC_CODE_V1",
    "MESSAGE_MAGIC_CODE_V2",
    "body_crc",
    "decode_record",
    "decode_records",
    "encode_record",
    "iter_records",
    "record_length",
    "record_properties",
    "record_property",
]

MESSAGE_MAGIC_CODE_V1 = -626843481  # 0xDAA320A7
MESSAGE_MAGIC_CODE_V2 = -626843477  # 0xDAA320AB
BLANK_MAGIC_CODE = -875286124  # 0xCBD43194
CRC_MASK = 0x7FFFFFFF

_HEAD = struct.Struct(">iiiiiqqiq")  # TOTALSIZE .. BORNTIMESTAMP, 48 bytes
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I16 = struct.Struct(">h")
_I8 = struct.Struct(">b")
_HOST4 = struct.Struct(">4si")
_HOST6 = struct.Struct(">16si")
_MIDDLE = struct.Struct(">iqi")  # RECONSUMETIMES, PREPAREDTRANSACTIONOFFSET, BODYLENGTH


def body_crc(body: bytes) -> int:
    """``UtilAll.crc32``: CRC-32 of ``body`` masked to 31 bits."""
    return zlib.crc32(body) & CRC_MASK


def record_length(
    body_len: int,
    topic_len: int,
    props_len: int,
    *,
    v2: bool = False,
    born_v6: bool = False,
    store_v6: bool = False,
) -> int:
    """``calMsgLength``: the TOTALSIZE of a record with these field lengths (in bytes)."""
    return (
        91 + body_len + topic_len + props_len + (1 if v2 else 0) + (12 if born_v6 else 0)
        + (12 if store_v6 else 0)
    )  # fmt: skip


def encode_record(msg: MessageExt, *, v2: bool | None = None) -> bytes:
    """Encode ``msg`` as one stored record.

    The sysFlag host bits are derived from the host address lengths and ``body_crc`` is
    recomputed from the body. ``store_size`` is ignored.

    Args:
        msg: the message; ``commit_log_offset`` and ``queue_offset`` are written as given.
        v2: force the V2 magic (2-byte topic length); by default V2 is used only for topics
            longer than 127 bytes.

    Raises:
        CorruptionError: never; ``InvalidArgumentError``-like problems raise ``ValueError``
            (topic or properties too long for their length fields).
    """
    topic = msg.topic.encode()
    prop_bytes = encode_properties(msg.properties).encode()
    use_v2 = len(topic) > 127 if v2 is None else v2
    if len(topic) > (32767 if use_v2 else 127):
        raise ValueError(f"topic too long: {len(topic)} bytes")
    if len(prop_bytes) > 32767:
        raise ValueError(f"properties too long: {len(prop_bytes)} bytes")
    born, store = msg.born_host, msg.store_host
    sys_flag = with_host_flags(
        msg.sys_flag, host_flags(len(born.addr) == 16, len(store.addr) == 16)
    )
    total = record_length(
        len(msg.body), len(topic), len(prop_bytes), v2=use_v2, born_v6=born.is_ipv6,
        store_v6=store.is_ipv6,
    )  # fmt: skip
    parts = [
        _HEAD.pack(
            total, MESSAGE_MAGIC_CODE_V2 if use_v2 else MESSAGE_MAGIC_CODE_V1,
            body_crc(msg.body), msg.queue_id, msg.flag, msg.queue_offset, msg.commit_log_offset,
            sys_flag, msg.born_timestamp_ms,
        ),
        (_HOST6 if born.is_ipv6 else _HOST4).pack(born.addr, born.port),
        _I64.pack(msg.store_timestamp_ms),
        (_HOST6 if store.is_ipv6 else _HOST4).pack(store.addr, store.port),
        _MIDDLE.pack(msg.reconsume_times, msg.prepared_transaction_offset, len(msg.body)),
        msg.body,
        (_I16 if use_v2 else _I8).pack(len(topic)),
        topic,
        _I16.pack(len(prop_bytes)),
        prop_bytes,
    ]  # fmt: skip
    return b"".join(parts)


def _need(buf: bytes | bytearray | memoryview, pos: int, n: int, what: str) -> None:
    if n < 0 or pos + n > len(buf):
        raise CorruptionError(f"record truncated reading {what}", pos=pos)


def decode_record(
    buf: bytes | bytearray | memoryview,
    pos: int = 0,
    *,
    check_crc: bool = False,
    decompress: bool = False,
) -> tuple[MessageExt, int]:
    """Decode the record that starts at ``pos``.

    Args:
        buf: the bytes holding the record.
        pos: where the record starts.
        check_crc: verify BODYCRC.
        decompress: inflate a zlib-compressed body (sysFlag bit 0 with compression type 0
            or 3) and clear the bit, as the Java client does. Other codecs are left as is.

    Returns:
        The message and the position just past the record.

    Raises:
        CorruptionError: the bytes are not a well-formed message record (a BLANK end-of-file
            record is reported as corruption too: it is not a message).
    """
    try:
        return _decode(buf, pos, check_crc, decompress)
    except CorruptionError:
        raise
    except (struct.error, ValueError, IndexError, UnicodeDecodeError, zlib.error) as exc:
        raise CorruptionError(f"undecodable record: {exc}", pos=pos) from exc


#: Everything up to BODYLENGTH when both hosts are IPv4 (the common case), in one unpack.
_FIXED4 = struct.Struct(">iiiiiqqiq4siq4siiqi")
_V6_FLAGS = host_flags(True, True)


def _decode(
    buf: bytes | bytearray | memoryview, pos: int, check_crc: bool, decompress: bool
) -> tuple[MessageExt, int]:
    if _FAST is not None:
        # the compiled twin decodes well-formed IPv4 records; anything unusual (None) and
        # compressed bodies to inflate take the pure path below, which owns every error
        got: tuple[MessageExt, int] | None = _FAST(buf, pos)
        if got is not None:
            msg = got[0]
            if not (decompress and msg.sys_flag & COMPRESSED_FLAG):
                if check_crc and (zlib.crc32(msg.body) & CRC_MASK) != msg.body_crc:
                    raise CorruptionError("body CRC mismatch", pos=pos)
                return got
    return _decode_py(buf, pos, check_crc, decompress)


def _decode_py(
    buf: bytes | bytearray | memoryview, pos: int, check_crc: bool, decompress: bool
) -> tuple[MessageExt, int]:
    if pos + _FIXED4.size <= len(buf):
        fields = _FIXED4.unpack_from(buf, pos)
        if not fields[7] & _V6_FLAGS:
            return _finish(buf, pos, fields, pos + _FIXED4.size, check_crc, decompress)
    _need(buf, pos, _HEAD.size, "header")
    head = _HEAD.unpack_from(buf, pos)
    total, magic, sys_flag = head[0], head[1], head[7]
    if magic not in (MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2):
        raise CorruptionError(f"bad magic code {magic & 0xFFFFFFFF:#010x}", pos=pos)
    if total < 91:
        raise CorruptionError(f"bad total size {total}", pos=pos)
    _need(buf, pos, total, "record")
    p = pos + _HEAD.size
    host = _HOST6 if born_host_v6(sys_flag) else _HOST4
    _need(buf, p, host.size + 8, "born host")
    born = host.unpack_from(buf, p)
    p += host.size
    store_ts = _I64.unpack_from(buf, p)
    p += 8
    host = _HOST6 if store_host_v6(sys_flag) else _HOST4
    _need(buf, p, host.size + _MIDDLE.size, "store host")
    store = host.unpack_from(buf, p)
    p += host.size
    middle = _MIDDLE.unpack_from(buf, p)
    p += _MIDDLE.size
    return _finish(buf, pos, head + born + store_ts + store + middle, p, check_crc, decompress)


def _fast_decoder() -> Any:
    fast = native.speedups
    if fast is None:
        return None
    fast.configure(MessageExt, HostPort, MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2, _V6_FLAGS)
    configure_records = getattr(fast, "configure_records", None)
    if configure_records is not None and not hasattr(MessageExt, "__post_init__"):
        # MessageExt's fields in its constructor's order: the compiled twin writes the values
        # straight into these slots (what the dataclass __init__ does, without running it)
        configure_records(tuple(f.name for f in dataclasses.fields(MessageExt)))
    return fast.decode_record_v4


#: the compiled record decoder (``None`` in the pure build)
_FAST = _fast_decoder()
#: the compiled decoder of a whole PULL body (``None`` in the pure build)
_FAST_ALL: Any = getattr(native.speedups, "decode_records_v4", None) if _FAST else None


#: Largest body a compressed record may inflate to (a zlib bomb guard, as the broker bounds
#: inflated registration bodies): 16 times RocketMQ's 4 MiB message limit.
MAX_INFLATED_BODY_BYTES = 64 * 1024 * 1024


def _inflate(body: bytes, pos: int) -> bytes:
    inflater = zlib.decompressobj()
    data = inflater.decompress(body, MAX_INFLATED_BODY_BYTES)
    if inflater.unconsumed_tail:
        raise CorruptionError(
            f"compressed body inflates past {MAX_INFLATED_BODY_BYTES} bytes", pos=pos
        )
    if not inflater.eof:
        raise CorruptionError("compressed body is truncated", pos=pos)
    return data


def _finish(
    buf: bytes | bytearray | memoryview,
    pos: int,
    fields: tuple[Any, ...],
    p: int,
    check_crc: bool,
    decompress: bool,
) -> tuple[MessageExt, int]:
    """The variable part of a record, once the fixed fields (up to BODYLENGTH) are known."""
    (
        total, magic, crc, queue_id, flag, queue_offset, phys, sys_flag, born_ts,
        born_addr, born_port, store_ts, store_addr, store_port, reconsume, prepared, body_len,
    ) = fields  # fmt: skip
    if magic not in (MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2):
        raise CorruptionError(f"bad magic code {magic & 0xFFFFFFFF:#010x}", pos=pos)
    if total < 91:
        raise CorruptionError(f"bad total size {total}", pos=pos)
    _need(buf, pos, total, "record")
    end = pos + total
    if body_len < 0 or p + body_len > end:
        raise CorruptionError(f"bad body length {body_len}", pos=pos)
    body = bytes(buf[p : p + body_len])
    p += body_len
    if magic == MESSAGE_MAGIC_CODE_V2:
        _need(buf, p, 2, "topic length")
        (topic_len,) = _I16.unpack_from(buf, p)
        p += 2
    else:
        _need(buf, p, 1, "topic length")
        (topic_len,) = _I8.unpack_from(buf, p)
        p += 1
    if topic_len < 0 or p + topic_len + 2 > end:
        raise CorruptionError(f"bad topic length {topic_len}", pos=pos)
    topic = bytes(buf[p : p + topic_len]).decode()
    p += topic_len
    (props_len,) = _I16.unpack_from(buf, p)
    p += 2
    if props_len < 0 or p + props_len != end:
        raise CorruptionError(f"bad properties length {props_len} for total {total}", pos=pos)
    properties = decode_properties(bytes(buf[p:end]).decode()) if props_len else {}
    if check_crc and (zlib.crc32(body) & CRC_MASK) != crc:
        raise CorruptionError("body CRC mismatch", pos=pos)
    compressed = sys_flag & COMPRESSED_FLAG
    if decompress and compressed and compression_type(sys_flag) in (0, COMPRESSION_ZLIB):
        body = _inflate(body, pos)
        sys_flag = clear_compression(sys_flag)
    msg = MessageExt(
        topic,
        body,
        flag,
        properties,
        queue_id,
        total,
        queue_offset,
        sys_flag,
        born_ts,
        HostPort(born_addr, born_port),
        store_ts,
        HostPort(store_addr, store_port),
        crc,
        reconsume,
        prepared,
        phys,
    )
    return msg, end


def iter_records(
    buf: bytes | bytearray | memoryview, *, check_crc: bool = False, decompress: bool = False
) -> Iterator[MessageExt]:
    """Yield every record of a concatenation (a PULL response body), in order.

    Raises:
        CorruptionError: a record does not decode (records before it were yielded).
    """
    pos = 0
    n = len(buf)
    while pos < n:
        msg, pos = decode_record(buf, pos, check_crc=check_crc, decompress=decompress)
        yield msg


def decode_records(
    buf: bytes | bytearray | memoryview, *, check_crc: bool = False, decompress: bool = False
) -> list[MessageExt]:
    """Decode a whole concatenation of records (``MessageDecoder.decodesBatch``).

    Raises:
        CorruptionError: any record does not decode.
    """
    if _FAST_ALL is not None and not check_crc:
        # the compiled twin of _decode_records_py takes the plain case in one call (every
        # record well-formed, IPv4 hosts, nothing to inflate); None: record by record below
        got: list[MessageExt] | None = _FAST_ALL(buf, COMPRESSED_FLAG if decompress else 0)
        if got is not None:
            return got
    return list(iter_records(buf, check_crc=check_crc, decompress=decompress))


def _decode_records_py(
    buf: bytes | bytearray | memoryview, check_crc: bool = False, decompress: bool = False
) -> list[MessageExt]:
    """The pure reference of ``decode_records`` (and of its compiled twin)."""
    out: list[MessageExt] = []
    pos = 0
    while pos < len(buf):
        try:
            msg, pos = _decode_py(buf, pos, check_crc, decompress)
        except CorruptionError:
            raise
        except (struct.error, ValueError, IndexError, UnicodeDecodeError, zlib.error) as exc:
            raise CorruptionError(f"undecodable record: {exc}", pos=pos) from exc
        out.append(msg)
    return out


def _properties_span(buf: bytes | bytearray | memoryview) -> tuple[int, int]:
    """(start, end) of the PROPERTIES bytes of the single record ``buf`` holds."""
    end = len(buf)
    if end < 91:
        raise CorruptionError(f"record of {end} bytes is too short")
    total, magic = struct.unpack_from(">ii", buf, 0)
    if total != end or magic not in (MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2):
        raise CorruptionError(f"not one whole record (size {total}, {end} bytes given)")
    (sys_flag,) = _I32.unpack_from(buf, 36)
    p = 48 + host_record_size(born_host_v6(sys_flag)) + 8
    p += host_record_size(store_host_v6(sys_flag)) + _MIDDLE.size
    if p > end:
        raise CorruptionError("record truncated before its body")
    (body_len,) = _I32.unpack_from(buf, p - 4)
    p += body_len
    if body_len < 0 or p + 2 > end:
        raise CorruptionError(f"bad body length {body_len}")
    if magic == MESSAGE_MAGIC_CODE_V2:
        (topic_len,) = _I16.unpack_from(buf, p)
        p += 2 + topic_len
    else:
        p += 1 + buf[p]
    if p + 2 > end:
        raise CorruptionError("bad topic length")
    (props_len,) = _I16.unpack_from(buf, p)
    p += 2
    if props_len < 0 or p + props_len != end:
        raise CorruptionError(f"bad properties length {props_len}")
    return p, end


def record_properties(buf: bytes | bytearray | memoryview) -> dict[str, str]:
    """The property map of one whole stored record, without decoding the rest.

    Raises:
        CorruptionError: ``buf`` is not exactly one well-formed record.
    """
    start, end = _properties_span(buf)
    try:
        return decode_properties(bytes(buf[start:end]).decode())
    except UnicodeDecodeError as exc:
        raise CorruptionError(f"properties are not UTF-8: {exc}") from None


def record_property(buf: bytes, name: str) -> str | None:
    """One property of one whole stored record (a byte search: no full decode).

    Raises:
        CorruptionError: ``buf`` is not exactly one well-formed record.
    """
    start, end = _properties_span(buf)
    key = name.encode() + b"\x01"
    hi = end
    while True:  # the last occurrence wins, as in decode_properties
        pos = buf.rfind(key, start, hi)
        if pos < 0:
            return None
        if pos == start or buf[pos - 1] == 2:
            value_end = buf.find(b"\x02", pos, end)
            raw = buf[pos + len(key) : end if value_end < 0 else value_end]
            try:
                return raw.decode() or None
            except UnicodeDecodeError as exc:
                raise CorruptionError(f"property {name} is not UTF-8: {exc}") from None
        hi = pos + len(key) - 1
