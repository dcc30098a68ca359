"""A small blocking remoting client over plain sockets (for Spark executors, CLIs and tests).

How it works: one socket per ``"host:port"``, reused, guarded by a lock so threads may share
the client (calls to the same address are serialised). A call writes the request frame and
reads frames until the response with the request's opaque arrives; late responses to earlier
timed-out calls are discarded by opaque. Requests the server sends on the connection are
answered REQUEST_CODE_NOT_SUPPORTED (one-way ones are ignored): this client registers no
processors. It shares the sans-IO codec with the asyncio transport.
"""

from __future__ import annotations

import socket
import threading
import time
from types import TracebackType

from ariane.errors import ConnectError, ConnectionClosedError, RequestTimeoutError
from ariane.remoting.client import parse_address
from ariane.remoting.protocol.codec import MAX_FRAME_BYTES, FrameDecoder, encode
from ariane.remoting.protocol.codes import ResponseCode
from ariane.remoting.protocol.command import RemotingCommand, make_response_for

__all__ = ["BlockingRemotingClient"]

_RECV_BYTES = 256 * 1024


class _Connection:
    __slots__ = ("decoder", "lock", "pending", "sock")

    def __init__(self, sock: socket.socket, max_frame_bytes: int) -> None:
        self.sock = sock
        self.decoder = FrameDecoder(max_frame_bytes)
        self.lock = threading.Lock()
        self.pending: list[RemotingCommand] = []

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


class BlockingRemotingClient:
    """Blocking request/response over the RocketMQ remoting protocol.

    Args:
        connect_timeout_ms: time allowed to open a connection.
        max_frame_bytes: largest frame accepted from a server.
    """

    def __init__(
        self, connect_timeout_ms: int = 3000, max_frame_bytes: int = MAX_FRAME_BYTES
    ) -> None:
        self.connect_timeout_ms = connect_timeout_ms
        self.max_frame_bytes = max_frame_bytes
        self._connections: dict[str, _Connection] = {}
        self._lock = threading.Lock()

    def __enter__(self) -> BlockingRemotingClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close every connection."""
        with self._lock:
            connections = list(self._connections.values())
            self._connections.clear()
        for conn in connections:
            conn.close()

    def _connection(self, addr: str) -> _Connection:
        with self._lock:
            conn = self._connections.get(addr)
            if conn is not None:
                return conn
        host, port = parse_address(addr)
        try:
            sock = socket.create_connection((host, port), timeout=self.connect_timeout_ms / 1000)
        except OSError as exc:
            raise ConnectError(f"connect to {addr} failed: {exc}") from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = _Connection(sock, self.max_frame_bytes)
        with self._lock:
            existing = self._connections.setdefault(addr, conn)
        if existing is not conn:
            conn.close()
        return existing

    def _drop(self, addr: str, conn: _Connection) -> None:
        with self._lock:
            if self._connections.get(addr) is conn:
                del self._connections[addr]
        conn.close()

    def invoke(self, addr: str, request: RemotingCommand, timeout_ms: int) -> RemotingCommand:
        """Send ``request`` and block until its response arrives.

        Raises:
            ConnectError: cannot connect.
            RequestTimeoutError: no response within ``timeout_ms`` (the connection is kept).
            ConnectionClosedError: the connection broke; the next call reconnects.
            RemoteProtocolError: the server sent bytes that do not decode.
        """
        conn = self._connection(addr)
        deadline = time.monotonic() + timeout_ms / 1000
        with conn.lock:
            try:
                conn.sock.settimeout(max(timeout_ms / 1000, 0.001))
                conn.sock.sendall(encode(request))
                while True:
                    for cmd in self._take(conn):
                        if cmd.is_response:
                            if cmd.opaque == request.opaque:
                                return cmd
                        elif not cmd.is_oneway:
                            self._refuse(conn, cmd)
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise TimeoutError
                    conn.sock.settimeout(left)
                    self._receive(conn, addr)
            except TimeoutError:
                raise RequestTimeoutError(
                    f"no response from {addr} within {timeout_ms} ms (opaque {request.opaque})"
                ) from None
            except OSError as exc:
                self._drop(addr, conn)
                raise ConnectionClosedError(f"connection to {addr} failed: {exc}") from exc
            except Exception:  # protocol errors, closed connection: the stream is unusable
                self._drop(addr, conn)
                raise

    def invoke_oneway(self, addr: str, request: RemotingCommand) -> None:
        """Send a one-way request.

        Raises:
            ConnectError: cannot connect.
            ConnectionClosedError: the connection broke.
        """
        conn = self._connection(addr)
        request.mark_oneway()
        with conn.lock:
            try:
                conn.sock.settimeout(self.connect_timeout_ms / 1000)
                conn.sock.sendall(encode(request))
            except OSError as exc:
                self._drop(addr, conn)
                raise ConnectionClosedError(f"connection to {addr} failed: {exc}") from exc

    @staticmethod
    def _take(conn: _Connection) -> list[RemotingCommand]:
        taken, conn.pending = conn.pending, []
        return taken

    @staticmethod
    def _receive(conn: _Connection, addr: str) -> None:
        data = conn.sock.recv(_RECV_BYTES)
        if not data:
            raise ConnectionClosedError(f"connection to {addr} closed by the server")
        conn.pending.extend(conn.decoder.feed(data))

    @staticmethod
    def _refuse(conn: _Connection, request: RemotingCommand) -> None:
        answer = make_response_for(
            request,
            ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
            f" request type {request.code} not supported",
        )
        conn.sock.sendall(encode(answer))
