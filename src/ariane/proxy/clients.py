"""The 5.x clients the proxy serves, and how each one reaches the broker (RocketMQ proxy's
``GrpcChannelManager``, ``GrpcClientChannel`` and ``GrpcClientSettingsManager``).

How it works: every RPC carries the client's id (``x-mq-client-id``). Per id the proxy keeps a
``ClientSession``: the settings the client sent on Telemetry, the Telemetry stream currently
open (the last one opened wins) and a *local channel* into the broker's remoting server. Every
operation is a remoting request dispatched on that channel, so the broker's processors,
hooks, client registry and long polling treat the gRPC client like a 4.x client on a TCP
connection (a producer registered per topic, a consumer in its group).

Requests the broker sends to the client on that channel are translated onto Telemetry:
CHECK_TRANSACTION_STATE becomes ``recover_orphaned_transaction_command``,
GET_CONSUMER_RUNNING_INFO a ``print_thread_stack_trace_command`` and CONSUME_MESSAGE_DIRECTLY a
``verify_message_command``; their nonces pair the client's answers with the broker's waiting
requests. Membership notifications have no v2 counterpart and are dropped.

Sessions of clients that stop calling are closed after ``channelExpiredTimeout`` (the broker's
client scan also drops their registrations); NotifyClientTermination closes one at once.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ariane.acl.credentials import SessionCredentials
from ariane.acl.plain import AclRules
from ariane.common.clock import Clock
from ariane.common.record import decode_record
from ariane.proxy.convert import incoming, make_transaction_id
from ariane.proxy.renew import LeaseTable
from ariane.proxy.v2 import definition_pb2 as pb
from ariane.proxy.v2 import service_pb2 as spb
from ariane.remoting.local import LocalChannel, LocalRequestCallback
from ariane.remoting.protocol import fastjson
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.admin_bodies import SubscriptionGroupConfig
from ariane.remoting.protocol.bodies import TopicConfig
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import RemotingCommand

__all__ = ["BrokerAccess", "ClientRegistry", "ClientSession", "TelemetryStream"]

logger = logging.getLogger(__name__)


class _BrokerConfig(Protocol):
    @property
    def broker_name(self) -> str: ...
    @property
    def broker_cluster_name(self) -> str: ...
    @property
    def default_topic_queue_nums(self) -> int: ...
    @property
    def broker_permission(self) -> int: ...
    @property
    def region_id(self) -> str: ...
    @property
    def msg_trace_topic_name(self) -> str: ...
    @property
    def grpc_message_trace_enable(self) -> bool: ...


class _Topics(Protocol):
    def get(self, topic: str) -> TopicConfig | None: ...
    def create_in_send(
        self, topic: str, default_topic: str, remote: str, queue_nums: int, topic_sys_flag: int
    ) -> TopicConfig | None: ...


class _Groups(Protocol):
    def find(self, group: str, *, create: bool | None = None) -> SubscriptionGroupConfig | None: ...


class _Remoting(Protocol):
    def open_local_channel(
        self, remote_addr: str, on_request: LocalRequestCallback | None = None
    ) -> LocalChannel: ...


class _AclHook(Protocol):
    @property
    def rules(self) -> AclRules: ...


class _Acl(Protocol):
    @property
    def hook(self) -> _AclHook: ...


class BrokerAccess(Protocol):
    """What the proxy needs of the broker it runs in (``BrokerController`` fits it)."""

    @property
    def config(self) -> _BrokerConfig: ...
    @property
    def topics(self) -> _Topics: ...
    @property
    def groups(self) -> _Groups: ...
    @property
    def remoting(self) -> _Remoting: ...
    @property
    def clock(self) -> Clock: ...
    @property
    def acl(self) -> _Acl | None: ...
    @property
    def broker_addr(self) -> str: ...


class TelemetryStream:
    """One open Telemetry stream: commands queued here are written to the client."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[spb.TelemetryCommand | None] = asyncio.Queue()
        self.closed = False

    def write(self, command: spb.TelemetryCommand) -> bool:
        """Queue ``command``; ``False`` once the stream ended."""
        if self.closed:
            return False
        self.queue.put_nowait(command)
        return True

    def close(self) -> None:
        """End the stream (the writer stops after what is queued)."""
        if not self.closed:
            self.closed = True
            self.queue.put_nowait(None)


