"""A DLedger follower copies the leader's metadata even when it started before any leader was
elected: it keeps registering until the NameServer names the master, then copies its topics
every ``slaveSynchronizeInterval``. A topic created on the leader alone is still writable after
the leader is SIGKILLed, on whichever node takes over. A message stamped with
``__ARIANE_DEDUP`` and acknowledged before the kill, sent again to the new master, is answered
with its first copy and stored once (the new master rebuilt its idempotence window from its
log when it took over)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from ariane.client import Admin, ClientConfig, Message, MessageQueue, Producer, SendResult
from ariane.common.msgid import decode_offset_msg_id
from ariane.common.properties import DEDUP
from ariane.errors import ArianeError
from tests.integration.dledger.cluster import DLedgerCluster

pytestmark = [pytest.mark.integration]

TOPIC = "LeaderOnly"


async def _has_topic(admin: Admin, addr: str) -> bool:
    try:
        config = await admin.topic_config(TOPIC, broker_addr=addr)
    except ArianeError:
        return False
    return (config.read_queue_nums, config.write_queue_nums) == (2, 2)


async def _routed(admin: Admin) -> bool:
    """The NameServer routes the topic with its two queues (the leader registers a new topic in
    the background; a producer that looks before that gets TBW102's four default queues)."""
    try:
        route = await admin.topic_route(TOPIC)
    except ArianeError:
        return False
    return [(q.broker_name, q.write_queue_nums) for q in route.queue_datas] == [("broker-a", 2)]


def _stamped() -> Message:
    return Message(TOPIC, b"stamped", properties={DEDUP: "row-1"})


async def _send_until_ok(producer: Producer, msg: Message, queue: MessageQueue) -> SendResult:
    deadline = time.monotonic() + 60
    while True:
        try:
            return await producer.send(msg, queue=queue)
        except ArianeError:
            assert time.monotonic() < deadline, "no send succeeded after the failover"
            await asyncio.sleep(0.2)


async def _until(what: str, check: object, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not await check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.1)


def test_followers_copy_a_topic_created_on_the_leader_and_serve_it_after_failover(
    tmp_path: Path,
) -> None:
    cluster = DLedgerCluster(tmp_path, metrics=True).start()
    config = ClientConfig(namesrv_addr=cluster.namesrv_addr, poll_name_server_interval_ms=500)

    async def main() -> None:
        async with Admin(namesrv_addr=cluster.namesrv_addr) as admin:
            master = await cluster.master(admin, timeout_s=60)
            await admin.create_topic(
                TOPIC, broker_addr=master, read_queue_nums=2, write_queue_nums=2
            )
            followers = [
                p.ready["broker"] for p in cluster.nodes.values() if p.ready["broker"] != master
            ]
            assert len(followers) == 2
            # learned in about a second plus one 500 ms copy round; the 20 s bound is below the
            # 30 s periodic registration, which alone would find the master eventually
            for addr in followers:
                await _until(
                    f"{TOPIC} on follower {addr}", lambda a=addr: _has_topic(admin, a), 20.0
                )
            await _until(f"{TOPIC}'s route at the NameServer", lambda: _routed(admin))
            async with Producer("dledger_meta_stamped", client_config=config) as producer:
                first = await producer.send(_stamped())
                assert first.ok
                victim = cluster.node_at(master)
                assert victim is not None
                await asyncio.to_thread(cluster.kill, victim)
                new_master = await cluster.master(admin, not_addr=master, timeout_s=60)
                assert new_master in followers
                assert await _has_topic(admin, new_master)
                again = await _send_until_ok(producer, _stamped(), first.message_queue)
            # the first copy's queue offset and physical offset (the hosts differ)
            assert again.queue_offset == first.queue_offset
            assert (
                decode_offset_msg_id(again.offset_msg_id).phys_offset
                == decode_offset_msg_id(first.offset_msg_id).phys_offset
            )

            async def first_in_its_queue() -> bool:  # dispatched by the new master's reput
                return await admin.max_offset(first.message_queue) == first.queue_offset + 1

            await _until("the first copy in its queue", first_in_its_queue)
            node = cluster.node_at(new_master)
            assert node is not None
            assert _dedup_duplicates(cluster, node) == 1.0
        async with Producer("dledger_meta_p", client_config=config) as producer:
            deadline = time.monotonic() + 60
            while True:
                try:
                    result = await producer.send(Message(TOPIC, b"after the failover"))
                    break
                except ArianeError:
                    assert time.monotonic() < deadline, "no send succeeded after the failover"
                    await asyncio.sleep(0.2)
        assert result.ok
        assert result.message_queue.topic == TOPIC
        async with Admin(namesrv_addr=cluster.namesrv_addr) as admin:
            # the ConsumeQueue entry is dispatched just after the quorum acknowledged the send

            async def stored() -> bool:
                found = await admin.query_message_by_offset(
                    result.message_queue, result.queue_offset
                )
                return found is not None and found.body == b"after the failover"

            await _until("the acknowledged message at its queue offset", stored)

    try:
        asyncio.run(main())
    finally:
        cluster.stop()


def _dedup_duplicates(cluster: DLedgerCluster, node: str) -> float:
    """``ariane_dedup_duplicates_total`` of ``node``."""
    import urllib.request

    url = f"http://{cluster.nodes[node].ready['metrics']}/metrics"
    with urllib.request.urlopen(url, timeout=10) as resp:
        text = resp.read().decode()
    for line in text.splitlines():
        if line.startswith("ariane_dedup_duplicates_total"):
            return float(line.rpartition(" ")[2])
    raise AssertionError("ariane_dedup_duplicates_total is not exported")
