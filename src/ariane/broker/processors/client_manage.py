"""Client registration: HEART_BEAT, UNREGISTER_CLIENT and CHECK_CLIENT_CONFIG (RocketMQ
``ClientManageProcessor``).

A heartbeat registers the connection under each producer and consumer group it reports. For a
consumer group it also makes sure the group's configuration (auto-created by default) and its
retry topic ``%RETRY%<group>`` exist; when the group's set of consumers or topics changes,
the group's members are told (NOTIFY_CONSUMER_IDS_CHANGED) so they rebalance at once. C++
clients send the enums as integers and ``subVersion`` as a string; both are accepted.
Heartbeat v2 (subscriptions omitted when unchanged) is not advertised, so clients send full
heartbeats; a ``withoutSub`` heartbeat keeps the subscriptions already known.

SQL92 subscriptions are compiled when they arrive: CHECK_CLIENT_CONFIG (what Java clients ask
before subscribing) answers SYSTEM_ERROR without ``enablePropertyFilter`` and
SUBSCRIPTION_PARSE_FAILED with the compiler's message for an invalid expression. A heartbeat
carrying such a subscription still registers everything (its producers and other groups keep
working; pulls of the bad subscription get the same error) and is answered with that error.
"""

from __future__ import annotations

from typing import Protocol

from ariane.broker.context import BrokerContext
from ariane.broker.processors import error, ok
from ariane.broker.processors.pull import PullMessageProcessor
from ariane.common.sysflag import PERM_READ, PERM_WRITE
from ariane.common.topics import retry_topic
from ariane.remoting.dispatch import RequestContext
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.client_bodies import (
    CheckClientRequestBody,
    ConsumeType,
    HeartbeatData,
)
from ariane.remoting.protocol.codes import RequestCode
from ariane.remoting.protocol.command import RemotingCommand
from ariane.remoting.server import RemotingServer

__all__ = ["ClientManageBrokerContext", "ClientManageProcessor"]


class ClientManageBrokerContext(BrokerContext, Protocol):
    """A broker with a pull processor (whose filters check the subscriptions)."""

    pull_processor: PullMessageProcessor


class ClientManageProcessor:
    """Handles heartbeats and client unregistration.

    Args:
        broker: the broker whose client registry, groups and topics are used.
    """

    def __init__(self, broker: ClientManageBrokerContext) -> None:
        self.broker = broker

    def register(self, server: RemotingServer) -> None:
        """Register the handlers on ``server``."""
        server.register_processor(RequestCode.HEART_BEAT, self.heartbeat)
        server.register_processor(RequestCode.UNREGISTER_CLIENT, self.unregister_client)
        server.register_processor(RequestCode.CHECK_CLIENT_CONFIG, self.check_client_config)

    def heartbeat(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """HEART_BEAT (34)."""
        data = HeartbeatData.decode(request.body or b"")
        broker = self.broker
        clients = broker.clients
        info = clients.client_info(ctx.channel, data.client_id, request.language, request.version)
        for consumer in data.consumer_data_set:
            if (
                broker.config.reject_pull_consumer_enable
                and consumer.consume_type is ConsumeType.CONSUME_ACTIVELY
            ):
                continue
            group = consumer.group_name
            cfg = broker.groups.find(group)
            notify = broker.config.notify_consumer_ids_changed_enable
            if cfg is not None:
                notify = notify and cfg.notify_consumer_ids_changed_enable
                if cfg.retry_queue_nums > 0:
                    broker.topics.create_in_send_back(
                        retry_topic(group), cfg.retry_queue_nums, PERM_READ | PERM_WRITE
                    )
            group_info = clients.consumer_group(group)
            subs = consumer.subscription_data_set
            if data.without_sub and group_info is not None:
                subs = list(group_info.subscriptions.values())
            clients.register_consumer(
                group, info, consumer.consume_type, consumer.message_model,
                consumer.consume_from_where, subs, notify=notify,
            )  # fmt: skip
        for producer in data.producer_data_set:
            clients.register_producer(producer.group_name, info)
        refused = self._check_subscriptions(data)
        if refused is not None:
            return refused
        return ok({"IS_SUB_CHANGE": "true"})

    def _check_subscriptions(self, data: HeartbeatData) -> RemotingCommand | None:
        """The first subscription of a heartbeat that does not compile, as an answer."""
        pull = self.broker.pull_processor
        for consumer in data.consumer_data_set:
            for sub in consumer.subscription_data_set:
                if sub.is_tag_type:
                    continue
                result = pull.message_filter(sub.sub_string, sub.expression_type)
                if isinstance(result, RemotingCommand):
                    remark = f"group {consumer.group_name}, topic {sub.topic}: {result.remark}"
                    return error(result.code, remark)
        return None

    def unregister_client(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """UNREGISTER_CLIENT (35); C++ sends empty strings for the group it does not mean."""
        header = h.UnregisterClientRequestHeader.from_ext_fields(request.ext_fields)
        broker = self.broker
        if header.producer_group:
            broker.clients.unregister_producer(header.producer_group, ctx.channel)
        group = header.consumer_group
        if group:
            cfg = broker.groups.table.get(group)
            notify = broker.config.notify_consumer_ids_changed_enable and (
                cfg is None or cfg.notify_consumer_ids_changed_enable
            )
            broker.clients.unregister_consumer(group, ctx.channel, notify=notify)
        return ok()

    def check_client_config(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """CHECK_CLIENT_CONFIG (46): TAG subscriptions pass; SQL92 needs
        ``enablePropertyFilter`` and an expression that compiles."""
        body = CheckClientRequestBody.decode(request.body or b"")
        sub = body.subscription_data
        if sub is None or sub.is_tag_type:
            return ok()
        result = self.broker.pull_processor.message_filter(sub.sub_string, sub.expression_type)
        if isinstance(result, RemotingCommand):
            return result
        return ok()
