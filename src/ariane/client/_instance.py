"""The per-process client core (RocketMQ ``MQClientInstance`` and ``MQClientManager``).

How it works: producers, consumers and admins of one process that name the same NameServers
and instance name share one ``ClientInstance`` (``ClientInstance.acquire``; one per event
loop, reference counted, closed by the last ``release``). The instance owns:

* ``api``: the ``ClientAPI`` over one ``RemotingClient`` (one connection per address);
* the route cache: ``topic_route_table`` (topic -> ``TopicRouteData``) and
  ``broker_addr_table`` (broker name -> {broker id -> address}), filled by
  ``update_topic_route`` and pushed to every member (``update_topic_publish_info`` for
  producers, ``update_topic_subscribe_info`` for consumers);
* the members: producer and consumer groups (``ProducerMember`` / ``ConsumerMember``
  protocols of ``_members``; one object per group);
* the background services: route refresh (``poll_name_server_interval_ms``, 30 s), offline
  broker cleanup plus heartbeat to every broker (30 s; also soon after a new broker address
  appears or a member joins, and once more when that happens while one is on its way),
  consumer offset persistence (5 s) and rebalancing (20 s, or at once on
  ``rebalance_immediately``); subscribed topics without a route yet (a new group's retry topic)
  are fetched again within ~200 ms, backing off (``await_routes``, ``_route_wait``) and
  rebalanced at once when found;
* the handlers of requests brokers send to clients (CHECK_TRANSACTION_STATE,
  NOTIFY_CONSUMER_IDS_CHANGED, RESET_CONSUMER_CLIENT_OFFSET, GET_CONSUMER_RUNNING_INFO,
  CONSUME_MESSAGE_DIRECTLY), which find the member by group and call it;
  ``register_request_handler`` replaces or adds one.

Heartbeats carry ``ProducerData`` for every producer group and each consumer's
``consumer_data()``; without consumers only masters get them, as in RocketMQ.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Any, Protocol

from ariane.acl.credentials import request_signer
from ariane.client._api import ClientAPI
from ariane.client._members import ConsumerMember, ProducerMember
from ariane.client._route import (
    clamp_default_route,
    publish_info_from_route,
    subscribe_queues_from_route,
)
from ariane.client._route_wait import RouteWaiter
from ariane.client.config import ClientConfig
from ariane.client.errors import ClientStateError
from ariane.client.message import Message, SendResult
from ariane.common import properties as props
from ariane.common.gc_policy import settle_client_process
from ariane.common.record import decode_record
from ariane.errors import ArianeError
from ariane.remoting.client import RemotingClient
from ariane.remoting.config import RemotingClientConfig
from ariane.remoting.dispatch import ProcessFunction, RequestContext
from ariane.remoting.protocol import fastjson
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.admin_bodies import ResetOffsetBody
from ariane.remoting.protocol.client_bodies import (
    HeartbeatData,
    ProducerData,
)
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import RemotingCommand, make_response_for
from ariane.remoting.protocol.route import MASTER_ID, TopicRouteData

__all__ = [
    "CLIENT_INNER_PRODUCER_GROUP",
    "ClientInstance",
    "ConsumerMember",
    "InnerProducer",
    "ProducerMember",
]

#: ``MixAll.CLIENT_INNER_PRODUCER_GROUP``.
CLIENT_INNER_PRODUCER_GROUP = "CLIENT_INNER_PRODUCER"

logger = logging.getLogger(__name__)


class InnerProducer(Protocol):
    """What a ``ClientInstance`` needs of its own producer (a ``Producer``)."""

    @property
    def group(self) -> str: ...
    @property
    def instance(self) -> ClientInstance: ...

    async def start(self) -> None: ...
    async def close(self) -> None: ...
    def detach(self) -> None: ...
    async def send(self, msg: Message) -> SendResult: ...


_Key = tuple[str, tuple[str, ...], object]
#: event loop -> (client id, NameServers) -> instance; a finished loop drops its instances.
_INSTANCES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[_Key, ClientInstance]] = (
    weakref.WeakKeyDictionary()
)


def _routes_equal(a: TopicRouteData | None, b: TopicRouteData) -> bool:
    if a is None:
        return False
    return (
        sorted(a.queue_datas, key=lambda q: q.broker_name)
        == sorted(b.queue_datas, key=lambda q: q.broker_name)
        and sorted(a.broker_datas, key=lambda d: d.broker_name)
        == sorted(b.broker_datas, key=lambda d: d.broker_name)
        and a.order_topic_conf == b.order_topic_conf
    )


class ClientInstance:
    """One process's connection to a RocketMQ cluster, shared by its clients.

    Use ``ClientInstance.acquire(config)`` (and ``release()``) rather than the constructor.

    Args:
        config: NameServers, instance name and service periods.

    Attributes:
        config: the configuration.
        client_id: ``ip@instanceName``; brokers know this client by it.
        api: every request, as async methods.
        topic_route_table: last route per topic.
        broker_addr_table: broker name -> {broker id -> address}.
    """

    def __init__(self, config: ClientConfig) -> None:
        self.config = config
        self.client_id = config.build_client_id()
        self.remoting = RemotingClient(
            RemotingClientConfig(connect_timeout_ms=config.connect_timeout_ms),
            signer=request_signer(config.credentials) if config.credentials else None,
        )
        self.api = ClientAPI(self.remoting, config.namesrv_addrs, timeout_ms=config.api_timeout_ms)
        self.topic_route_table: dict[str, TopicRouteData] = {}
        #: when a failure last made each topic's route be fetched (monotonic ms)
        self._failure_refresh_ms: dict[str, float] = {}
        self.broker_addr_table: dict[str, dict[int, str]] = {}
        self.producers: dict[str, ProducerMember] = {}
        self.consumers: dict[str, ConsumerMember] = {}
        self._refs = 0
        self._key: _Key | None = None
        self._started = False
        self._closed = False
        self._tasks: list[asyncio.Task[None]] = []
        self._background: set[asyncio.Task[Any]] = set()
        self._route_lock = asyncio.Lock()
        self._heartbeat_lock = asyncio.Lock()
        self._heartbeat_task: asyncio.Task[None] | None = None
        self._heartbeat_again = False  # heartbeat_soon called while one was on its way
        self._rebalance_wakeup = asyncio.Event()
        # issue 20: subscribed topics without a route yet
        self.route_waiter = RouteWaiter(
            self._fetch_awaited_route,
            self._consumers_need_route,
            self.rebalance_immediately,
            initial_ms=config.route_wait_initial_ms,
            max_ms=config.route_wait_max_ms,
        )
        self._inner: InnerProducer | None = None
        for code, handler in (
            (RequestCode.CHECK_TRANSACTION_STATE, self._on_check_transaction_state),
            (RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, self._on_consumer_ids_changed),
            (RequestCode.RESET_CONSUMER_CLIENT_OFFSET, self._on_reset_offset),
            (RequestCode.GET_CONSUMER_RUNNING_INFO, self._on_get_running_info),
            (RequestCode.CONSUME_MESSAGE_DIRECTLY, self._on_consume_directly),
        ):
            self.remoting.register_processor(code, handler)

    # -- registry -------------------------------------------------------------------------------

    @classmethod
    def acquire(cls, config: ClientConfig) -> ClientInstance:
        """The shared instance for ``config`` on the running loop (created if needed); call
        ``release()`` once when done.

        Raises:
            RuntimeError: no event loop is running.
        """
        table = _INSTANCES.setdefault(asyncio.get_running_loop(), {})
        # clients with other credentials never share an instance (Java's MQClientManager
        # would silently sign with the first client's hook)
        key: _Key = (config.build_client_id(), config.namesrv_addrs, config.credentials)
        instance = table.get(key)
        if instance is None or instance._closed:
            instance = cls(config)
            instance._key = key
            table[key] = instance
        instance._refs += 1
        return instance

    async def release(self) -> None:
        """Drop one reference; the last one closes the instance."""
        self._refs -= 1
        if self._refs <= 0:
            await self.close()

    # -- lifecycle ------------------------------------------------------------------------------

    @property
    def started(self) -> bool:
        """Whether the background services run."""
        return self._started and not self._closed

    async def start(self) -> None:
        """Start the background services (idempotent). The first instance of the process to
        start settles its garbage collector unless ``config.gc_freeze_on_start`` is False
        (collect, then freeze what is alive: see ``ClientConfig``)."""
        if self._closed:
            raise ClientStateError("the client instance is closed")
        if self._started:
            return
        self._started = True
        cfg = self.config
        if cfg.gc_freeze_on_start:
            settle_client_process()
        for name, interval_ms, first_ms, job in (
            ("route", cfg.poll_name_server_interval_ms, 10, self.update_all_routes),
            ("heartbeat", cfg.heartbeat_broker_interval_ms, 1000, self._heartbeat_round),
            # first commit after 10 s as in RocketMQ, or sooner with a shorter period
            (
                "persist",
                cfg.persist_consumer_offset_interval_ms,
                min(10_000, cfg.persist_consumer_offset_interval_ms),
                self._persist_all,
            ),
        ):
            self._tasks.append(
                asyncio.create_task(self._every(name, interval_ms, first_ms, job), name=name)
            )
        self._tasks.append(asyncio.create_task(self._rebalance_service(), name="rebalance"))
        self._tasks.append(asyncio.create_task(self.route_waiter.run(), name="route-wait"))
        logger.info("client instance %s started", self.client_id)

    async def close(self) -> None:
        """Stop the services and close every connection (members unregister themselves from
        the brokers before they release the instance; brokers drop what is left when the
        connections close)."""
        if self._closed:
            return
        self._closed = True
        inner, self._inner = self._inner, None
        if inner is not None:
            self.producers.pop(inner.group, None)
            inner.detach()
        with contextlib.suppress(RuntimeError):
            table = _INSTANCES.get(asyncio.get_running_loop(), {})
            if self._key is not None and table.get(self._key) is self:
                del table[self._key]
        for task in [*self._tasks, *self._background]:
            task.cancel()
        for task in [*self._tasks, *self._background]:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self.remoting.close()
        logger.info("client instance %s closed", self.client_id)

    async def inner_producer(
        self, create: Callable[[str, ClientConfig], InnerProducer]
    ) -> InnerProducer:
        """The instance's own producer (group ``CLIENT_INNER_PRODUCER``, RocketMQ's
        ``MQClientInstance.defaultMQProducer``), made by ``create(group, config)`` and started
        on first use (``ariane.client._producer.new_producer`` makes a ``Producer``);
        consumers send failed messages to retry topics with it when CONSUMER_SEND_MSG_BACK
        fails. It lives as long as the instance and holds no reference to it.
        """
        if self._inner is None:
            producer = create(CLIENT_INNER_PRODUCER_GROUP, self.config)
            await producer.start()
            if producer.instance is not self:  # pragma: no cover - acquire() returns self
                await producer.close()
                raise ClientStateError("the inner producer joined another client instance")
            self._refs -= 1  # owned by the instance, not the other way round
            self._inner = producer
        return self._inner

    async def _every(
        self, name: str, interval_ms: int, first_ms: int, job: Callable[[], Awaitable[Any]]
    ) -> None:
        await asyncio.sleep(first_ms / 1000)
        while True:
            try:
                await job()
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.warning("client service %s failed", name, exc_info=True)
            await asyncio.sleep(interval_ms / 1000)

    def spawn(self, coro: Awaitable[Any], name: str | None = None) -> asyncio.Task[Any]:
        """Run ``coro`` in the background; it is cancelled when the instance closes."""
        task = asyncio.ensure_future(coro)
        if name is not None:
            task.set_name(name)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        task.add_done_callback(_log_failure)
        return task

    # -- members --------------------------------------------------------------------------------

    def register_producer(self, member: ProducerMember) -> None:
        """Add a producer group.

        Raises:
            ClientStateError: the group is already registered in this instance.
        """
        self._check_new_group("producer", member.group, self.producers)
        self.producers[member.group] = member
        for topic, route in self.topic_route_table.items():
            member.update_topic_publish_info(topic, publish_info_from_route(topic, route))
        self.heartbeat_soon()

    def register_consumer(self, member: ConsumerMember) -> None:
        """Add a consumer group.

        Raises:
            ClientStateError: the group is already registered in this instance.
        """
        self._check_new_group("consumer", member.group, self.consumers)
        self.consumers[member.group] = member
        self.heartbeat_soon()

    def _check_new_group(self, kind: str, group: str, table: Mapping[str, object]) -> None:
        if group in table:
            raise ClientStateError(
                f"{kind} group {group!r} already exists in client {self.client_id}; "
                "use another group or instance name"
            )

    async def unregister_producer(self, group: str) -> None:
        """Remove a producer group and tell every broker (UNREGISTER_CLIENT)."""
        if self.producers.pop(group, None) is not None:
            await self._unregister(producer_group=group)

    async def unregister_consumer(self, group: str) -> None:
        """Remove a consumer group and tell every broker (UNREGISTER_CLIENT)."""
        if self.consumers.pop(group, None) is not None:
            await self._unregister(consumer_group=group)

    async def _unregister(
        self, *, producer_group: str | None = None, consumer_group: str | None = None
    ) -> None:
        addrs = {addr for table in self.broker_addr_table.values() for addr in table.values()}

        async def one(addr: str) -> None:
            try:
                await self.api.unregister_client(
                    addr,
                    self.client_id,
                    producer_group=producer_group,
                    consumer_group=consumer_group,
                )
            except ArianeError as exc:
                logger.info("unregister from %s failed: %s", addr, exc)

        await asyncio.gather(*(one(a) for a in addrs))

    # -- routes ---------------------------------------------------------------------------------

    async def update_topic_route(
        self,
        topic: str,
        *,
        template: str | None = None,
        default_queue_nums: int = 4,
    ) -> bool:
        """Fetch ``topic``'s route and push it to the members if it changed
        (``updateTopicRouteInfoFromNameServer``).

        Args:
            topic: the topic.
            template: fetch this template topic's route instead (the auto-create path: the
                producer's ``createTopicKey``, TBW102), clamped to ``default_queue_nums``.
            default_queue_nums: queue count of auto-created topics.

        Returns:
            Whether a route was found and something was updated.

        Raises:
            ConnectError: no NameServer is reachable.
            RequestTimeoutError: the NameServer did not answer.
        """
        async with self._route_lock:
            if template is not None:
                route = await self.api.get_topic_route(template)
                if route is not None:
                    route = clamp_default_route(route, default_queue_nums)
            else:
                route = await self.api.get_topic_route(topic)
            if route is None:
                logger.debug("no route for topic %s (template %s)", topic, template)
                return False
            changed = not _routes_equal(self.topic_route_table.get(topic), route)
            if not changed:
                changed = self._needs_update(topic)
            if changed:
                self._apply_route(topic, route)
            return changed

    async def refresh_route_after_failure(self, topic: str) -> bool:
        """Fetch ``topic``'s route now because a send or pull failed (refused by a slave, a
        lost connection), at most once per ``route_refresh_on_failure_ms``: a new master is
        used as soon as it registered, not at the next 30 s refresh. Returns whether the
        route changed."""
        now = self.config.clock.monotonic() * 1000
        last = self._failure_refresh_ms.get(topic)
        if last is not None and now - last < self.config.route_refresh_on_failure_ms:
            return False
        self._failure_refresh_ms[topic] = now
        try:
            return await self.update_topic_route(topic)
        except ArianeError as exc:
            logger.debug("route refresh of %s after a failure failed: %s", topic, exc)
            return False

    def await_routes(self, topics: Collection[str]) -> None:
        """Fetch the routes of these subscribed topics again soon, backing off, until they
        exist (then rebalance at once): the retry topic of a new group, a topic created a
        moment ago. Topics that have a route already are left out."""
        self.route_waiter.want(t for t in topics if self._consumers_need_route(t))

    def _consumers_need_route(self, topic: str) -> bool:
        return any(c.is_subscribe_topic_need_update(topic) for c in self.consumers.values())

    async def _fetch_awaited_route(self, topic: str) -> bool:
        await self.update_topic_route(topic)
        return not self._consumers_need_route(topic)

    def _needs_update(self, topic: str) -> bool:
        return any(p.is_publish_topic_need_update(topic) for p in self.producers.values()) or any(
            c.is_subscribe_topic_need_update(topic) for c in self.consumers.values()
        )

    def _apply_route(self, topic: str, route: TopicRouteData) -> None:
        new_addr = False
        for bd in route.broker_datas:
            known = self.broker_addr_table.get(bd.broker_name)
            if known != bd.broker_addrs:
                new_addr = (
                    new_addr
                    or not known
                    or bool(set(bd.broker_addrs.values()) - set(known.values()))
                )
                self.broker_addr_table[bd.broker_name] = dict(bd.broker_addrs)
        if self.producers:
            for producer in self.producers.values():
                producer.update_topic_publish_info(topic, publish_info_from_route(topic, route))
        if self.consumers:
            queues = subscribe_queues_from_route(topic, route)
            for consumer in self.consumers.values():
                consumer.update_topic_subscribe_info(topic, set(queues))
        self.topic_route_table[topic] = route
        logger.info("route of %s updated: %s", topic, route.to_json())
        if new_addr:
            self.heartbeat_soon()

    async def update_all_routes(self) -> None:
        """Refresh the route of every topic a member uses (the 30 s service)."""
        topics: set[str] = set()
        for producer in self.producers.values():
            topics.update(producer.publish_topics())
        for consumer in self.consumers.values():
            topics.update(consumer.subscribe_topics())
        for topic in topics:
            try:
                await self.update_topic_route(topic)
            except ArianeError as exc:
                logger.warning("route refresh of %s failed: %s", topic, exc)

    def refresh_route_soon(self, topic: str) -> None:
        """:meth:`refresh_route_after_failure` in the background (a pull went to another
        member of the group than the one wanted, a commit or a one-way send failed); nothing
        is started while the topic's last refresh is recent."""
        if self._closed:
            return
        last = self._failure_refresh_ms.get(topic)
        now = self.config.clock.monotonic() * 1000
        if last is not None and now - last < self.config.route_refresh_on_failure_ms:
            return
        self.spawn(self.refresh_route_after_failure(topic), f"route-refresh-{topic}")

    def find_broker_addr_in_publish(self, broker_name: str) -> str | None:
        """The master address of ``broker_name``, if known."""
        table = self.broker_addr_table.get(broker_name)
        return table.get(MASTER_ID) if table else None

    def find_broker_addr_in_subscribe(
        self, broker_name: str, broker_id: int = MASTER_ID, *, only_this_broker: bool = False
    ) -> tuple[str, bool] | None:
        """``findBrokerAddressInSubscribe``: ``(address, is_slave)`` of ``broker_id``, else
        (unless ``only_this_broker``) any member of the group; ``None`` if none is known."""
        table = self.broker_addr_table.get(broker_name)
        if not table:
            return None
        addr = table.get(broker_id)
        if addr is not None:
            return addr, broker_id != MASTER_ID
        if only_this_broker:
            return None
        any_id = min(table)
        return table[any_id], any_id != MASTER_ID

    def find_broker_addr_by_topic(self, topic: str) -> str | None:
        """A broker address hosting ``topic`` (for group-wide queries)."""
        route = self.topic_route_table.get(topic)
        if route is None:
            return None
        for bd in route.broker_datas:
            addr = bd.select_broker_addr()
            if addr is not None:
                return addr
        return None

    async def find_consumer_id_list(self, topic: str, group: str) -> list[str]:
        """The client ids of ``group`` as a broker hosting ``topic`` knows them (refreshing
        the route first if it is unknown); empty if no broker answers."""
        addr = self.find_broker_addr_by_topic(topic)
        if addr is None:
            await self.update_topic_route(topic)
            addr = self.find_broker_addr_by_topic(topic)
            if addr is None:
                return []
        return await self.api.get_consumer_id_list(addr, group)

    def _clean_offline_brokers(self) -> None:
        live = {
            (bd.broker_name, addr)
            for route in self.topic_route_table.values()
            for bd in route.broker_datas
            for addr in bd.broker_addrs.values()
        }
        for name in list(self.broker_addr_table):
            table = {i: a for i, a in self.broker_addr_table[name].items() if (name, a) in live}
            if table:
                self.broker_addr_table[name] = table
            else:
                del self.broker_addr_table[name]

    # -- heartbeats -----------------------------------------------------------------------------

    def heartbeat_data(self) -> HeartbeatData:
        """This client's heartbeat: every producer group and each consumer's data."""
        return HeartbeatData(
            client_id=self.client_id,
            producer_data_set=[ProducerData(g) for g in self.producers],
            consumer_data_set=[c.consumer_data() for c in self.consumers.values()],
        )

    def heartbeat_soon(self) -> None:
        """Send a heartbeat to every broker in the background (coalesced: a call while one is
        on its way sends one more after it, which sees the brokers and groups known then)."""
        if self._closed:
            return
        if self._heartbeat_task is not None and not self._heartbeat_task.done():
            self._heartbeat_again = True
            return
        self._heartbeat_task = self.spawn(self._heartbeats_now(), "heartbeat-now")

    async def _heartbeats_now(self) -> None:
        self._heartbeat_again = True
        while self._heartbeat_again:
            self._heartbeat_again = False
            await self.send_heartbeat_to_all_brokers()

    async def _heartbeat_round(self) -> None:
        self._clean_offline_brokers()
        await self.send_heartbeat_to_all_brokers()

    async def send_heartbeat_to_all_brokers(self) -> None:
        """HEART_BEAT to every known broker (masters only when there are no consumers)."""
        if not self.producers and not self.consumers:
            return
        async with self._heartbeat_lock:
            data = self.heartbeat_data()
            masters_only = not data.consumer_data_set
            addrs = {
                addr
                for table in self.broker_addr_table.values()
                for broker_id, addr in table.items()
                if not masters_only or broker_id == MASTER_ID
            }

            async def one(addr: str) -> None:
                try:
                    await self.api.send_heartbeat(addr, data)
                except ArianeError as exc:
                    logger.info("heartbeat to %s failed: %s", addr, exc)

            await asyncio.gather(*(one(a) for a in addrs))

    # -- consumer services ----------------------------------------------------------------------

    def rebalance_immediately(self) -> None:
        """Wake the rebalance service now (NOTIFY_CONSUMER_IDS_CHANGED, a consumer start)."""
        self._rebalance_wakeup.set()

    async def do_rebalance(self) -> None:
        """Rebalance every consumer group once."""
        for consumer in list(self.consumers.values()):
            try:
                await consumer.do_rebalance()
            except Exception:
                logger.warning("rebalance of group %s failed", consumer.group, exc_info=True)

    async def _rebalance_service(self) -> None:
        wait_s = self.config.rebalance_interval_ms / 1000
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._rebalance_wakeup.wait(), wait_s)
            self._rebalance_wakeup.clear()
            await self.do_rebalance()

    async def _persist_all(self) -> None:
        for consumer in list(self.consumers.values()):
            try:
                await consumer.persist_consumer_offset()
            except Exception:
                logger.warning("offset commit of group %s failed", consumer.group, exc_info=True)

    # -- requests from brokers ------------------------------------------------------------------

    def register_request_handler(self, code: int, handler: ProcessFunction) -> None:
        """Handle requests with ``code`` that brokers send to this client.

        ``handler(ctx, request)`` returns a response, ``None`` (one-way requests) or an
        awaitable of either (see ``ariane.remoting.dispatch``).
        """
        self.remoting.register_processor(code, handler)

    def _on_check_transaction_state(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand | None:
        header = h.CheckTransactionStateRequestHeader.from_ext_fields(request.ext_fields)
        if not request.body:
            logger.warning("CHECK_TRANSACTION_STATE without a message from %s", ctx.remote_addr)
            return None
        msg, _ = decode_record(request.body, decompress=True)
        group = msg.properties.get(props.PRODUCER_GROUP)
        producer = self.producers.get(group) if group else None
        if producer is None:
            logger.warning("transaction check for unknown producer group %s", group)
            return None
        producer.check_transaction_state(ctx.remote_addr, msg, header)
        return None

    def _on_consumer_ids_changed(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand | None:
        group = request.ext_fields.get("consumerGroup")
        logger.info("consumer ids of group %s changed (from %s)", group, ctx.remote_addr)
        self.rebalance_immediately()
        return None

    def _on_reset_offset(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand | None:
        header = h.ResetOffsetRequestHeader.from_ext_fields(request.ext_fields)
        consumer = self.consumers.get(header.group)
        if consumer is not None and request.body:
            consumer.reset_offset(header.topic, ResetOffsetBody.decode(request.body).offset_table)
        return None

    def _on_get_running_info(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        header = h.GetConsumerRunningInfoRequestHeader.from_ext_fields(request.ext_fields)
        consumer = self.consumers.get(header.consumer_group)
        if consumer is None:
            return _no_consumer(request, header.consumer_group)
        body = fastjson.dumps(consumer.running_info())
        return make_response_for(request, ResponseCode.SUCCESS, body=body)

    async def _on_consume_directly(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        header = h.ConsumeMessageDirectlyResultRequestHeader.from_ext_fields(request.ext_fields)
        consumer = self.consumers.get(header.consumer_group)
        if consumer is None or not request.body:
            return _no_consumer(request, header.consumer_group)
        msg, _ = decode_record(request.body, decompress=True)
        result = await consumer.consume_message_directly(msg, header.broker_name)
        return make_response_for(request, ResponseCode.SUCCESS, body=fastjson.dumps(result))


def _no_consumer(request: RemotingCommand, group: str) -> RemotingCommand:
    return make_response_for(
        request,
        ResponseCode.SYSTEM_ERROR,
        f"The Consumer Group <{group}> not exist in this consumer",
    )


def _log_failure(task: asyncio.Future[Any]) -> None:
    if task.cancelled():
        return
    exc = task.exception()
    if exc is not None:
        logger.warning("client background task failed: %r", exc, exc_info=exc)
