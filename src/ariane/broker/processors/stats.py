"""Statistics requests (the stats part of RocketMQ ``AdminBrokerProcessor``):
VIEW_BROKER_STATS_DATA (315), what ``mqadmin statsAll`` reads per topic and group, and
GET_BROKER_CONSUME_STATS (317), every group's offsets on this broker (``mqadmin
brokerConsumeStats``), and Ariane's two summaries (ARIANE_GET_TOPIC_SUMMARY,
ARIANE_GET_GROUP_SUMMARY): a few numbers per topic or group for every topic or group at once,
so that a dashboard lists 1,000 topics or 10,000 groups with one request per broker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ariane.broker.processors import error, ok
from ariane.remoting.dispatch import RequestContext
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.admin_bodies import ConsumeStats, OffsetWrapper
from ariane.remoting.protocol.client_bodies import MessageQueue
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import RemotingCommand
from ariane.remoting.protocol.stats_bodies import (
    GROUP_GET_NUMS,
    TOPIC_PUT_NUMS,
    BrokerStatsData,
    BrokerStatsItem,
    ConsumeStatsList,
)
from ariane.remoting.protocol.summary_bodies import (
    GroupSummary,
    GroupSummaryTable,
    TopicSummary,
    TopicSummaryTable,
)
from ariane.remoting.server import RemotingServer

if TYPE_CHECKING:
    from ariane.broker.context import BrokerContext

__all__ = ["StatsProcessor"]

#: Client ids listed per group in a summary (the count is always exact).
_SUMMARY_CLIENT_IDS = 8


class StatsProcessor:
    """Answers the statistics requests.

    Args:
        broker: the broker whose statistics are read.
    """

    def __init__(self, broker: BrokerContext) -> None:
        self.broker = broker

    def register(self, server: RemotingServer) -> None:
        """Register the handlers on ``server``."""
        server.register_processor(RequestCode.VIEW_BROKER_STATS_DATA, self.view_broker_stats_data)
        server.register_processor(
            RequestCode.GET_BROKER_CONSUME_STATS, self.get_broker_consume_stats
        )
        server.register_processor(RequestCode.ARIANE_GET_TOPIC_SUMMARY, self.get_topic_summary)
        server.register_processor(RequestCode.ARIANE_GET_GROUP_SUMMARY, self.get_group_summary)

    def view_broker_stats_data(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """VIEW_BROKER_STATS_DATA (315): minute, hour and day windows of one stats item;
        SYSTEM_ERROR "The stats <name> <key> not exist" when unknown, as RocketMQ answers."""
        header = h.ViewBrokerStatsDataRequestHeader.from_ext_fields(request.ext_fields)
        windows = self.broker.stats.view(header.stats_name, header.stats_key)
        if windows is None:
            return error(
                ResponseCode.SYSTEM_ERROR,
                f"The stats <{header.stats_name}> <{header.stats_key}> not exist",
            )
        items = [BrokerStatsItem(w.sum, w.tps, w.avgpt) for w in windows]
        return ok(body=BrokerStatsData(*items).encode())

    def get_broker_consume_stats(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """GET_BROKER_CONSUME_STATS (317): ``ConsumeStats`` of every subscription group and
        topic it has offsets for (ordered topics only when ``isOrder``)."""
        header = h.GetConsumeStatsInBrokerHeader.from_ext_fields(request.ext_fields)
        broker = self.broker
        store = broker.store
        body = ConsumeStatsList(broker_addr=broker.broker_addr)
        topics_of = _topics_by_group(broker.offsets.offset_table)
        for group in sorted(broker.groups.table):
            online = broker.clients.consumer_group(group)
            per_group: list[ConsumeStats] = []
            for topic in sorted(topics_of.get(group, ())):
                tc = broker.topics.get(topic)
                if tc is None or (header.is_order and not tc.order):
                    continue
                if (
                    online is not None
                    and online.subscriptions
                    and topic not in online.subscriptions
                ):
                    continue  # RocketMQ skips topics the online group does not subscribe
                tps = 0.0  # nobody consumes now: not the rate of the last minute
                if broker.offsets.consuming(group, topic, online is not None):
                    tps = broker.stats.group_get_tps(group, topic)
                stats = ConsumeStats(consume_tps=tps)
                for queue_id in range(tc.write_queue_nums):
                    max_offset = max(0, store.get_max_offset_in_queue(topic, queue_id))
                    consumer = max(0, broker.offsets.query(group, topic, queue_id))
                    pulled = max(consumer, broker.offsets.pull_offset(group, topic, queue_id))
                    last = 0
                    if consumer > 0:
                        last = max(
                            0, store.get_message_store_timestamp(topic, queue_id, consumer - 1)
                        )
                    mq = MessageQueue(topic, broker.config.broker_name, queue_id)
                    stats.offset_table[mq] = OffsetWrapper(max_offset, consumer, pulled, last)
                    body.total_diff += max_offset - consumer
                    body.total_inflight_diff += pulled - consumer
                per_group.append(stats)
            body.consume_stats_list.append({group: per_group})
        return ok(body=body.encode())

    def _put_24h(self, topic: str) -> int:
        """Messages put in the last 24 h (``statsAll``'s ``compute24HourSum``)."""
        items = self.broker.stats.sets[TOPIC_PUT_NUMS]
        for window in (items.day(topic), items.hour(topic), items.minute(topic)):
            if window is not None and window.sum:
                return int(window.sum)
        return 0

    def get_topic_summary(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """ARIANE_GET_TOPIC_SUMMARY: message count, put TPS and 24 h volume of every topic."""
        broker = self.broker
        store = broker.store
        body = TopicSummaryTable(broker.broker_addr)
        for topic, tc in list(broker.topics.table.items()):
            count = max_sum = last = 0
            for queue_id in range(max(tc.read_queue_nums, tc.write_queue_nums)):
                hi = max(0, store.get_max_offset_in_queue(topic, queue_id))
                if hi == 0:
                    continue
                lo = max(0, store.get_min_offset_in_queue(topic, queue_id))
                count += max(0, hi - lo)
                max_sum += hi
                last = max(last, store.get_message_store_timestamp(topic, queue_id, hi - 1))
            body.table[topic] = TopicSummary(
                count, max_sum, broker.stats.topic_put_tps(topic), self._put_24h(topic), last
            )
        return ok(body=body.encode())

    def get_group_summary(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """ARIANE_GET_GROUP_SUMMARY: settings, online clients, lag and consume TPS of every
        group (one pass over the offset table, not one per group)."""
        broker = self.broker
        store = broker.store
        body = GroupSummaryTable(broker.broker_addr)
        get_nums = broker.stats.sets[GROUP_GET_NUMS]
        topics_of = _topics_by_group(broker.offsets.offset_table)
        for group, cfg in list(broker.groups.table.items()):
            online = broker.clients.consumer_group(group)
            topics = set(topics_of.get(group, ()))
            if online is not None:
                topics.update(online.subscriptions)
            diff = inflight = last = 0
            tps = 0.0
            for topic in topics:
                tc = broker.topics.get(topic)
                if tc is None:
                    continue
                window = None
                if broker.offsets.consuming(group, topic, online is not None):
                    window = get_nums.minute(f"{topic}@{group}")
                tps += 0.0 if window is None else window.tps
                for queue_id in range(tc.write_queue_nums):
                    consumer = broker.offsets.query(group, topic, queue_id)
                    if consumer < 0:
                        continue
                    max_offset = max(0, store.get_max_offset_in_queue(topic, queue_id))
                    pulled = max(consumer, broker.offsets.pull_offset(group, topic, queue_id))
                    diff += max(0, max_offset - consumer)
                    inflight += pulled - consumer
                    if consumer > 0:
                        stamp = store.get_message_store_timestamp(topic, queue_id, consumer - 1)
                        last = max(last, stamp)
            clients = [] if online is None else list(online.channels.values())
            body.table[group] = GroupSummary(
                client_count=len(clients),
                client_ids=tuple(sorted(c.client_id for c in clients)[:_SUMMARY_CLIENT_IDS]),
                consume_type=online.consume_type.name if online is not None and clients else "",
                message_model=online.message_model.name if online is not None and clients else "",
                min_version=min((c.version for c in clients), default=0),
                diff=diff,
                inflight=inflight,
                consume_tps=tps,
                topics=tuple(sorted(topics)),
                last_consume_ms=last,
                orderly=cfg.consume_message_orderly,
                broadcast_enable=cfg.consume_broadcast_enable,
                consume_enable=cfg.consume_enable,
                retry_max_times=cfg.retry_max_times,
                retry_queue_nums=cfg.retry_queue_nums,
            )
        return ok(body=body.encode())


def _topics_by_group(offset_table: dict[str, dict[int, int]]) -> dict[str, set[str]]:
    """Group -> the topics it has offsets for, in one pass over the offset table (not one
    scan per group: 10,000 groups would make that seconds)."""
    topics_of: dict[str, set[str]] = {}
    for key in offset_table:
        topic, _, group = key.partition("@")
        topics_of.setdefault(group, set()).add(topic)
    return topics_of
