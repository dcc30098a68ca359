"""Starting the gRPC proxy inside ``ariane broker`` when ``grpcServerPort`` is set.

``ariane/cli.py`` registers :func:`grpc_service` with :mod:`ariane.broker.services`, so the
broker starts it without importing this package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ariane.proxy.config import ProxyConfig
from ariane.proxy.server import GrpcProxy

if TYPE_CHECKING:
    from ariane.broker.controller import BrokerController

__all__ = ["ProxyService", "grpc_service", "proxy_config"]


def proxy_config(broker: BrokerController) -> ProxyConfig:
    """The proxy configuration from the broker's (``grpc*`` keys, ``maxMessageSize``)."""
    c = broker.config
    return ProxyConfig(
        bind_address=c.bind_address,
        port=max(0, c.grpc_server_port),
        advertised_host=c.advertised_host,
        tls_cert_path=c.grpc_tls_cert_path,
        tls_key_path=c.grpc_tls_key_path,
        max_message_size=broker.store_config.max_message_size,
        max_streams_per_connection=c.grpc_max_streams_per_connection,
        max_inflight_receives=c.grpc_max_inflight_receives,
        settings_timeout_ms=c.grpc_settings_timeout_ms,
        enable_topic_message_type_check=c.enable_topic_message_type_check,
        max_long_polling_ms=c.grpc_max_long_polling_ms,
        min_long_polling_ms=min(5_000, c.grpc_max_long_polling_ms),
    )


class ProxyService:
    """The proxy as a broker service."""

    def __init__(self, broker: BrokerController) -> None:
        self.proxy = GrpcProxy(
            broker, proxy_config(broker), broker.config.channel_expired_timeout_ms / 1000
        )

    async def start(self) -> int:
        return await self.proxy.start()

    async def stop(self) -> None:
        await self.proxy.stop()

    @property
    def ready_field(self) -> str:
        return f"grpc={self.proxy.address}"


def grpc_service(broker: BrokerController) -> ProxyService | None:
    """The proxy service when ``grpcServerPort`` is not -1."""
    if broker.config.grpc_server_port < 0:
        return None
    return ProxyService(broker)
