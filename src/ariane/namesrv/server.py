"""The NameServer: wiring and lifecycle (RocketMQ ``NamesrvController``).

How it works: ``start()`` loads the KV config, starts a ``RemotingServer`` with the NameServer
processors, and runs the dead-broker scan every ``scanNotActiveBrokerInterval``. A closed
connection unregisters the broker that registered over it at once (RocketMQ's
``BrokerHousekeepingService``). KV writes and config updates are persisted in a worker thread,
one at a time, before their requests are answered. NameServers never talk to each other:
brokers register with every one of them. With ``metricsPromExporterPort`` set, ``/metrics``
is served over HTTP (:mod:`ariane.namesrv.metrics`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ariane.common.clock import Clock, SystemClock
from ariane.common.javaprops import format_properties
from ariane.common.netaddr import is_loopback
from ariane.namesrv.acl import NamesrvAcl
from ariane.namesrv.config import NamesrvConfig
from ariane.namesrv.kvconfig import KVConfigManager, write_file_atomically
from ariane.namesrv.processors import NamesrvProcessor
from ariane.namesrv.route_info import RouteInfoManager
from ariane.remoting.channel import Channel
from ariane.remoting.config import RemotingServerConfig
from ariane.remoting.eventloop import cancel_and_wait
from ariane.remoting.metrics import RpcMetrics
from ariane.remoting.server import RemotingServer

if TYPE_CHECKING:
    from ariane.observability.exporter import MetricsServer

__all__ = ["NameServer"]

logger = logging.getLogger(__name__)


class NameServer:
    """A RocketMQ-compatible NameServer.

    Args:
        config: the NameServer configuration.
        clock: time source (tests pass a ``ManualClock``).
    """

    def __init__(self, config: NamesrvConfig, *, clock: Clock | None = None) -> None:
        self.config = config
        self.clock = clock or SystemClock()
        self.route_info = RouteInfoManager(config, self.clock)
        self.kv_config = KVConfigManager()
        self.remoting = RemotingServer(
            RemotingServerConfig(
                bind_address=config.bind_address,
                listen_port=config.listen_port,
                channel_max_idle_seconds=float(config.server_channel_max_idle_time_seconds),
                backlog=config.server_socket_backlog,
                max_connections=config.server_max_connections,
                max_write_buffer_bytes=config.server_max_buffered_bytes_per_connection,
            )
        )
        NamesrvProcessor(self).register(self.remoting)
        self.rpc_metrics = RpcMetrics()
        self.remoting.register_hook(self.rpc_metrics)
        self.metrics_server: MetricsServer | None = None
        self.acl: NamesrvAcl | None = None
        self.remoting.add_channel_close_listener(self._on_channel_closed)
        self._scan_task: asyncio.Task[None] | None = None
        self._persist_lock = asyncio.Lock()
        self._started_at = self.clock.monotonic()

    @property
    def port(self) -> int:
        """The bound port (after ``start``)."""
        return self.remoting.port

    def ready_for_service(self) -> bool:
        """Whether ``waitSecondsForService`` has passed since start."""
        return self.clock.monotonic() - self._started_at >= self.config.wait_seconds_for_service

    async def start(self) -> int:
        """Load state and start serving.

        Returns:
            The bound port.

        Raises:
            ConfigError: the KV config file exists but is unreadable.
            OSError: the port cannot be bound.
        """
        self.kv_config = KVConfigManager.load(self.config.kv_config_path)
        self._start_acl()
        port = await self.remoting.start()
        self._started_at = self.clock.monotonic()
        self._scan_task = asyncio.create_task(
            self._scan_loop(), name="namesrv-scan-not-active-broker"
        )
        if self.config.metrics_prom_exporter_port > 0:
            try:
                self._start_metrics()
            except OSError:
                await self.stop()
                raise
        logger.info("name server started on %s", self.remoting.address)
        return port

    async def stop(self) -> None:
        """Stop serving; pending KV writes finish first."""
        task, self._scan_task = self._scan_task, None
        await cancel_and_wait(task)
        await self.remoting.stop()
        if self.acl is not None:
            await self.acl.stop()
            self.acl = None
        server, self.metrics_server = self.metrics_server, None
        if server is not None:
            await asyncio.to_thread(server.stop)
        async with self._persist_lock:
            pass
        logger.info("name server stopped")

    def _start_acl(self) -> None:
        config = self.config
        if not config.acl_enable:
            if not is_loopback(config.bind_address):
                logger.warning(
                    "the name server listens on %s with aclEnable=false: anyone who can reach "
                    "it may register brokers and change its KV config; set aclEnable=true",
                    config.bind_address,
                )
            return
        if self.acl is None:
            self.acl = NamesrvAcl(config.rocketmq_home, self.clock, config.acl_watch_interval_ms)
            self.acl.load()
            self.remoting.register_hook(self.acl.hook)

    def _start_metrics(self) -> None:
        from ariane.namesrv.metrics import NamesrvMetrics  # prometheus only when exported
        from ariane.observability.exporter import LoopCollector, MetricsServer, new_registry

        build = NamesrvMetrics(self, self.rpc_metrics).build
        collector = LoopCollector(asyncio.get_running_loop(), build)
        host = self.config.metrics_prom_exporter_host or self.config.bind_address
        server = MetricsServer(
            new_registry(collector), host, self.config.metrics_prom_exporter_port
        )
        server.start()
        self.metrics_server = server

    def scan_not_active_brokers(self) -> int:
        """Remove expired brokers and close their connections; returns how many."""
        expired = self.route_info.scan_not_active_brokers()
        for _, channel in expired:
            if isinstance(channel, Channel):
                channel.close()
        return len(expired)

    async def _scan_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.scan_not_active_broker_interval_ms / 1000)
            try:
                self.scan_not_active_brokers()
                self.rpc_metrics.prune()
            except Exception:
                logger.exception("scanning for inactive brokers failed")

    def _on_channel_closed(self, channel: Channel) -> None:
        self.route_info.on_channel_destroy(channel)

    async def persist_kv_config(self) -> None:
        """Write the KV config file (atomically, in a worker thread, one write at a time).

        Raises:
            OSError: the file cannot be written.
        """
        async with self._persist_lock:
            data = self.kv_config.encode()  # snapshot inside the lock: the latest state wins
            await asyncio.to_thread(write_file_atomically, self.config.kv_config_path, data)

    async def update_config(self, props: Mapping[str, str]) -> None:
        """Apply UPDATE_NAMESRV_CONFIG properties and persist the result.

        Raises:
            ConfigError: a value is invalid (nothing is changed).
        """
        updated, unknown = self.config.with_properties(props)
        if unknown:
            logger.warning("ignoring unknown config keys: %s", ", ".join(sorted(unknown)))
        self.config = updated
        self.route_info.config = updated
        text = format_properties(updated.to_properties()).encode("utf-8")
        async with self._persist_lock:
            try:
                await asyncio.to_thread(write_file_atomically, updated.config_store_path, text)
            except OSError as exc:
                logger.warning("cannot save config to %s: %s", updated.config_store_path, exc)
