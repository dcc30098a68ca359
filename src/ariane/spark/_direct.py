"""Bulk pulls over a blocking connection of their own: the executors' raw reads, no event loop.

How it works: a Spark task reading one queue range with ARIANE_BULK_PULL_MESSAGE (answers of a
few MiB) spends much of its Python time around the bytes rather than on them when the answers
come through the SDK's background loop: reads of at most 256 KiB each, a ``bytes`` per read,
the frame decoder joining them, a future completed on the loop's thread and waited on by the
task's. ``DirectPulls`` opens one plain TCP connection to the broker for the task's range,
writes the window's requests on it (``submit`` then ``flush``: one write per burst), and reads
each answer on the task's own thread: the 8 bytes of length and header word, the header, then
the body with ``recv_into`` straight into a ``bytearray`` of its size (the only copy of the
records in this process before the column decode). Answers are matched to requests by opaque
(``RemotingCommand``); an answer whose ``Ticket`` the pull window has dropped (a tag filter
skipped past it, a restart) is read and discarded.

The caller (``QueueReader``) takes this path only for raw bulk reads without an ACL account
(no request signing here); everything else, and the plain pulls after a broker answered
REQUEST_CODE_NOT_SUPPORTED, uses the SDK's client. Answers are decoded with the same
``decode_pull_response`` as the SDK's pulls (same statuses, same errors).

Receive buffers are reused: a body the caller is done with (its records decoded into columns
of their own, no view of it kept) can be handed back to the connection's ``spare`` list, and
the next answer is read into it (``take_buffer``) instead of a fresh, zero-filled
``bytearray``: a few MiB of ``memset`` and page faults per answer fewer.
"""

from __future__ import annotations

import socket
import struct
import weakref
from typing import NoReturn

from ariane.client._api import decode_pull_response
from ariane.client.message import PullResult, PullStatus
from ariane.errors import ConnectError, ConnectionClosedError, RemoteProtocolError
from ariane.errors import RequestTimeoutError as _Timeout
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.codec import MAX_FRAME_BYTES, decode_frame, encode
from ariane.remoting.protocol.codes import RequestCode
from ariane.remoting.protocol.command import RemotingCommand

__all__ = ["DirectPulls", "Ticket", "take_buffer"]

#: the request code sent (a module constant so a test can send one the broker does not know)
BULK_CODE = RequestCode.ARIANE_BULK_PULL_MESSAGE
_PREFIX = struct.Struct(">iI")  # frame length, header word
_HEADER_LENGTH_MASK = 0xFFFFFF
#: a body read with recv_into in pieces of at most this many bytes
_READ = 1 << 20


def take_buffer(spare: list[bytearray], size: int) -> bytearray:
    """A ``bytearray`` of ``size`` bytes for an answer's body: the last of ``spare`` (taken
    off it) resized, its old bytes left in place (the read overwrites them all), else a new
    one. Shrinking keeps the allocation unless it falls below half, growing by a little
    stays within CPython's over-allocation, so answers of about one size reuse one block."""
    if not spare:
        return bytearray(size)
    buf = spare.pop()
    have = len(buf)
    if have > size:
        del buf[size:]
    elif have < size:
        buf += bytes(size - have)
    return buf


class Ticket:
    """One bulk pull in flight on a ``DirectPulls`` connection."""

    __slots__ = ("__weakref__", "_conn", "answer", "body", "opaque")

    def __init__(self, conn: DirectPulls, opaque: int) -> None:
        self._conn = conn
        self.opaque = opaque
        #: the answer (its header; the records are ``body``), once read
        self.answer: RemotingCommand | None = None
        self.body = bytearray()

    def result(self) -> tuple[PullResult, bytearray]:
        """The pull's result and raw records (empty unless FOUND), reading answers off the
        connection until this one's arrives.

        Raises:
            BrokerResponseError: the broker refused the pull.
            RequestTimeoutError, ConnectionClosedError, RemoteProtocolError: the connection
                failed (then every later ticket of it fails too).
        """
        while self.answer is None:
            self._conn.read_answer()
        result = decode_pull_response(self.answer, decode_body=False)
        return result, self.body if result.status is PullStatus.FOUND else bytearray()


