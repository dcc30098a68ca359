"""ClientInstance without sockets: members, route fan-out, heartbeats, broker requests."""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

import pytest

from ariane.client._instance import ClientInstance
from ariane.client._route import TopicPublishInfo
from ariane.client.config import ClientConfig
from ariane.client.errors import ClientStateError
from ariane.client.message import MessageExt, MessageQueue
from ariane.common.message import HostPort
from ariane.common.record import encode_record
from ariane.remoting.dispatch import RequestContext
from ariane.remoting.protocol import fastjson
from ariane.remoting.protocol import headers as h
from ariane.remoting.protocol.admin_bodies import ResetOffsetBody
from ariane.remoting.protocol.client_bodies import ConsumerData, SubscriptionData
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from ariane.remoting.protocol.command import RemotingCommand
from ariane.remoting.protocol.route import BrokerData, QueueData, TopicRouteData

CONFIG = ClientConfig(namesrv_addr="127.0.0.1:9876", client_ip="10.0.0.1", instance_name="t")


@dataclass
class FakeProducer:
    group: str
    infos: dict[str, TopicPublishInfo] = field(default_factory=dict)
    checks: list[tuple[str, MessageExt, h.CheckTransactionStateRequestHeader]] = field(
        default_factory=list
    )

    def publish_topics(self) -> Collection[str]:
        return list(self.infos)

    def update_topic_publish_info(self, topic: str, info: TopicPublishInfo) -> None:
        self.infos[topic] = info

    def is_publish_topic_need_update(self, topic: str) -> bool:
        return False

    def check_transaction_state(
        self, broker_addr: str, msg: MessageExt, header: h.CheckTransactionStateRequestHeader
    ) -> None:
        self.checks.append((broker_addr, msg, header))


@dataclass
class FakeConsumer:
    group: str
    queues: dict[str, set[MessageQueue]] = field(default_factory=dict)
    rebalances: int = 0
    resets: list[tuple[str, dict[MessageQueue, int]]] = field(default_factory=list)

    def consumer_data(self) -> ConsumerData:
        return ConsumerData(self.group, subscription_data_set=[SubscriptionData.build("T", "*")])

    def subscribe_topics(self) -> Collection[str]:
        return ["T"]

    def update_topic_subscribe_info(self, topic: str, queues: set[MessageQueue]) -> None:
        self.queues[topic] = queues

    def is_subscribe_topic_need_update(self, topic: str) -> bool:
        return topic not in self.queues

    async def do_rebalance(self) -> None:
        self.rebalances += 1

    async def persist_consumer_offset(self) -> None:
        return None

    def reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        self.resets.append((topic, offsets))

    def running_info(self) -> dict[str, Any]:
        return {"properties": {"consumeType": "CONSUME_PASSIVELY"}}

    async def consume_message_directly(
        self, msg: MessageExt, broker_name: str | None
    ) -> dict[str, Any]:
        return {"consumeResult": "CR_SUCCESS", "remark": msg.topic}


class FakeChannel:
    remote_addr = "127.0.0.1:10911"


def _ctx(request: RemotingCommand) -> RequestContext:
    return RequestContext(None, FakeChannel(), request)  # type: ignore[arg-type]


def _route() -> TopicRouteData:
    return TopicRouteData(
        [QueueData("a", 2, 3, 6), QueueData("b", 1, 1, 6)],
        [
            BrokerData("C", "a", {0: "127.0.0.1:1", 1: "127.0.0.1:2"}),
            BrokerData("C", "b", {0: "127.0.0.1:3"}),
        ],
    )


def _in_loop(fn: Any) -> Any:
    async def go() -> Any:
        instance = ClientInstance(CONFIG)
        try:
            return await fn(instance)
        finally:
            await instance.close()

    return asyncio.run(go())


