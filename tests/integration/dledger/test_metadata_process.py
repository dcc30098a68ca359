"""A DLedger follower copies the leader's metadata even when it started before any leader was
elected: it keeps registering until the NameServer names the master, then copies its topics
every ``slaveSynchronizeInterval``. A topic created on the leader alone is still writable after
the leader is SIGKILLed, on whichever node takes over."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from ariane.client import Admin, ClientConfig, Message, Producer
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


async def _until(what: str, check: object, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not await check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.1)


def test_followers_copy_a_topic_created_on_the_leader_and_serve_it_after_failover(
    tmp_path: Path,
) -> None:
    cluster = DLedgerCluster(tmp_path).start()

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
            victim = cluster.node_at(master)
            assert victim is not None
            await asyncio.to_thread(cluster.kill, victim)
            new_master = await cluster.master(admin, not_addr=master, timeout_s=60)
            assert new_master in followers
            assert await _has_topic(admin, new_master)
        config = ClientConfig(namesrv_addr=cluster.namesrv_addr, poll_name_server_interval_ms=500)
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
