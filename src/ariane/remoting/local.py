"""An in-process remoting connection: a channel without a socket (RocketMQ proxy's
``SimpleChannel`` / ``GrpcClientChannel``, used by its local mode).

How it works: a ``LocalChannel`` is a ``Channel`` whose far end is code in the same process,
such as the gRPC proxy acting for one 5.x client. ``call(request)`` hands the request to the
server's dispatcher exactly as if it had arrived on a TCP connection (hooks, processors, long
polling and all), and the response the dispatcher sends back on this channel completes the
call's future instead of being written to a socket. Requests the server sends the other way
(transaction checks, consumer notifications, running-info queries) go to the
``on_request`` callback of the owner, which answers two-way ones with ``deliver_response``.
Nothing is encoded: commands travel as objects.

``close()`` behaves like a lost connection: waiting calls fail with ``ConnectionClosedError``
and the server's close listeners drop what was registered under the channel.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from ariane.errors import ConnectionClosedError, RequestTimeoutError
from ariane.remoting.channel import Channel, RequestHandler
from ariane.remoting.protocol.command import FLAG_ONEWAY, FLAG_RESPONSE, RemotingCommand

__all__ = ["LocalChannel", "LocalRequestCallback"]

logger = logging.getLogger(__name__)

#: ``on_request(channel, request)``: a request the server sends to the in-process peer.
LocalRequestCallback = Callable[["LocalChannel", RemotingCommand], None]


class LocalChannel(Channel):
    """A channel whose peer lives in this process.

    Args:
        handler: the server's dispatcher.
        remote_addr: the peer's address as the server should see it (``"host:port"``).
        local_addr: the server's address.
        on_request: receives the requests the server sends to the peer.
    """

    def __init__(
        self,
        handler: RequestHandler,
        *,
        remote_addr: str,
        local_addr: str = "?",
        on_request: LocalRequestCallback | None = None,
    ) -> None:
        super().__init__(handler)
        self.remote_addr = remote_addr
        self.local_addr = local_addr
        self.on_request = on_request
        self._open = True
        self._calls: dict[int, asyncio.Future[RemotingCommand]] = {}

    def __repr__(self) -> str:
        return f"<LocalChannel #{self.id} {self.remote_addr}>"

    @property
    def is_active(self) -> bool:
        return self._open

    # -- the in-process peer calling the server ---------------------------------------------

    async def call(
        self, request: RemotingCommand, timeout_s: float | None = None
    ) -> RemotingCommand:
        """Dispatch ``request`` to the server and wait for its response.

        Raises:
            ConnectionClosedError: the channel is (or gets) closed.
            RequestTimeoutError: no response within ``timeout_s``.
        """
        if not self._open:
            raise ConnectionClosedError(f"{self!r} is closed")
        future: asyncio.Future[RemotingCommand] = self._loop.create_future()
        opaque = request.opaque
        while opaque in self._calls:
            request.opaque = opaque = opaque + 1
        self._calls[opaque] = future
        self.last_active = self._loop.time()
        try:
            self._handler.handle_request(self, request)
            if future.done() or timeout_s is None:  # answered inline: the common case
                return await future
            timer = self._loop.call_later(timeout_s, _expire, future, request, timeout_s)
            try:
                return await future
            finally:
                timer.cancel()
        finally:
            if self._calls.get(opaque) is future:
                del self._calls[opaque]

    def send_oneway(self, request: RemotingCommand) -> None:
        """Dispatch a one-way request (no response comes back).

        Raises:
            ConnectionClosedError: the channel is closed.
        """
        if not self._open:
            raise ConnectionClosedError(f"{self!r} is closed")
        request.mark_oneway()
        self.last_active = self._loop.time()
        self._handler.handle_request(self, request)

    # -- what the server writes on the channel ------------------------------------------------

    def send(self, cmd: RemotingCommand) -> bool:
        if not self._open:
            return False
        self.last_active = self._loop.time()
        if cmd.flag & FLAG_RESPONSE:
            future = self._calls.pop(cmd.opaque, None)
            if future is None or future.done():
                logger.debug("%r: response without a waiting call: %s", self, cmd.describe())
                return False
            future.set_result(cmd)
            return True
        callback = self.on_request
        if callback is None:
            if not cmd.flag & FLAG_ONEWAY:
                self._pending.pop(cmd.opaque, None)
            return False
        try:
            callback(self, cmd)
        except Exception:
            logger.exception("%r: request callback failed on %s", self, cmd.describe())
        return True

    def deliver_response(self, response: RemotingCommand) -> bool:
        """Answer a two-way request the server sent on this channel (matched by opaque).

        Returns:
            Whether a request was waiting for it.
        """
        waiter = self._pending.pop(response.opaque, None)
        if waiter is None:
            return False
        response.flag |= FLAG_RESPONSE
        waiter.complete(response)
        return True

    def close(self) -> None:
        """Close like a lost connection: waiting calls fail, close listeners run."""
        if not self._open:
            return
        self._open = False
        calls, self._calls = self._calls, {}
        for future in calls.values():
            if not future.done():
                future.set_exception(ConnectionClosedError(f"{self!r} closed"))
        self.connection_lost(None)

    def abort(self) -> None:
        self.close()


def _expire(
    future: asyncio.Future[RemotingCommand], request: RemotingCommand, timeout_s: float
) -> None:
    if not future.done():
        future.set_exception(
            RequestTimeoutError(f"no response to {request.describe()} within {timeout_s:.1f} s")
        )
