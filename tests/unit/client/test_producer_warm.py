"""A started producer fetches its auto-create template's route (TBW102) before any send, as
RocketMQ's producer does (its createTopicKey is in the publish table from the start): the
broker addresses are known and the heartbeat has connected the brokers before the first send.
No sockets: the NameServer request and the heartbeat are replaced."""

from __future__ import annotations

import asyncio

import pytest

from ariane.client._api import ClientAPI
from ariane.client._instance import ClientInstance
from ariane.client._producer import Producer
from ariane.client._route import TopicPublishInfo
from ariane.client.config import ClientConfig
from ariane.client.errors import NoRouteError
from ariane.client.message import MessageQueue
from ariane.common.clock import ManualClock
from ariane.common.topics import AUTO_CREATE_TOPIC
from ariane.errors import ConnectError
from ariane.remoting.protocol.route import BrokerData, QueueData, TopicRouteData
from tests.unit.client.fakes import install, run

ROUTE = TopicRouteData([QueueData("b", 8, 8, 7)], [BrokerData("C", "b", {0: "127.0.0.1:1"})])


def test_start_fetches_the_template_route_and_heartbeats_the_broker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[str] = []
    beats: list[list[str]] = []

    async def get_topic_route(self: ClientAPI, topic: str, *args: object) -> TopicRouteData:
        asked.append(topic)
        return ROUTE

    async def heartbeat(self: ClientInstance) -> None:
        beats.append(sorted(self.broker_addr_table))

    monkeypatch.setattr(ClientAPI, "get_topic_route", get_topic_route)
    monkeypatch.setattr(ClientInstance, "send_heartbeat_to_all_brokers", heartbeat)

    async def go() -> None:
        producer = Producer("warm_p", namesrv_addr="127.0.0.1:1", instance_name="warm1")
        await producer.start()
        try:
            for _ in range(5):
                await asyncio.sleep(0)
            assert asked == [AUTO_CREATE_TOPIC]  # at once, not at the route service's turn
            instance = producer.instance
            assert instance.broker_addr_table == {"b": {0: "127.0.0.1:1"}}
            assert beats[-1] == ["b"]  # the first one, at registration, knew no broker
            assert producer.publish_topics() == [AUTO_CREATE_TOPIC]
            info = producer._publish[AUTO_CREATE_TOPIC]
            assert info.ok
            assert len(info.message_queues) == 8
        finally:
            await producer.close()

    asyncio.run(go())


def test_start_without_a_nameserver_or_template_route_still_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    answers: list[object] = [ConnectError("127.0.0.1:1 refused"), None]

    async def get_topic_route(self: ClientAPI, topic: str, *args: object) -> object:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(ClientAPI, "get_topic_route", get_topic_route)

    async def go() -> None:
        for name in ("warm2", "warm3"):
            producer = Producer("warm_p", namesrv_addr="127.0.0.1:1", instance_name=name)
            await producer.start()
            try:
                for _ in range(5):
                    await asyncio.sleep(0)
                assert producer.instance.broker_addr_table == {}
                assert not producer._publish[AUTO_CREATE_TOPIC].ok
            finally:
                await producer.close()
        assert answers == []

    asyncio.run(go())


class _RouteCounter:
    """A fake instance's route fetch: counts, waits a loop turn, installs a route or not."""

    def __init__(self, producer: Producer, found: list[bool]) -> None:
        self.producer, self.found, self.calls = producer, found, 0

    async def update_topic_route(self, topic: str, **kwargs: object) -> bool:
        self.calls += 1
        await asyncio.sleep(0)
        if kwargs or not self.found.pop(0):
            return False
        mqs = [MessageQueue(topic, "b", i) for i in range(4)]
        self.producer.update_topic_publish_info(
            topic, TopicPublishInfo(topic, mqs, have_route=True)
        )
        return True


def _fresh(found: list[bool]) -> tuple[Producer, _RouteCounter]:
    producer = Producer("G", client_config=ClientConfig(namesrv_addr="127.0.0.1:9876"))
    install(producer, ManualClock(), {"b": "127.0.0.1:1"})
    del producer._publish["T"]  # a topic not sent to yet
    fake = _RouteCounter(producer, found)
    producer._instance.update_topic_route = fake.update_topic_route  # type: ignore[union-attr]
    return producer, fake


def test_sends_that_find_no_route_share_the_fetch_on_its_way() -> None:
    async def go() -> None:
        producer, fake = _fresh([True])
        infos = await asyncio.gather(*(producer.find_publish_info("T") for _ in range(6)))
        assert fake.calls == 1  # one NameServer request, not six in turn
        assert all(info is infos[0] for info in infos)
        assert len(infos[0].message_queues) == 4
        assert producer._route_fetches == {}

    run(go)


def test_after_a_failed_shared_fetch_each_send_tries_again_itself() -> None:
    async def go() -> None:
        producer, fake = _fresh([False, True])
        results = await asyncio.gather(
            *(producer.find_publish_info("T") for _ in range(3)), return_exceptions=True
        )
        assert isinstance(results[0], NoRouteError)  # no route, no template route
        assert results[1] is results[2]  # the next fetch found it, shared by the third
        assert isinstance(results[1], TopicPublishInfo)
        assert fake.calls == 3  # topic + template, then the topic again
        assert producer._route_fetches == {}

    run(go)
