"""The replication wire format (RocketMQ 4.x ``HAConnection`` / ``HAClient``), pure functions
over bytes.

Two byte streams over one TCP connection, all integers big-endian:

* slave -> master, *reports*: ``int64 offset`` repeated, nothing else. The first report is
  where the slave wants the transfer to start (0: "I am empty", which a RocketMQ 4.x master
  answers from the start of its last CommitLog file); every report is also the acknowledgement that the
  slave holds everything below it. Only the last complete report of a read matters.
* master -> slave, *frames*: ``int64 offset, int32 size`` then ``size`` bytes of CommitLog
  starting at ``offset``. A frame never crosses a CommitLog file and may end in the middle of
  a record. ``size = 0`` is a heartbeat whose offset is where the next data will start.

Ariane keeps this format (a RocketMQ 4.x slave or master can talk to it) and adds meaning
only where 4.x leaves a connection silent: a master that cannot serve the offset a slave
asked for answers with a heartbeat carrying another offset, its own end when the slave is
ahead of it, its first offset when the data the slave needs is gone; the slave stops there.

The decoders are sans-IO: feed them what the socket gave, get reports or frames back; a
value that cannot be right (a negative offset, a frame larger than the largest allowed)
raises :class:`~ariane.errors.RemoteProtocolError` and the connection should be closed.
"""

from __future__ import annotations

import struct
from typing import Final, NamedTuple

from ariane.errors import RemoteProtocolError

__all__ = [
    "FRAME_HEADER_SIZE",
    "REPORT_SIZE",
    "Frame",
    "FrameDecoder",
    "ReportDecoder",
    "encode_frame_header",
    "encode_report",
]

REPORT_SIZE: Final = 8
FRAME_HEADER_SIZE: Final = 12
_REPORT = struct.Struct(">q")
_HEADER = struct.Struct(">qi")


class Frame(NamedTuple):
    """One master -> slave frame: CommitLog bytes ``body`` starting at ``offset`` (empty for
    a heartbeat)."""

    offset: int
    body: bytes


def encode_report(offset: int) -> bytes:
    """A slave's report of ``offset`` (8 bytes).

    Raises:
        ValueError: ``offset`` is negative or does not fit an int64.
    """
    if offset < 0:
        raise ValueError(f"negative report offset {offset}")
    try:
        return _REPORT.pack(offset)
    except struct.error as exc:
        raise ValueError(str(exc)) from None


def encode_frame_header(offset: int, size: int) -> bytes:
    """The 12-byte header of a frame of ``size`` bytes at ``offset``.

    Raises:
        ValueError: a negative value, or one that does not fit its field.
    """
    if offset < 0 or size < 0:
        raise ValueError(f"bad frame header ({offset}, {size})")
    try:
        return _HEADER.pack(offset, size)
    except struct.error as exc:
        raise ValueError(str(exc)) from None


class ReportDecoder:
    """Reads a slave's reports; keeps at most 7 bytes of an incomplete one."""

    __slots__ = ("_partial",)

    def __init__(self) -> None:
        self._partial = b""

    def feed(self, data: bytes) -> int | None:
        """The last complete report in what arrived so far (older ones are superseded), or
        None if none completed.

        Raises:
            RemoteProtocolError: a negative offset.
        """
        buf = self._partial + data if self._partial else data
        complete = len(buf) - len(buf) % REPORT_SIZE
        self._partial = bytes(buf[complete:])
        if not complete:
            return None
        (offset,) = _REPORT.unpack_from(buf, complete - REPORT_SIZE)
        if offset < 0:
            raise RemoteProtocolError(f"replication report with a negative offset {offset}")
        return int(offset)


class FrameDecoder:
    """Splits the master's byte stream into frames.

    Args:
        max_body: the largest frame body accepted (a larger size means a broken stream).
    """

    __slots__ = ("_buf", "max_body")

    def __init__(self, max_body: int) -> None:
        self.max_body = max_body
        self._buf = bytearray()

    @property
    def buffered(self) -> int:
        """Bytes held for an incomplete frame."""
        return len(self._buf)

    def feed(self, data: bytes) -> list[Frame]:
        """Every frame completed by ``data``, in order.

        Raises:
            RemoteProtocolError: a header with a negative offset, or a negative or too large
                size. The decoder is then unusable.
        """
        buf = self._buf
        buf += data
        frames: list[Frame] = []
        pos = 0
        end = len(buf)
        while end - pos >= FRAME_HEADER_SIZE:
            offset, size = _HEADER.unpack_from(buf, pos)
            if offset < 0 or size < 0 or size > self.max_body:
                raise RemoteProtocolError(
                    f"bad replication frame header: offset {offset}, size {size} "
                    f"(at most {self.max_body})"
                )
            stop = pos + FRAME_HEADER_SIZE + size
            if stop > end:
                break
            frames.append(Frame(offset, bytes(buf[pos + FRAME_HEADER_SIZE : stop])))
            pos = stop
        if pos:
            del buf[:pos]
        return frames
