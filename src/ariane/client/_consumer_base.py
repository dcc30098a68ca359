"""What push and lite pull consumers share: group and client settings, subscriptions, the
offset store, the rebalance state and the ``ConsumerMember`` hooks of ``ClientInstance``
(RocketMQ ``MQConsumerInner`` as ``DefaultMQPushConsumerImpl`` and
``DefaultLitePullConsumerImpl`` both implement it).

How it works: a subclass calls ``_join`` from its ``start`` (acquire the shared client
instance, create the offset store and ``RebalanceImpl``, register as a consumer group, fetch
routes, heartbeat, ask for a rebalance) and ``_leave`` from its ``close``. The instance
calls the hooks: route changes land in ``rebalance.topic_subscribe_info``; ``do_rebalance``
and ``persist_consumer_offset`` run on its timers.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any

from ariane.acl.credentials import SessionCredentials
from ariane.client._allocate import AllocateMessageQueueAveragely, AllocateStrategy
from ariane.client._instance import ClientInstance
from ariane.client._offset_store import (
    LocalFileOffsetStore,
    OffsetStore,
    RemoteBrokerOffsetStore,
)
from ariane.client._producer import trace_dispatcher
from ariane.client._rebalance import RebalanceImpl, parse_consume_timestamp
from ariane.client._route import subscribe_queues_from_route
from ariane.client._subscription_check import check_subscriptions
from ariane.client._trace_hooks import ConsumeTracer
from ariane.client.config import ClientConfig
from ariane.client.consumer_types import MessageSelector
from ariane.client.errors import BrokerNotFoundError, ClientStateError, SubscriptionRefusedError
from ariane.client.message import PullResult, PullStatus
from ariane.common import properties as props
from ariane.common.clock import Clock, SystemClock
from ariane.common.message import MessageExt
from ariane.common.topics import retry_topic, validate_group, validate_topic
from ariane.errors import ArianeError, InvalidArgumentError
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.client_bodies import (
    SUB_ALL,
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    MessageModel,
    MessageQueue,
    SubscriptionData,
)
from ariane.remoting.protocol.route import MASTER_ID

__all__ = ["ConsumerBase", "default_consume_timestamp"]

logger = logging.getLogger(__name__)

#: ``PullSysFlag`` bits.
FLAG_COMMIT_OFFSET = 0x1
FLAG_SUSPEND = 0x2
FLAG_SUBSCRIPTION = 0x4
FLAG_LITE_PULL = 0x10

#: Java's reserved ``DEFAULT_CONSUMER`` group may not be used.
DEFAULT_CONSUMER_GROUP = "DEFAULT_CONSUMER"
#: Pause after a pull that went to another member of the group than the one wanted (not in
#: the route yet) and was sent back to it: the route refresh is under way.
_FALLBACK_PAUSE_S = 0.1


def default_consume_timestamp(clock: Clock | None = None) -> str:
    """``consumeTimestamp``'s default: half an hour ago, ``yyyyMMddHHmmss`` local time."""
    now_s = (clock or SystemClock()).now_ms() / 1000
    return time.strftime("%Y%m%d%H%M%S", time.localtime(now_s - 1800))


def _selector(expression: str | MessageSelector | None) -> MessageSelector:
    if isinstance(expression, MessageSelector):
        return expression
    return MessageSelector.by_tag(expression)


