"""The dashboard's view of a cluster: the rows its list pages show (brokers, topics, consumer
groups, producers), each list loaded with one request per broker and cached briefly.

How it works: ``ClusterData`` wraps one started :class:`ariane.client.Admin`. A list is built
from the bulk calls of ``AdminBulk`` (whole topic and group tables, Ariane's topic and group
summaries, GET_BROKER_CONSUME_STATS as the fallback for brokers without summaries), each
broker under the dashboard's request deadline, so a page never sends one request per topic
or group and a dead broker costs one deadline, not one per row. What a broker failed to
answer travels with the rows (``Snapshot.errors``) and is shown above the table. Lists are
kept in a :class:`~ariane.dashboard.cache.TtlCache`; writes made through the dashboard
invalidate what they change.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, NamedTuple, TypeVar

from ariane.client import Admin
from ariane.client.broker_status import broker_row
from ariane.common.topics import DLQ_PREFIX, RETRY_PREFIX, SYSTEM_TOPICS, is_system_topic
from ariane.common.versions import version_desc
from ariane.dashboard.cache import TtlCache
from ariane.dashboard.config import DashboardConfig
from ariane.remoting.protocol.admin_bodies import SubscriptionGroupConfig
from ariane.remoting.protocol.bodies import TopicConfig
from ariane.remoting.protocol.summary_bodies import GroupSummary, TopicSummary

__all__ = [
    "TOPIC_KINDS",
    "BrokerRow",
    "ClusterData",
    "ConsumerOffset",
    "GroupRow",
    "ProducerRow",
    "Snapshot",
    "TopicRow",
    "topic_kind",
]

logger = logging.getLogger(__name__)
T = TypeVar("T")

#: rocketmq-dashboard's topic types (``/topic/list.queryTopicType``).
TOPIC_KINDS = ("NORMAL", "FIFO", "DELAY", "TRANSACTION", "RETRY", "DLQ", "SYSTEM")
_MESSAGE_TYPES = {"FIFO": "FIFO", "DELAY": "DELAY", "TRANSACTION": "TRANSACTION"}


def topic_kind(topic: str, config: TopicConfig | None) -> str:
    """The topic's type as rocketmq-dashboard names it."""
    if topic.startswith(RETRY_PREFIX):
        return "RETRY"
    if topic.startswith(DLQ_PREFIX):
        return "DLQ"
    if is_system_topic(topic) or topic in SYSTEM_TOPICS:
        return "SYSTEM"
    if config is not None:
        kind = _MESSAGE_TYPES.get(config.attributes.get("message.type", "").upper())
        if kind is not None:
            return kind
        if config.order:
            return "FIFO"
    return "NORMAL"


@dataclass(frozen=True, slots=True)
class Snapshot(Generic[T]):
    """Rows of a list and what went wrong while loading them.

    Attributes:
        rows: every row (unfiltered; pages filter, sort and cut them).
        errors: broker address -> why it did not answer.
        taken_ms: when the rows were loaded.
    """

    rows: list[T]
    errors: dict[str, str] = field(default_factory=dict)
    taken_ms: int = 0


@dataclass(frozen=True, slots=True)
class BrokerRow:
    """One broker of the Cluster page (``clusterList``)."""

    cluster: str
    broker_name: str
    broker_id: int
    addr: str
    role: str
    reachable: bool
    error: str = ""
    version: str = ""
    in_tps: float = 0.0
    out_tps: float = 0.0
    in_today: int = 0
    out_today: int = 0
    in_yesterday: int = 0
    out_yesterday: int = 0
    hours_of_data: float = 0.0
    permission: int = 0
    ha: str = ""

    def to_json(self) -> dict[str, Any]:
        """JSON form (camelCase, as the API answers)."""
        return {
            "cluster": self.cluster,
            "brokerName": self.broker_name,
            "brokerId": self.broker_id,
            "addr": self.addr,
            "role": self.role,
            "reachable": self.reachable,
            "error": self.error,
            "version": self.version,
            "inTps": self.in_tps,
            "outTps": self.out_tps,
            "inTotalToday": self.in_today,
            "outTotalToday": self.out_today,
            "inTotalYesterday": self.in_yesterday,
            "outTotalYesterday": self.out_yesterday,
            "hoursOfData": self.hours_of_data,
            "brokerPermission": self.permission,
            "ha": self.ha,
        }


