"""Broker configuration (RocketMQ ``BrokerConfig`` plus the ``NettyServerConfig`` fields that
matter here), and the split of one property map into it and the store's
:class:`~ariane.store.StoreConfig` (whose RocketMQ ``MessageStoreConfig`` names are mapped in
``ariane.broker.store_properties``).

``broker.conf`` is a Java properties file with RocketMQ's names; ``load_properties`` splits
one property map into a ``BrokerConfig`` and a ``StoreConfig`` and reports the names it does
not know. Thread-pool and Netty tuning keys are accepted and ignored. Every bad value raises
``ConfigError`` naming the RocketMQ key. No I/O here: the launcher reads files and flags.
"""

from __future__ import annotations

import dataclasses
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ariane.broker.store_properties import STORE_PROPERTIES, store_config, store_to_properties
from ariane.common.javaprops import PROPERTY, config_from_properties, config_to_properties
from ariane.common.roles import BrokerRole, parse_role
from ariane.common.sysflag import PERM_READ, PERM_WRITE
from ariane.common.topics import validate_topic
from ariane.dledger.config import DLedgerConfig
from ariane.dledger.format import parse_peers
from ariane.errors import ConfigError, InvalidArgumentError
from ariane.remoting.client import parse_address
from ariane.store.config import StoreConfig

__all__ = [
    "IGNORED_PROPERTIES",
    "STORE_PROPERTIES",
    "BrokerConfig",
    "LoadedConfig",
    "load_properties",
    "store_to_properties",
]


def _prop(name: str, default: Any) -> Any:
    return field(default=default, metadata={PROPERTY: name})


