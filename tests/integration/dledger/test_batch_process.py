"""Batch and single sends to a DLedger group go through the Raft log: after the leader that
acknowledged them is SIGKILLed, the node that takes over serves every one of them, with its
body, at the queue offset the send was answered with (a put that skipped the log would be on
the dead leader only)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from ariane.client import Admin, ClientConfig, Message, MessageQueue, Producer
from ariane.errors import ArianeError
from tests.integration.dledger.cluster import DLedgerCluster

pytestmark = [pytest.mark.integration]

TOPIC = "DLedgerBatch"


async def _read_back(admin: Admin, mq: MessageQueue, offsets: dict[int, bytes]) -> None:
    """Wait until the master serves each queue offset of ``offsets`` with its body."""
    deadline = time.monotonic() + 60
    pending = dict(offsets)
    while pending:
        for offset, body in list(pending.items()):
            try:
                found = await admin.query_message_by_offset(mq, offset)
            except ArianeError:  # the new master's route is not registered yet
                break
            if found is not None:
                assert found.body == body, f"offset {offset}"
                del pending[offset]
        if pending:
            assert time.monotonic() < deadline, f"offsets never served: {sorted(pending)}"
            await asyncio.sleep(0.2)


async def _has_topic(admin: Admin, addr: str) -> bool:
    try:
        await admin.topic_config(TOPIC, broker_addr=addr)
    except ArianeError:
        return False
    return True


def test_batch_and_single_sends_survive_the_leaders_kill(tmp_path: Path) -> None:
    cluster = DLedgerCluster(tmp_path).start()
    config = ClientConfig(namesrv_addr=cluster.namesrv_addr, poll_name_server_interval_ms=500)

    async def main() -> None:
        async with Admin(namesrv_addr=cluster.namesrv_addr) as admin:
            master = await cluster.master(admin, timeout_s=60)
            await admin.create_topic(
                TOPIC, broker_addr=master, read_queue_nums=1, write_queue_nums=1
            )
            mq = MessageQueue(TOPIC, "broker-a", 0)
            sent: dict[int, bytes] = {}
            async with Producer("dledger_batch_p", client_config=config) as producer:
                deadline = time.monotonic() + 30
                while True:  # the route may not name the topic yet
                    try:
                        first = await producer.send(Message(TOPIC, b"single-0"), queue=mq)
                        break
                    except Exception:
                        assert time.monotonic() < deadline, "no send succeeded"
                        await asyncio.sleep(0.2)
                sent[first.queue_offset] = b"single-0"
                bodies = [b"batch-%02d" % i for i in range(10)]
                (result,) = await producer.send_batch(
                    [Message(TOPIC, b) for b in bodies], queue=mq
                )  # one request: ten small bodies
                assert result.ok
                start = result.queue_offset
                sent.update({start + i: b for i, b in enumerate(bodies)})
                last = await producer.send(Message(TOPIC, b"single-1"), queue=mq)
                sent[last.queue_offset] = b"single-1"
            assert sorted(sent) == list(range(first.queue_offset, first.queue_offset + 12))
            for proc in cluster.nodes.values():  # followers copy the topic (metadata sync)
                addr = proc.ready["broker"]
                deadline = time.monotonic() + 30
                while not await _has_topic(admin, addr):
                    assert time.monotonic() < deadline, f"{TOPIC} never reached {addr}"
                    await asyncio.sleep(0.2)
            victim = cluster.node_at(master)
            assert victim is not None
            await asyncio.to_thread(cluster.kill, victim)
            await cluster.master(admin, not_addr=master, timeout_s=60)
            await _read_back(admin, mq, sent)
            assert await admin.max_offset(mq) == first.queue_offset + 12

    try:
        asyncio.run(main())
    finally:
        cluster.stop()
