"""A producer riding through a broker crash and restart on retries."""

from __future__ import annotations

import asyncio

import pytest

from ariane.client import Admin, ClientConfig, Message, Producer, SendResult
from tests.integration.client.conftest import run
from tests.support.cluster import Cluster
from tests.support.polling import await_for

pytestmark = pytest.mark.integration


def test_sends_keep_succeeding_while_one_broker_crashes_and_restarts(
    fresh_cluster: Cluster,
) -> None:
    fresh_cluster.start(("broker-a", "broker-b"))
    # a send that cannot reach broker-a retries on broker-b and fetches the route again at
    # once (the NameServer may still list broker-a: retries do the rest)
    # the NameServer drops broker-a when its connection closes; the producer learns the
    # restarted broker at its next route poll (30 s by default, 1 s here)
    config = ClientConfig(
        namesrv_addr=fresh_cluster.namesrv_addr, poll_name_server_interval_ms=1_000
    )

    async def go() -> None:
        async with Admin(namesrv_addr=fresh_cluster.namesrv_addr) as admin:
            # created (and persisted) by the admin: a topic auto-created by a send may not be
            # on disk yet when the broker is killed
            await admin.create_topic("RideThrough", read_queue_nums=4, write_queue_nums=4)
        async with Producer("pg_restart", client_config=config) as producer:
            acked: list[tuple[SendResult, bytes]] = []

            async def send(body: bytes) -> SendResult:
                result = await producer.send(Message("RideThrough", body))
                acked.append((result, body))
                return result

            # both brokers host the topic before the crash
            brokers: set[str] = set()
            for i in range(200):
                brokers.add((await send(b"warm-%d" % i)).message_queue.broker_name)
                if brokers == {"broker-a", "broker-b"}:
                    break
                await asyncio.sleep(0.01)
            assert brokers == {"broker-a", "broker-b"}

            await asyncio.to_thread(fresh_cluster.brokers["broker-a"].kill)
            during: list[SendResult] = []
            for i in range(40):
                during.append(await send(b"during-%d" % i))
            assert {r.message_queue.broker_name for r in during} == {"broker-b"}
            async_results = await asyncio.gather(
                *(producer.send_async(Message("RideThrough", b"async-%d" % i)) for i in range(40))
            )
            assert all(r.ok for r in async_results)
            acked += [(r, b"async-%d" % i) for i, r in enumerate(async_results)]

            await asyncio.to_thread(fresh_cluster.restart_broker, "broker-a")
            after: list[SendResult] = []
            for i in range(2000):
                after.append(await send(b"after-%d" % i))
                if after[-1].message_queue.broker_name == "broker-a":
                    break
                await asyncio.sleep(0.01)
            assert after[-1].message_queue.broker_name == "broker-a"
            assert all(r.ok for r in after)
        # every acknowledged message is stored where its answer said, with its body
        async with Admin(namesrv_addr=fresh_cluster.namesrv_addr) as admin:
            for result, body in acked:
                # a queue offset is readable once the broker's reput thread dispatched it,
                # after the answer: the last sends may not be yet
                stored = await await_for(
                    lambda r=result: admin.query_message_by_offset(  # type: ignore[misc]
                        r.message_queue, r.queue_offset
                    ),
                    lambda m: m is not None,
                )
                assert stored is not None, result
                assert stored.body == body
                assert stored.msg_id == result.msg_id
            slots = {(r.message_queue, r.queue_offset) for r, _ in acked}
            assert len(slots) == len(acked), "two acknowledged sends share a queue offset"

    run(go())