@dataclass(slots=True)
class _Relay:
    opaque: int
    code: int


@dataclass(slots=True)
class ClientSession:
    """Everything the proxy knows of one client id."""

    client_id: str
    peer: str
    language: str = ""
    version: str = ""
    settings: pb.Settings | None = None
    stream: TelemetryStream | None = None
    channel: LocalChannel | None = None
    last_seen: float = 0.0
    relays: dict[str, _Relay] = field(default_factory=dict)
    #: auto-renewed messages (push consumers), and the credentials to renew them with
    leases: LeaseTable = field(default_factory=LeaseTable)
    credentials: SessionCredentials | None = None

    @property
    def client_type(self) -> int:
        """The ``ClientType`` from the settings (UNSPECIFIED before any)."""
        return int(self.settings.client_type) if self.settings is not None else 0

    @property
    def group(self) -> str:
        """The consumer group of a consumer's settings ('' otherwise)."""
        if self.settings is None or self.settings.WhichOneof("pub_sub") != "subscription":
            return ""
        return self.settings.subscription.group.name


_nonces = itertools.count()


class ClientRegistry:
    """Client sessions by id, and their local channels into the broker.

    Args:
        broker: the broker.
        expire_s: a client silent this long is forgotten.
        relay_timeout_ms: how long a relayed command waits for the client's answer.
    """

    def __init__(self, broker: BrokerAccess, expire_s: float, relay_timeout_ms: int) -> None:
        self.broker = broker
        self.expire_s = expire_s
        self.relay_timeout_ms = relay_timeout_ms
        self.sessions: dict[str, ClientSession] = {}
        #: called after a session is closed (the service releases per-client state)
        self.on_close: list[Callable[[ClientSession], None]] = []

    def session(
        self, client_id: str, peer: str, language: str = "", version: str = ""
    ) -> ClientSession:
        """The session of ``client_id`` (created on first use)."""
        s = self.sessions.get(client_id)
        if s is None:
            s = ClientSession(client_id, peer, language, version)
            self.sessions[client_id] = s
        if language:
            s.language = language
        if version:
            s.version = version
        s.last_seen = self.broker.clock.monotonic()
        return s

    def channel(self, s: ClientSession) -> LocalChannel:
        """The session's channel into the broker (re-opened if the broker closed it)."""
        ch = s.channel
        if ch is None or not ch.is_active:
            ch = self.broker.remoting.open_local_channel(s.peer, self._on_request)
            ch.attributes["grpc_client_id"] = s.client_id
            s.channel = ch
        return ch

    def close(self, client_id: str) -> ClientSession | None:
        """Forget a client: its channel closes (the broker unregisters it), its stream ends."""
        s = self.sessions.pop(client_id, None)
        if s is None:
            return None
        if s.channel is not None:
            s.channel.close()
        if s.stream is not None:
            s.stream.close()
        for listener in self.on_close:
            try:
                listener(s)
            except Exception:
                logger.exception("session close listener failed for %s", client_id)
        return s

    def expire(self) -> list[str]:
        """Close the sessions silent for longer than ``expire_s``; their ids."""
        deadline = self.broker.clock.monotonic() - self.expire_s
        gone = [
            cid
            for cid, s in self.sessions.items()
            if s.last_seen < deadline and (s.stream is None or s.stream.closed)
        ]
        for cid in gone:
            logger.info("gRPC client %s expired", cid)
            self.close(cid)
        return gone

    def close_all(self) -> None:
        """Close every session (shutdown)."""
        for cid in list(self.sessions):
            self.close(cid)

    # -- broker -> client --------------------------------------------------------------------

    def _session_of(self, channel: LocalChannel) -> ClientSession | None:
        cid = channel.attributes.get("grpc_client_id")
        s = self.sessions.get(cid) if isinstance(cid, str) else None
        return s if s is not None and s.channel is channel else None

    def _on_request(self, channel: LocalChannel, request: RemotingCommand) -> None:
        s = self._session_of(channel)
        code = request.code
        command: spb.TelemetryCommand | None = None
        nonce = str(next(_nonces))
        if s is None or s.stream is None or s.stream.closed:
            command = None
        elif code == RequestCode.CHECK_TRANSACTION_STATE:
            command = self._recover_command(request)
        elif code == RequestCode.GET_CONSUMER_RUNNING_INFO:
            command = spb.TelemetryCommand(
                print_thread_stack_trace_command=spb.PrintThreadStackTraceCommand(nonce=nonce)
            )
        elif code == RequestCode.CONSUME_MESSAGE_DIRECTLY and request.body:
            command = self._verify_command(request, nonce)
        oneway = request.is_oneway
        if command is None or s is None or s.stream is None or not s.stream.write(command):
            if not oneway:
                channel.deliver_response(
                    _answer(request, ResponseCode.SYSTEM_ERROR, "the gRPC client cannot do this")
                )
            return
        if not oneway:
            s.relays[nonce] = _Relay(request.opaque, code)
            asyncio.get_running_loop().call_later(
                self.relay_timeout_ms / 1000, self._relay_timeout, s, nonce
            )

    def _relay_timeout(self, s: ClientSession, nonce: str) -> None:
        relay = s.relays.pop(nonce, None)
        if relay is not None and s.channel is not None:
            s.channel.deliver_response(
                RemotingCommand.response(
                    ResponseCode.SYSTEM_BUSY, "call remote timeout", opaque=relay.opaque
                )
            )

    @staticmethod
    def _recover_command(request: RemotingCommand) -> spb.TelemetryCommand | None:
        header = h.CheckTransactionStateRequestHeader.from_ext_fields(request.ext_fields)
        try:
            ext, _ = decode_record(request.body or b"", decompress=True)
        except Exception as exc:
            logger.warning("cannot relay a transaction check: %s", exc)
            return None
        message = incoming(ext)
        return spb.TelemetryCommand(
            recover_orphaned_transaction_command=spb.RecoverOrphanedTransactionCommand(
                message=message,
                transaction_id=make_transaction_id(
                    header.offset_msg_id or "", header.tran_state_table_offset
                ),
            )
        )

    @staticmethod
    def _verify_command(request: RemotingCommand, nonce: str) -> spb.TelemetryCommand | None:
        try:
            ext, _ = decode_record(request.body or b"", decompress=True)
        except Exception as exc:
            logger.warning("cannot relay a consume-directly request: %s", exc)
            return None
        return spb.TelemetryCommand(
            verify_message_command=spb.VerifyMessageCommand(nonce=nonce, message=incoming(ext))
        )

    def client_answer(self, s: ClientSession, command: spb.TelemetryCommand) -> None:
        """A client's answer to a relayed command (thread stack or verify result)."""
        kind = command.WhichOneof("command")
        if kind == "thread_stack_trace":
            nonce = command.thread_stack_trace.nonce
        elif kind == "verify_message_result":
            nonce = command.verify_message_result.nonce
        else:
            return
        relay = s.relays.pop(nonce, None)
        if relay is None or s.channel is None:
            return
        ok = command.status.code == pb.OK
        body: dict[str, Any]
        if kind == "thread_stack_trace":
            body = {
                "properties": {"PROP_CLIENT_VERSION": s.version, "language": s.language},
                "subscriptionSet": [],
                "mqTable": {},
                "statusTable": {},
                "jstack": command.thread_stack_trace.thread_stack_trace,
            }
        else:
            result = {
                pb.OK: "CR_SUCCESS",
                pb.FAILED_TO_CONSUME_MESSAGE: "CR_LATER",
                pb.MESSAGE_CORRUPTED: "CR_RETURN_NULL",
            }.get(command.status.code, "CR_THROW_EXCEPTION")
            body = {
                "order": False,
                "autoCommit": True,
                "consumeResult": result,
                "remark": "from gRPC client",
                "spentTimeMills": 0,
            }
            ok = True
        code = ResponseCode.SUCCESS if ok else ResponseCode.SYSTEM_ERROR
        remark = command.status.message or None
        s.channel.deliver_response(
            RemotingCommand.response(code, remark, body=fastjson.dumps(body), opaque=relay.opaque)
        )


def _answer(request: RemotingCommand, code: int, remark: str) -> RemotingCommand:
    return RemotingCommand.response(code, remark, opaque=request.opaque)
