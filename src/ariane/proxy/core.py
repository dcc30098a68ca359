"""What every RPC of the proxy shares: the call context, the answer on errors and the way into
the broker (RocketMQ proxy's ``ContextInitPipeline``, ``ResponseBuilder`` and
``LocalMessageService``).

How it works: ``rpc`` wraps a unary handler: it reads the call metadata (``x-mq-client-id`` is
required on every call, as upstream), finds the client's session, runs the handler and turns a
``ProxyError`` (or any other failure) into the response type's ``status``, so every answer
carries a status and the gRPC call itself ends OK. ``ProxyCore.invoke`` dispatches one remoting
request on the client's local channel and returns the broker's response: every operation runs
the same processor a 4.x client reaches; with ACL on, signed with the caller's account
(:mod:`ariane.proxy.auth`) so the broker's hook authorizes it as it would a 4.x client.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc
from google.protobuf.message import Message

from ariane.acl.credentials import SessionCredentials, sign_fields
from ariane.errors import ArianeError, ConnectionClosedError, RequestTimeoutError
from ariane.proxy.auth import authenticate
from ariane.proxy.clients import BrokerAccess, ClientRegistry, ClientSession
from ariane.proxy.config import ProxyConfig
from ariane.proxy.status import ProxyError, from_remoting, status
from ariane.proxy.v2 import definition_pb2 as pb
from ariane.remoting.protocol.codes import ResponseCode
from ariane.remoting.protocol.command import RemotingCommand

__all__ = [
    "CallContext",
    "Malformed",
    "ProxyCore",
    "check_request",
    "lenient",
    "metadata_of",
    "rpc",
]

logger = logging.getLogger(__name__)

R = TypeVar("R", bound=Message)
Q = TypeVar("Q", bound=Message)


class Malformed:
    """What a request that does not decode becomes (answered BAD_REQUEST in-band)."""

    __slots__ = ("error", "type_name")

    def __init__(self, type_name: str, error: str) -> None:
        self.type_name = type_name
        self.error = error


def lenient(message_type: type[R]) -> Callable[[bytes], R | Malformed]:
    """A deserializer that turns undecodable bytes into ``Malformed`` instead of failing the
    call with a bare transport error."""

    def parse(data: bytes) -> R | Malformed:
        try:
            return message_type.FromString(data)
        except Exception as exc:  # DecodeError, or anything the C parser raises
            return Malformed(message_type.DESCRIPTOR.full_name, str(exc))

    return parse


def check_request(request: object) -> None:
    """Raise BAD_REQUEST for a request that did not decode."""
    if isinstance(request, Malformed):
        raise ProxyError(pb.BAD_REQUEST, f"malformed {request.type_name}: {request.error}")


def metadata_of(context: grpc.aio.ServicerContext[Any, Any]) -> dict[str, str]:
    """The call's metadata as a dict (last value wins; binary values skipped)."""
    out: dict[str, str] = {}
    for key, value in context.invocation_metadata() or ():
        if isinstance(value, str):
            out[key.lower()] = value
    return out


def peer_address(context: grpc.aio.ServicerContext[Any, Any]) -> str:
    """``host:port`` of the peer (``ipv4:1.2.3.4:5`` / ``ipv6:[::1]:5`` from gRPC)."""
    peer = context.peer() or "?"
    for prefix in ("ipv4:", "ipv6:"):
        if peer.startswith(prefix):
            return peer[len(prefix) :]
    return peer


@dataclass(slots=True)
class CallContext:
    """One RPC: who called, and the client's session."""

    client_id: str
    peer: str
    metadata: dict[str, str]
    session: ClientSession
    grpc: grpc.aio.ServicerContext[Any, Any]
    credentials: SessionCredentials | None = None

    def remaining_ms(self) -> int | None:
        """Milliseconds left before the call's deadline (None: no deadline)."""
        left = self.grpc.time_remaining()
        return None if left is None else int(left * 1000)


