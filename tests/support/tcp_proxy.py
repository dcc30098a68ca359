"""A TCP proxy between two servers that a test can stall (keep the connections, move no
byte) and cut (close every connection, refuse new ones), then resume. One thread, select."""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading

__all__ = ["TcpProxy"]


class TcpProxy:
    """Forwards ``127.0.0.1:<port>`` to ``target`` (which may be set after start).

    Attributes:
        port: the listening port.
        connections: connections accepted so far.
    """

    def __init__(self, target: str | None = None) -> None:
        self.target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.setblocking(False)
        self.port = int(self._listener.getsockname()[1])
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._listener, selectors.EVENT_READ, None)
        self._peers: dict[socket.socket, socket.socket] = {}
        self._lock = threading.Lock()
        self._stalled = False
        self._cut = False
        self._stop = False
        self.connections = 0
        self._thread = threading.Thread(target=self._run, name="tcp-proxy", daemon=True)
        self._thread.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def open_connections(self) -> int:
        with self._lock:
            return len(self._peers) // 2

    def stall(self) -> None:
        """Stop moving bytes (connections stay open)."""
        self._stalled = True

    def cut(self) -> None:
        """Close every connection and refuse new ones."""
        self._cut = True
        with self._lock:
            for sock in list(self._peers):
                self._close(sock)

    def resume(self) -> None:
        """Forward again and accept new connections."""
        self._stalled = False
        self._cut = False

    def close(self) -> None:
        self._stop = True
        self._thread.join(5)
        with self._lock:
            for sock in list(self._peers):
                self._close(sock)
        self._sel.close()
        self._listener.close()

    # -- the thread -------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop:
            events = self._sel.select(0.05)
            for key, _ in events:
                if key.data is None:
                    self._accept()
                elif not self._stalled:
                    self._forward(key.fileobj)  # type: ignore[arg-type]

    def _accept(self) -> None:
        try:
            client, _ = self._listener.accept()
        except BlockingIOError:
            return
        if self._cut or self.target is None:
            client.close()
            return
        host, _, port = self.target.rpartition(":")
        try:
            upstream = socket.create_connection((host, int(port)), timeout=2)
        except OSError:
            client.close()
            return
        self.connections += 1
        for sock in (client, upstream):
            sock.setblocking(False)
        with self._lock:
            self._peers[client] = upstream
            self._peers[upstream] = client
            self._sel.register(client, selectors.EVENT_READ, "c")
            self._sel.register(upstream, selectors.EVENT_READ, "u")

    def _forward(self, sock: socket.socket) -> None:
        with self._lock:
            other = self._peers.get(sock)
            if other is None:
                return
            try:
                data = sock.recv(65536)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                self._close(sock)
                return
            try:
                other.setblocking(True)
                other.sendall(data)
                other.setblocking(False)
            except OSError:
                self._close(sock)

    def _close(self, sock: socket.socket) -> None:
        other = self._peers.pop(sock, None)
        for s in (sock, other):
            if s is None:
                continue
            self._peers.pop(s, None)
            with contextlib.suppress(KeyError, ValueError):
                self._sel.unregister(s)
            with contextlib.suppress(OSError):
                s.close()