def _default_broker_name() -> str:
    try:
        name = socket.gethostname().split(".")[0]
    except OSError:
        name = ""
    return name if name and all(c.isalnum() or c in "-_" for c in name) else "DEFAULT_BROKER"


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerConfig:
    """Everything the broker (not the store) reads from ``broker.conf``.

    Times are milliseconds unless the name says otherwise; each attribute names its RocketMQ
    property. Defaults are RocketMQ's, except ``listenPort`` (10911, as BrokerStartup sets it)
    and the bind address (127.0.0.1).

    Attributes:
        broker_cluster_name: ``brokerClusterName``.
        broker_name: ``brokerName`` (default: the host name).
        broker_id: ``brokerId``: 0 for the master of the group, > 0 for a slave.
        namesrv_addr: ``namesrvAddr``: ``host:port`` list separated by ``;``.
        listen_port: ``listenPort``; 0 picks a free port.
        bind_address: ``bindAddress``: the interface to listen on.
        broker_ip1: ``brokerIP1``: the address announced to NameServers and clients
            (default: the bind address, or 127.0.0.1 when binding every interface).
        broker_permission: ``brokerPermission``: PermName bits (6 = read + write).
        default_topic_queue_nums: ``defaultTopicQueueNums``: queues of TBW102.
        auto_create_topic_enable: ``autoCreateTopicEnable``.
        cluster_topic_enable: ``clusterTopicEnable``.
        broker_topic_enable: ``brokerTopicEnable``.
        auto_create_subscription_group: ``autoCreateSubscriptionGroup``.
        trace_topic_enable: ``traceTopicEnable``.
        msg_trace_topic_name: ``msgTraceTopicName``.
        flush_consumer_offset_interval_ms: ``flushConsumerOffsetInterval``.
        reject_transaction_message: ``rejectTransactionMessage``.
        long_polling_enable: ``longPollingEnable``.
        short_polling_time_ms: ``shortPollingTimeMills``.
        bulk_pull_max_messages: ``bulkPullMaxMessages`` (Ariane: records per bulk pull).
        bulk_pull_max_bytes: ``bulkPullMaxBytes`` (Ariane: bytes per bulk pull).
        notify_consumer_ids_changed_enable: ``notifyConsumerIdsChangedEnable``.
        region_id: ``regionId`` (the ``MSG_REGION`` of send answers).
        trace_on: ``traceOn`` (the ``TRACE_ON`` of send answers).
        register_broker_timeout_ms: ``registerBrokerTimeoutMills``.
        register_name_server_period_ms: ``registerNameServerPeriod``.
        force_register: ``forceRegister``: register even when the NameServer has our version.
        compressed_register: ``compressedRegister``.
        channel_expired_timeout_ms: ``channelExpiredTimeout``: drop clients silent this long.
        enable_property_filter: ``enablePropertyFilter``: accept SQL92 subscriptions.
        filter_support_retry: ``filterSupportRetry``: filter ``%RETRY%`` messages with the
            group's subscription to their original topic.
        reject_pull_consumer_enable: ``rejectPullConsumerEnable``.
        use_server_side_reset_offset: ``useServerSideResetOffset``.
        config_black_list: ``configBlackList``: keys UPDATE_BROKER_CONFIG refuses.
        server_channel_max_idle_time_seconds: ``serverChannelMaxIdleTimeSeconds``.
        server_socket_backlog: ``serverSocketBacklog``.
        metrics_exporter_type: ``metricsExporterType``: ``DISABLE`` or ``PROM`` (RocketMQ's
            ``OTLP_GRPC``/``LOG`` are accepted and export nothing).
        metrics_prom_exporter_port: ``metricsPromExporterPort``: the ``/metrics`` HTTP port;
            0 (Ariane's default) is off unless ``metricsExporterType=PROM``, which then means
            RocketMQ's 5557.
        metrics_prom_exporter_host: ``metricsPromExporterHost`` (default: the bind address).
        metrics_label: ``metricsLabel``: extra labels on every series, ``k1:v1,k2:v2``.
        metrics_cardinality_limit: ``metricsOtelCardinalityLimit``: most series per metric
            in one scrape (Ariane's default 10,000; RocketMQ's 50,000).
        max_stats_idle_time_minutes: ``maxStatsIdleTimeInMinutes``: stats keys without
            traffic this long are forgotten (< 0 never, 0..10 mean 30; Ariane's default 1500,
            past the day window; RocketMQ's -1).
        max_stats_keys: ``maxStatsKeys`` (Ariane's): most keys per stats item.
        gc_young_threshold: ``gcYoungThreshold`` (Ariane's): the garbage collector's young
            generation runs every this many allocations (default 10,000; 0: CPython's 700);
            what is alive once the broker started is frozen out of every collection either way
            (:mod:`ariane.common.gc_policy`; measured in ``docs/benchmarks.md``).
        flush_delay_offset_interval_ms: ``flushDelayOffsetInterval``: how often delay
            progress is written to ``delayOffset.json`` (also at shutdown).
        transaction_timeout_ms: ``transactionTimeOut``: half messages younger than this are
            not checked back yet.
        transaction_check_interval_ms: ``transactionCheckInterval``: period of the check.
        transaction_check_max: ``transactionCheckMax``: check-backs before a half message is
            discarded.
        rebalance_lock_max_live_time_ms: ``rebalanceLockMaxLiveTime`` (RocketMQ's system
            property ``rocketmq.broker.rebalance.lockMaxLiveTime``): a queue lock not
            refreshed for this long may be taken over.
        acl_enable: ``aclEnable``: check every request against the ACL files.
        rocketmq_home: ``rocketmqHome`` (default: the ``ROCKETMQ_HOME`` environment variable,
            set by the launcher): the ACL files are ``{rocketmqHome}/conf/plain_acl.yml`` and
            ``{rocketmqHome}/conf/acl/**/*.yml``.
        acl_watch_interval_ms: ``aclWatchIntervalMs`` (Ariane's): how often the ACL files are
            checked for changes.
        access_key: ``accessKey`` (Ariane's): the account the broker signs its requests to the
            NameServers with (registrations), when their ACL is on.
        secret_key: ``secretKey``: that account's secret (never shown by GET_BROKER_CONFIG).
        server_max_connections: ``serverMaxConnections`` (Ariane's): open client connections
            at most; more are closed at once and logged.
        server_max_buffered_bytes_per_connection: ``serverMaxBufferedBytesPerConnection``:
            answers queued for one connection at most; a client that stops reading past this
            is disconnected.
        auto_create_topic_limit: ``autoCreateTopicLimit``: sends stop auto-creating topics
            once the broker holds this many (``updateTopic`` still creates).
        auto_create_subscription_group_limit: ``autoCreateSubscriptionGroupLimit``: the
            same for subscription groups.
        max_clients_per_group: ``maxClientsPerGroup``: producer or consumer connections one
            group may have; heartbeats of more are refused.
        grpc_server_port: ``grpcServerPort``: serve the 5.x gRPC protocol on this port (-1,
            Ariane's default, is off; 0 picks a free port; RocketMQ's proxy uses 8081).
        grpc_tls_cert_path / grpc_tls_key_path: ``grpcTlsCertPath``/``grpcTlsKeyPath``: PEM
            files turning TLS on for gRPC.
        grpc_max_streams_per_connection: ``grpcMaxStreamsPerConnection``.
        grpc_max_inflight_receives: ``grpcMaxInflightReceives``: receive/pull streams open
            at once.
        grpc_settings_timeout_ms: ``grpcSettingsTimeoutMillis``: a Telemetry stream must
            send its settings within this time.
        grpc_message_trace_enable: ``grpcMessageTraceEnable``: write 4.x trace records
            (Pub, SubBefore, SubAfter, EndTransaction) for gRPC clients' calls.
        enable_topic_message_type_check: ``enableTopicMessageTypeCheck``: gRPC sends must
            match the topic's ``message.type``.
        grpc_max_long_polling_ms: ``grpcClientConsumerMaxLongPollingTimeoutMillis``: longest
            long polling of a gRPC receive (also what consumers are told in their settings).
        revive_queue_num: ``reviveQueueNum``: queues of the POP revive topic.
        revive_interval_ms: ``reviveInterval``: period of the POP revive pass.
        enable_retry_topic_v2: ``enableRetryTopicV2``: POP retry topics are named
            ``%RETRY%<group>+<topic>`` instead of ``%RETRY%<group>_<topic>``.
        retrieve_message_from_pop_retry_topic_v1: ``retrieveMessageFromPopRetryTopicV1``:
            with v2 names, still read the v1 retry topic every other pop.
        pop_from_retry_probability: ``popFromRetryProbability``: percent of pops that read
            the retry topic first.
        pop_polling_size: ``popPollingSize``: parked POPs per (topic, group, queue).
        max_pop_polling_size: ``maxPopPollingSize``: parked POPs in all.
        init_pop_offset_by_check_msg_in_mem: ``initPopOffsetByCheckMsgInMem``: a new POP
            group (init mode MAX) starts at 0 when the queue's first message is in memory.
        pop_response_return_actual_retry_topic: ``popResponseReturnActualRetryTopic``.
        enable_pop_buffer_merge: ``enablePopBufferMerge``: hold POP checkpoints in memory
            while their messages are acked (Ariane's default true; RocketMQ's false).
        pop_ck_stay_buffer_time_ms: ``popCkStayBufferTime``: longest a checkpoint is held.
        pop_ck_stay_buffer_time_out_ms: ``popCkStayBufferTimeOut``: a held checkpoint is
            written this long before its revive time at the latest.
        pop_ck_max_buffer_size: ``popCkMaxBufferSize``: most checkpoints held.
        enable_mixed_message_type: ``enableMixedMessageType``: topics may be
            ``message.type=MIXED``.
        enable_remoting_message_type_check: ``enableRemotingMessageTypeCheck`` (Ariane's):
            remoting sends must match the topic's ``message.type`` too (RocketMQ checks gRPC
            sends only; off by default so 4.x clients keep working).
    """

    broker_cluster_name: str = _prop("brokerClusterName", "DefaultCluster")
    broker_name: str = _prop("brokerName", _default_broker_name())
    broker_id: int = _prop("brokerId", 0)
    namesrv_addr: str = _prop("namesrvAddr", "")
    listen_port: int = _prop("listenPort", 10911)
    bind_address: str = _prop("bindAddress", "127.0.0.1")
    broker_ip1: str = _prop("brokerIP1", "")
    broker_permission: int = _prop("brokerPermission", PERM_READ | PERM_WRITE)
    default_topic_queue_nums: int = _prop("defaultTopicQueueNums", 8)
    auto_create_topic_enable: bool = _prop("autoCreateTopicEnable", True)
    cluster_topic_enable: bool = _prop("clusterTopicEnable", True)
    broker_topic_enable: bool = _prop("brokerTopicEnable", True)
    auto_create_subscription_group: bool = _prop("autoCreateSubscriptionGroup", True)
    trace_topic_enable: bool = _prop("traceTopicEnable", False)
    msg_trace_topic_name: str = _prop("msgTraceTopicName", "RMQ_SYS_TRACE_TOPIC")
    flush_consumer_offset_interval_ms: int = _prop("flushConsumerOffsetInterval", 5000)
    reject_transaction_message: bool = _prop("rejectTransactionMessage", False)
    long_polling_enable: bool = _prop("longPollingEnable", True)
    short_polling_time_ms: int = _prop("shortPollingTimeMills", 1000)
    bulk_pull_max_messages: int = _prop("bulkPullMaxMessages", 8192)
    bulk_pull_max_bytes: int = _prop("bulkPullMaxBytes", 4 * 1024 * 1024)
    notify_consumer_ids_changed_enable: bool = _prop("notifyConsumerIdsChangedEnable", True)
    region_id: str = _prop("regionId", "DefaultRegion")
    trace_on: bool = _prop("traceOn", True)
    register_broker_timeout_ms: int = _prop("registerBrokerTimeoutMills", 24000)
    register_name_server_period_ms: int = _prop("registerNameServerPeriod", 30000)
    force_register: bool = _prop("forceRegister", True)
    compressed_register: bool = _prop("compressedRegister", False)
    channel_expired_timeout_ms: int = _prop("channelExpiredTimeout", 120_000)
    enable_property_filter: bool = _prop("enablePropertyFilter", False)
    filter_support_retry: bool = _prop("filterSupportRetry", False)
    reject_pull_consumer_enable: bool = _prop("rejectPullConsumerEnable", False)
    use_server_side_reset_offset: bool = _prop("useServerSideResetOffset", True)
    config_black_list: str = _prop("configBlackList", "configBlackList;brokerConfigPath")
    server_channel_max_idle_time_seconds: int = _prop("serverChannelMaxIdleTimeSeconds", 120)
    server_socket_backlog: int = _prop("serverSocketBacklog", 1024)
    metrics_exporter_type: str = _prop("metricsExporterType", "DISABLE")
    metrics_prom_exporter_port: int = _prop("metricsPromExporterPort", 0)
    metrics_prom_exporter_host: str = _prop("metricsPromExporterHost", "")
    metrics_label: str = _prop("metricsLabel", "")
    metrics_cardinality_limit: int = _prop("metricsOtelCardinalityLimit", 10_000)
    max_stats_idle_time_minutes: int = _prop("maxStatsIdleTimeInMinutes", 1500)
    max_stats_keys: int = _prop("maxStatsKeys", 20_000)
    gc_young_threshold: int = _prop("gcYoungThreshold", 10_000)
    flush_delay_offset_interval_ms: int = _prop("flushDelayOffsetInterval", 10_000)
    transaction_timeout_ms: int = _prop("transactionTimeOut", 6000)
    transaction_check_interval_ms: int = _prop("transactionCheckInterval", 30_000)
    transaction_check_max: int = _prop("transactionCheckMax", 15)
    rebalance_lock_max_live_time_ms: int = _prop("rebalanceLockMaxLiveTime", 60_000)
    # -- replication (issue 13; docs/ha.md) -------------------------------------------------
    broker_role: str = _prop("brokerRole", "ASYNC_MASTER")
    ha_listen_port: int = _prop("haListenPort", -1)
    ha_master_address: str = _prop("haMasterAddress", "")
    ha_send_heartbeat_interval_ms: int = _prop("haSendHeartbeatInterval", 5000)
    ha_housekeeping_interval_ms: int = _prop("haHousekeepingInterval", 20_000)
    ha_transfer_batch_size: int = _prop("haTransferBatchSize", 32 * 1024)
    ha_slave_fallbehind_max: int = _prop("haSlaveFallbehindMax", 256 * 1024 * 1024)
    ha_max_gap_not_in_sync: int = _prop("haMaxGapNotInSync", 256 * 1024 * 1024)
    in_sync_replicas: int = _prop("inSyncReplicas", 2)
    min_in_sync_replicas: int = _prop("minInSyncReplicas", 1)
    enable_auto_in_sync_replicas: bool = _prop("enableAutoInSyncReplicas", False)
    all_ack_in_sync_state_set: bool = _prop("allAckInSyncStateSet", False)
    slave_read_enable: bool = _prop("slaveReadEnable", False)
    offset_check_in_slave: bool = _prop("offsetCheckInSlave", False)
    slave_synchronize_interval_ms: int = _prop("slaveSynchronizeInterval", 10_000)
    sync_from_last_file: bool = _prop("syncFromLastFile", False)
    # -- ACL (issue 11) --
    acl_enable: bool = _prop("aclEnable", False)
    rocketmq_home: str = _prop("rocketmqHome", "")
    acl_watch_interval_ms: int = _prop("aclWatchIntervalMs", 500)
    access_key: str = _prop("accessKey", "")
    secret_key: str = _prop("secretKey", "")
    # -- limits of the closed admin plane (issue 11) --
    server_max_connections: int = _prop("serverMaxConnections", 8192)
    server_max_buffered_bytes_per_connection: int = _prop(
        "serverMaxBufferedBytesPerConnection", 64 * 1024 * 1024
    )
    auto_create_topic_limit: int = _prop("autoCreateTopicLimit", 10_000)
    auto_create_subscription_group_limit: int = _prop("autoCreateSubscriptionGroupLimit", 10_000)
    max_clients_per_group: int = _prop("maxClientsPerGroup", 4096)
    # -- the gRPC 5.x protocol (ariane.proxy, issue 16): -1 = off, 0 = a free port ---------------
    grpc_server_port: int = _prop("grpcServerPort", -1)
    grpc_tls_cert_path: str = _prop("grpcTlsCertPath", "")
    grpc_tls_key_path: str = _prop("grpcTlsKeyPath", "")
    grpc_max_streams_per_connection: int = _prop("grpcMaxStreamsPerConnection", 256)
    grpc_max_inflight_receives: int = _prop("grpcMaxInflightReceives", 10_000)
    grpc_settings_timeout_ms: int = _prop("grpcSettingsTimeoutMillis", 30_000)
    grpc_message_trace_enable: bool = _prop("grpcMessageTraceEnable", False)
    enable_topic_message_type_check: bool = _prop("enableTopicMessageTypeCheck", True)
    grpc_max_long_polling_ms: int = _prop("grpcClientConsumerMaxLongPollingTimeoutMillis", 20_000)
    # -- POP consumption (issue 16) --
    revive_queue_num: int = _prop("reviveQueueNum", 8)
    revive_interval_ms: int = _prop("reviveInterval", 1000)
    enable_retry_topic_v2: bool = _prop("enableRetryTopicV2", False)
    retrieve_message_from_pop_retry_topic_v1: bool = _prop(
        "retrieveMessageFromPopRetryTopicV1", True
    )
    pop_from_retry_probability: int = _prop("popFromRetryProbability", 20)
    pop_polling_size: int = _prop("popPollingSize", 1024)
    max_pop_polling_size: int = _prop("maxPopPollingSize", 100_000)
    init_pop_offset_by_check_msg_in_mem: bool = _prop("initPopOffsetByCheckMsgInMem", True)
    pop_response_return_actual_retry_topic: bool = _prop("popResponseReturnActualRetryTopic", False)
    enable_pop_buffer_merge: bool = _prop("enablePopBufferMerge", True)
    pop_ck_stay_buffer_time_ms: int = _prop("popCkStayBufferTime", 10_000)
    pop_ck_stay_buffer_time_out_ms: int = _prop("popCkStayBufferTimeOut", 3000)
    pop_ck_max_buffer_size: int = _prop("popCkMaxBufferSize", 200_000)
    # -- topic message types (issue 16) --
    enable_mixed_message_type: bool = _prop("enableMixedMessageType", False)
    enable_remoting_message_type_check: bool = _prop("enableRemotingMessageTypeCheck", False)
    # -- DLedger: the CommitLog under Raft (issue 14; docs/dledger.md) ---------------------------
    enable_dleger_commit_log: bool = _prop("enableDLegerCommitLog", False)
    dleger_group: str = _prop("dLegerGroup", "")
    dleger_peers: str = _prop("dLegerPeers", "")
    dleger_self_id: str = _prop("dLegerSelfId", "")
    preferred_leader_id: str = _prop("preferredLeaderId", "")
    # Ariane's names for DLedger's timings (DLedgerConfig), DLedger's defaults
    dleger_heart_beat_time_interval_ms: int = _prop("dLegerHeartBeatTimeIntervalMs", 2000)
    dleger_max_heart_beat_leak: int = _prop("dLegerMaxHeartBeatLeak", 3)
    dleger_min_vote_interval_ms: int = _prop("dLegerMinVoteIntervalMs", 300)
    dleger_max_vote_interval_ms: int = _prop("dLegerMaxVoteIntervalMs", 1000)
    dleger_vote_wait_ms: int = _prop("dLegerVoteWaitMs", 3000)
    dleger_max_wait_ack_time_ms: int = _prop("dLegerMaxWaitAckTimeMs", 2500)
    dleger_max_pending_requests_num: int = _prop("dLegerMaxPendingRequestsNum", 10_000)
    dleger_listen_port: int = _prop("dLegerListenPort", -1)

    def __post_init__(self) -> None:
        try:  # normalise the spelling ("slave" -> "SLAVE")
            object.__setattr__(self, "broker_role", parse_role(self.broker_role).value)
        except ValueError as exc:
            raise ConfigError("brokerRole", str(exc)) from None
        _check(self)

    @property
    def role(self) -> BrokerRole:
        """``brokerRole`` as an enum."""
        return parse_role(self.broker_role)

    @property
    def effective_ha_listen_port(self) -> int:
        """The HA port to bind: ``haListenPort``, else ``listenPort + 1`` (0 with a free
        ``listenPort``, which then picks a free port too)."""
        if self.ha_listen_port >= 0:
            return self.ha_listen_port
        return self.listen_port + 1 if self.listen_port else 0

    def dledger(self) -> DLedgerConfig:
        """The DLedger settings (``enableDLegerCommitLog=true``).

        Raises:
            ConfigError: a DLedger key is missing or wrong (names it).
        """
        for key, value in (
            ("dLegerGroup", self.dleger_group),
            ("dLegerSelfId", self.dleger_self_id),
            ("dLegerPeers", self.dleger_peers),
        ):
            if not value.strip():
                raise ConfigError(key, "required with enableDLegerCommitLog=true")
        preferred = self.preferred_leader_id.replace(",", ";").split(";")
        return DLedgerConfig(
            group=self.dleger_group.strip(),
            self_id=self.dleger_self_id.strip(),
            peers=parse_peers(self.dleger_peers),
            heart_beat_time_interval_ms=self.dleger_heart_beat_time_interval_ms,
            max_heart_beat_leak=self.dleger_max_heart_beat_leak,
            min_vote_interval_ms=self.dleger_min_vote_interval_ms,
            max_vote_interval_ms=self.dleger_max_vote_interval_ms,
            vote_wait_ms=self.dleger_vote_wait_ms,
            max_wait_ack_time_ms=self.dleger_max_wait_ack_time_ms,
            max_pending_requests_num=self.dleger_max_pending_requests_num,
            listen_port=self.dleger_listen_port,
            preferred_leader_ids=tuple(p.strip() for p in preferred if p.strip()),
        )

    @property
    def advertised_host(self) -> str:
        """The host announced to NameServers and written into message ids."""
        if self.broker_ip1:
            return self.broker_ip1
        return "127.0.0.1" if self.bind_address in ("0.0.0.0", "::", "") else self.bind_address

    @property
    def metrics_port(self) -> int | None:
        """The ``/metrics`` port to serve (0: any free one), or None when metrics are off."""
        if self.metrics_prom_exporter_port > 0:
            return self.metrics_prom_exporter_port
        if self.metrics_exporter_type.upper() == "PROM":
            return 5557
        return None

    @property
    def metrics_host(self) -> str:
        """The address the ``/metrics`` endpoint binds."""
        return self.metrics_prom_exporter_host or self.bind_address

    @property
    def namesrv_addresses(self) -> list[str]:
        """``namesrvAddr`` split on ``;`` (blank entries dropped)."""
        return [a.strip() for a in self.namesrv_addr.split(";") if a.strip()]

    def black_listed(self) -> frozenset[str]:
        """Keys UPDATE_BROKER_CONFIG refuses (RocketMQ's fixed ones plus the configured)."""
        fixed = {"configBlackList", "brokerConfigPath", "rocketmqHome", "storePathRootDir"}
        return frozenset(fixed | {k.strip() for k in self.config_black_list.split(";") if k})

    def to_properties(self) -> dict[str, str]:
        """The config as RocketMQ properties (``secretKey`` masked: this is what
        GET_BROKER_CONFIG shows)."""
        props = config_to_properties(self)
        if props.get("secretKey"):
            props["secretKey"] = "******"
        return props


