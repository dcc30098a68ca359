"""The batch body of SEND_BATCH_MESSAGE (RocketMQ ``MessageDecoder.encodeMessages`` /
``decodeMessages``; protocol notes D.3).

A batch body is the plain concatenation of one entry per message, big-endian::

    TOTALSIZE i32 (= 22 + bodyLen + propsLen) | MAGICCODE i32 (0) | BODYCRC i32 (0)
    FLAG i32 | BODYLENGTH i32 | BODY | PROPERTIESLENGTH i16 | PROPERTIES (UTF-8)

Pure code (no I/O). ``decode_batch`` raises only :class:`ariane.errors.CorruptionError`.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from ariane.common import native
from ariane.common.properties import encode_properties
from ariane.errors import CorruptionError, InvalidArgumentError

__all__ = [
    "ENTRY_FIXED",
    "ENTRY_HEAD",
    "ENTRY_PROPS_LEN",
    "BatchEntry",
    "decode_batch",
    "decode_batch_py",
    "encode_batch",
    "encode_batch_py",
]

#: a batch entry's fixed head: TOTALSIZE, MAGIC, BODYCRC, FLAG, BODYLENGTH
ENTRY_HEAD = struct.Struct(">iiiii")
#: PROPERTIESLENGTH, after the body
ENTRY_PROPS_LEN = struct.Struct(">h")
#: the fixed bytes of an entry (22)
ENTRY_FIXED = ENTRY_HEAD.size + ENTRY_PROPS_LEN.size
#: the compiled ``encode_entries`` (None: the pure build, or a stale one)
_encode_entries = getattr(native.speedups, "encode_entries", None)


class BatchEntry(NamedTuple):
    """One message of a batch: body, flag and the encoded properties string."""

    body: bytes
    flag: int
    properties: str


def encode_batch(messages: Iterable[tuple[bytes, int, Mapping[str, str] | str]]) -> bytes:
    """Encode ``(body, flag, properties)`` triples as a batch body; properties are a map or
    an already encoded properties string. A list of ``(bytes, int, str)`` (what a producer
    makes) is encoded in one C call when built (``_speedups_batchenc.h``); anything else by
    :func:`encode_batch_py`, the reference.

    Raises:
        InvalidArgumentError: properties are not valid Unicode or longer than 32767 bytes.
    """
    if _encode_entries is not None:
        body: bytes | None = _encode_entries(messages)
        if body is not None:
            return body
    return encode_batch_py(messages)


def encode_batch_py(messages: Iterable[tuple[bytes, int, Mapping[str, str] | str]]) -> bytes:
    """The pure-Python :func:`encode_batch`: the reference of the compiled twin."""
    parts: list[bytes] = []
    for body, flag, props in messages:
        try:
            text = (props if isinstance(props, str) else encode_properties(props)).encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidArgumentError(f"batch properties are not valid Unicode: {exc}") from None
        if len(text) > 0x7FFF:
            raise InvalidArgumentError(f"batch properties are {len(text)} bytes, limit 32767")
        parts.append(ENTRY_HEAD.pack(ENTRY_FIXED + len(body) + len(text), 0, 0, flag, len(body)))
        parts.append(body)
        parts.append(ENTRY_PROPS_LEN.pack(len(text)))
        parts.append(text)
    return b"".join(parts)


def decode_batch(data: bytes | bytearray | memoryview) -> list[BatchEntry]:
    """Split a batch body into its messages (the compiled twin when built).

    Raises:
        CorruptionError: the body is truncated, a length is inconsistent, or properties are not
            UTF-8.
    """
    fast = native.speedups
    if fast is None:
        return decode_batch_py(data)
    try:
        entries: list[BatchEntry] = fast.decode_batch(data, BatchEntry)
    except ValueError as exc:
        message, pos = exc.args
        raise CorruptionError(message, pos=pos) from None
    return entries


def decode_batch_py(data: bytes | bytearray | memoryview) -> list[BatchEntry]:
    """The pure-Python ``decode_batch``: the reference of the compiled twin."""
    buf = bytes(data)
    out: list[BatchEntry] = []
    pos = 0
    end = len(buf)
    while pos < end:
        if end - pos < ENTRY_FIXED:
            raise CorruptionError("batch entry truncated", pos=pos)
        total, _magic, _crc, flag, body_len = ENTRY_HEAD.unpack_from(buf, pos)
        if body_len < 0 or total < ENTRY_FIXED + body_len or total > end - pos:
            raise CorruptionError(
                f"batch entry has inconsistent lengths (total {total}, body {body_len})", pos=pos
            )
        body_start = pos + ENTRY_HEAD.size
        body_end = body_start + body_len
        (props_len,) = ENTRY_PROPS_LEN.unpack_from(buf, body_end)
        if props_len < 0 or ENTRY_FIXED + body_len + props_len != total:
            raise CorruptionError(
                f"batch entry has inconsistent lengths (total {total}, properties {props_len})",
                pos=pos,
            )
        props_start = body_end + ENTRY_PROPS_LEN.size
        try:
            props = buf[props_start : props_start + props_len].decode("utf-8")
        except UnicodeDecodeError:
            raise CorruptionError("batch entry properties are not UTF-8", pos=pos) from None
        out.append(BatchEntry(buf[body_start:body_end], flag, props))
        pos += total
    return out
