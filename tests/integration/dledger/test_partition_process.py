"""Partitions between real broker processes (TCP proxies in front of the Raft ports): a leader
cut off from its group steps down and acknowledges nothing sent to it; the majority elects a
new master; when the network heals the old leader's uncommitted entries are cut (a copy
kept) and it catches up."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from ariane.client import Admin, ClientConfig, Message, MessageQueue, Producer
from ariane.remoting.protocol.codes import ResponseCode
from tests.integration.client.conftest import wait_for_route
from tests.integration.dledger.cluster import DLedgerCluster
from tests.support.rpc import send_message

pytestmark = [pytest.mark.integration, pytest.mark.slow]


async def _until(check: object, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not await check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out: {what}")
        await asyncio.sleep(0.05)


def test_minority_leader_acks_nothing_and_catches_up_after_healing(tmp_path: Path) -> None:
    cluster = DLedgerCluster(tmp_path, proxied=True, metrics=True).start()
    proxies = cluster.proxies
    assert proxies is not None

    async def main() -> None:
        config = ClientConfig(namesrv_addr=cluster.namesrv_addr, poll_name_server_interval_ms=500)
        async with Admin(namesrv_addr=cluster.namesrv_addr) as admin:
            old = await cluster.master(admin)
            old_node = cluster.node_at(old)
            assert old_node is not None
            await admin.create_topic("Part", read_queue_nums=1, write_queue_nums=1)
            await wait_for_route(admin, "Part")
            async with Producer("part-p", client_config=config) as producer:
                before = [await producer.send(Message("Part", b"before-%d" % i)) for i in range(20)]
            assert all(r.ok for r in before)

            proxies.isolate(old_node)
            lonely = await asyncio.gather(
                *(
                    asyncio.to_thread(send_message, old, "Part", b"lonely-%d" % i, timeout_ms=8000)
                    for i in range(5)
                )
            )
            assert [r.code for r in lonely].count(ResponseCode.SUCCESS) == 0, [
                (r.code, r.remark) for r in lonely
            ]
            new = await cluster.master(admin, not_addr=old, timeout_s=10)
            async with Producer("part-p2", client_config=config) as producer:
                after = [await producer.send(Message("Part", b"after-%d" % i)) for i in range(20)]
            assert all(r.ok for r in after)
            assert [r.queue_offset for r in after] == list(range(20, 40))

            proxies.heal()

            async def caught_up() -> bool:
                mine = await admin.broker_runtime_info(old)
                theirs = await admin.broker_runtime_info(new)
                return (
                    mine.get("dLegerRole") == "FOLLOWER"
                    and mine.get("dLegerCommittedIndex") == theirs.get("dLegerCommittedIndex")
                    and mine.get("dLegerLedgerEndIndex") == theirs.get("dLegerLedgerEndIndex")
                )

            await _until(caught_up, 15, "the old leader catches up")
            # Prometheus: role, term, commit index and each follower's lag
            new_node = cluster.node_at(new)
            assert new_node is not None
            lead = await asyncio.to_thread(cluster.scrape, new_node)
            follow = await asyncio.to_thread(cluster.scrape, old_node)
            assert lead['ariane_dledger_role{role="LEADER"}'] == 1
            assert follow['ariane_dledger_role{role="FOLLOWER"}'] == 1
            assert lead["ariane_dledger_term"] == follow["ariane_dledger_term"] > 0
            assert (
                lead["ariane_dledger_committed_index"] == follow["ariane_dledger_committed_index"]
            )
            assert lead[f'ariane_dledger_peer_lag_entries{{peer="{old_node}"}}'] == 0
            assert lead["ariane_dledger_role_changes_total"] >= 1
            # everything the old leader holds now is what the group committed
            bodies = []
            for offset in range(40):
                msg = await admin.query_message_by_offset(
                    MessageQueue("Part", "broker-a", 0), offset
                )
                assert msg is not None
                bodies.append(msg.body)
            assert bodies == [b"before-%d" % i for i in range(20)] + [
                b"after-%d" % i for i in range(20)
            ]

    try:
        asyncio.run(main())
    finally:
        cluster.stop()
    node_dirs = sorted(tmp_path.glob("n*/store/dledger-*/cut"))
    kept = b"".join(p.read_bytes() for d in node_dirs for p in d.iterdir())
    assert b"lonely-" in kept  # the cut entries were kept