class DirectPulls:
    """A blocking connection to one broker for the bulk pulls of one queue range.

    Args:
        addr: the broker's ``host:port``.
        timeout_ms: connect timeout, and the longest wait for any read of an answer.
        spare: bodies the caller is done with, read into again before new ones are made.

    Raises:
        ConnectError: the connection could not be opened.
    """

    def __init__(self, addr: str, timeout_ms: int, spare: list[bytearray] | None = None) -> None:
        host, _, port = addr.rpartition(":")
        self._timeout_ms = timeout_ms
        try:
            self._sock = socket.create_connection((host, int(port)), timeout=timeout_ms / 1000)
        except (OSError, ValueError) as exc:
            raise ConnectError(f"connect to {addr}: {exc}") from exc
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._addr = addr
        self._out: list[bytes] = []
        self._tickets: weakref.WeakValueDictionary[int, Ticket] = weakref.WeakValueDictionary()
        self._prefix = bytearray(_PREFIX.size)
        self._broken: str | None = None
        self._spare: list[bytearray] = [] if spare is None else spare

    def __enter__(self) -> DirectPulls:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection (answers still in flight are dropped)."""
        self._sock.close()

    def submit(self, header: h.PullMessageRequestHeader) -> Ticket:
        """Queue a bulk pull; it leaves with the next ``flush``."""
        request = RemotingCommand.request(BULK_CODE, header.to_ext_fields())
        self._out.append(encode(request))
        ticket = Ticket(self, request.opaque)
        self._tickets[request.opaque] = ticket
        return ticket

    def flush(self) -> None:
        """Send the queued requests in one write."""
        if not self._out:
            return
        data = self._out[0] if len(self._out) == 1 else b"".join(self._out)
        self._out.clear()
        try:
            self._sock.sendall(data)
        except OSError as exc:
            self._fail(f"send to {self._addr}: {exc}")

    def read_answer(self) -> None:
        """Read one answer and hand it to its ticket (dropped when nobody waits for it)."""
        if self._broken is not None:
            raise ConnectionClosedError(self._broken)
        prefix = self._prefix
        self._fill(memoryview(prefix))
        length, word = _PREFIX.unpack(prefix)
        header_len = word & _HEADER_LENGTH_MASK
        if length < 4 or length + 4 > MAX_FRAME_BYTES or header_len > length - 4:
            self._fail(f"bad frame from {self._addr}: length {length}, header {header_len}")
        head = bytearray(4 + header_len)
        head[:4] = prefix[4:]
        self._fill(memoryview(head)[4:])
        body = take_buffer(self._spare, length - 4 - header_len)
        self._fill(memoryview(body))
        try:
            answer = decode_frame(head)
        except RemoteProtocolError as exc:
            self._fail(f"bad frame from {self._addr}: {exc}")
        if not answer.is_response:
            return  # a request from the broker: none is expected on this connection
        ticket = self._tickets.pop(answer.opaque, None)
        if ticket is not None:
            ticket.body = body
            ticket.answer = answer

    def _fill(self, view: memoryview) -> None:
        """Read exactly ``len(view)`` bytes into ``view``."""
        recv_into = self._sock.recv_into
        got, size = 0, len(view)
        try:
            while got < size:
                n = recv_into(view[got : got + _READ])
                if n == 0:
                    self._fail(f"{self._addr} closed the connection")
                got += n
        except TimeoutError:
            self._broken = f"no answer from {self._addr} within {self._timeout_ms} ms"
            raise _Timeout(self._broken) from None
        except OSError as exc:
            self._fail(f"read from {self._addr}: {exc}")

    def _fail(self, why: str) -> NoReturn:
        self._broken = why
        self.close()
        raise ConnectionClosedError(why)
