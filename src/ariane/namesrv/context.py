"""What the NameServer's request processors and metrics may use of the server (the seam that
keeps ``server`` out of their imports).

How it works: :class:`~ariane.namesrv.server.NameServer` hands itself to
:class:`~ariane.namesrv.processors.NamesrvProcessor` and
:class:`~ariane.namesrv.metrics.NamesrvMetrics` typed as :class:`NamesrvContext`: its route
table, KV config, configuration and remoting server plus the two operations that write
files. They import this module, never ``server``, so there is no import circle.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from ariane.namesrv.config import NamesrvConfig
from ariane.namesrv.kvconfig import KVConfigManager
from ariane.namesrv.route_info import RouteInfoManager
from ariane.remoting.server import RemotingServer

__all__ = ["NamesrvContext"]


class NamesrvContext(Protocol):
    """The NameServer as its processors see it."""

    config: NamesrvConfig
    route_info: RouteInfoManager
    kv_config: KVConfigManager
    remoting: RemotingServer

    @property
    def port(self) -> int:
        """The bound port."""
        ...

    def ready_for_service(self) -> bool:
        """Whether ``waitSecondsForService`` has passed since start."""
        ...

    async def persist_kv_config(self) -> None:
        """Write the KV config file."""
        ...

    async def update_config(self, props: Mapping[str, str]) -> None:
        """Apply UPDATE_NAMESRV_CONFIG properties and persist them."""
        ...
