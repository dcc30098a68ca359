"""A DLedger group of three real broker processes under load: our SDK produces (every
acknowledgement recorded) and a push consumer consumes while the leader is SIGKILLed ten times
at random moments. Each time a new master must be registered within 10 s; in the end every
acknowledged message is consumed, at the queue offset its acknowledgement gave, and no queue
offset holds two different messages."""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path

import pytest

from ariane.client import (
    Admin,
    ClientConfig,
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    Message,
    MessageExt,
    Producer,
    PushConsumer,
)
from tests.integration.dledger.cluster import DLedgerCluster

pytestmark = [pytest.mark.integration, pytest.mark.slow]

KILLS = 10
TOPIC = "Failover"


def test_ten_leader_kills_under_load(tmp_path: Path) -> None:
    cluster = DLedgerCluster(tmp_path).start()
    rng = random.Random()
    seed = rng.randrange(1 << 30)
    rng.seed(seed)
    failovers: list[float] = []
    acked: dict[bytes, tuple[int, int]] = {}  # body -> (queue id, queue offset)
    failed = 0
    got: dict[bytes, set[tuple[int, int]]] = {}
    at_offset: dict[tuple[int, int], set[bytes]] = {}
    awaited: set[bytes] = set()
    all_consumed = asyncio.Event()

    async def listener(
        msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
    ) -> ConsumeConcurrentlyStatus:
        for m in msgs:
            got.setdefault(m.body, set()).add((m.queue_id, m.queue_offset))
            at_offset.setdefault((m.queue_id, m.queue_offset), set()).add(m.body)
            awaited.discard(m.body)
        if not awaited:
            all_consumed.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    async def produce(producer: Producer, stop: asyncio.Event) -> None:
        nonlocal failed
        i = 0
        while not stop.is_set():
            body = b"m-%06d" % i
            i += 1
            try:
                result = await producer.send(Message(TOPIC, body))
            except Exception:
                failed += 1
                await asyncio.sleep(0.02)
                continue
            acked[body] = (result.message_queue.queue_id, result.queue_offset)

    async def main() -> None:
        config = ClientConfig(
            namesrv_addr=cluster.namesrv_addr, poll_name_server_interval_ms=1000,
            rebalance_interval_ms=500, persist_consumer_offset_interval_ms=200,
            heartbeat_broker_interval_ms=1000,
        )  # fmt: skip
        async with Admin(namesrv_addr=cluster.namesrv_addr) as admin:
            master = await cluster.master(admin)
            await admin.create_topic(TOPIC, read_queue_nums=4, write_queue_nums=4)
            # retry_times=0: a send that fails is never stored twice by a retry
            producer = Producer("dledger-p", client_config=config, retry_times=0)
            consumer = PushConsumer("dledger-c", client_config=config)
            consumer.subscribe(TOPIC, "*")
            consumer.register_message_listener(listener)
            await producer.start()
            await consumer.start()
            stop = asyncio.Event()
            load = asyncio.create_task(produce(producer, stop))
            restart: asyncio.Future[object] | None = None
            try:
                for _ in range(KILLS):
                    await asyncio.sleep(rng.uniform(0.3, 1.5))
                    if restart is not None:  # three nodes up before the next kill
                        await restart
                    victim = cluster.node_at(master)
                    assert victim is not None
                    killed_at = time.monotonic()
                    await asyncio.to_thread(cluster.kill, victim)
                    master = await cluster.master(admin, not_addr=master, timeout_s=10)
                    failovers.append(time.monotonic() - killed_at)
                    restart = asyncio.ensure_future(asyncio.to_thread(cluster.start_node, victim))
                if restart is not None:
                    await restart
                await asyncio.sleep(0.5)
            finally:
                stop.set()
                await load
                await producer.close()
            awaited.update(set(acked) - set(got))
            all_consumed.clear()
            if awaited:
                try:
                    await asyncio.wait_for(all_consumed.wait(), 60)
                except TimeoutError:
                    pass  # reported below
            await consumer.close()

    try:
        asyncio.run(main())
    finally:
        cluster.stop()
    report = f"seed {seed}, failovers {[round(f, 2) for f in failovers]}, failed sends {failed}"
    print(report, "acked", len(acked))
    assert len(failovers) == KILLS, report
    assert max(failovers) < 10, report
    assert len(acked) > 100, report
    missing = set(acked) - set(got)
    assert not missing, f"{len(missing)} acknowledged messages never consumed ({report})"
    for body, (queue_id, offset) in acked.items():
        assert got[body] == {(queue_id, offset)}, (
            f"{body!r}: acked at {(queue_id, offset)}, consumed at {got[body]}"
        )
    twice = {pos: bodies for pos, bodies in at_offset.items() if len(bodies) > 1}
    assert not twice, f"offsets holding two messages: {list(twice.items())[:5]} ({report})"
    moved = {b: places for b, places in got.items() if len(places) > 1}
    assert not moved, f"messages at two offsets: {list(moved.items())[:5]} ({report})"
