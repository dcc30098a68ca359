"""The gRPC server of the 5.x protocol (RocketMQ ``GrpcServer`` + ``GrpcMessagingApplication``).

How it works: one ``grpc.aio`` server on the broker's event loop serves
``apache.rocketmq.v2.MessagingService``; its handlers are the proxy services, which reach the
broker in-process (see :mod:`ariane.proxy.core`). RPCs a client may call but Ariane does not
serve (RecallMessage, SyncLiteSubscription, the Admin service) get gRPC UNIMPLEMENTED like any
unknown method. Limits: ``grpc.max_concurrent_streams`` bounds the streams of one connection,
``grpc.max_receive_message_length`` the size of a request, ``max_inflight_receives`` the
receive/pull streams open at once; a request that does not decode is answered BAD_REQUEST in-band
(Telemetry: INVALID_ARGUMENT), never reaching the operations. TLS is on when a certificate and key are
configured. Idle client sessions are swept every few seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

import grpc

from ariane.proxy.clients import BrokerAccess, ClientRegistry
from ariane.proxy.config import ProxyConfig
from ariane.proxy.consumer import ConsumerService
from ariane.proxy.core import ProxyCore, lenient
from ariane.proxy.producer import ProducerService
from ariane.proxy.telemetry import TelemetryService
from ariane.proxy.trace import GrpcTracer
from ariane.proxy.v2 import service_pb2 as spb

__all__ = ["GrpcProxy"]

logger = logging.getLogger(__name__)

SERVICE = "apache.rocketmq.v2.MessagingService"
_SWEEP_S = 5.0


class GrpcProxy:
    """The v2 MessagingService for one broker.

    Args:
        broker: the broker to serve (its controller).
        cfg: the proxy configuration.
        expire_s: forget clients silent this long (``channelExpiredTimeout``).
    """

    def __init__(self, broker: BrokerAccess, cfg: ProxyConfig, expire_s: float = 120.0) -> None:
        self.cfg = cfg
        self.clients = ClientRegistry(broker, expire_s, cfg.relay_timeout_ms)
        self.core = ProxyCore(broker, cfg, self.clients)
        self.port = cfg.port
        self.tracer = GrpcTracer(self.core) if broker.config.grpc_message_trace_enable else None
        self.producer = ProducerService(self.core, cfg.port, self.tracer)
        self.consumer = ConsumerService(self.core, self.tracer)
        self.telemetry = TelemetryService(self.core, self.producer)
        self._server: grpc.aio.Server | None = None
        self._sweeper: asyncio.Task[None] | None = None

    @property
    def address(self) -> str:
        """``host:port`` clients connect to."""
        return f"{self.cfg.advertised_host}:{self.port}"

    def _handlers(self) -> grpc.GenericRpcHandler[Any, Any]:
        p, c, t = self.producer, self.consumer, self.telemetry
        unary: dict[str, Callable[..., Any]] = {
            "QueryRoute": p.QueryRoute,
            "Heartbeat": p.Heartbeat,
            "SendMessage": p.SendMessage,
            "QueryAssignment": p.QueryAssignment,
            "EndTransaction": p.EndTransaction,
            "NotifyClientTermination": p.NotifyClientTermination,
            "AckMessage": c.AckMessage,
            "ChangeInvisibleDuration": c.ChangeInvisibleDuration,
            "ForwardMessageToDeadLetterQueue": c.ForwardMessageToDeadLetterQueue,
            "UpdateOffset": c.UpdateOffset,
            "GetOffset": c.GetOffset,
            "QueryOffset": c.QueryOffset,
        }
        streaming: dict[str, Callable[..., Any]] = {
            "ReceiveMessage": c.ReceiveMessage,
            "PullMessage": c.PullMessage,
        }
        handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {}
        for method in spb.DESCRIPTOR.services_by_name["MessagingService"].methods:
            req = getattr(spb, method.input_type.name)
            resp = getattr(spb, method.output_type.name)
            kwargs = {
                "request_deserializer": lenient(req),
                "response_serializer": resp.SerializeToString,
            }
            name = method.name
            if name in unary:
                handlers[name] = grpc.unary_unary_rpc_method_handler(unary[name], **kwargs)
            elif name in streaming:
                handlers[name] = grpc.unary_stream_rpc_method_handler(streaming[name], **kwargs)
            elif name == "Telemetry":
                handlers[name] = grpc.stream_stream_rpc_method_handler(t.Telemetry, **kwargs)
        return grpc.method_handlers_generic_handler(SERVICE, handlers)

    async def start(self) -> int:
        """Listen and serve; returns the bound port.

        Raises:
            OSError: the port cannot be bound or the TLS files cannot be read.
        """
        cfg = self.cfg
        options = [
            ("grpc.max_receive_message_length", cfg.grpc_max_inbound_message_size),
            ("grpc.max_send_message_length", -1),
            ("grpc.max_concurrent_streams", cfg.max_streams_per_connection),
            ("grpc.so_reuseport", 0),
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.http2.min_ping_interval_without_data_ms", 5_000),
        ]
        server = grpc.aio.server(options=options)
        server.add_generic_rpc_handlers((self._handlers(),))
        target = f"{cfg.bind_address}:{cfg.port}"
        if cfg.tls:
            key, cert = await asyncio.to_thread(_read_pair, cfg.tls_key_path, cfg.tls_cert_path)
            port = server.add_secure_port(target, grpc.ssl_server_credentials([(key, cert)]))
        else:
            port = server.add_insecure_port(target)
        if port == 0:
            raise OSError(f"cannot listen for gRPC on {target}")
        await server.start()
        self._server = server
        self.port = port
        self.producer.port = port
        self._sweeper = asyncio.get_running_loop().create_task(self._sweep())
        logger.info("gRPC proxy listening on %s (tls=%s)", target, cfg.tls)
        return port

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(_SWEEP_S)
            try:
                self.clients.expire()
                await self.consumer.renew()
            except Exception:
                logger.exception("gRPC client sweep failed")

    async def stop(self, grace_s: float = 1.0) -> None:
        """Stop serving: open streams end, client sessions close."""
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
            self._sweeper = None
        server, self._server = self._server, None
        for session in list(self.clients.sessions.values()):
            if session.stream is not None:
                session.stream.close()
        if server is not None:
            await server.stop(grace_s)
        if self.tracer is not None:
            await self.tracer.drain()
        self.clients.close_all()
        logger.info("gRPC proxy stopped")


def _read_pair(key_path: str, cert_path: str) -> tuple[bytes, bytes]:
    with open(key_path, "rb") as f:
        key = f.read()
    with open(cert_path, "rb") as f:
        return key, f.read()