class ProxyCore:
    """The proxy's state shared by its services.

    Args:
        broker: the broker the proxy runs in.
        cfg: the proxy configuration.
        clients: the client sessions.
    """

    def __init__(self, broker: BrokerAccess, cfg: ProxyConfig, clients: ClientRegistry) -> None:
        self.broker = broker
        self.cfg = cfg
        self.clients = clients

    @property
    def broker_name(self) -> str:
        """The name of the broker the proxy runs in."""
        return self.broker.config.broker_name

    def now_ms(self) -> int:
        """The broker clock."""
        return self.broker.clock.now_ms()

    def context(self, context: grpc.aio.ServicerContext[Any, Any]) -> CallContext:
        """The call context; CLIENT_ID_REQUIRED without ``x-mq-client-id``."""
        md = metadata_of(context)
        client_id = md.get("x-mq-client-id", "").strip()
        if not client_id:
            raise ProxyError(pb.CLIENT_ID_REQUIRED, "client id cannot be empty")
        peer = peer_address(context)
        acl = self.broker.acl
        credentials = authenticate(acl.hook.rules if acl is not None else None, md, peer)
        session = self.clients.session(
            client_id, peer, md.get("x-mq-language", ""), md.get("x-mq-client-version", "")
        )
        return CallContext(client_id, peer, md, session, context, credentials)

    async def invoke(
        self, ctx: CallContext, request: RemotingCommand, timeout_ms: int | None = None
    ) -> RemotingCommand:
        """Dispatch ``request`` to the broker on the client's channel.

        Raises:
            ProxyError: the broker cannot be reached in time (PROXY_TIMEOUT, INTERNAL...).
        """
        return await self.invoke_for(ctx.session, ctx.credentials, request, timeout_ms)

    async def invoke_for(
        self,
        session: ClientSession,
        credentials: SessionCredentials | None,
        request: RemotingCommand,
        timeout_ms: int | None = None,
    ) -> RemotingCommand:
        """``invoke`` outside a call (renewals): on ``session``'s channel, signed with
        ``credentials``."""
        channel = self.clients.channel(session)
        if credentials is not None:
            sign_fields(request.ext_fields, request.body, credentials)
        timeout = (timeout_ms or self.cfg.broker_call_timeout_ms) / 1000
        try:
            return await channel.call(request, timeout)
        except RequestTimeoutError as exc:
            raise ProxyError(pb.PROXY_TIMEOUT, str(exc)) from None
        except ConnectionClosedError as exc:
            raise ProxyError(pb.INTERNAL_SERVER_ERROR, f"broker connection closed: {exc}") from None

    async def invoke_ok(
        self,
        ctx: CallContext,
        request: RemotingCommand,
        timeout_ms: int | None = None,
        accept: Sequence[int] = (ResponseCode.SUCCESS,),
    ) -> RemotingCommand:
        """``invoke``, raising the mapped ``ProxyError`` unless the code is in ``accept``."""
        response = await self.invoke(ctx, request, timeout_ms)
        if response.code not in accept:
            raise from_remoting(response.code, response.remark)
        return response


def rpc(
    response_type: type[R],
) -> Callable[
    [Callable[[Any, Q, CallContext], Awaitable[R]]],
    Callable[[Any, Q, grpc.aio.ServicerContext[Any, Any]], Awaitable[R]],
]:
    """Wrap a unary handler ``(self, request, ctx) -> response`` of a ``ProxyCore`` user."""

    def wrap(
        fn: Callable[[Any, Q, CallContext], Awaitable[R]],
    ) -> Callable[[Any, Q, grpc.aio.ServicerContext[Any, Any]], Awaitable[R]]:
        @functools.wraps(fn)
        async def handler(self: Any, request: Q, context: grpc.aio.ServicerContext[Any, Any]) -> R:
            try:
                check_request(request)
                ctx = self.core.context(context)
                return await fn(self, request, ctx)
            except ProxyError as exc:
                return response_type(status=status(exc.code, exc.message))
            except ArianeError as exc:
                logger.warning("%s failed: %s", fn.__name__, exc)
                return response_type(status=status(pb.INTERNAL_SERVER_ERROR, str(exc)))
            except Exception as exc:
                logger.exception("%s raised", fn.__name__)
                return response_type(
                    status=status(pb.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {exc}")
                )

        return handler

    return wrap
