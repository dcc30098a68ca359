"""Configuration of the remoting server and client (RocketMQ ``NettyServerConfig``,
``NettyClientConfig``). Only entry points build these from files or flags."""

from __future__ import annotations

from dataclasses import dataclass

from ariane.errors import ConfigError
from ariane.remoting.protocol.codec import MAX_FRAME_BYTES
from ariane.remoting.protocol.codes import RequestCode

#: The pull requests (PULL_MESSAGE, LITE_PULL_MESSAGE, POP_MESSAGE, the bulk pull).
PULL_CODES = frozenset(
    {
        RequestCode.PULL_MESSAGE,
        RequestCode.LITE_PULL_MESSAGE,
        RequestCode.POP_MESSAGE,
        RequestCode.ARIANE_BULK_PULL_MESSAGE,
    }
)

__all__ = ["RemotingClientConfig", "RemotingServerConfig"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RemotingServerConfig:
    """How a ``RemotingServer`` listens and polices its connections.

    Attributes:
        bind_address: interface to listen on (Ariane servers bind to 127.0.0.1 by default).
        listen_port: TCP port; 0 picks a free one (``start()`` returns it).
        max_frame_bytes: largest accepted frame, length field included (16 MiB).
        channel_max_idle_seconds: close connections with no traffic for this long
            (``serverChannelMaxIdleTimeSeconds``); 0 disables.
        backlog: listen backlog.
        max_inflight_per_channel: asynchronous requests one connection may have in progress
            before the server stops reading from it.
        shutdown_grace_seconds: how long ``stop()`` waits for in-progress requests.
        max_connections: open connections at most; more are closed at once, logged
            (``serverMaxConnections``).
        max_write_buffer_bytes: bytes queued for one connection at most; a peer that stops
            reading past this is disconnected, logged (``serverMaxBufferedBytesPerConnection``).
    """

    bind_address: str = "127.0.0.1"
    listen_port: int = 0
    max_frame_bytes: int = MAX_FRAME_BYTES
    channel_max_idle_seconds: float = 120.0
    backlog: int = 1024
    max_inflight_per_channel: int = 10_000
    shutdown_grace_seconds: float = 5.0
    # limits (issue 11)
    max_connections: int = 8192
    max_write_buffer_bytes: int = 64 * 1024 * 1024

    def __post_init__(self) -> None:
        if self.max_connections < 1:
            raise ConfigError("serverMaxConnections", f"must be >= 1, got {self.max_connections}")
        if self.max_write_buffer_bytes < 1024 * 1024:
            raise ConfigError(
                "serverMaxBufferedBytesPerConnection",
                f"must be at least 1 MiB, got {self.max_write_buffer_bytes}",
            )
        if not 0 <= self.listen_port <= 65535:
            raise ConfigError("listenPort", f"must be 0..65535, got {self.listen_port}")
        if self.max_frame_bytes < 64:
            raise ConfigError("maxFrameBytes", f"must be at least 64, got {self.max_frame_bytes}")
        if self.channel_max_idle_seconds < 0:
            raise ConfigError(
                "serverChannelMaxIdleTimeSeconds",
                f"must be >= 0, got {self.channel_max_idle_seconds}",
            )
        if self.backlog < 1:
            raise ConfigError("serverSocketBacklog", f"must be >= 1, got {self.backlog}")
        if self.max_inflight_per_channel < 1:
            raise ConfigError("maxInflightPerChannel", "must be >= 1")
        if self.shutdown_grace_seconds < 0:
            raise ConfigError("shutdownWaitTimeSeconds", "must be >= 0")


@dataclass(frozen=True, slots=True, kw_only=True)
class RemotingClientConfig:
    """How a ``RemotingClient`` connects.

    Attributes:
        connect_timeout_ms: time allowed to open a connection (``connectTimeoutMillis``).
        max_frame_bytes: largest accepted frame, length field included (16 MiB).
        write_at_once: request codes written at once rather than at the next loop turn's
            flush (the pulls: the broker works on the next pull while the consumer handles
            the batch it just received).
    """

    connect_timeout_ms: int = 3000
    max_frame_bytes: int = MAX_FRAME_BYTES
    write_at_once: frozenset[int] = PULL_CODES

    def __post_init__(self) -> None:
        if self.connect_timeout_ms <= 0:
            raise ConfigError("connectTimeoutMillis", "must be > 0")
        if self.max_frame_bytes < 64:
            raise ConfigError("maxFrameBytes", "must be at least 64")