def _check(c: BrokerConfig) -> None:
    rules: list[tuple[str, bool, str]] = [
        ("brokerId", c.broker_id >= 0, "must be >= 0"),
        ("listenPort", 0 <= c.listen_port <= 65535, "must be 0..65535"),
        ("bindAddress", bool(c.bind_address), "must not be empty"),
        ("brokerPermission", 0 <= c.broker_permission <= 15, "must be PermName bits 0..15"),
        ("defaultTopicQueueNums", 1 <= c.default_topic_queue_nums <= 1024, "must be 1..1024"),
        ("flushConsumerOffsetInterval", c.flush_consumer_offset_interval_ms > 0, "must be > 0"),
        ("shortPollingTimeMills", c.short_polling_time_ms > 0, "must be > 0"),
        ("bulkPullMaxMessages", 1 <= c.bulk_pull_max_messages <= 65_536, "must be 1..65536"),
        ("bulkPullMaxBytes", 1 <= c.bulk_pull_max_bytes <= 64 << 20, "must be 1..67108864"),
        ("registerBrokerTimeoutMills", c.register_broker_timeout_ms > 0, "must be > 0"),
        ("registerNameServerPeriod", c.register_name_server_period_ms > 0, "must be > 0"),
        ("channelExpiredTimeout", c.channel_expired_timeout_ms > 0, "must be > 0"),
        ("serverChannelMaxIdleTimeSeconds", c.server_channel_max_idle_time_seconds >= 0, ">= 0"),
        ("serverSocketBacklog", c.server_socket_backlog >= 1, "must be >= 1"),
        ("flushDelayOffsetInterval", c.flush_delay_offset_interval_ms > 0, "must be > 0"),
        ("transactionTimeOut", c.transaction_timeout_ms >= 0, "must be >= 0"),
        ("transactionCheckInterval", c.transaction_check_interval_ms > 0, "must be > 0"),
        ("transactionCheckMax", c.transaction_check_max >= 0, "must be >= 0"),
        ("rebalanceLockMaxLiveTime", c.rebalance_lock_max_live_time_ms > 0, "must be > 0"),
        ("brokerClusterName", bool(c.broker_cluster_name), "must not be empty"),
        ("metricsPromExporterPort", 0 <= c.metrics_prom_exporter_port <= 65535, "0..65535"),
        (
            "metricsExporterType",
            c.metrics_exporter_type.upper() in ("DISABLE", "PROM", "OTLP_GRPC", "LOG"),
            "must be DISABLE, PROM, OTLP_GRPC or LOG",
        ),
        ("metricsOtelCardinalityLimit", c.metrics_cardinality_limit >= 1, "must be >= 1"),
        ("maxStatsKeys", c.max_stats_keys >= 1, "must be >= 1"),
        ("gcYoungThreshold", 0 <= c.gc_young_threshold <= 1_000_000, "must be 0..1000000"),
        ("aclWatchIntervalMs", 10 <= c.acl_watch_interval_ms <= 60_000, "must be 10..60000"),
        ("serverMaxConnections", c.server_max_connections >= 1, "must be >= 1"),
        (
            "serverMaxBufferedBytesPerConnection",
            c.server_max_buffered_bytes_per_connection >= 1 << 20,
            "must be at least 1 MiB",
        ),
        ("autoCreateTopicLimit", c.auto_create_topic_limit >= 0, "must be >= 0"),
        (
            "autoCreateSubscriptionGroupLimit",
            c.auto_create_subscription_group_limit >= 0,
            "must be >= 0",
        ),
        ("maxClientsPerGroup", c.max_clients_per_group >= 1, "must be >= 1"),
        ("grpcServerPort", -1 <= c.grpc_server_port <= 65535, "must be -1 (off) or 0..65535"),
        (
            "grpcClientConsumerMaxLongPollingTimeoutMillis",
            c.grpc_max_long_polling_ms >= 1000,
            "must be >= 1000",
        ),
        # POP consumption (issue 16)
        ("reviveQueueNum", 1 <= c.revive_queue_num <= 998, "must be 1..998"),
        ("reviveInterval", c.revive_interval_ms > 0, "must be > 0"),
        ("popFromRetryProbability", 0 <= c.pop_from_retry_probability <= 100, "0..100"),
        ("popPollingSize", c.pop_polling_size >= 1, "must be >= 1"),
        ("maxPopPollingSize", c.max_pop_polling_size >= 1, "must be >= 1"),
        ("popCkStayBufferTime", c.pop_ck_stay_buffer_time_ms > 0, "must be > 0"),
        ("popCkStayBufferTimeOut", c.pop_ck_stay_buffer_time_out_ms >= 0, "must be >= 0"),
        ("popCkMaxBufferSize", c.pop_ck_max_buffer_size >= 0, "must be >= 0"),
    ]
    for key, ok, problem in rules:
        if not ok:
            raise ConfigError(key, f"{problem}, got {getattr(c, _field_of(key))!r}")
    _check_replication(c)
    if c.enable_dleger_commit_log:
        c.dledger()
    if bool(c.secret_key) != bool(c.access_key):
        raise ConfigError("accessKey", "accessKey and secretKey must be set together")
    for key, value in (("brokerName", c.broker_name), ("brokerClusterName", c.broker_cluster_name)):
        try:
            validate_topic(value)
        except InvalidArgumentError as exc:
            raise ConfigError(key, f"{exc} (it is also a topic name)") from None
    for addr in c.namesrv_addresses:
        try:
            parse_address(addr)
        except (ValueError, InvalidArgumentError) as exc:
            raise ConfigError("namesrvAddr", f"bad address {addr!r}: {exc}") from None


