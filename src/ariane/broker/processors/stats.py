"""Statistics requests (the stats part of RocketMQ ``AdminBrokerProcessor``):
VIEW_BROKER_STATS_DATA (315), what ``mqadmin statsAll`` reads per topic and group, and
GET_BROKER_CONSUME_STATS (317), every group's offsets on this broker (``mqadmin
brokerConsumeStats``).
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
from ariane.remoting.protocol.stats_bodies import BrokerStatsData, BrokerStatsItem, ConsumeStatsList
from ariane.remoting.server import RemotingServer

if TYPE_CHECKING:
    from ariane.broker.context import BrokerContext

__all__ = ["StatsProcessor"]


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
        for group in sorted(broker.groups.table):
            online = broker.clients.consumer_group(group)
            per_group: list[ConsumeStats] = []
            for topic in sorted(broker.offsets.topics_of_group(group)):
                tc = broker.topics.get(topic)
                if tc is None or (header.is_order and not tc.order):
                    continue
                if (
                    online is not None
                    and online.subscriptions
                    and topic not in online.subscriptions
                ):
                    continue  # RocketMQ skips topics the online group does not subscribe
                stats = ConsumeStats(consume_tps=broker.stats.group_get_tps(group, topic))
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