@dataclass(frozen=True, slots=True)
class TopicRow:
    """One topic of the Topic page; the counters are ``None`` when no broker summarised
    them."""

    topic: str
    kind: str
    brokers: tuple[str, ...]
    read_queues: int
    write_queues: int
    perm: int
    message_count: int | None = None
    put_tps: float | None = None
    put_24h: int | None = None
    last_update_ms: int = 0

    def to_json(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "topic": self.topic,
            "type": self.kind,
            "brokers": list(self.brokers),
            "readQueueNums": self.read_queues,
            "writeQueueNums": self.write_queues,
            "perm": self.perm,
            "messageCount": self.message_count,
            "putTps": self.put_tps,
            "put24h": self.put_24h,
            "lastUpdateTimestamp": self.last_update_ms,
        }


class GroupRow(NamedTuple):
    """One consumer group of the Consumer page; ``clients``, ``diff`` and ``tps`` are
    ``None`` when no broker told them (a NamedTuple: 10,000 are built per load)."""

    group: str
    brokers: tuple[str, ...]
    clients: int | None
    consume_type: str
    message_model: str
    version: str
    diff: int | None
    tps: float | None
    topics: tuple[str, ...]
    orderly: bool
    broadcast_enable: bool
    consume_enable: bool
    retry_max_times: int
    retry_queue_nums: int
    last_consume_ms: int = 0
    client_ids: tuple[str, ...] = ()

    @property
    def system(self) -> bool:
        """A group of the broker itself or of admin tools."""
        return self.group in _SYSTEM_GROUPS or self.group.startswith("CID_RMQ_SYS_")

    def to_json(self) -> dict[str, Any]:
        """JSON form (rocketmq-dashboard's names where it has them)."""
        return {
            "group": self.group,
            "brokers": list(self.brokers),
            "count": self.clients,
            "consumeType": self.consume_type,
            "messageModel": self.message_model,
            "version": self.version,
            "diffTotal": self.diff,
            "consumeTps": self.tps,
            "topics": list(self.topics),
            "consumeMessageOrderly": self.orderly,
            "consumeBroadcastEnable": self.broadcast_enable,
            "consumeEnable": self.consume_enable,
            "retryMaxTimes": self.retry_max_times,
            "retryQueueNums": self.retry_queue_nums,
            "lastConsumeTimestamp": self.last_consume_ms,
            "clientIds": list(self.client_ids),
            "system": self.system,
        }


_SYSTEM_GROUPS = frozenset(
    {
        "TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "__MONITOR_CONSUMER", "CLIENT_INNER_PRODUCER",
        "SELF_TEST_P_GROUP", "SELF_TEST_C_GROUP", "CID_ONS-HTTP-PROXY", "CID_ONSAPI_PERMISSION",
        "CID_ONSAPI_OWNER", "CID_ONSAPI_PULL", "CID_RMQ_SYS_TRANS", "CID_SYS_RMQ_TRANS",
        "RMQ_SYS_TRACE_GROUP",
    }
)  # fmt: skip


class ConsumerOffset(NamedTuple):
    """A group's consumer offset (the next message it will consume) of one queue."""

    group: str
    topic: str
    broker_name: str
    queue_id: int
    offset: int


@dataclass(frozen=True, slots=True)
class ProducerRow:
    """One online producer connection (``producerConnection``)."""

    group: str
    client_id: str
    client_addr: str
    language: str
    version: str
    broker_addr: str
    last_update_ms: int = 0

    def to_json(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "group": self.group,
            "clientId": self.client_id,
            "clientAddr": self.client_addr,
            "language": self.language,
            "version": self.version,
            "brokerAddr": self.broker_addr,
            "lastUpdateTimestamp": self.last_update_ms,
        }


