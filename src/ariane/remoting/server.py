"""The remoting server (RocketMQ ``NettyRemotingServer``).

How it works: ``start()`` listens with ``loop.create_server``; every accepted connection is a
``Channel`` whose requests go to this server's ``Dispatcher`` (processors and hooks). A small
sweeper closes connections idle for longer than ``channel_max_idle_seconds``. The server can
call a client back on the connection the client opened (``invoke``, ``invoke_oneway``), which
brokers use for transaction checks and consumer notifications. Close listeners let upper layers
drop state tied to a connection (a broker's client registrations, a NameServer's broker
liveness). ``stop()`` stops accepting, lets in-progress requests finish for a grace period,
then closes every connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import cast

from ariane.remoting.channel import Channel
from ariane.remoting.config import RemotingServerConfig
from ariane.remoting.dispatch import Dispatcher, DispatchingEndpoint
from ariane.remoting.eventloop import cancel_and_wait
from ariane.remoting.local import LocalChannel, LocalRequestCallback
from ariane.remoting.protocol.command import RemotingCommand

__all__ = ["RemotingServer"]

logger = logging.getLogger(__name__)


class RemotingServer(DispatchingEndpoint):
    """Serves RocketMQ remoting requests on one TCP port.

    Args:
        config: listen address, limits and timeouts.
    """

    def __init__(self, config: RemotingServerConfig | None = None) -> None:
        self.config = config or RemotingServerConfig()
        self.dispatcher = Dispatcher()
        self._channels: dict[int, Channel] = {}
        self._refused = 0
        self._refused_logged = -1e9
        self._close_listeners: list[Callable[[Channel], None]] = []
        self._server: asyncio.Server | None = None
        self._sweeper: asyncio.Task[None] | None = None
        self._port = 0

    def add_channel_close_listener(self, listener: Callable[[Channel], None]) -> None:
        """Call ``listener(channel)`` whenever a client connection goes away."""
        self._close_listeners.append(listener)

    # -- state ----------------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The bound port (after ``start``)."""
        return self._port

    @property
    def address(self) -> str:
        """``"host:port"`` the server listens on."""
        return f"{self.config.bind_address}:{self._port}"

    @property
    def channels(self) -> list[Channel]:
        """The open client connections."""
        return list(self._channels.values())

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> int:
        """Start listening.

        Returns:
            The bound port (useful with ``listen_port=0``).

        Raises:
            OSError: the address cannot be bound.
        """
        if self._server is not None:
            return self._port
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            self._new_channel,
            host=self.config.bind_address,
            port=self.config.listen_port,
            backlog=self.config.backlog,
            reuse_address=True,
        )
        sockets = self._server.sockets
        self._port = sockets[0].getsockname()[1] if sockets else self.config.listen_port
        if self.config.channel_max_idle_seconds > 0:
            self._sweeper = asyncio.create_task(self._sweep_idle(), name="remoting-idle-sweeper")
        logger.info("remoting server listening on %s", self.address)
        return self._port

    async def stop(self) -> None:
        """Stop accepting, finish in-progress requests (bounded), close every connection."""
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        sweeper, self._sweeper = self._sweeper, None
        await cancel_and_wait(sweeper)
        tasks = set(self.dispatcher.tasks)
        if tasks:
            _, late = await asyncio.wait(tasks, timeout=self.config.shutdown_grace_seconds)
            for task in late:
                task.cancel()
        channels = list(self._channels.values())
        for channel in channels:
            channel.close()
        if channels:
            _, stuck = await asyncio.wait(
                [asyncio.ensure_future(c.wait_closed()) for c in channels], timeout=1.0
            )
            for channel in channels:
                if channel.is_active or stuck:
                    channel.abort()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.wait_closed(), timeout=1.0)
        logger.info("remoting server on %s stopped", self.address)

    # -- calling clients back -------------------------------------------------------------------

    async def invoke(
        self, channel: Channel, request: RemotingCommand, timeout_ms: int
    ) -> RemotingCommand:
        """Send a request to the client at the other end of ``channel`` and await its answer.

        Raises:
            RequestTimeoutError: no answer within ``timeout_ms``.
            ConnectionClosedError: the connection is (or goes) away.
        """
        return await channel.invoke(request, timeout_ms)

    def invoke_oneway(self, channel: Channel, request: RemotingCommand) -> None:
        """Send a one-way request to the client at the other end of ``channel``.

        Raises:
            ConnectionClosedError: the connection is closed.
        """
        channel.invoke_oneway(request)

    def open_local_channel(
        self, remote_addr: str, on_request: LocalRequestCallback | None = None
    ) -> LocalChannel:
        """A connection from a peer inside this process (the gRPC proxy acting for a client):
        its requests reach this server's processors and hooks, and its ``close()`` runs the
        close listeners like any lost connection."""
        channel = LocalChannel(
            self.dispatcher, remote_addr=remote_addr, local_addr=self.address, on_request=on_request
        )
        self._channels[channel.id] = channel
        channel.add_close_listener(self._on_channel_closed)
        return channel

    # -- internals ------------------------------------------------------------------------------

    def _new_channel(self) -> asyncio.Protocol:
        if len(self._channels) >= self.config.max_connections:
            self._refused += 1
            now = asyncio.get_running_loop().time()
            if now - self._refused_logged >= 10.0:
                logger.warning(
                    "%s: %d connection(s) refused: %d open, serverMaxConnections=%d",
                    self.address, self._refused, len(self._channels), self.config.max_connections,
                )  # fmt: skip
                self._refused, self._refused_logged = 0, now
            return _Refused()
        channel = Channel(
            self.dispatcher,
            max_frame_bytes=self.config.max_frame_bytes,
            pause_reading_on_backpressure=True,
            max_inflight=self.config.max_inflight_per_channel,
            max_write_buffer_bytes=self.config.max_write_buffer_bytes,
        )
        self._channels[channel.id] = channel
        channel.add_close_listener(self._on_channel_closed)
        return channel

    def _on_channel_closed(self, channel: Channel) -> None:
        self._channels.pop(channel.id, None)
        logger.debug("connection %r closed", channel)
        for listener in self._close_listeners:
            try:
                listener(channel)
            except Exception:
                logger.exception("channel close listener %r failed", listener)

    async def _sweep_idle(self) -> None:
        idle = self.config.channel_max_idle_seconds
        period = max(0.05, min(idle / 4, 5.0))
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(period)
            deadline = loop.time() - idle
            for channel in list(self._channels.values()):
                if channel.last_active < deadline and channel.is_active:
                    logger.info("closing %r: idle for more than %.0f s", channel, idle)
                    channel.close()


class _Refused(asyncio.Protocol):
    """A connection over ``max_connections``: closed as soon as it is made."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        cast(asyncio.Transport, transport).abort()
