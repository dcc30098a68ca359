"""The remoting client (RocketMQ ``NettyRemotingClient``).

How it works: one ``Channel`` per ``"host:port"``, opened on first use and reused; a broken
connection is dropped from the table, so the next call reconnects. Concurrent calls to an
address that is still connecting share the one connection attempt. Requests the server sends
back on the connection (NOTIFY_CONSUMER_IDS_CHANGED, CHECK_TRANSACTION_STATE,
GET_CONSUMER_RUNNING_INFO...) go to processors registered here, exactly as on a server; codes
without a processor are answered with REQUEST_CODE_NOT_SUPPORTED.

``signer``, when set, amends every outgoing request just before it is written (the ACL
signature: ``AclClientRPCHook``); it runs on the fast paths too, unlike general hooks.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from ariane.errors import ConnectError, InvalidArgumentError, RequestTimeoutError
from ariane.remoting.channel import Channel, ReadBufferChannel
from ariane.remoting.config import RemotingClientConfig
from ariane.remoting.dispatch import Dispatcher, DispatchingEndpoint
from ariane.remoting.protocol.command import RemotingCommand

__all__ = ["RemotingClient", "RequestSigner", "parse_address"]

#: Amends a request in place before it is sent (adds credentials and a signature).
RequestSigner = Callable[[RemotingCommand], None]

logger = logging.getLogger(__name__)


def parse_address(addr: str) -> tuple[str, int]:
    """Split ``"host:port"`` (or ``"[v6]:port"``).

    Raises:
        InvalidArgumentError: not of that form.
    """
    host, sep, port_text = addr.strip().rpartition(":")
    if not sep or not host:
        raise InvalidArgumentError(f"address {addr!r} is not host:port")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        port = int(port_text)
    except ValueError:
        raise InvalidArgumentError(f"address {addr!r} has a bad port") from None
    if not 0 < port < 65536:
        raise InvalidArgumentError(f"address {addr!r} has a bad port")
    return host, port


class RemotingClient(DispatchingEndpoint):
    """Sends requests to remoting servers, one reused connection per address.

    Args:
        config: connect timeout and frame limit.
        signer: signs every outgoing request (None: requests go out as they are).
    """

    def __init__(
        self, config: RemotingClientConfig | None = None, *, signer: RequestSigner | None = None
    ) -> None:
        self.config = config or RemotingClientConfig()
        self.signer = signer
        self.dispatcher = Dispatcher()
        self._channels: dict[str, Channel] = {}
        self._connecting: dict[str, asyncio.Future[Channel]] = {}
        self._closed = False

    # -- connections ----------------------------------------------------------------------------

    async def get_channel(self, addr: str) -> Channel:
        """The open connection to ``addr``, connecting if needed.

        Raises:
            ConnectError: the connection cannot be opened in ``connect_timeout_ms``.
            InvalidArgumentError: ``addr`` is not ``host:port``.
        """
        channel = self._channels.get(addr)
        if channel is not None and channel.is_active:
            return channel
        if self._closed:
            raise ConnectError("the remoting client is closed")
        attempt = self._connecting.get(addr)
        if attempt is None:
            attempt = asyncio.ensure_future(self._connect(addr))
            self._connecting[addr] = attempt
            attempt.add_done_callback(lambda _: self._connecting.pop(addr, None))
        return await asyncio.shield(attempt)

    def active_channel(self, addr: str) -> Channel | None:
        """The open connection to ``addr`` if there is one, without connecting (hot paths)."""
        channel = self._channels.get(addr)
        return channel if channel is not None and channel.is_active else None

    async def _connect(self, addr: str) -> Channel:
        host, port = parse_address(addr)
        loop = asyncio.get_running_loop()
        timeout = self.config.connect_timeout_ms / 1000.0

        def factory() -> Channel:
            return ReadBufferChannel(
                self.dispatcher,
                max_frame_bytes=self.config.max_frame_bytes,
                write_at_once=self.config.write_at_once,
            )

        try:
            _, channel = await asyncio.wait_for(
                loop.create_connection(factory, host, port), timeout
            )
        except TimeoutError:
            raise ConnectError(f"connect to {addr} timed out after {timeout:.1f} s") from None
        except OSError as exc:
            raise ConnectError(f"connect to {addr} failed: {exc}") from exc
        if self._closed:
            channel.close()
            raise ConnectError("the remoting client is closed")
        old = self._channels.get(addr)
        if old is not None:
            old.close()
        self._channels[addr] = channel
        channel.add_close_listener(lambda ch: self._forget(addr, ch))
        logger.debug("connected to %s as %r", addr, channel)
        return channel

    def _forget(self, addr: str, channel: Channel) -> None:
        if self._channels.get(addr) is channel:
            del self._channels[addr]

    def close_channel(self, addr: str) -> None:
        """Close the connection to ``addr`` if there is one."""
        channel = self._channels.pop(addr, None)
        if channel is not None:
            channel.close()

    async def close(self) -> None:
        """Close every connection; in-flight requests fail with ``ConnectionClosedError``."""
        self._closed = True
        channels = list(self._channels.values())
        self._channels.clear()
        for channel in channels:
            channel.close()
        for channel in channels:
            try:
                await asyncio.wait_for(channel.wait_closed(), 1.0)
            except TimeoutError:
                channel.abort()

    # -- requests -------------------------------------------------------------------------------

    async def invoke(self, addr: str, request: RemotingCommand, timeout_ms: int) -> RemotingCommand:
        """Send ``request`` to ``addr`` and wait for the response.

        ``timeout_ms`` covers connecting as well as waiting.

        Raises:
            ConnectError: cannot connect.
            RequestTimeoutError: no response in time.
            ConnectionClosedError: the connection went away while waiting.
        """
        channel = self._channels.get(addr)
        started: float | None = None
        if channel is None or not channel.is_active:
            # the loop only when connecting: CPython 3.11's get_running_loop() makes a getpid
            # system call, once per request otherwise (each pull of a push consumer)
            started = asyncio.get_running_loop().time()
            channel = await self.get_channel(addr)
        if self.signer is not None:
            self.signer(request)
        hooks = self.dispatcher.hooks
        for hook in hooks:
            early = hook.before_request(channel, request)
            if early is not None:
                return early
        left_ms = timeout_ms
        if started is not None:
            left_ms -= int((asyncio.get_running_loop().time() - started) * 1000)
            if left_ms <= 0:
                raise RequestTimeoutError(
                    f"connecting to {addr} used up the {timeout_ms} ms timeout"
                )
        response = await channel.invoke(request, left_ms)
        for hook in hooks:
            try:
                hook.after_response(channel, request, response)
            except Exception:
                logger.exception("after_response hook %r failed", hook)
        return response

    async def invoke_oneway(self, addr: str, request: RemotingCommand) -> None:
        """Send a one-way request to ``addr``.

        Raises:
            ConnectError: cannot connect.
            ConnectionClosedError: the connection closed.
        """
        channel = self._channels.get(addr)
        if channel is None or not channel.is_active:
            channel = await self.get_channel(addr)
        if self.signer is not None:
            self.signer(request)
        for hook in self.dispatcher.hooks:
            if hook.before_request(channel, request) is not None:
                return
        channel.invoke_oneway(request)
