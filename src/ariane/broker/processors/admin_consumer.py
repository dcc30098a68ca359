"""Administration of consumer groups, offsets and connections (the consumer part of RocketMQ
``AdminBrokerProcessor`` and ``Broker2Client``): subscription group CRUD, GET_ALL_CONSUMER_OFFSET,
GET_ALL_DELAY_OFFSET, GET_CONSUME_STATS, consumer/producer connection lists,
GET_ALL_PRODUCER_INFO, QUERY_TOPIC_CONSUME_BY_WHO, QUERY_TOPICS_BY_CONSUMER,
QUERY_SUBSCRIPTION_BY_CONSUMER, QUERY_CONSUME_TIME_SPAN, CLONE_GROUP_OFFSET,
INVOKE_BROKER_TO_RESET_OFFSET, and the relays GET_CONSUMER_RUNNING_INFO and
CONSUME_MESSAGE_DIRECTLY.

Offset resets (by time, to the end = "skip accumulated", or one queue to an offset) are
committed on the broker and the online consumers are told with RESET_CONSUMER_CLIENT_OFFSET,
C++ clients in the ``ResetOffsetBodyForC`` list form, Java clients with MessageQueue object
keys; with ``useServerSideResetOffset`` (the default) the next pull of each queue also jumps to
the new offset (PULL_OFFSET_MOVED) unless it already asks for it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ariane.broker.processors import error, ok
from ariane.common.msgid import decode_offset_msg_id
from ariane.common.topics import validate_group
from ariane.errors import (
    ArianeError,
    ConnectionClosedError,
    InvalidArgumentError,
    RequestTimeoutError,
)
from ariane.remoting.dispatch import RequestContext
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol._jsonfields import get_list, parse_object
from ariane.remoting.protocol.admin_bodies import (
    ConsumerConnection,
    ConsumeStats,
    GroupList,
    OffsetWrapper,
    ProducerConnection,
    ProducerInfo,
    ProducerTableInfo,
    QueryConsumeTimeSpanBody,
    QuerySubscriptionResponseBody,
    QueueTimeSpan,
    RemotingConnection,
    ResetOffsetBody,
    ResetOffsetBodyForC,
    SubscriptionGroupConfig,
)
from ariane.remoting.protocol.bodies import TopicList
from ariane.remoting.protocol.client_bodies import MessageQueue
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import LanguageCode, MQVersion, RemotingCommand
from ariane.remoting.server import RemotingServer

if TYPE_CHECKING:
    from ariane.broker.client_manager import ClientChannelInfo
    from ariane.broker.context import BrokerContext

__all__ = ["AdminConsumerProcessor"]

logger = logging.getLogger(__name__)

_RELAY_TIMEOUT_MS = 5000


def _connection(info: ClientChannelInfo) -> RemotingConnection:
    return RemotingConnection(
        info.client_id, info.channel.remote_addr, info.language.name, info.version
    )


class AdminConsumerProcessor:
    """Handles consumer-group administration.

    Args:
        broker: the broker administered.
    """

    def __init__(self, broker: BrokerContext) -> None:
        self.broker = broker

    def register(self, server: RemotingServer) -> None:
        """Register the handlers on ``server``."""
        table: dict[int, Any] = {
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: self.update_group,
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST: self.update_group_list,
            RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: self.get_all_groups,
            RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG: self.get_group,
            RequestCode.DELETE_SUBSCRIPTIONGROUP: self.delete_group,
            RequestCode.GET_ALL_CONSUMER_OFFSET: self.get_all_consumer_offset,
            RequestCode.GET_ALL_DELAY_OFFSET: self.get_all_delay_offset,
            RequestCode.GET_CONSUME_STATS: self.get_consume_stats,
            RequestCode.GET_CONSUMER_CONNECTION_LIST: self.get_consumer_connection_list,
            RequestCode.GET_PRODUCER_CONNECTION_LIST: self.get_producer_connection_list,
            RequestCode.GET_ALL_PRODUCER_INFO: self.get_all_producer_info,
            RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: self.query_topic_consume_by_who,
            RequestCode.QUERY_TOPICS_BY_CONSUMER: self.query_topics_by_consumer,
            RequestCode.QUERY_SUBSCRIPTION_BY_CONSUMER: self.query_subscription_by_consumer,
            RequestCode.QUERY_CONSUME_TIME_SPAN: self.query_consume_time_span,
            RequestCode.CLONE_GROUP_OFFSET: self.clone_group_offset,
            RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: self.reset_offset,
            RequestCode.GET_CONSUMER_RUNNING_INFO: self.get_consumer_running_info,
            RequestCode.CONSUME_MESSAGE_DIRECTLY: self.consume_message_directly,
        }
        for code, handler in table.items():
            server.register_processor(code, handler)

    # -- subscription groups -------------------------------------------------------------------

    async def update_group(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200): body SubscriptionGroupConfig."""
        cfg = SubscriptionGroupConfig.decode(request.body or b"")
        try:
            validate_group(cfg.group_name)
        except InvalidArgumentError as exc:
            return error(ResponseCode.INVALID_PARAMETER, str(exc))
        self.broker.groups.put(cfg)
        await self.broker.groups.file.persist()
        return ok()

    async def update_group_list(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST (225): ``{"groupConfigList": [...]}``."""
        obj = parse_object(request.body or b"{}", "SubscriptionGroupList")
        configs = [
            SubscriptionGroupConfig.from_json(c)
            for c in get_list(obj, "groupConfigList", "SubscriptionGroupList")
        ]
        for cfg in configs:
            try:
                validate_group(cfg.group_name)
            except InvalidArgumentError as exc:
                return error(ResponseCode.INVALID_PARAMETER, str(exc))
        for cfg in configs:
            self.broker.groups.put(cfg)
        await self.broker.groups.file.persist()
        return ok()

    def get_all_groups(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201)."""
        wrapper = self.broker.groups.wrapper()
        ext = h.GetAllSubscriptionGroupResponseHeader(
            total_group_num=len(wrapper.subscription_group_table)
        ).to_ext_fields()
        return ok(ext, wrapper.encode())

    def get_group(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """GET_SUBSCRIPTIONGROUP_CONFIG (352)."""
        header = h.GetSubscriptionGroupConfigRequestHeader.from_ext_fields(request.ext_fields)
        cfg = self.broker.groups.table.get(header.group)
        if cfg is None:
            return error(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"No group in this broker: {header.group}",
            )
        return ok(body=cfg.encode())

    async def delete_group(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """DELETE_SUBSCRIPTIONGROUP (207), optionally with the group's offsets."""
        header = h.DeleteSubscriptionGroupRequestHeader.from_ext_fields(request.ext_fields)
        broker = self.broker
        broker.groups.delete(header.group_name)
        await broker.groups.file.persist()
        if header.clean_offset:
            broker.offsets.remove_group(header.group_name)
            await broker.offsets.persist()
        return ok()

    # -- offsets and stats -----------------------------------------------------------------------

    def get_all_consumer_offset(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """GET_ALL_CONSUMER_OFFSET (43)."""
        return ok(body=self.broker.offsets.encode())

    def get_all_delay_offset(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """GET_ALL_DELAY_OFFSET (45): the delay service's progress per level."""
        return ok(body=self.broker.schedule.encode())

    def _subscribed_elsewhere(self, group: str, topic: str) -> bool:
        """The group is online but does not subscribe ``topic`` (RocketMQ skips such topics)."""
        info = self.broker.clients.consumer_group(group)
        return info is not None and bool(info.subscriptions) and topic not in info.subscriptions

    def get_consume_stats(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """GET_CONSUME_STATS (208): broker/consumer/pull offsets per queue, MessageQueue-keyed."""
        header = h.GetConsumeStatsRequestHeader.from_ext_fields(request.ext_fields)
        broker = self.broker
        group = header.consumer_group
        if header.topic:
            topics = [header.topic]
        elif header.topic_list:
            topics = [t.strip() for t in header.topic_list.split(",") if t.strip()]
        else:
            topics = sorted(broker.offsets.topics_of_group(group))
        stats = ConsumeStats()
        store = broker.store
        online = broker.clients.consumer_group(group) is not None
        for topic in topics:
            tc = broker.topics.get(topic)
            if tc is None or self._subscribed_elsewhere(group, topic):
                continue
            if broker.offsets.consuming(group, topic, online):  # else 0, not the last minute's
                stats.consume_tps += broker.stats.group_get_tps(group, topic)
            for queue_id in range(tc.read_queue_nums):
                consumer = max(0, broker.offsets.query(group, topic, queue_id))
                last = 0
                if consumer > 0:
                    last = max(0, store.get_message_store_timestamp(topic, queue_id, consumer - 1))
                mq = MessageQueue(topic, broker.config.broker_name, queue_id)
                stats.offset_table[mq] = OffsetWrapper(
                    max(0, store.get_max_offset_in_queue(topic, queue_id)),
                    consumer,
                    max(0, broker.offsets.pull_offset(group, topic, queue_id)),
                    last,
                )
        return ok(body=stats.encode())

    def query_consume_time_span(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """QUERY_CONSUME_TIME_SPAN (303)."""
        header = h.QueryConsumeTimeSpanRequestHeader.from_ext_fields(request.ext_fields)
        broker = self.broker
        topic, group = header.topic, header.group
        tc = broker.topics.get(topic)
        if tc is None:
            return error(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        store = broker.store
        body = QueryConsumeTimeSpanBody()
        for queue_id in range(tc.write_queue_nums):
            min_ts = store.get_earliest_message_time(topic, queue_id)
            max_offset = store.get_max_offset_in_queue(topic, queue_id)
            max_ts = store.get_message_store_timestamp(topic, queue_id, max_offset - 1)
            consumer = broker.offsets.query(group, topic, queue_id)
            consume_ts = (
                store.get_message_store_timestamp(topic, queue_id, consumer - 1)
                if consumer > 0
                else min_ts
            )
            mq = MessageQueue(topic, broker.config.broker_name, queue_id)
            delay = max_ts - consume_ts if max_ts > 0 and consume_ts > 0 else 0
            body.consume_time_span_set.append(QueueTimeSpan(mq, min_ts, max_ts, consume_ts, delay))
        return ok(body=body.encode())

    async def clone_group_offset(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """CLONE_GROUP_OFFSET (314)."""
        header = h.CloneGroupOffsetRequestHeader.from_ext_fields(request.ext_fields)
        broker = self.broker
        topics = (
            [header.topic]
            if header.topic
            else sorted(broker.offsets.topics_of_group(header.src_group))
        )
        for topic in topics:
            if broker.topics.get(topic) is None:
                continue
            if not header.offline and self._subscribed_elsewhere(header.src_group, topic):
                continue
            broker.offsets.clone(header.src_group, header.dest_group, topic)
        await broker.offsets.persist()
        return ok()

    async def reset_offset(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """INVOKE_BROKER_TO_RESET_OFFSET (222): reset a group's offsets of a topic to a time
        (``timestamp``; -1 = the end, i.e. skip the accumulated messages) or, for one queue,
        to ``offset``.

        Online consumers are told at once (RESET_CONSUMER_CLIENT_OFFSET) and the offsets are
        committed on the broker; with ``useServerSideResetOffset`` the next pull of each queue
        also jumps there (unless it already asks for that offset), so clients that ignore the
        notification follow too. Without it an offline group is refused (CONSUMER_NOT_ONLINE),
        as RocketMQ 4.x does.
        """
        header = h.ResetOffsetRequestHeader.from_ext_fields(request.ext_fields)
        broker = self.broker
        group, topic = header.group, header.topic
        tc = broker.topics.get(topic)
        if tc is None:
            return error(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        if broker.groups.table.get(group) is None and not broker.offsets.query_all(group, topic):
            return error(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"Group {group} does not exist")
        table = self._reset_targets(header, tc.read_queue_nums)
        if isinstance(table, RemotingCommand):
            return table
        server_side = broker.config.use_server_side_reset_offset
        online = broker.clients.consumer_group(group)
        if online is None and not server_side:
            return error(
                ResponseCode.CONSUMER_NOT_ONLINE,
                f"Consumer not online, so can not reset offset, Group: {group}",
            )
        for mq, offset in table.items():
            if server_side:
                broker.offsets.assign_reset(group, topic, mq.queue_id, offset)
            else:
                broker.offsets.commit_reset(group, topic, mq.queue_id, offset)
        await broker.offsets.persist()
        if online is not None:
            self._tell_clients_to_reset(online.channels.values(), header, table)
        logger.info(
            "offsets of %s on %s reset (timestamp %d): %s", group, topic, header.timestamp,
            {mq.queue_id: o for mq, o in table.items()},
        )  # fmt: skip
        return ok(body=ResetOffsetBody(table).encode())

    def _reset_targets(
        self, header: h.ResetOffsetRequestHeader, queue_nums: int
    ) -> dict[MessageQueue, int] | RemotingCommand:
        """The offset each queue is reset to (``isForce`` false: never forwards)."""
        broker = self.broker
        store = broker.store
        topic = header.topic
        explicit = header.offset is not None and header.offset != -1 and header.queue_id >= 0
        queue_ids = [header.queue_id] if header.queue_id >= 0 else list(range(queue_nums))
        table: dict[MessageQueue, int] = {}
        for queue_id in queue_ids:
            lo = store.get_min_offset_in_queue(topic, queue_id)
            hi = store.get_max_offset_in_queue(topic, queue_id)
            if explicit:
                assert header.offset is not None
                target = header.offset
                if target < lo or target > hi:
                    return error(
                        ResponseCode.SYSTEM_ERROR,
                        f"Target offset {target} not in consume queue range [{lo}-{hi}]",
                    )
            elif header.timestamp == -1:
                target = hi
            else:
                target = store.get_offset_in_queue_by_time(topic, queue_id, header.timestamp)
            current = broker.offsets.query(header.group, topic, queue_id)
            if not header.is_force and 0 <= current <= target:
                target = current
            table[MessageQueue(topic, broker.config.broker_name, queue_id)] = max(0, target)
        return table

    def _tell_clients_to_reset(
        self, infos: Any, header: h.ResetOffsetRequestHeader, table: dict[MessageQueue, int]
    ) -> None:
        ext = header.to_ext_fields()
        java_body = ResetOffsetBody(table).encode()
        cpp_body = ResetOffsetBodyForC(table).encode()
        for info in list(infos):
            body = cpp_body if info.language is LanguageCode.CPP else java_body
            request = RemotingCommand.request(
                RequestCode.RESET_CONSUMER_CLIENT_OFFSET, dict(ext), body
            )
            try:
                self.broker.remoting.invoke_oneway(info.channel, request)
            except ConnectionClosedError:
                continue

    # -- connections ---------------------------------------------------------------------------

    def get_consumer_connection_list(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """GET_CONSUMER_CONNECTION_LIST (203)."""
        header = h.GetConsumerConnectionListRequestHeader.from_ext_fields(request.ext_fields)
        info = self.broker.clients.consumer_group(header.consumer_group)
        if info is None:
            return error(
                ResponseCode.CONSUMER_NOT_ONLINE,
                f"the consumer group[{header.consumer_group}] not online",
            )
        body = ConsumerConnection(
            [_connection(ci) for ci in info.channels.values()],
            dict(info.subscriptions),
            info.consume_type,
            info.message_model,
            info.consume_from_where,
        )
        return ok(body=body.encode())

    def get_producer_connection_list(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """GET_PRODUCER_CONNECTION_LIST (204)."""
        header = h.GetProducerConnectionListRequestHeader.from_ext_fields(request.ext_fields)
        table = self.broker.clients.producers.get(header.producer_group)
        if not table:
            return error(
                ResponseCode.SYSTEM_ERROR, f"the producer group[{header.producer_group}] not exist"
            )
        return ok(body=ProducerConnection([_connection(i) for i in table.values()]).encode())

    def get_all_producer_info(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """GET_ALL_PRODUCER_INFO (328)."""
        now_ms = self.broker.clock.now_ms()
        mono = self.broker.clock.monotonic()
        data = {
            group: [
                ProducerInfo(
                    i.client_id,
                    i.channel.remote_addr,
                    i.language.name,
                    i.version,
                    int(now_ms - (mono - i.last_update_s) * 1000),
                )
                for i in table.values()
            ]
            for group, table in self.broker.clients.producers.items()
        }
        return ok(body=ProducerTableInfo(data).encode())

    def query_topic_consume_by_who(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """QUERY_TOPIC_CONSUME_BY_WHO (300)."""
        header = h.QueryTopicConsumeByWhoRequestHeader.from_ext_fields(request.ext_fields)
        broker = self.broker
        groups = broker.clients.groups_subscribing(header.topic)
        groups |= broker.offsets.groups_of_topic(header.topic)
        return ok(body=GroupList(sorted(groups)).encode())

    def query_topics_by_consumer(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """QUERY_TOPICS_BY_CONSUMER (343)."""
        header = h.QueryTopicsByConsumerRequestHeader.from_ext_fields(request.ext_fields)
        topics = sorted(self.broker.offsets.topics_of_group(header.group))
        return ok(body=TopicList(topics, self.broker.broker_addr).encode())

    def query_subscription_by_consumer(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """QUERY_SUBSCRIPTION_BY_CONSUMER (345)."""
        header = h.QuerySubscriptionByConsumerRequestHeader.from_ext_fields(request.ext_fields)
        info = self.broker.clients.consumer_group(header.group)
        sub = info.subscriptions.get(header.topic or "") if info is not None else None
        if sub is None:
            return error(
                ResponseCode.SUBSCRIPTION_NOT_EXIST,
                f"the consumer group[{header.group}] has no subscription to {header.topic}",
            )
        body = QuerySubscriptionResponseBody(sub, header.group, header.topic or "")
        return ok(body=body.encode())

    # -- relays to clients -----------------------------------------------------------------------

    async def _relay(
        self, group: str, client_id: str, request: RemotingCommand, body: bytes | None
    ) -> RemotingCommand:
        info = self.broker.clients.find_consumer(group, client_id)
        if info is None:
            return error(
                ResponseCode.SYSTEM_ERROR, f"The Consumer <{group}> <{client_id}> not online"
            )
        if info.version < MQVersion.V3_1_8_SNAPSHOT:
            return error(
                ResponseCode.SYSTEM_ERROR,
                f"The Consumer <{group}> Version <{info.version}> too low to finish, please upgrade",
            )
        relayed = RemotingCommand.request(request.code, dict(request.ext_fields), body)
        try:
            answer = await self.broker.remoting.invoke(info.channel, relayed, _RELAY_TIMEOUT_MS)
        except RequestTimeoutError:
            return error(ResponseCode.CONSUME_MSG_TIMEOUT, f"consumer <{client_id}> timed out")
        except ArianeError as exc:
            return error(ResponseCode.SYSTEM_ERROR, f"invoke consumer <{client_id}> failed: {exc}")
        return RemotingCommand.response(answer.code, answer.remark, answer.ext_fields, answer.body)

    async def get_consumer_running_info(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """GET_CONSUMER_RUNNING_INFO (307): asked of the consumer, answered verbatim."""
        header = h.GetConsumerRunningInfoRequestHeader.from_ext_fields(request.ext_fields)
        return await self._relay(header.consumer_group, header.client_id, request, request.body)

    async def consume_message_directly(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """CONSUME_MESSAGE_DIRECTLY (309): the consumer consumes one stored message now."""
        header = h.ConsumeMessageDirectlyResultRequestHeader.from_ext_fields(request.ext_fields)
        try:
            offset = decode_offset_msg_id(header.msg_id or "").phys_offset
        except InvalidArgumentError as exc:
            return error(ResponseCode.INVALID_PARAMETER, str(exc))
        record = self.broker.store.look_message_by_offset(offset)
        if record is None:
            return error(ResponseCode.SYSTEM_ERROR, f"can not find message by id {header.msg_id}")
        request.ext_fields["brokerName"] = self.broker.config.broker_name
        return await self._relay(header.consumer_group, header.client_id or "", request, record)
