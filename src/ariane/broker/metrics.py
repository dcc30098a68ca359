"""The broker's Prometheus metrics (RocketMQ 5 ``BrokerMetricsManager``,
``DefaultStoreMetricsManager``, ``ConsumerLagCalculator``), built at scrape time.

How it works: ``BrokerMetrics.build()`` runs on the event loop for each scrape (see
:mod:`ariane.observability.exporter`); what may touch the disk (timestamps of the oldest
unconsumed messages, disk usage) is finished on the HTTP thread. It reads the counters the
broker keeps anyway: the
stats sets (message and byte counters per topic and per topic@group), the remoting hook's
latency histograms and in-flight table, the client registry, the consumer offsets and the
store's positions. Names, label names and units are RocketMQ 5's (``docs/metrics.md``);
Ariane's additions start with ``ariane_``. Every series carries ``cluster``, ``node_type``
(``broker``) and ``node_id`` (the broker name) plus the ``metricsLabel`` extras.

Consumer lag covers every (group, topic) with an online subscription or a committed offset:
RocketMQ 5 reports online groups only, which hides the lag of a stopped consumer, the case
alerts exist for.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from prometheus_client.core import Metric

from ariane.broker.dledger import DLedgerReplication
from ariane.broker.replication import BrokerReplication
from ariane.broker.stats import GROUP_GET_NUMS, GROUP_GET_SIZE, TOPIC_PUT_NUMS, TOPIC_PUT_SIZE
from ariane.common.topics import (
    DLQ_PREFIX,
    RETRY_PREFIX,
    SCHEDULE_TOPIC,
    TRANS_HALF_TOPIC,
    is_system_topic,
)
from ariane.observability.families import Families, parse_metrics_label
from ariane.observability.rpc import add_rpc_families
from ariane.observability.rpc import label_bool as _bool
from ariane.remoting.protocol.client_bodies import ConsumeType
from ariane.remoting.protocol.command import LanguageCode, MQVersion

if TYPE_CHECKING:
    from ariane.broker.context import BrokerContext

__all__ = ["BrokerMetrics", "message_type_of"]

_PROCESSORS = (
    "send", "pull", "lite_pull", "query_message", "heartbeat", "client_manager",
    "consumer_manager", "admin", "transaction",
)  # fmt: skip
_SYS_GROUP_PREFIX = "cid_rmq_sys_"
_MEDIUM = ["storage_type", "storage_medium"]
_WHERE = ["local", "disk"]
_TIMER_TOPIC = "rmq_sys_wheel_timer"
_CONSUME_MODES = {
    ConsumeType.CONSUME_ACTIVELY: "pull",
    ConsumeType.CONSUME_PASSIVELY: "push",
    ConsumeType.CONSUME_POP: "pop",
}


def message_type_of(topic: str) -> str:
    """The ``message_type`` label of a put into ``topic``: delayed and transactional messages
    are stored in their system topics (remoting clients send no FIFO marker)."""
    if topic in (SCHEDULE_TOPIC, _TIMER_TOPIC):
        return "delay"
    if topic == TRANS_HALF_TOPIC:
        return "transaction"
    return "normal"


def _is_retry_or_dlq(topic: str) -> bool:
    return topic.startswith((RETRY_PREFIX, DLQ_PREFIX))


def _is_system_group(group: str) -> bool:
    return group.lower().startswith(_SYS_GROUP_PREFIX)


def _version_desc(version: int) -> str:
    try:
        return MQVersion(version).name.lower()
    except ValueError:
        return str(version)


def _language(language: LanguageCode | int) -> str:
    try:
        return LanguageCode(language).name.lower()
    except ValueError:
        return str(int(language))


_LAG_FAMILIES = (
    ("rocketmq_consumer_lag_messages", "Messages not consumed yet (committed offset to end)"),
    ("rocketmq_consumer_lag_latency", "Age of the oldest unconsumed message in milliseconds"),
    ("rocketmq_consumer_inflight_messages", "Messages pulled but not committed yet"),
    ("rocketmq_consumer_queueing_latency", "Age of the oldest message not pulled yet in ms"),
    ("rocketmq_consumer_ready_messages", "Messages not pulled yet"),
)


@dataclass(slots=True)
class _Lag:
    """One (group, topic): sums over its queues and the oldest timestamps."""

    lag: int = 0
    inflight: int = 0
    ready: int = 0
    queues: list[tuple[int, int]] = field(default_factory=list)  # (queue id, lag)
    # (queue id, offset of the oldest unconsumed or -1, of the oldest unpulled or -1)
    reads: list[tuple[int, int, int]] = field(default_factory=list)


class BrokerMetrics:
    """Builds the broker's metric families.

    Args:
        broker: the broker observed.
    """

    def __init__(self, broker: BrokerContext) -> None:
        self.broker = broker

    def common_labels(self) -> dict[str, str]:
        """Labels on every series: ``metricsLabel`` extras, then cluster/node_type/node_id."""
        cfg = self.broker.config
        labels = parse_metrics_label(cfg.metrics_label)
        labels.update(
            {"cluster": cfg.broker_cluster_name, "node_type": "broker", "node_id": cfg.broker_name}
        )
        return labels

    def build(self) -> Callable[[], list[Metric]]:
        """Read the broker's state now (call on the event loop); the returned function finishes
        the families off the loop: it reads message timestamps and disk usage, which may
        touch the disk."""
        fam = Families(self.common_labels(), self.broker.config.metrics_cardinality_limit)
        self._broker_state(fam)
        self._messages(fam)
        self._connections(fam)
        lags = [(g, t, self._lag_of(g, t)) for g, t in self._lag_pairs()]
        self._rpc(fam)
        self._storage(fam)
        self._stats_sets(fam)
        replication = self.broker.replication
        if isinstance(replication, DLedgerReplication):  # issue 14
            replication.add_metrics(fam)
        master_slave = replication if isinstance(replication, BrokerReplication) else None
        if master_slave is not None:  # issue 13
            self._replication(fam, master_slave)

        def finish() -> list[Metric]:
            self._lag(fam, lags)
            self._disk(fam)
            if master_slave is not None:
                self._slave_lags(fam, master_slave)
            return fam.finish()

        return finish

    # -- broker state -----------------------------------------------------------------------

    def _broker_state(self, fam: Families) -> None:
        b = self.broker
        fam.gauge("rocketmq_broker_permission", "Broker permission (PermName bits)").add(
            [], b.config.broker_permission
        )
        fam.gauge("rocketmq_topic_number", "Topics configured on the broker").add(
            [], len(b.topics.table)
        )
        fam.gauge("rocketmq_consumer_group_number", "Subscription groups on the broker").add(
            [], len(b.groups.table)
        )
        rpc = b.rpc_metrics.snapshot()
        mark = fam.gauge(
            "rocketmq_processor_watermark",
            "Requests received and not answered yet, per processor (held pulls excluded)",
            ["processor"],
        )
        for name in _PROCESSORS:
            mark.add([name], rpc.in_flight.get(name, 0))
        fam.gauge("ariane_pull_held_requests", "Pulls held by long polling").add(
            [], b.hold.held_count
        )
        fam.gauge("ariane_client_connections", "Open client connections").add(
            [], len(b.remoting.channels)
        )

    # -- messages in and out --------------------------------------------------------------------

    def _messages(self, fam: Families) -> None:
        sets = self.broker.stats.sets
        in_labels = ["topic", "message_type", "is_system"]
        msgs_in = fam.counter("rocketmq_messages_in_total", "Messages put by producers", in_labels)
        bytes_in = fam.counter(
            "rocketmq_throughput_in_total", "Bytes of messages put by producers", in_labels
        )
        sizes = fam.histogram(
            "rocketmq_message_size", "Size of incoming messages in bytes (one per put)", in_labels
        )
        put_size = sets[TOPIC_PUT_SIZE]
        for topic, value, _ in sets[TOPIC_PUT_NUMS].items():
            if _is_retry_or_dlq(topic):
                continue
            labels = [topic, message_type_of(topic), _bool(is_system_topic(topic))]
            msgs_in.add(labels, value)
            bytes_in.add(labels, put_size.value(topic))
            hist = self.broker.stats.message_size.get(topic)
            if hist is not None:
                sizes.add(labels, hist)
        out_labels = ["topic", "consumer_group", "is_system"]
        msgs_out = fam.counter(
            "rocketmq_messages_out_total", "Messages delivered to consumers", out_labels
        )
        bytes_out = fam.counter(
            "rocketmq_throughput_out_total", "Bytes delivered to consumers", out_labels
        )
        get_size = sets[GROUP_GET_SIZE]
        for key, value, _ in sets[GROUP_GET_NUMS].items():
            topic, _, group = key.partition("@")
            if _is_retry_or_dlq(topic):
                continue
            system = is_system_topic(topic) or _is_system_group(group)
            labels = [topic, group, _bool(system)]
            msgs_out.add(labels, value)
            bytes_out.add(labels, get_size.value(key))
        dlq = fam.counter(
            "rocketmq_send_to_dlq_messages_total",
            "Messages stored in a group's dead-letter queue",
            ["consumer_group", "is_system"],
        )
        store = self.broker.store
        for topic, tc in sorted(self.broker.topics.table.items()):
            if topic.startswith(DLQ_PREFIX):
                group = topic[len(DLQ_PREFIX) :]
                total = sum(
                    max(0, store.get_max_offset_in_queue(topic, q))
                    for q in range(max(tc.read_queue_nums, tc.write_queue_nums))
                )
                dlq.add([group, _bool(_is_system_group(group))], total)

    # -- clients --------------------------------------------------------------------------------

    def _connections(self, fam: Families) -> None:
        clients = self.broker.clients
        producers: dict[tuple[str, str], int] = {}
        for infos in clients.producers.values():
            for info in infos.values():
                key = (_language(info.language), _version_desc(info.version))
                producers[key] = producers.get(key, 0) + 1
        prod = fam.gauge(
            "rocketmq_producer_connections",
            "Producer connections",
            ["language", "version", "protocol_type"],
        )
        for (language, version), n in sorted(producers.items()):
            prod.add([language, version, "remoting"], n)
        cons = fam.gauge(
            "rocketmq_consumer_connections",
            "Consumer connections",
            ["consumer_group", "language", "version", "consume_mode", "protocol_type", "is_system"],
        )
        for group, group_info in sorted(clients.consumers.items()):
            mode = _CONSUME_MODES.get(group_info.consume_type, "push")
            counts: dict[tuple[str, str], int] = {}
            for ch in group_info.channels.values():
                key = (_language(ch.language), _version_desc(ch.version))
                counts[key] = counts.get(key, 0) + 1
            for (language, version), n in sorted(counts.items()):
                labels = [
                    group,
                    language,
                    version,
                    mode,
                    "remoting",
                    _bool(_is_system_group(group)),
                ]
                cons.add(labels, n)

    # -- consumer lag ---------------------------------------------------------------------------

    def _lag_pairs(self) -> list[tuple[str, str]]:
        b = self.broker
        pairs: set[tuple[str, str]] = set()
        for group, info in b.clients.consumers.items():
            pairs.update((group, topic) for topic in info.subscriptions)
        for key in b.offsets.offset_table:
            topic, _, group = key.partition("@")
            pairs.add((group, topic))
        return sorted(
            (g, t) for g, t in pairs if t in b.topics.table and not t.startswith(DLQ_PREFIX)
        )

    def _lag_of(self, group: str, topic: str) -> _Lag:
        """Offsets of one (group, topic): in memory, cheap (on the loop)."""
        b = self.broker
        store = b.store
        out = _Lag()
        for q in range(b.topics.table[topic].write_queue_nums):
            max_offset = max(0, store.get_max_offset_in_queue(topic, q))
            consumer = b.offsets.query(group, topic, q)
            if consumer < 0:
                consumer = max_offset  # nothing committed: RocketMQ counts no lag
            consumer = min(consumer, max_offset)
            pulled = min(max(b.offsets.pull_offset(group, topic, q), consumer), max_offset)
            lag = max_offset - consumer
            out.lag += lag
            out.inflight += pulled - consumer
            out.ready += max_offset - pulled
            out.queues.append((q, lag))
            out.reads.append(
                (q, consumer if lag > 0 else -1, pulled if max_offset > pulled else -1)
            )
        return out

    def _ages(self, topic: str, lag: _Lag, now_ms: int) -> tuple[int, int]:
        """Ages (ms) of the oldest unconsumed and oldest unpulled messages (off the loop:
        reading a store timestamp may fault a page in)."""
        store = self.broker.store
        unconsumed = unpulled = 0
        for q, consumer, pulled in lag.reads:
            if consumer >= 0:
                ts = store.get_message_store_timestamp(topic, q, consumer)
                if ts > 0 and (unconsumed == 0 or ts < unconsumed):
                    unconsumed = ts
            if pulled >= 0:
                ts = store.get_message_store_timestamp(topic, q, pulled)
                if ts > 0 and (unpulled == 0 or ts < unpulled):
                    unpulled = ts
        return (
            max(0, now_ms - unconsumed) if unconsumed else 0,
            max(0, now_ms - unpulled) if unpulled else 0,
        )

    def _lag(self, fam: Families, lags: list[tuple[str, str, _Lag]]) -> None:
        labels = ["consumer_group", "topic", "is_retry", "is_system"]
        lag_msgs, lag_ms, inflight, queueing, ready = (
            fam.gauge(name, doc, labels) for name, doc in _LAG_FAMILIES
        )
        per_queue = fam.gauge(
            "ariane_consumer_queue_lag_messages",
            "Messages not consumed yet, per queue",
            ["consumer_group", "topic", "queue_id"],
        )
        now = self.broker.clock.now_ms()
        for group, topic, lag in lags:
            system = is_system_topic(topic) or _is_system_group(group)
            values = [group, topic, _bool(topic.startswith(RETRY_PREFIX)), _bool(system)]
            unconsumed_ms, unpulled_ms = self._ages(topic, lag, now)
            lag_msgs.add(values, lag.lag)
            lag_ms.add(values, unconsumed_ms)
            inflight.add(values, lag.inflight)
            queueing.add(values, unpulled_ms)
            ready.add(values, lag.ready)
            for q, n in lag.queues:
                per_queue.add([group, topic, str(q)], n)

    # -- requests ---------------------------------------------------------------------------------

    def _rpc(self, fam: Families) -> None:
        add_rpc_families(fam, self.broker.rpc_metrics.snapshot())

    # -- storage ----------------------------------------------------------------------------------

    def _storage(self, fam: Families) -> None:
        store = self.broker.store
        cl = store.commit_log
        fam.gauge(
            "rocketmq_storage_flush_behind_bytes", "CommitLog bytes not flushed yet", _MEDIUM
        ).add(_WHERE, max(0, cl.max_offset - cl.flushed_where))
        fam.gauge(
            "rocketmq_storage_dispatch_behind_bytes",
            "CommitLog bytes not dispatched to ConsumeQueues yet",
            _MEDIUM,
        ).add(_WHERE, store.dispatch_behind_bytes())
        fam.gauge("ariane_storage_writeable", "1 while the store accepts puts").add(
            [], 1 if store.is_writeable else 0
        )
        fam.counter("ariane_storage_put_failures_total", "Puts the store refused").add(
            [], store.put_failed_times
        )
        fam.counter(
            "ariane_dedup_duplicates_total",
            "Idempotent sends dropped as already stored (__ARIANE_DEDUP seen in the window)",
        ).add([], store.dedup.duplicates)
        fam.gauge("ariane_dedup_window_ids", "Ids held by the idempotence window").add(
            [], len(store.dedup)
        )
        gets = fam.counter("ariane_storage_get_requests_total", "Store reads", ["result"])
        gets.add(["found"], store.get_times_found)
        gets.add(["miss"], store.get_times_miss)
        flush = fam.histogram(
            "ariane_storage_flush_latency_seconds", "Time of CommitLog flushes that wrote data"
        )
        flush.add([], cl.flush_latency)

    def _disk(self, fam: Families) -> None:
        """Disk usage and the oldest message (off the loop: file system calls, page reads)."""
        store = self.broker.store
        root = store.config.store_path_root_dir
        try:
            usage = shutil.disk_usage(root if os.path.isdir(root) else os.path.dirname(root))
        except OSError:
            usage = None
        if usage is not None:
            fam.gauge("rocketmq_storage_size", "Used bytes of the store's partition", _MEDIUM).add(
                _WHERE, usage.total - usage.free
            )
        fam.gauge(
            "ariane_storage_commitlog_disk_ratio", "Used fraction of the CommitLog's partition"
        ).add([], store.disk_usage(store.config.commit_log_dir))
        earliest = self.broker.earliest_message_time()
        if earliest > 0:
            fam.gauge(
                "rocketmq_storage_message_reserve_time",
                "Age of the oldest stored message in milliseconds",
                _MEDIUM,
            ).add(_WHERE, max(0, self.broker.clock.now_ms() - earliest))

    # -- replication (issue 13) ---------------------------------------------------------------

    def _replication(self, fam: Families, replication: BrokerReplication) -> None:
        r = replication.metrics()
        role = fam.gauge("ariane_broker_role", "1 for the broker's current role", ["role"])
        for name in ("ASYNC_MASTER", "SYNC_MASTER", "SLAVE"):
            role.add([name], 1 if r.role == name else 0)
        fam.gauge("ariane_replication_connected_slaves", "Slaves connected to this master").add(
            [], r.connected_slaves
        )
        fam.gauge(
            "ariane_replication_in_sync_slaves", "Connected slaves within haMaxGapNotInSync"
        ).add([], r.in_sync_slaves)
        fam.gauge(
            "ariane_replication_sync_waiting", "SYNC_MASTER sends waiting for slaves now"
        ).add([], r.sync_waiting)
        outcomes = fam.counter(
            "ariane_replication_sync_sends_total",
            "SYNC_MASTER sends that waited for slaves, by outcome",
            ["result"],
        )
        outcomes.add(["acked"], r.sync_acked)
        outcomes.add(["flush_slave_timeout"], r.sync_timeouts)
        outcomes.add(["slave_not_available"], r.sync_not_available)
        outcomes.add(["in_sync_replicas_not_enough"], r.sync_refused)
        if r.slave_state:
            state = fam.gauge(
                "ariane_replication_slave_state", "1 for the slave's state", ["state"]
            )
            for name in ("IDLE", "CONNECTING", "CHECKING", "TRANSFER", "REFUSED"):
                state.add([name], 1 if r.slave_state == name else 0)
        fam.counter(
            "ariane_replication_received_records_total", "Records a slave appended from its master"
        ).add([], r.replicated_records)
        fam.counter(
            "ariane_replication_received_bytes_total", "Bytes a slave appended from its master"
        ).add([], r.replicated_bytes)
        fam.counter(
            "ariane_replication_master_connections_total", "Connections a slave made to its master"
        ).add([], r.master_connections)

    def _slave_lags(self, fam: Families, replication: BrokerReplication) -> None:
        """Each slave's lag behind this master (off the loop: reads the CommitLog)."""
        lags = replication.slave_lags()
        if not lags:
            return
        by_bytes = fam.gauge(
            "ariane_replication_lag_bytes",
            "CommitLog bytes a slave has not acknowledged",
            ["slave"],
        )
        by_messages = fam.gauge(
            "ariane_replication_lag_messages",
            "Messages a slave has not acknowledged (counted to 20,000, then estimated)",
            ["slave"],
        )
        by_time = fam.gauge(
            "ariane_replication_lag_seconds",
            "Age of the oldest message a slave has not acknowledged",
            ["slave"],
        )
        acked = fam.gauge(
            "ariane_replication_slave_ack_offset",
            "CommitLog offset a slave acknowledged",
            ["slave"],
        )
        for lag in lags:
            by_bytes.add([lag.address], lag.lag_bytes)
            by_messages.add([lag.address], lag.lag_messages)
            by_time.add([lag.address], lag.lag_seconds)
            acked.add([lag.address], lag.ack_offset)

    def _stats_sets(self, fam: Families) -> None:
        keys = fam.gauge("ariane_stats_keys", "Keys tracked per stats item", ["stats_name"])
        dropped = fam.counter(
            "ariane_stats_dropped_total",
            "Increments dropped because a stats item reached its key limit",
            ["stats_name"],
        )
        for name, items in self.broker.stats.sets.items():
            keys.add([name], len(items))
            dropped.add([name], items.dropped)