def test_a_group_can_join_an_instance_once() -> None:
    async def go(instance: ClientInstance) -> None:
        instance.register_producer(FakeProducer("P"))
        with pytest.raises(ClientStateError):
            instance.register_producer(FakeProducer("P"))
        instance.register_consumer(FakeConsumer("C"))
        with pytest.raises(ClientStateError):
            instance.register_consumer(FakeConsumer("C"))

    _in_loop(go)


def test_a_route_reaches_every_member_and_the_broker_table() -> None:
    async def go(instance: ClientInstance) -> None:
        producer, consumer = FakeProducer("P"), FakeConsumer("C")
        instance.register_producer(producer)
        instance.register_consumer(consumer)
        instance._apply_route("T", _route())
        assert [mq.broker_name for mq in producer.infos["T"].message_queues] == ["a"] * 3 + ["b"]
        assert len(consumer.queues["T"]) == 3
        assert instance.find_broker_addr_in_publish("a") == "127.0.0.1:1"
        assert instance.find_broker_addr_in_subscribe("a", 1) == ("127.0.0.1:2", True)
        assert instance.find_broker_addr_in_subscribe("b", 1) == ("127.0.0.1:3", False)
        assert instance.find_broker_addr_in_subscribe("b", 1, only_this_broker=True) is None
        assert instance.find_broker_addr_by_topic("T") in {"127.0.0.1:1", "127.0.0.1:2"}
        late = FakeProducer("Late")
        instance.register_producer(late)  # a late member gets the routes known so far
        assert "T" in late.infos
        instance.topic_route_table.clear()
        instance._clean_offline_brokers()
        assert instance.broker_addr_table == {}

    _in_loop(go)


def test_heartbeat_carries_every_group() -> None:
    async def go(instance: ClientInstance) -> None:
        instance.register_producer(FakeProducer("P"))
        instance.register_consumer(FakeConsumer("C"))
        data = instance.heartbeat_data()
        assert data.client_id == "10.0.0.1@t"
        assert [p.group_name for p in data.producer_data_set] == ["P"]
        assert [c.group_name for c in data.consumer_data_set] == ["C"]

    _in_loop(go)


def test_a_heartbeat_asked_for_while_one_is_on_its_way_is_sent_after_it() -> None:
    # a route naming a new broker (or a new group) while a heartbeat is being sent: the
    # broker gets one right after, not at the next 30 s round
    async def go(instance: ClientInstance) -> None:
        sent: list[tuple[str, list[str]]] = []
        on_its_way, release = asyncio.Event(), asyncio.Event()

        async def send_heartbeat(addr: str, data: Any) -> None:
            sent.append((addr, [p.group_name for p in data.producer_data_set]))
            on_its_way.set()
            await release.wait()

        instance.api.send_heartbeat = send_heartbeat  # type: ignore[method-assign]
        instance.broker_addr_table["a"] = {0: "A:1"}
        instance.register_producer(FakeProducer("P"))  # heartbeat_soon
        await on_its_way.wait()
        instance.broker_addr_table["b"] = {0: "B:1"}  # as update_topic_route does
        instance.register_producer(FakeProducer("Q"))
        instance.heartbeat_soon()
        release.set()
        assert instance._heartbeat_task is not None
        await instance._heartbeat_task
        assert sorted(sent) == [("A:1", ["P"]), ("A:1", ["P", "Q"]), ("B:1", ["P", "Q"])]

    _in_loop(go)


def test_consumer_ids_changed_wakes_the_rebalance() -> None:
    async def go(instance: ClientInstance) -> None:
        consumer = FakeConsumer("C")
        instance.register_consumer(consumer)
        notify = RemotingCommand.request(
            RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": "C"}
        )
        assert instance._on_consumer_ids_changed(_ctx(notify), notify) is None
        assert instance._rebalance_wakeup.is_set()
        await instance.do_rebalance()
        assert consumer.rebalances == 1

    _in_loop(go)