def _check_replication(c: BrokerConfig) -> None:
    """The replication block (issue 13)."""
    role = c.role
    if role.is_slave and c.broker_id <= 0:
        raise ConfigError("brokerId", f"a SLAVE needs a brokerId > 0, got {c.broker_id}")
    if role.is_master and c.broker_id != 0:
        raise ConfigError(
            "brokerId",
            f"{c.broker_id} is a slave's id: set brokerRole=SLAVE, or brokerId=0 for the master",
        )
    rules: list[tuple[str, bool, str]] = [
        (
            "haListenPort",
            -1 <= c.ha_listen_port <= 65535,
            "must be -1 (listenPort + 1) or 0..65535",
        ),
        ("haSendHeartbeatInterval", c.ha_send_heartbeat_interval_ms > 0, "must be > 0"),
        ("haHousekeepingInterval", c.ha_housekeeping_interval_ms > 0, "must be > 0"),
        ("haTransferBatchSize", 1 <= c.ha_transfer_batch_size <= 64 << 20, "must be 1..64 MiB"),
        ("haSlaveFallbehindMax", c.ha_slave_fallbehind_max > 0, "must be > 0"),
        ("haMaxGapNotInSync", c.ha_max_gap_not_in_sync > 0, "must be > 0"),
        ("inSyncReplicas", c.in_sync_replicas >= 1, "must be >= 1"),
        ("minInSyncReplicas", c.min_in_sync_replicas >= 1, "must be >= 1"),
        ("slaveSynchronizeInterval", c.slave_synchronize_interval_ms > 0, "must be > 0"),
    ]
    for key, ok, problem in rules:
        if not ok:
            raise ConfigError(key, f"{problem}, got {getattr(c, _field_of(key))!r}")
    if c.ha_master_address:
        try:
            parse_address(c.ha_master_address)
        except (ValueError, InvalidArgumentError) as exc:
            raise ConfigError("haMasterAddress", f"bad address: {exc}") from None