class ClusterData:
    """Cached lists of a cluster's brokers, topics, groups and producers.

    Args:
        admin: a started admin client.
        config: the dashboard's settings (deadline, cache ages).
        clock: monotonic seconds (the cache's clock).
        now_ms: wall-clock milliseconds.
    """

    def __init__(
        self,
        admin: Admin,
        config: DashboardConfig,
        *,
        clock: Callable[[], float] = time.monotonic,
        now_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self.admin = admin
        self.config = config
        self.now_ms = now_ms
        self.timeout_ms = config.request_timeout_ms
        self.cache = TtlCache(clock, config.cache_fresh_ms / 1000, config.cache_stale_ms / 1000)

    def invalidate(self, *what: str) -> None:
        """Forget cached lists (``"topics"``, ``"groups"``...; all when none named)."""
        self.cache.invalidate(*what)

    # -- brokers --------------------------------------------------------------------------------

    async def brokers(self) -> Snapshot[BrokerRow]:
        """Every broker of every cluster with its runtime numbers."""
        return await self.cache.get("brokers", self._load_brokers)

    async def _load_brokers(self) -> Snapshot[BrokerRow]:
        info = await self.admin.cluster_info()
        addrs = [a for bd in info.broker_addr_table.values() for a in bd.broker_addrs.values()]
        answers = await self.admin.runtime_infos(addrs, timeout_ms=self.timeout_ms)
        cluster_of = {b: c for c, names in info.cluster_addr_table.items() for b in names}
        now = self.now_ms()
        rows: list[BrokerRow] = []
        for name, bd in sorted(info.broker_addr_table.items()):
            for bid, addr in sorted(bd.broker_addrs.items()):
                rt = answers.values.get(addr)
                row = broker_row(cluster_of.get(name, bd.cluster), name, bid, addr, rt, now)
                rows.append(_broker_row(row, rt, answers.errors.get(addr, "")))
        return Snapshot(rows, answers.errors, now)

    # -- topics ---------------------------------------------------------------------------------

    async def topics(self) -> Snapshot[TopicRow]:
        """Every topic of every master, with its counters where the brokers summarise them."""
        return await self.cache.get("topics", self._load_topics)

    async def _load_topics(self) -> Snapshot[TopicRow]:
        configs = await self.admin.all_topic_configs(timeout_ms=self.timeout_ms)
        summaries = await self.admin.topic_summaries(timeout_ms=self.timeout_ms)
        names = await self._broker_names()
        per_topic: dict[str, list[tuple[str, TopicConfig]]] = {}
        for addr, wrapper in configs.values.items():
            for topic, tc in wrapper.topic_config_table.items():
                per_topic.setdefault(topic, []).append((names.get(addr, addr), tc))
        counters: dict[str, list[TopicSummary]] = {}
        for table in summaries.values.values():
            for topic, summary in table.table.items():
                counters.setdefault(topic, []).append(summary)
        rows = [
            _topic_row(topic, entries, counters.get(topic)) for topic, entries in per_topic.items()
        ]
        errors = dict(configs.errors)
        errors.update(_unsupported(summaries.errors, configs.errors, "topic counters"))
        return Snapshot(rows, errors, self.now_ms())

    async def _broker_names(self) -> dict[str, str]:
        info = await self.admin.cluster_info()
        return {
            a: name for name, bd in info.broker_addr_table.items() for a in bd.broker_addrs.values()
        }

    # -- consumer groups ------------------------------------------------------------------------

    async def groups(self) -> Snapshot[GroupRow]:
        """Every subscription group of every master with clients, lag and TPS."""
        return await self.cache.get("groups", self._load_groups)

    async def _load_groups(self) -> Snapshot[GroupRow]:
        summaries = await self.admin.group_summaries(timeout_ms=self.timeout_ms)
        names = await self._broker_names()
        per_group: dict[str, list[tuple[str, GroupSummary]]] = {}
        for addr, table in summaries.values.items():
            name = names.get(addr, addr)
            for group, summary in table.table.items():
                per_group.setdefault(group, []).append((name, summary))
        errors: dict[str, str] = {}
        if summaries.errors:  # brokers without Ariane's summary (RocketMQ's own): the tables
            errors.update(
                await self._groups_without_summary(list(summaries.errors), names, per_group)
            )
        rows = [_group_row(g, entries) for g, entries in per_group.items()]
        return Snapshot(rows, errors, self.now_ms())

    async def _groups_without_summary(
        self,
        addrs: list[str],
        names: dict[str, str],
        per_group: dict[str, list[tuple[str, GroupSummary]]],
    ) -> dict[str, str]:
        """Groups of ``addrs`` from GET_ALL_SUBSCRIPTIONGROUP_CONFIG, lag and TPS from
        GET_BROKER_CONSUME_STATS (no client information); returns the brokers that failed."""
        api, t = self.admin.api, self.timeout_ms
        configs = await self.admin.each_broker(
            lambda a: api.get_all_subscription_group(a, t), addrs, timeout_ms=t
        )
        stats = await self.admin.each_broker(
            lambda a: api.get_broker_consume_stats(a, timeout_ms=t), configs.values, timeout_ms=t
        )
        progress: dict[tuple[str, str], list[Any]] = {}
        for addr, table in stats.values.items():
            for entry in table.consume_stats_list:
                for group, per_topic in entry.items():
                    progress.setdefault((addr, group), []).extend(per_topic)
        for addr, wrapper in configs.values.items():
            for group, cfg in wrapper.subscription_group_table.items():
                summary = _summary_of_stats(cfg, progress.get((addr, group), []))
                per_group.setdefault(group, []).append((names.get(addr, addr), summary))
        return {**configs.errors, **stats.errors}

    # -- consumer offsets -----------------------------------------------------------------------

    async def consumer_offsets(self) -> Snapshot[ConsumerOffset]:
        """Every group's consumer offset of every queue on every master, from
        GET_BROKER_CONSUME_STATS (one request per broker, not one per group), cached like the
        lists (a reload at 10,000 groups costs a few hundred ms: no page load waits for it)."""
        return await self.cache.get("consumerOffsets", self._load_consumer_offsets)

    async def _load_consumer_offsets(self) -> Snapshot[ConsumerOffset]:
        answers = await self.admin.all_consume_stats(timeout_ms=self.timeout_ms)
        rows = [
            ConsumerOffset(group, mq.topic, mq.broker_name, mq.queue_id, w.consumer_offset)
            for table in answers.values.values()
            for entry in table.consume_stats_list
            for group, per_topic in entry.items()
            for stats in per_topic
            for mq, w in stats.offset_table.items()
        ]
        return Snapshot(rows, answers.errors, self.now_ms())

    # -- producers ------------------------------------------------------------------------------

    async def producers(self) -> Snapshot[ProducerRow]:
        """Every online producer connection of every master."""
        return await self.cache.get("producers", self._load_producers)

    async def _load_producers(self) -> Snapshot[ProducerRow]:
        answers = await self.admin.all_producers(timeout_ms=self.timeout_ms)
        rows = [
            ProducerRow(
                group,
                p.client_id,
                p.remote_ip,
                p.language,
                version_desc(p.version),
                addr,
                p.last_update_timestamp,
            )
            for addr, table in answers.values.items()
            for group, infos in table.data.items()
            for p in infos
        ]
        return Snapshot(rows, answers.errors, self.now_ms())


def _unsupported(errors: dict[str, str], already: dict[str, str], what: str) -> dict[str, str]:
    """Errors of an optional request, minus brokers already reported, worded as such."""
    return {a: f"{what} unavailable: {e}" for a, e in errors.items() if a not in already}


def _broker_row(row: dict[str, Any], rt: dict[str, str] | None, error: str) -> BrokerRow:
    bid = int(row["brokerId"])
    role = (rt or {}).get("brokerRole") or ("MASTER" if bid == 0 else "SLAVE")
    ha = _ha_text(rt or {})
    if not row.get("reachable"):
        return BrokerRow(
            row["cluster"], row["brokerName"], bid, row["addr"], role, False,
            error or "did not answer",
        )  # fmt: skip
    return BrokerRow(
        row["cluster"], row["brokerName"], bid, row["addr"], role, True, "",
        row["version"], row["inTps"], row["outTps"], row["inTotalToday"], row["outTotalToday"],
        row["inTotalYesterday"], row["outTotalYesterday"], row["hoursOfData"],
        row["brokerPermission"], ha,
    )  # fmt: skip


def _ha_text(rt: dict[str, str]) -> str:
    """The replication state of GET_BROKER_RUNTIME_INFO in a few words (issue 13's keys)."""
    if "haConnectionCount" in rt:
        text = f"{rt['haConnectionCount']} slave(s), {rt.get('inSyncSlaveNums', '0')} in sync"
        behind = rt.get("slaveFallBehindMuch", "0")
        return text + (f", {behind} bytes behind" if behind not in ("", "0") else "")
    if rt.get("masterAddr"):
        state = rt.get("haClientState", "")
        return f"master {rt['masterAddr']}" + (f" ({state})" if state else "")
    return ""


def _topic_row(
    topic: str, entries: list[tuple[str, TopicConfig]], counters: list[TopicSummary] | None
) -> TopicRow:
    first = entries[0][1]
    row = TopicRow(
        topic,
        topic_kind(topic, first),
        tuple(sorted(name for name, _ in entries)),
        sum(tc.read_queue_nums for _, tc in entries),
        sum(tc.write_queue_nums for _, tc in entries),
        first.perm,
    )
    if not counters:
        return row
    return TopicRow(
        row.topic, row.kind, row.brokers, row.read_queues, row.write_queues, row.perm,
        sum(c.message_count for c in counters), sum(c.put_tps for c in counters),
        sum(c.put_24h for c in counters), max(c.last_update_ms for c in counters),
    )  # fmt: skip


def _summary_of_stats(cfg: SubscriptionGroupConfig, per_topic: list[Any]) -> GroupSummary:
    """A group summary from its config and GET_BROKER_CONSUME_STATS (clients unknown: -1)."""
    diff = sum(
        max(0, w.broker_offset - w.consumer_offset)
        for s in per_topic
        for w in s.offset_table.values()
    )
    topics = tuple(sorted({mq.topic for s in per_topic for mq in s.offset_table}))
    return GroupSummary(
        client_count=-1, diff=diff, consume_tps=sum(s.consume_tps for s in per_topic),
        topics=topics, orderly=cfg.consume_message_orderly,
        broadcast_enable=cfg.consume_broadcast_enable, consume_enable=cfg.consume_enable,
        retry_max_times=cfg.retry_max_times, retry_queue_nums=cfg.retry_queue_nums,
    )  # fmt: skip


def _group_row(group: str, entries: list[tuple[str, GroupSummary]]) -> GroupRow:
    first = entries[0][1]
    if len(entries) == 1:  # the common case, kept cheap for 10,000 groups
        told = first.client_count >= 0
        online = told and first.client_count > 0
        return GroupRow(
            group, (entries[0][0],), first.client_count if told else None,
            first.consume_type if online else "", first.message_model if online else "",
            version_desc(first.min_version) if first.min_version > 0 else "",
            first.diff, first.consume_tps, first.topics, first.orderly, first.broadcast_enable,
            first.consume_enable, first.retry_max_times, first.retry_queue_nums,
            first.last_consume_ms, first.client_ids if online else (),
        )  # fmt: skip
    found = [s for _, s in entries]
    known = [s for s in found if s.client_count >= 0]
    versions = [s.min_version for s in known if s.min_version > 0]
    live = [s for s in known if s.client_count > 0]
    return GroupRow(
        group=group,
        brokers=tuple(sorted(name for name, _ in entries)),
        clients=max(s.client_count for s in known) if known else None,
        consume_type=live[0].consume_type if live else "",
        message_model=live[0].message_model if live else "",
        version=version_desc(min(versions)) if versions else "",
        diff=sum(s.diff for s in found),
        tps=sum(s.consume_tps for s in found),
        topics=tuple(sorted({t for s in found for t in s.topics})),
        orderly=first.orderly,
        broadcast_enable=first.broadcast_enable,
        consume_enable=first.consume_enable,
        retry_max_times=first.retry_max_times,
        retry_queue_nums=first.retry_queue_nums,
        last_consume_ms=max(s.last_consume_ms for s in found),
        client_ids=tuple(sorted({c for s in live for c in s.client_ids})),
    )