def test_reset_offset_reaches_the_consumer_of_the_group() -> None:
    async def go(instance: ClientInstance) -> None:
        consumer = FakeConsumer("C")
        instance.register_consumer(consumer)
        mq = MessageQueue("T", "a", 1)
        header = h.ResetOffsetRequestHeader(group="C", topic="T", timestamp=0, is_force=True)
        request = RemotingCommand.request(
            RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
            header.to_ext_fields(),
            ResetOffsetBody({mq: 17}).encode(),
        )
        instance._on_reset_offset(_ctx(request), request)
        assert consumer.resets == [("T", {mq: 17})]

    _in_loop(go)


def test_running_info_and_consume_directly() -> None:
    async def go(instance: ClientInstance) -> None:
        instance.register_consumer(FakeConsumer("C"))
        ask = h.GetConsumerRunningInfoRequestHeader(consumer_group="C", client_id="x")
        request = RemotingCommand.request(
            RequestCode.GET_CONSUMER_RUNNING_INFO, ask.to_ext_fields()
        )
        response = instance._on_get_running_info(_ctx(request), request)
        assert response.code == ResponseCode.SUCCESS
        assert (
            fastjson.loads(response.body or b"")["properties"]["consumeType"] == "CONSUME_PASSIVELY"
        )
        unknown = h.GetConsumerRunningInfoRequestHeader(consumer_group="nobody", client_id="x")
        request = RemotingCommand.request(
            RequestCode.GET_CONSUMER_RUNNING_INFO, unknown.to_ext_fields()
        )
        assert (
            instance._on_get_running_info(_ctx(request), request).code == ResponseCode.SYSTEM_ERROR
        )

        msg = MessageExt("T", b"x", store_host=HostPort(b"\x7f\x00\x00\x01", 1))
        direct = h.ConsumeMessageDirectlyResultRequestHeader(consumer_group="C", broker_name="a")
        request = RemotingCommand.request(
            RequestCode.CONSUME_MESSAGE_DIRECTLY, direct.to_ext_fields(), encode_record(msg)
        )
        response = await instance._on_consume_directly(_ctx(request), request)
        assert fastjson.loads(response.body or b"") == {
            "consumeResult": "CR_SUCCESS",
            "remark": "T",
        }

    _in_loop(go)


def test_transaction_checks_go_to_the_producer_of_the_message_s_group() -> None:
    async def go(instance: ClientInstance) -> None:
        producer = FakeProducer("TXG")
        instance.register_producer(producer)
        msg = MessageExt(
            "T", b"x", properties={"PGROUP": "TXG", "UNIQ_KEY": "U"},
            store_host=HostPort(b"\x7f\x00\x00\x01", 1),
        )  # fmt: skip
        header = h.CheckTransactionStateRequestHeader(
            tran_state_table_offset=1, commit_log_offset=2
        )
        request = RemotingCommand.request(
            RequestCode.CHECK_TRANSACTION_STATE, header.to_ext_fields(), encode_record(msg)
        )
        assert instance._on_check_transaction_state(_ctx(request), request) is None
        ((addr, got, got_header),) = producer.checks
        assert addr == "127.0.0.1:10911"
        assert got.properties["UNIQ_KEY"] == "U"
        assert got_header.commit_log_offset == 2
        other = MessageExt("T", b"x", properties={"PGROUP": "unknown"})
        request.body = encode_record(other)
        assert instance._on_check_transaction_state(_ctx(request), request) is None
        assert len(producer.checks) == 1

    _in_loop(go)


def test_acquire_shares_one_instance_per_loop_and_config() -> None:
    async def go() -> None:
        a = ClientInstance.acquire(CONFIG)
        b = ClientInstance.acquire(CONFIG)
        assert a is b
        other = ClientInstance.acquire(
            ClientConfig(namesrv_addr="127.0.0.1:9876", client_ip="10.0.0.1", instance_name="u")
        )
        assert other is not a
        await other.release()
        await a.release()
        assert not a._closed
        await b.release()
        assert a._closed
        fresh = ClientInstance.acquire(CONFIG)
        assert fresh is not a
        await fresh.release()

    asyncio.run(go())