class ConsumerBase:
    """Shared state of a consumer group in this process (see the module docstring).

    Raises:
        InvalidArgumentError: a bad group name or setting.
    """

    consume_type = ConsumeType.CONSUME_PASSIVELY

    def __init__(
        self,
        group: str,
        *,
        namesrv_addr: str | None,
        instance_name: str,
        client_ip: str | None,
        message_model: MessageModel,
        consume_from_where: ConsumeFromWhere,
        consume_timestamp: str | None,
        allocate_strategy: AllocateStrategy | None,
        offset_store_dir: str | Path | None,
        client_config: ClientConfig | None,
        credentials: SessionCredentials | None = None,
        enable_trace: bool = False,
        trace_topic: str | None = None,
    ) -> None:
        validate_group(group)
        if group == DEFAULT_CONSUMER_GROUP:
            raise InvalidArgumentError(f"the consumer group {group} is reserved")
        if client_config is None:
            if namesrv_addr is None:
                raise InvalidArgumentError("namesrv_addr is required")
            client_config = ClientConfig(
                namesrv_addr=namesrv_addr,
                instance_name=instance_name,
                client_ip=client_ip,
                credentials=credentials,
            )
        self._group = group
        self.client_config = client_config
        self.message_model = MessageModel(message_model)
        self.consume_from_where = ConsumeFromWhere(consume_from_where)
        self.clock = client_config.clock
        self.consume_timestamp = consume_timestamp or default_consume_timestamp(self.clock)
        try:
            parse_consume_timestamp(self.consume_timestamp)
        except ValueError:
            raise InvalidArgumentError(
                f"consume_timestamp must be yyyyMMddHHmmss: {self.consume_timestamp!r}"
            ) from None
        self.allocate_strategy: AllocateStrategy = (
            allocate_strategy or AllocateMessageQueueAveragely()
        )
        self.offset_store_dir = Path(offset_store_dir) if offset_store_dir is not None else None
        self.retry_topic = retry_topic(group)
        self._subscriptions: dict[str, SubscriptionData] = {}
        self._instance: ClientInstance | None = None
        self._offset_store: OffsetStore | None = None
        self._rebalance: RebalanceImpl | None = None
        self._closed = False
        self._stopping = False
        self.orderly = False
        self._pull_from_which_node: dict[MessageQueue, int] = {}
        # message trace (issue 15): None unless enable_trace; consume paths test only that
        self.tracer: ConsumeTracer | None = None
        if enable_trace:
            dispatcher = trace_dispatcher(client_config, group, "CONSUME", trace_topic)
            self.tracer = ConsumeTracer(dispatcher, group)

    # -- properties ------------------------------------------------------------------------------

    @property
    def group(self) -> str:
        """The consumer group."""
        return self._group

    @property
    def instance(self) -> ClientInstance:
        """The client instance.

        Raises:
            ClientStateError: not started or closed.
        """
        if self._instance is None or self._closed:
            raise ClientStateError(f"consumer {self._group!r} is not started")
        return self._instance

    @property
    def started(self) -> bool:
        """Whether ``start`` succeeded and ``close`` was not called."""
        return self._instance is not None and not self._closed

    @property
    def offset_store(self) -> OffsetStore:
        """The group's offset store (exists once started)."""
        if self._offset_store is None:
            raise ClientStateError(f"consumer {self._group!r} is not started")
        return self._offset_store

    @property
    def rebalance(self) -> RebalanceImpl:
        """The rebalance state (exists once started)."""
        if self._rebalance is None:
            raise ClientStateError(f"consumer {self._group!r} is not started")
        return self._rebalance

    @property
    def subscriptions(self) -> dict[str, SubscriptionData]:
        """topic -> subscription (the retry topic included once started in clustering)."""
        return self._subscriptions

    # -- subscriptions ---------------------------------------------------------------------------

    def _subscribe(self, topic: str, expression: str | MessageSelector | None) -> None:
        validate_topic(topic)
        selector = _selector(expression)
        sd = SubscriptionData.build(
            topic, selector.expression, selector.type, sub_version=self.clock.now_ms()
        )
        self._subscriptions[topic] = sd
        if self._rebalance is not None:
            self._rebalance.subscription_inner[topic] = sd
        if self.started:
            self.instance.heartbeat_soon()
            self.instance.spawn(self._refresh_route(topic, sd))

    def _unsubscribe(self, topic: str) -> None:
        self._subscriptions.pop(topic, None)
        if self._rebalance is not None:
            self._rebalance.subscription_inner.pop(topic, None)
        if self.started:
            self.instance.heartbeat_soon()

    async def _refresh_route(self, topic: str, sd: SubscriptionData | None = None) -> None:
        try:
            await self.instance.update_topic_route(topic)
        except ArianeError as exc:
            logger.warning("route of %s: %s", topic, exc)
        if sd is not None:  # subscribed after start(): a refusal can only be logged
            try:
                await check_subscriptions(self.instance, self._group, [sd])
            except SubscriptionRefusedError as exc:
                logger.error("%s", exc)
        self.instance.await_routes([topic])
        self.instance.rebalance_immediately()

    # -- lifecycle -------------------------------------------------------------------------------

    def _make_offset_store(self, instance: ClientInstance) -> OffsetStore:
        if self.message_model is MessageModel.BROADCASTING:
            return LocalFileOffsetStore(instance.client_id, self._group, self.offset_store_dir)
        # a timestamp start must not be overridden by the broker's "young queue: 0" answer
        by_time = self.consume_from_where is ConsumeFromWhere.CONSUME_FROM_TIMESTAMP
        return RemoteBrokerOffsetStore(
            instance, self._group, zero_if_not_found=False if by_time else None
        )

    def _make_rebalance(self, instance: ClientInstance, store: OffsetStore) -> RebalanceImpl:
        return RebalanceImpl(
            group=self._group,
            model=self.message_model,
            strategy=self.allocate_strategy,
            instance=instance,
            offset_store=store,
            consume_from_where=self.consume_from_where,
            consume_timestamp=self.consume_timestamp,
            orderly=self.orderly,
            clock=self.clock,
        )

    def _configure_rebalance(self, rebalance: RebalanceImpl) -> None:
        """Install the subclass's hooks (before the first rebalance can run)."""

    async def _join(self) -> ClientInstance:
        """Acquire the instance, build the store and rebalance state, register, start."""
        if self._closed:
            raise ClientStateError(f"consumer {self._group!r} is closed")
        if (
            self.message_model is MessageModel.CLUSTERING
            and self.retry_topic not in self._subscriptions
            and self.consume_type is ConsumeType.CONSUME_PASSIVELY
        ):
            self._subscriptions[self.retry_topic] = SubscriptionData.build(
                self.retry_topic, SUB_ALL, sub_version=self.clock.now_ms()
            )
        instance = ClientInstance.acquire(self.client_config)
        store = self._make_offset_store(instance)
        store.load()
        rebalance = self._make_rebalance(instance, store)
        rebalance.subscription_inner.update(self._subscriptions)
        self._configure_rebalance(rebalance)
        try:
            instance.register_consumer(self)
        except BaseException:
            await instance.release()
            raise
        self._instance, self._offset_store, self._rebalance = instance, store, rebalance
        if self.tracer is not None:
            await self.tracer.dispatcher.start()
        try:
            await instance.start()
        except BaseException:
            await self._leave()
            raise
        for topic in list(self._subscriptions):
            try:
                await instance.update_topic_route(topic)
            except ArianeError as exc:
                logger.warning("no route for %s yet: %s", topic, exc)
        try:  # a SQL92 filter the brokers refuse fails start(), not every pull for ever
            await check_subscriptions(instance, self._group, list(self._subscriptions.values()))
        except BaseException:
            await self._leave()
            raise
        await instance.send_heartbeat_to_all_brokers()
        # the retry topic is created by that heartbeat: look for it (and any other topic
        # without a route) again in a moment, not at the next 20 s rebalance
        instance.await_routes(list(self._subscriptions))
        instance.rebalance_immediately()
        return instance

    async def close(self) -> None:
        """Leave the cluster (each consumer says what it finishes first)."""
        raise NotImplementedError

    async def shutdown(self) -> None:
        """``close`` under Java's name (``DefaultMQPushConsumer.shutdown()``)."""
        await self.close()

    async def _leave(self) -> None:
        """Unregister from the brokers and release the instance."""
        instance, self._instance = self._instance, None
        self._closed = True
        if self.tracer is not None:
            await self.tracer.dispatcher.close()
        if instance is not None:
            await instance.unregister_consumer(self._group)
            await instance.release()

    async def fetch_subscribe_message_queues(self, topic: str) -> set[MessageQueue]:
        """The readable queues of ``topic``, fresh from the NameServer (empty when it has no
        route).

        Raises:
            ClientStateError: not started.
        """
        instance = self.instance
        await instance.update_topic_route(topic)
        route = instance.topic_route_table.get(topic)
        return subscribe_queues_from_route(topic, route) if route is not None else set()

    # -- pulling -------------------------------------------------------------------------------

    async def pull_kernel(
        self,
        mq: MessageQueue,
        sd: SubscriptionData,
        offset: int,
        *,
        max_nums: int,
        sys_flag: int,
        commit_offset: int,
        suspend_ms: int,
        timeout_ms: int,
    ) -> PullResult:
        """``pullKernelImpl``: PULL_MESSAGE (LITE_PULL_MESSAGE with ``FLAG_LITE_PULL``) to the
        broker the last answer suggested (a slave never gets the commit-offset flag).

        Raises:
            ArianeError: no broker is known, or the request failed.
        """
        instance = self.instance
        broker_id = self._pull_from_which_node.get(mq, MASTER_ID)
        found = instance.find_broker_addr_in_subscribe(mq.broker_name, broker_id)
        if found is None:
            await instance.update_topic_route(mq.topic)
            found = instance.find_broker_addr_in_subscribe(mq.broker_name, broker_id)
            if found is None:
                raise BrokerNotFoundError(mq.broker_name)
        addr, is_slave = found
        fell_back = broker_id not in instance.broker_addr_table.get(mq.broker_name, {})
        if fell_back:
            # another member than the one wanted (its master is down): look again soon
            instance.refresh_route_soon(mq.topic)
        if is_slave:
            sys_flag &= ~FLAG_COMMIT_OFFSET
        header = h.PullMessageRequestHeader(
            consumer_group=self._group,
            topic=mq.topic,
            queue_id=mq.queue_id,
            queue_offset=offset,
            max_msg_nums=max_nums,
            sys_flag=sys_flag,
            commit_offset=commit_offset,
            suspend_timeout_millis=suspend_ms,
            sub_version=sd.sub_version,
            subscription=sd.sub_string if sys_flag & FLAG_SUBSCRIPTION else None,
            expression_type=sd.expression_type,
            broker_name=mq.broker_name,
        )
        result = await instance.api.pull_message(addr, header, timeout_ms)
        self._pull_from_which_node[mq] = result.suggest_which_broker_id
        if (
            fell_back
            and result.status is PullStatus.NO_MATCHED_MSG
            and result.suggest_which_broker_id == broker_id
        ):
            # the member reached sends us back to the one our route lacks (a slave whose
            # master returned before our route knew it): wait for the refresh, do not spin
            await asyncio.sleep(_FALLBACK_PAUSE_S)
        return result

    @staticmethod
    def filter_and_stamp(
        msgs: list[MessageExt], sd: SubscriptionData, min_offset: int, max_offset: int
    ) -> list[MessageExt]:
        """``processPullResult``: keep messages whose tag is subscribed (the broker compares
        hashes only) and stamp the queue's MIN/MAX_OFFSET on each."""
        tags = sd.tags_set
        if tags and sd.is_tag_type and not sd.class_filter_mode:
            wanted = set(tags)
            msgs = [m for m in msgs if m.properties.get(props.TAGS) in wanted]
        low, high = str(min_offset), str(max_offset)
        for msg in msgs:
            p = msg.properties
            p[props.MIN_OFFSET] = low
            p[props.MAX_OFFSET] = high
        return msgs

    # -- ConsumerMember --------------------------------------------------------------------------

    def consumer_data(self) -> ConsumerData:
        """This group's heartbeat entry."""
        return ConsumerData(
            group_name=self._group,
            consume_type=self.consume_type,
            message_model=self.message_model,
            consume_from_where=self.consume_from_where,
            subscription_data_set=list(self._subscriptions.values()),
        )

    def subscribe_topics(self) -> Collection[str]:
        """Subscribed topics (retry topic included)."""
        return list(self._subscriptions)

    def update_topic_subscribe_info(self, topic: str, queues: set[MessageQueue]) -> None:
        """A topic's readable queues changed."""
        if self._rebalance is not None and topic in self._subscriptions:
            self._rebalance.topic_subscribe_info[topic] = set(queues)

    def is_subscribe_topic_need_update(self, topic: str) -> bool:
        """Whether a subscribed topic has no queue set yet."""
        return (
            topic in self._subscriptions
            and self._rebalance is not None
            and topic not in self._rebalance.topic_subscribe_info
        )

    async def do_rebalance(self) -> None:
        """One rebalance round."""
        rebalance = self._rebalance
        if rebalance is None or self._stopping:
            return
        # not routed yet (created after we subscribed): looked up again soon, not in 30 s
        self.instance.await_routes(
            [t for t in self._subscriptions if t not in rebalance.topic_subscribe_info]
        )
        await rebalance.do_rebalance()

    async def _stop_rebalancing(self) -> None:
        """No new rounds; wait for a running one to end."""
        self._stopping = True
        if self._rebalance is not None:
            async with self._rebalance.lock_round():
                pass

    async def persist_consumer_offset(self) -> None:
        """Commit the offsets of the owned queues."""
        if self._rebalance is not None and self._offset_store is not None:
            await self._offset_store.persist_all(set(self._rebalance.process_queue_table))

    def _running_info_base(self, extra: dict[str, Any]) -> dict[str, Any]:
        table = self._rebalance.process_queue_table if self._rebalance else {}
        store = self._offset_store
        mq_table = {}
        for mq, pq in table.items():
            info = pq.snapshot()
            info["commitOffset"] = store.offset_table.get(mq, -1) if store else -1
            mq_table[mq] = info
        properties = {
            "PROP_CONSUMER_START_TIMESTAMP": str(getattr(self, "_start_ms", 0)),
            "PROP_CONSUME_TYPE": self.consume_type.name,
            "PROP_CONSUMEORDERLY": str(self.orderly).lower(),
            "PROP_CLIENT_VERSION": "V5_3_3",
            "messageModel": self.message_model.name,
            "consumeFromWhere": self.consume_from_where.name,
            "allocateMessageQueueStrategy": self.allocate_strategy.name,
            **extra,
        }
        return {
            "properties": properties,
            "subscriptionSet": [sd.to_json() for sd in self._subscriptions.values()],
            "mqTable": mq_table,
            "statusTable": {},
            "jstack": "",
        }

    def running_info(self) -> dict[str, Any]:
        """GET_CONSUMER_RUNNING_INFO."""
        return self._running_info_base({})

    def reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET (subclasses implement it)."""
        raise NotImplementedError

    async def consume_message_directly(
        self, msg: MessageExt, broker_name: str | None
    ) -> dict[str, Any]:
        """CONSUME_MESSAGE_DIRECTLY: not supported unless a subclass says otherwise."""
        return {
            "order": False,
            "autoCommit": True,
            "consumeResult": "CR_THROW_EXCEPTION",
            "remark": f"{type(self).__name__} cannot consume directly",
            "spentTimeMills": 0,
        }

    def _check_positive(self, **values: int) -> None:
        for name, value in values.items():
            if value <= 0:
                raise InvalidArgumentError(f"{name} must be > 0, got {value}")
