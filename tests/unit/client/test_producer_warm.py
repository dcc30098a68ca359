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
from ariane.common.topics import AUTO_CREATE_TOPIC
from ariane.errors import ConnectError
from ariane.remoting.protocol.route import BrokerData, QueueData, TopicRouteData

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
