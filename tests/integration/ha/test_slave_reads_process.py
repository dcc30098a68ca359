"""Read/write separation with real processes (book §19): with ``slaveReadEnable`` a master
answers a pull of messages no longer "in memory" with ``suggestWhichBrokerId`` = the group's
``whichBrokerWhenConsumeSlowly`` (1), our push consumer pulls that queue from the slave, and
once it has caught up (the slave, whose master is up, answers its empty pull after a short
poll suggesting the master) it pulls from the master again. ``accessMessageInMemoryMaxRatio=0`` makes every read short of the newest
message "cold", so a few messages are enough."""

from __future__ import annotations

import asyncio
import time

import pytest

from ariane.client import (
    Admin,
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    Message,
    MessageExt,
    MessageQueue,
    Producer,
    PushConsumer,
    SendStatus,
)
from tests.integration.ha.support import (
    client_config,
    create_topic,
    run,
    runtime,
    wait_caught_up,
    wait_until,
)
from tests.support.cluster import HACluster

pytestmark = [pytest.mark.integration, pytest.mark.slow]

_QUEUES = 2
_BATCH = 8  # pull batch; also RocketMQ's maxTransferCountOnMessageInDisk (every read is cold)


async def counters(admin: Admin, addr: str) -> tuple[int, int]:
    """(pulls that found messages, messages transferred) of the broker at ``addr``."""
    info = await runtime(admin, addr)
    return int(info["getMessageTimesTotalFound"]), int(info["getMessageTransferedMsgCount"])


async def held(admin: Admin, addr: str) -> int:
    """Pulls the broker at ``addr`` holds (long polling)."""
    return int((await runtime(admin, addr))["pullHoldRequests"])


async def send_to_queues(producer: Producer, bodies: list[bytes]) -> list[list[bytes]]:
    """``bodies`` dealt over the queues, one batch per queue; the bodies of each queue in
    offset order."""
    dealt = [bodies[q::_QUEUES] for q in range(_QUEUES)]
    for q, part in enumerate(dealt):
        mq = MessageQueue("Cold", "broker-a", q)
        results = await producer.send_batch([Message("Cold", b) for b in part], queue=mq)
        assert all(r.status is SendStatus.SEND_OK for r in results)
    return dealt


async def wait_dispatched(admin: Admin, addrs: list[str], end: int) -> None:
    """Wait until every queue of "Cold" on each broker ends at ``end`` (a slave's ConsumeQueues
    follow its CommitLog a little later; a pull it cannot serve yet goes back to the master)."""
    deadline = time.monotonic() + 60
    while True:
        ends = [await admin.api.get_max_offset(a, "Cold", q) for a in addrs for q in range(_QUEUES)]
        if ends == [end] * len(ends):
            return
        assert time.monotonic() < deadline, ends
        await asyncio.sleep(0.05)


def test_cold_reads_move_to_the_slave_and_come_back(ha_cluster: HACluster) -> None:
    ha_cluster.conf = {"slaveReadEnable": "true", "accessMessageInMemoryMaxRatio": 0}
    ha_cluster.start()
    master, slave = ha_cluster.addr("broker-a/0"), ha_cluster.addr("broker-a/1")
    got: list[MessageExt] = []

    async def listener(
        msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
    ) -> ConsumeConcurrentlyStatus:
        got.extend(msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    async def go() -> None:
        async with (
            Admin(namesrv_addr=ha_cluster.namesrv_addr) as admin,
            Producer("pg_cold", client_config=client_config(ha_cluster, "pcold")) as producer,
        ):
            await create_topic(admin, ha_cluster, "Cold", _QUEUES)
            first = await send_to_queues(producer, [f"cold-{i}".encode() for i in range(100)])
            await wait_caught_up(admin, master, slave)
            await wait_dispatched(admin, [master, slave], 50)
            assert await counters(admin, master) == (0, 0)
            assert await counters(admin, slave) == (0, 0)
            consumer = PushConsumer(
                "cg_cold",
                client_config=client_config(ha_cluster, "ccold"),
                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                pull_batch_size=_BATCH,
            )
            consumer.subscribe("Cold")
            consumer.register_message_listener(listener)
            async with consumer:
                await wait_until(lambda: len(got) >= 100, 60, "the backlog")
                # the master served the first pull of each queue and sent it to the slave
                assert await counters(admin, master) == (_QUEUES, _QUEUES * _BATCH)
                found, moved = await counters(admin, slave)
                assert moved == 100 - _QUEUES * _BATCH  # the rest, each message once
                assert found == _QUEUES * -(-(50 - _BATCH) // _BATCH)
                # caught up: the slave (its master is up) holds each queue's empty pull a short
                # poll only and answers it suggesting the master; every pull of the group is
                # then held there
                deadline = time.monotonic() + 60
                while (await held(admin, slave), await held(admin, master)) != (0, _QUEUES + 1):
                    assert time.monotonic() < deadline, (
                        await held(admin, slave), await held(admin, master)
                    )  # fmt: skip
                    await asyncio.sleep(0.05)
                second = await send_to_queues(producer, [f"new-{i}".encode() for i in range(20)])
                await wait_until(lambda: len(got) >= 120, 60, "the new messages")
                m_found, m_moved = await counters(admin, master)
                s_moved = (await counters(admin, slave))[1]
                assert m_found >= 2 * _QUEUES  # back on the master for both queues
                assert (m_moved - _QUEUES * _BATCH) + (s_moved - moved) == 20
                deadline = time.monotonic() + 20
                while True:  # the consumer commits its offsets to the master
                    offsets = [
                        await admin.api.query_consumer_offset(master, "cg_cold", "Cold", q)
                        for q in range(_QUEUES)
                    ]
                    if offsets == [60] * _QUEUES:
                        break
                    assert time.monotonic() < deadline, offsets
                    await asyncio.sleep(0.1)
        # every (queue, offset) exactly once, with its body
        seen = sorted((m.queue_id, m.queue_offset, m.body) for m in got)
        expected = [
            (q, o, body) for q in range(_QUEUES) for o, body in enumerate(first[q] + second[q])
        ]
        assert seen == expected

    run(go())
