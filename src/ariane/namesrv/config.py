"""NameServer configuration (RocketMQ ``NamesrvConfig`` plus the ``NettyServerConfig`` fields
that matter here), keyed by RocketMQ's property names so Java config files work unchanged."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ariane.common.javaprops import (
    PROPERTY,
    config_from_properties,
    config_to_properties,
)
from ariane.errors import ConfigError

__all__ = ["DEFAULT_HOME", "IGNORED_PROPERTIES", "NamesrvConfig"]

#: Where RocketMQ keeps NameServer files by default (``${user.home}/namesrv``).
DEFAULT_HOME = os.path.join(os.path.expanduser("~"), "namesrv")

#: RocketMQ properties accepted for compatibility that have no effect here (thread pools,
#: Netty buffers, the embedded controller...).
IGNORED_PROPERTIES = frozenset(
    {
        "clientRequestThreadPoolNums",
        "defaultThreadPoolNums",
        "clientRequestThreadPoolQueueCapacity",
        "defaultThreadPoolQueueCapacity",
        "unRegisterBrokerQueueCapacity",
        "notifyMinBrokerIdChanged",
        "enableControllerInNamesrv",
        "serverWorkerThreads",
        "serverCallbackExecutorThreads",
        "serverSelectorThreads",
        "serverOnewaySemaphoreValue",
        "serverAsyncSemaphoreValue",
        "serverSocketSndBufSize",
        "serverSocketRcvBufSize",
        "writeBufferHighWaterMark",
        "writeBufferLowWaterMark",
        "serverNettyWorkerGroupEnable",
        "serverPooledByteBufAllocatorEnable",
        "enableShutdownGracefully",
        "shutdownWaitTimeSeconds",
        "useEpollNativeSelector",
    }
)


def _prop(name: str, default: Any) -> Any:
    return field(default=default, metadata={PROPERTY: name})


@dataclass(frozen=True, slots=True, kw_only=True)
class NamesrvConfig:
    """Everything a NameServer reads from its config file.

    Attributes:
        listen_port: TCP port (``listenPort``, 9876; 0 picks a free one).
        bind_address: interface to listen on (``bindAddress``; Ariane binds 127.0.0.1).
        rocketmq_home: ``rocketmqHome``: with ``aclEnable`` the ACL files are
            ``{rocketmqHome}/conf/plain_acl.yml`` and ``{rocketmqHome}/conf/acl/**/*.yml``.
        kv_config_path: the persisted KV config (``kvConfigPath``).
        config_store_path: where runtime config updates are saved (``configStorePath``).
        product_env_name: informational (``productEnvName``).
        cluster_test: informational (``clusterTest``).
        order_message_enable: attach ``orderTopicConf`` to routes (``orderMessageEnable``).
        return_order_topic_config_to_broker: answer registrations with the ORDER_TOPIC_CONFIG
            namespace (``returnOrderTopicConfigToBroker``).
        scan_not_active_broker_interval_ms: period of the dead-broker scan
            (``scanNotActiveBrokerInterval``).
        broker_channel_expired_time_ms: liveness timeout of a broker that does not send its
            own ``heartbeatTimeoutMillis`` (``brokerChannelExpiredTime``; RocketMQ's constant).
        support_acting_master: let the lowest slave act as master (``supportActingMaster``).
        enable_all_topic_list: serve GET_ALL_TOPIC_LIST_FROM_NAMESERVER (``enableAllTopicList``).
        enable_topic_list: serve the topic-list queries (``enableTopicList``).
        need_wait_for_service: refuse routes for a while after start (``needWaitForService``).
        wait_seconds_for_service: that while (``waitSecondsForService``).
        delete_topic_with_broker_registration: drop topics a master stops reporting
            (``deleteTopicWithBrokerRegistration``).
        config_black_list: ';'-separated keys UPDATE_NAMESRV_CONFIG may not change
            (``configBlackList``).
        server_channel_max_idle_time_seconds: close idle connections after this long
            (``serverChannelMaxIdleTimeSeconds``; 0 disables).
        server_socket_backlog: listen backlog (``serverSocketBacklog``).
        metrics_prom_exporter_port: the ``/metrics`` HTTP port (``metricsPromExporterPort``,
            the broker's key; 0 = off).
        metrics_prom_exporter_host: its bind address (``metricsPromExporterHost``; default:
            ``bindAddress``).
        acl_enable: ``aclEnable`` (Ariane's, as the broker's): check the write requests
            (broker registration, KV and config updates, write-permission changes) against the
            ACL files; they then need an admin account. Reads stay open.
        acl_watch_interval_ms: ``aclWatchIntervalMs``: how often the ACL files are re-read.
        kv_config_max_entries: ``kvConfigMaxEntries`` (Ariane's): KV entries at most; a
            PUT_KV_CONFIG of a new key past it is refused.
        server_max_connections: ``serverMaxConnections``: open connections at most.
        server_max_buffered_bytes_per_connection: ``serverMaxBufferedBytesPerConnection``:
            answers queued for one connection at most before it is closed.
    """

    listen_port: int = _prop("listenPort", 9876)
    bind_address: str = _prop("bindAddress", "127.0.0.1")
    rocketmq_home: str = _prop("rocketmqHome", os.environ.get("ROCKETMQ_HOME", ""))
    kv_config_path: str = _prop("kvConfigPath", os.path.join(DEFAULT_HOME, "kvConfig.json"))
    config_store_path: str = _prop(
        "configStorePath", os.path.join(DEFAULT_HOME, "namesrv.properties")
    )
    product_env_name: str = _prop("productEnvName", "center")
    cluster_test: bool = _prop("clusterTest", False)
    order_message_enable: bool = _prop("orderMessageEnable", False)
    return_order_topic_config_to_broker: bool = _prop("returnOrderTopicConfigToBroker", True)
    scan_not_active_broker_interval_ms: int = _prop("scanNotActiveBrokerInterval", 10_000)
    broker_channel_expired_time_ms: int = _prop("brokerChannelExpiredTime", 120_000)
    support_acting_master: bool = _prop("supportActingMaster", False)
    enable_all_topic_list: bool = _prop("enableAllTopicList", True)
    enable_topic_list: bool = _prop("enableTopicList", True)
    need_wait_for_service: bool = _prop("needWaitForService", False)
    wait_seconds_for_service: int = _prop("waitSecondsForService", 45)
    delete_topic_with_broker_registration: bool = _prop("deleteTopicWithBrokerRegistration", False)
    config_black_list: str = _prop(
        "configBlackList", "configBlackList;configStorePath;kvConfigPath;rocketmqHome"
    )
    server_channel_max_idle_time_seconds: int = _prop("serverChannelMaxIdleTimeSeconds", 120)
    server_socket_backlog: int = _prop("serverSocketBacklog", 1024)
    metrics_prom_exporter_port: int = _prop("metricsPromExporterPort", 0)
    metrics_prom_exporter_host: str = _prop("metricsPromExporterHost", "")
    # -- ACL (issue 11) --
    acl_enable: bool = _prop("aclEnable", False)
    acl_watch_interval_ms: int = _prop("aclWatchIntervalMs", 500)
    # -- limits (issue 11) --
    kv_config_max_entries: int = _prop("kvConfigMaxEntries", 100_000)
    server_max_connections: int = _prop("serverMaxConnections", 8192)
    server_max_buffered_bytes_per_connection: int = _prop(
        "serverMaxBufferedBytesPerConnection", 64 * 1024 * 1024
    )

    def __post_init__(self) -> None:
        if not 0 <= self.listen_port <= 65535:
            raise ConfigError("listenPort", f"must be 0..65535, got {self.listen_port}")
        if not self.bind_address:
            raise ConfigError("bindAddress", "must not be empty")
        if not self.kv_config_path:
            raise ConfigError("kvConfigPath", "must not be empty")
        if self.scan_not_active_broker_interval_ms <= 0:
            raise ConfigError(
                "scanNotActiveBrokerInterval",
                f"must be > 0 ms, got {self.scan_not_active_broker_interval_ms}",
            )
        if self.broker_channel_expired_time_ms <= 0:
            raise ConfigError(
                "brokerChannelExpiredTime",
                f"must be > 0 ms, got {self.broker_channel_expired_time_ms}",
            )
        if self.wait_seconds_for_service < 0:
            raise ConfigError("waitSecondsForService", "must be >= 0")
        if self.server_channel_max_idle_time_seconds < 0:
            raise ConfigError("serverChannelMaxIdleTimeSeconds", "must be >= 0")
        if self.server_socket_backlog < 1:
            raise ConfigError("serverSocketBacklog", "must be >= 1")
        if not 0 <= self.metrics_prom_exporter_port <= 65535:
            raise ConfigError("metricsPromExporterPort", "must be 0..65535")
        if not 10 <= self.acl_watch_interval_ms <= 60_000:
            raise ConfigError("aclWatchIntervalMs", "must be 10..60000")
        if self.kv_config_max_entries < 1:
            raise ConfigError("kvConfigMaxEntries", "must be >= 1")

    def with_properties(self, props: Mapping[str, str]) -> tuple[NamesrvConfig, list[str]]:
        """A copy with RocketMQ properties applied.

        Returns:
            The new config and the property names it does not know.

        Raises:
            ConfigError: a value is invalid (names the property).
        """
        return config_from_properties(NamesrvConfig, props, self, ignored=IGNORED_PROPERTIES)

    def to_properties(self) -> dict[str, str]:
        """The config as RocketMQ properties (for GET_NAMESRV_CONFIG and persistence)."""
        return config_to_properties(self)

    def black_listed(self) -> frozenset[str]:
        """Keys UPDATE_NAMESRV_CONFIG refuses (RocketMQ's fixed four plus the configured)."""
        fixed = {"configBlackList", "configStorePath", "kvConfigPath", "rocketmqHome", "aclEnable"}
        configured = {k.strip() for k in self.config_black_list.split(";") if k.strip()}
        return frozenset(fixed | configured)