def _field_of(prop: str) -> str:
    for f in dataclasses.fields(BrokerConfig):
        if f.metadata.get(PROPERTY) == prop:
            return f.name
    raise KeyError(prop)


#: RocketMQ properties accepted for compatibility that have no effect here.
IGNORED_PROPERTIES = frozenset(
    {
        "brokerIP2", "brokerConfigPath",
        "sendMessageThreadPoolNums", "putMessageFutureThreadPoolNums", "pullMessageThreadPoolNums",
        "litePullMessageThreadPoolNums", "ackMessageThreadPoolNums", "queryMessageThreadPoolNums",
        "adminBrokerThreadPoolNums", "clientManageThreadPoolNums", "consumerManageThreadPoolNums",
        "heartbeatThreadPoolNums", "endTransactionThreadPoolNums", "processReplyMessageThreadPoolNums",
        "sendThreadPoolQueueCapacity", "pullThreadPoolQueueCapacity", "queryThreadPoolQueueCapacity",
        "clientManagerThreadPoolQueueCapacity", "consumerManagerThreadPoolQueueCapacity",
        "heartbeatThreadPoolQueueCapacity", "endTransactionPoolQueueCapacity",
        "adminBrokerThreadPoolQueueCapacity", "useReentrantLockWhenPutMessage",
        "transientStorePoolEnable", "transientStorePoolSize", "warmMapedFileEnable",
        "serverWorkerThreads", "serverSelectorThreads", "serverCallbackExecutorThreads",
        "serverOnewaySemaphoreValue", "serverAsyncSemaphoreValue", "serverSocketSndBufSize",
        "serverSocketRcvBufSize", "serverPooledByteBufAllocatorEnable", "useEpollNativeSelector",
        "clientWorkerThreads", "clientCallbackExecutorThreads", "fetchNamesrvAddrByAddressServer",
        "fetchNameSrvAddrByDnsLookup", "sendHeartbeatTimeoutMillis",
        "brokerFastFailureEnable", "waitTimeMillsInSendQueue", "waitTimeMillsInPullQueue",
        "waitTimeMillsInHeartbeatQueue", "waitTimeMillsInTransactionQueue", "osPageCacheBusyTimeOutMills",
        "enableCalcFilterBitMap", "accountStatsEnable", "transferMsgByHeap",
        "metricsInDelta", "metricsGrpcExporterTarget", "metricsGrpcExporterHeader",
        "metricGrpcExporterTimeOutInMills", "metricGrpcExporterIntervalInMills",
        "metricLoggingExporterIntervalInMills", "enableRemotingMetrics", "enableMessageStoreMetrics",
        "enablePopMetrics", "enableConnectionMetrics", "enableTransactionMetrics",
        "enableStatsMetrics", "enableRequestMetrics", "enableLagAndDlqMetrics",
        "enableDetailStat", "duplicationEnable", "isolateLogEnable", "enableControllerMode",
        "enableSlaveActingMaster", "storePathCommitLog", "storePathConsumeQueue", "storePathIndex",
        "maxErrorRateOfBloomFilter", "expectConsumerNumUseFilter", "commercialBaseCount",
        "highSpeedMode", "brokerNotActiveTimeoutMillis", "enableNetWorkFlowControl",
    }
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class LoadedConfig:
    """The result of :func:`load_properties`."""

    broker: BrokerConfig
    store: StoreConfig
    unknown: list[str]
    ignored: list[str]


def load_properties(
    props: Mapping[str, str],
    *,
    broker: BrokerConfig | None = None,
    store: StoreConfig | None = None,
) -> LoadedConfig:
    """Split RocketMQ broker properties into the broker's and the store's configuration.

    Args:
        props: property name -> text value (``broker.conf`` content, flags...).
        broker: the broker config to start from (defaults to ``BrokerConfig()``).
        store: the store config to start from (defaults to ``StoreConfig()``).

    Raises:
        ConfigError: a value does not convert or is out of range (names the property).
    """
    broker_props = {k: v for k, v in props.items() if k not in STORE_PROPERTIES}
    new_broker, unknown = config_from_properties(
        BrokerConfig, broker_props, broker, ignored=IGNORED_PROPERTIES
    )
    new_store = store_config(props, store)
    ignored = sorted(k for k in props if k in IGNORED_PROPERTIES)
    return LoadedConfig(new_broker, new_store, sorted(unknown), ignored)
