"""Configuration of the gRPC proxy (RocketMQ ``ProxyConfig``, the fields that matter here).

Defaults are RocketMQ's; times are milliseconds unless the name says otherwise. The broker's
entry point builds this from ``broker.conf`` (``grpcServerPort`` and the ``grpc*`` keys of
:class:`~ariane.broker.config.BrokerConfig`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ariane.errors import ConfigError

__all__ = ["ProxyConfig"]

_MIB = 1024 * 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class ProxyConfig:
    """What the gRPC ``MessagingService`` needs to know.

    Attributes:
        bind_address: interface to listen on.
        port: ``grpcServerPort`` (0 picks a free port).
        advertised_host: the host clients are told to come back to (routes).
        tls_cert_path / tls_key_path: PEM files; both set turns TLS on.
        max_message_size: ``maxMessageSize``: largest body of one message (4 MiB).
        max_user_property_size: ``maxUserPropertySize``: bytes of properties, tag and keys.
        user_property_max_num: ``userPropertyMaxNum``.
        max_message_group_size: ``maxMessageGroupSize``: a message group is shorter.
        max_delay_time_ms: ``maxDelayTimeMills``: how far ahead a delivery time may be.
        max_transaction_recovery_s: ``maxTransactionRecoverySecond``.
        default_invisible_time_ms / min_invisible_time_ms / max_invisible_time_ms: receive
            invisibility (auto-renewing receives use the default).
        min_long_polling_ms / max_long_polling_ms: bounds of a receive's long polling.
        max_batch_size: most messages one receive returns.
        grpc_max_inbound_message_size: ``grpcMaxInboundMessageSize``: largest request.
        max_streams_per_connection: concurrent streams one HTTP/2 connection may open.
        max_inflight_receives: receive and pull streams open at once (all clients); more
            get TOO_MANY_REQUESTS.
        settings_timeout_ms: a Telemetry stream that sends no settings this long is ended.
        enable_topic_message_type_check: ``enableTopicMessageTypeCheck``: sends must match
            the topic's ``message.type``.
        relay_timeout_ms: how long a command relayed to a client (verify message, thread
            stack) waits for its answer.
        broker_call_timeout_ms: how long a call into the broker may take (not receives).
    """

    bind_address: str = "127.0.0.1"
    port: int = 8081
    advertised_host: str = "127.0.0.1"
    tls_cert_path: str = ""
    tls_key_path: str = ""
    max_message_size: int = 4 * _MIB
    max_user_property_size: int = 16 * 1024
    user_property_max_num: int = 128
    max_message_group_size: int = 64
    max_delay_time_ms: int = 86_400_000
    max_transaction_recovery_s: int = 3600
    default_invisible_time_ms: int = 60_000
    min_invisible_time_ms: int = 10_000
    max_invisible_time_ms: int = 43_200_000
    min_long_polling_ms: int = 5_000
    max_long_polling_ms: int = 20_000
    max_batch_size: int = 32
    grpc_max_inbound_message_size: int = 130 * _MIB
    max_streams_per_connection: int = 256
    max_inflight_receives: int = 10_000
    settings_timeout_ms: int = 30_000
    enable_topic_message_type_check: bool = True
    relay_timeout_ms: int = 5_000
    broker_call_timeout_ms: int = 10_000

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ConfigError("grpcServerPort", f"must be 0..65535, got {self.port}")
        if bool(self.tls_cert_path) != bool(self.tls_key_path):
            raise ConfigError(
                "grpcTlsCertPath", "grpcTlsCertPath and grpcTlsKeyPath must be set together"
            )
        for key, value in (
            ("maxMessageSize", self.max_message_size),
            ("grpcMaxInboundMessageSize", self.grpc_max_inbound_message_size),
            ("grpcMaxStreamsPerConnection", self.max_streams_per_connection),
            ("grpcMaxInflightReceives", self.max_inflight_receives),
            ("grpcSettingsTimeoutMillis", self.settings_timeout_ms),
        ):
            if value <= 0:
                raise ConfigError(key, f"must be > 0, got {value}")

    @property
    def tls(self) -> bool:
        """Whether the server speaks TLS."""
        return bool(self.tls_cert_path)
