"""Request plumbing shared by every client request (RocketMQ ``MQClientAPIImpl``'s
``remotingClient.invokeSync/Async/Oneway`` calls and NameServer fail-over).

How it works: ``RpcBase`` wraps one ``RemotingClient`` and the NameServer list. ``call`` sends
to a broker and raises ``error_for(code)`` unless the answer's code is expected;
``call_namesrv`` does the same against the current NameServer, moving to the next one when it
cannot be reached. ``invoke_future``/``invoke_callback`` are the hot-path forms (no task when
the connection is open).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Sequence

from ariane.client.errors import error_for
from ariane.errors import ConnectError, ConnectionClosedError, InvalidArgumentError
from ariane.remoting.channel import Channel, ResponseCallback
from ariane.remoting.client import RemotingClient
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.codes import ResponseCode
from ariane.remoting.protocol.command import RemotingCommand

__all__ = ["RpcBase"]

logger = logging.getLogger(__name__)

_OK = (ResponseCode.SUCCESS,)


def _request(code: int, header: h.CommandHeader | None, body: bytes | None) -> RemotingCommand:
    return RemotingCommand.request(
        code, header.to_ext_fields() if header is not None else None, body
    )


def _checked(response: RemotingCommand, ok: tuple[int, ...]) -> RemotingCommand:
    if response.code not in ok:
        raise error_for(response.code, response.remark)
    return response


class RpcBase:
    """Sends requests to brokers and NameServers.

    Args:
        remoting: the connection pool; server-to-client requests are registered on it.
        namesrv_addrs: NameServer addresses (``host:port``), tried in turn.
        timeout_ms: default timeout of requests that take none (``mqClientApiTimeout``).
    """

    def __init__(
        self, remoting: RemotingClient, namesrv_addrs: Sequence[str], *, timeout_ms: int = 3000
    ) -> None:
        if not namesrv_addrs:
            raise InvalidArgumentError("at least one NameServer address is needed")
        self.remoting = remoting
        self.namesrv_addrs = list(namesrv_addrs)
        self.timeout_ms = timeout_ms
        self._ns_index = random.randrange(len(self.namesrv_addrs))

    # -- plumbing --------------------------------------------------------------------------------

    async def invoke(
        self, addr: str, request: RemotingCommand, timeout_ms: int | None = None
    ) -> RemotingCommand:
        """Send ``request`` to ``addr`` and return the response, whatever its code."""
        return await self.remoting.invoke(addr, request, timeout_ms or self.timeout_ms)

    def invoke_future(
        self, addr: str, request: RemotingCommand, timeout_ms: int
    ) -> asyncio.Future[RemotingCommand]:
        """Like ``invoke`` but returns the response future at once (no task when the
        connection is already open and no hooks are registered)."""
        remoting = self.remoting
        channel = remoting.active_channel(addr)
        if channel is not None and not remoting.dispatcher.hooks:
            if remoting.signer is not None:
                remoting.signer(request)
            return channel.invoke_future(request, timeout_ms)
        return asyncio.ensure_future(self.remoting.invoke(addr, request, timeout_ms))

    def plain_channel(self, addr: str) -> Channel | None:
        """The open connection to ``addr`` when requests go out as encoded (no signer, no
        hooks), for ``Channel.invoke_frame``; None otherwise (use ``invoke_callback``)."""
        remoting = self.remoting
        if remoting.signer is not None or remoting.dispatcher.hooks:
            return None
        return remoting.active_channel(addr)

    def invoke_callback(
        self, addr: str, request: RemotingCommand, timeout_ms: int, callback: ResponseCallback
    ) -> None:
        """Send ``request`` and call ``callback(response, error)`` once with the outcome; the
        cheapest way to pipeline (no future and no task when the connection is open)."""
        remoting = self.remoting
        channel = remoting.active_channel(addr)
        if channel is not None and not remoting.dispatcher.hooks:
            if remoting.signer is not None:
                remoting.signer(request)
            channel.invoke_callback(request, timeout_ms, callback)
            return

        def done(future: asyncio.Future[RemotingCommand]) -> None:
            if future.cancelled():
                callback(None, asyncio.CancelledError())
            elif (error := future.exception()) is not None:
                callback(None, error)
            else:
                callback(future.result(), None)

        asyncio.ensure_future(self.remoting.invoke(addr, request, timeout_ms)).add_done_callback(
            done
        )

    async def invoke_oneway(self, addr: str, request: RemotingCommand) -> None:
        """Send a one-way request to ``addr``."""
        await self.remoting.invoke_oneway(addr, request)

    async def call(
        self,
        addr: str,
        code: int,
        header: h.CommandHeader | None = None,
        body: bytes | None = None,
        *,
        timeout_ms: int | None = None,
        ok: tuple[int, ...] = _OK,
    ) -> RemotingCommand:
        """Send one request to a broker; raise ``error_for`` unless the code is in ``ok``."""
        return _checked(await self.invoke(addr, _request(code, header, body), timeout_ms), ok)

    async def invoke_namesrv(
        self, request: RemotingCommand, timeout_ms: int | None = None
    ) -> RemotingCommand:
        """Send ``request`` to a NameServer, moving to the next one if it cannot be reached.

        Raises:
            ConnectError: no NameServer could be reached.
            RequestTimeoutError: the chosen NameServer did not answer in time.
        """
        last: Exception | None = None
        count = len(self.namesrv_addrs)
        for _ in range(count):
            addr = self.namesrv_addrs[self._ns_index % count]
            try:
                return await self.invoke(addr, request, timeout_ms)
            except (ConnectError, ConnectionClosedError) as exc:
                logger.info("NameServer %s unreachable: %s", addr, exc)
                last = exc
                self._ns_index = (self._ns_index + 1) % count
        raise ConnectError(f"no NameServer of {self.namesrv_addrs} is reachable: {last}")

    async def call_namesrv(
        self,
        code: int,
        header: h.CommandHeader | None = None,
        body: bytes | None = None,
        *,
        timeout_ms: int | None = None,
        ok: tuple[int, ...] = _OK,
    ) -> RemotingCommand:
        """``call`` for the NameServer (with fail-over)."""
        return _checked(await self.invoke_namesrv(_request(code, header, body), timeout_ms), ok)
