"""Route refresh after failures (replication, issue 13): at once, then throttled per topic;
a master leaving the route sends reads to its slave, a returning one takes them back."""

from __future__ import annotations

import asyncio

from ariane.client._instance import ClientInstance
from ariane.client.config import ClientConfig
from ariane.remoting.protocol.route import BrokerData, QueueData, TopicRouteData

CONFIG = ClientConfig(
    namesrv_addr="127.0.0.1:9876", client_ip="10.0.0.1", instance_name="rr",
    route_refresh_on_failure_ms=60_000,
)  # fmt: skip


def _route(addrs: dict[int, str]) -> TopicRouteData:
    return TopicRouteData([QueueData("a", 4, 4, 6)], [BrokerData("C", "a", addrs)])


def test_refresh_on_failure_is_throttled_per_topic() -> None:
    async def go() -> None:
        instance = ClientInstance(CONFIG)
        calls: list[str] = []

        async def fake_update(topic: str, **kwargs: object) -> bool:
            calls.append(topic)
            return True

        instance.update_topic_route = fake_update  # type: ignore[method-assign]
        try:
            for _ in range(5):
                instance.refresh_route_soon("T")
            instance.refresh_route_soon("U")
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            assert sorted(calls) == ["T", "U"]
        finally:
            await instance.close()

    asyncio.run(go())


def test_reads_follow_the_master_out_and_back() -> None:
    async def go() -> None:
        instance = ClientInstance(CONFIG)
        try:
            instance._apply_route("T", _route({0: "m:1", 1: "s:2"}))
            assert instance.find_broker_addr_in_subscribe("a") == ("m:1", False)
            instance._apply_route("T", _route({1: "s:2"}))  # the master died
            assert instance.find_broker_addr_in_subscribe("a") == ("s:2", True)
            assert instance.find_broker_addr_in_publish("a") is None
            instance._apply_route("T", _route({0: "m:1", 1: "s:2"}))  # it came back
            assert instance.find_broker_addr_in_subscribe("a") == ("m:1", False)
        finally:
            await instance.close()

    asyncio.run(go())
