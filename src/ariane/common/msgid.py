"""Message ids: the broker's offsetMsgId and the client's unique id (UNIQ_KEY).

offsetMsgId (``MessageDecoder.createMessageId``): store host address bytes (4 for IPv4, 16 for
IPv6) + port as int32 + physical offset as int64, big-endian, as upper-case hex: 32 characters
for IPv4. The unique id (``MessageClientIDSetter``) is 16 bytes for IPv4 clients: IP (4), pid
(2), a per-process random int (4), milliseconds since the start of the month (4) and a
counter (2).
"""

from __future__ import annotations

import ipaddress
import itertools
import os
import struct
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from ariane.common import native
from ariane.errors import InvalidArgumentError

__all__ = [
    "OffsetMsgId",
    "UniqueIdGenerator",
    "create_offset_msg_id",
    "decode_offset_msg_id",
    "host_to_bytes",
    "offset_msg_ids",
    "offset_msg_ids_py",
]

_IPV4_ID = struct.Struct(">4siq")
_IPV6_ID = struct.Struct(">16siq")


def host_to_bytes(host: str) -> bytes:
    """Packed address bytes of an IPv4 or IPv6 literal (4 or 16 bytes)."""
    try:
        return ipaddress.ip_address(host).packed
    except ValueError as exc:
        raise InvalidArgumentError(f"not an IP address: {host!r}") from exc


def create_offset_msg_id(host: bytes, port: int, phys_offset: int) -> str:
    """Build the offsetMsgId for a record stored at ``phys_offset`` by ``host:port``."""
    if len(host) == 4:
        return _IPV4_ID.pack(host, port, phys_offset).hex().upper()
    if len(host) == 16:
        return _IPV6_ID.pack(host, port, phys_offset).hex().upper()
    raise InvalidArgumentError(f"host must be 4 or 16 bytes, got {len(host)}")


def offset_msg_ids_py(prefix: str, offsets: Sequence[int]) -> str:
    """The msgId of a stored batch's answer: ``prefix`` (the host part of
    :func:`create_offset_msg_id`) and each offset as 16 upper-case hex digits, comma-separated."""
    return ",".join(map(f"{prefix}%016X".__mod__, offsets))


def offset_msg_ids(prefix: str, offsets: Sequence[int]) -> str:
    """:func:`offset_msg_ids_py`, by its compiled twin when built."""
    fast = _MSG_IDS
    if fast is not None:
        got: str | None = fast(prefix, offsets)
        if got is not None:
            return got
    return offset_msg_ids_py(prefix, offsets)


_MSG_IDS = getattr(native.speedups, "offset_msg_ids", None)


@dataclass(frozen=True, slots=True)
class OffsetMsgId:
    """A decoded offsetMsgId."""

    host: str
    port: int
    phys_offset: int


def decode_offset_msg_id(msg_id: str) -> OffsetMsgId:
    """Decode a 32 (IPv4) or 56 (IPv6) hex character offsetMsgId.

    Raises:
        InvalidArgumentError: the string is not a well-formed offsetMsgId.
    """
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError as exc:
        raise InvalidArgumentError(f"offsetMsgId is not hex: {msg_id!r}") from exc
    if len(raw) == _IPV4_ID.size:
        addr, port, off = _IPV4_ID.unpack(raw)
    elif len(raw) == _IPV6_ID.size:
        addr, port, off = _IPV6_ID.unpack(raw)
    else:
        raise InvalidArgumentError(f"offsetMsgId has a wrong length: {msg_id!r}")
    if off < 0:
        raise InvalidArgumentError(f"offsetMsgId has a negative offset: {msg_id!r}")
    return OffsetMsgId(str(ipaddress.ip_address(addr)), port, off)


def _month_start_ms(now_ms: int) -> int:
    t = time.localtime(now_ms / 1000)
    start = time.mktime((t.tm_year, t.tm_mon, 1, 0, 0, 0, 0, 0, -1))
    return int(start * 1000)


_HEX2 = [f"{i:02X}" for i in range(256)]


class UniqueIdGenerator:
    """Generates client-side unique message ids in the shape of ``MessageClientIDSetter``.

    Args:
        ip: the client's address bytes (4 or 16); random bytes when unknown.
    """

    def __init__(self, ip: bytes | None = None) -> None:
        ip = ip if ip is not None else os.urandom(4)
        fixed = ip + struct.pack(">H", os.getpid() & 0xFFFF) + os.urandom(4)
        self._prefix = fixed.hex().upper()
        self._counter = itertools.count()
        self._lock = threading.Lock()
        self._month_start_ms = 0
        self._next_month_ms = 0
        #: the last ``(milliseconds, stem)``: sends in one millisecond format it once
        self._last: tuple[int, str] = (-1, "")
        #: ``(milliseconds << 8 | high byte of the sequence, stem + its two hex digits)``
        self._head: tuple[int, str] = (-1, "")

    def _stem(self, now: int | None = None) -> str:
        """The prefix and the milliseconds since the month started (8 hex digits), at
        ``now`` (milliseconds since the epoch; the clock when ``None``)."""
        if now is None:
            now = int(time.time() * 1000)
        last = self._last
        if now == last[0]:
            return last[1]
        if now >= self._next_month_ms:
            with self._lock:
                self._month_start_ms = _month_start_ms(now)
                self._next_month_ms = _month_start_ms(now + 32 * 86_400_000)
        stem = f"{self._prefix}{(now - self._month_start_ms) & 0xFFFFFFFF:08X}"
        self._last = (now, stem)
        return stem

    def next_id(self) -> str:
        """Return a new id (32 hex characters for an IPv4 client): the stem, then the 16-bit
        sequence in 4 hex digits. The stem and the sequence's first two digits change at most
        once per millisecond or per 256 ids, so they are joined once and reused."""
        now = int(time.time() * 1000)
        seq = next(self._counter) & 0xFFFF
        key = now << 8 | seq >> 8
        head = self._head
        if key != head[0]:
            head = (key, self._stem(now) + _HEX2[seq >> 8])
            self._head = head
        return head[1] + _HEX2[seq & 0xFF]

    def next_ids(self, n: int) -> list[str]:
        """``n`` new ids at once, as ``n`` calls of :meth:`next_id` in the same millisecond
        make them (one clock read; a batch's ids)."""
        stem = self._stem()
        seqs = [seq & 0xFFFF for seq in itertools.islice(self._counter, n)]
        digits = struct.pack(f">{len(seqs)}H", *seqs).hex().upper()  # 4 per id, in one call
        return [stem + digits[i : i + 4] for i in range(0, len(digits), 4)]