def test_failures_refresh_a_route_at_most_once_per_interval() -> None:
    from ariane.common.clock import ManualClock

    clock = ManualClock()
    config = ClientConfig(
        namesrv_addr="127.0.0.1:9876", client_ip="10.0.0.1", instance_name="t-fail",
        route_refresh_on_failure_ms=500, clock=clock,
    )  # fmt: skip

    async def go() -> list[str]:
        instance = ClientInstance(config)
        fetched: list[str] = []

        async def fetch(topic: str) -> TopicRouteData | None:
            fetched.append(topic)
            return _route()

        instance.api.get_topic_route = fetch  # type: ignore[method-assign]
        try:
            assert await instance.refresh_route_after_failure("T")
            assert not await instance.refresh_route_after_failure("T")  # too soon
            await instance.refresh_route_after_failure("U")  # another topic: its own limit
            clock.advance(499)
            await instance.refresh_route_after_failure("T")
            clock.advance(1)
            await instance.refresh_route_after_failure("T")
        finally:
            await instance.close()
        return fetched

    assert asyncio.run(go()) == ["T", "U", "T"]


def test_a_failure_refresh_follows_the_master_through_a_dledger_failover() -> None:
    """The routes a DLedger failover shows one after another: the leader at :1 dies (the
    group has no master for a moment), then :2 registers as master (id 0) and :1 comes back
    as a slave. Each failure-triggered refresh that sees a change says so and hands the
    producer the new writable queues and the client the new master address; an unchanged
    route is reported as such and leaves everything as it was."""
    from ariane.common.clock import ManualClock

    clock = ManualClock()
    config = ClientConfig(
        namesrv_addr="127.0.0.1:9876", client_ip="10.0.0.1", instance_name="t-failover",
        route_refresh_on_failure_ms=500, clock=clock,
    )  # fmt: skip
    queues = [QueueData("a", 4, 4, 6)]
    routes = [
        TopicRouteData(queues, [BrokerData("C", "a", {0: "127.0.0.1:1", 2: "127.0.0.1:2"})]),
        TopicRouteData(queues, [BrokerData("C", "a", {0: "127.0.0.1:1", 2: "127.0.0.1:2"})]),
        TopicRouteData(queues, [BrokerData("C", "a", {2: "127.0.0.1:2", 3: "127.0.0.1:3"})]),
        TopicRouteData(queues, [BrokerData("C", "a", {0: "127.0.0.1:2", 3: "127.0.0.1:3"})]),
        TopicRouteData(
            queues,
            [BrokerData("C", "a", {0: "127.0.0.1:2", 1: "127.0.0.1:1", 3: "127.0.0.1:3"})],
        ),
    ]

    async def go() -> list[tuple[bool, str | None, int]]:
        instance = ClientInstance(config)
        producer = FakeProducer("P")
        instance.register_producer(producer)
        seen: list[tuple[bool, str | None, int]] = []

        async def fetch(topic: str) -> TopicRouteData | None:
            return routes[len(seen)]

        instance.api.get_topic_route = fetch  # type: ignore[method-assign]
        try:
            for _ in routes:
                changed = await instance.refresh_route_after_failure("T")
                clock.advance(500)
                info = producer.infos["T"]
                seen.append(
                    (changed, instance.find_broker_addr_in_publish("a"), len(info.message_queues))
                )
        finally:
            await instance.close()
        return seen

    assert asyncio.run(go()) == [
        (True, "127.0.0.1:1", 4),  # first route: the leader :1
        (False, "127.0.0.1:1", 4),  # the same route again: nothing changed
        (True, None, 0),  # the leader died: no master, nothing writable (sends wait)
        (True, "127.0.0.1:2", 4),  # :2 elected and registered as master
        (True, "127.0.0.1:2", 4),  # :1 back as a slave: the master stays :2
    ]
