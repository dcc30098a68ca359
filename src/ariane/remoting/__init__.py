"""RocketMQ remoting: the sans-IO protocol (``ariane.remoting.protocol``) and the asyncio
transport (``Channel``, ``RemotingServer``, ``RemotingClient``), plus a blocking client.

Lower layers only: this package imports nothing from store, namesrv, broker or client.
"""

from __future__ import annotations

from ariane.remoting.channel import Channel
from ariane.remoting.client import RemotingClient, parse_address
from ariane.remoting.config import RemotingClientConfig, RemotingServerConfig
from ariane.remoting.dispatch import (
    Dispatcher,
    ProcessFunction,
    ProcessResult,
    RemotingHook,
    RequestContext,
    RequestProcessor,
)
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import (
    LanguageCode,
    RemotingCommand,
    SerializeType,
    make_response_for,
)
from ariane.remoting.server import RemotingServer

__all__ = [
    "Channel",
    "Dispatcher",
    "LanguageCode",
    "ProcessFunction",
    "ProcessResult",
    "RemotingClient",
    "RemotingClientConfig",
    "RemotingCommand",
    "RemotingHook",
    "RemotingServer",
    "RemotingServerConfig",
    "RequestCode",
    "RequestContext",
    "RequestProcessor",
    "ResponseCode",
    "SerializeType",
    "make_response_for",
    "parse_address",
]
