"""Rebalancing against real processes: consumers joining and leaving a group, and orderly
consumption (per-queue order, one consumer per queue at a time)."""

from __future__ import annotations

import asyncio
import itertools
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ariane.client import (
    ConsumeFromWhere,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    Message,
    MessageExt,
    MessageModel,
    MessageQueue,
    Producer,
    PushConsumer,
)
from tests.integration.client.conftest import run
from tests.integration.client.consumer_support import (
    CONSUMER_BROKER_CONF,
    Collector,
    create_topic,
    fast_config,
)
from tests.support.cluster import Cluster
from tests.support.polling import await_until

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def rcluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("rebalance-cluster"))
    try:
        yield c.start(**CONSUMER_BROKER_CONF)
    finally:
        c.stop()


def _owned(consumer: PushConsumer, topic: str) -> set[MessageQueue]:
    return {
        mq
        for mq, pq in consumer.rebalance.process_queue_table.items()
        if mq.topic == topic and not pq.dropped
    }


def _partitioned(consumers: list[PushConsumer], topic: str, queues: int) -> bool:
    shares = [_owned(c, topic) for c in consumers]
    union = set().union(*shares)
    return len(union) == queues and sum(len(s) for s in shares) == queues and all(shares)


def test_consumers_join_and_leave_and_every_message_is_consumed(rcluster: Cluster) -> None:
    topic, queues = "RbJoinLeave", 8

    async def go() -> None:
        await create_topic(rcluster, topic, queues)
        got = Collector()
        sent: list[str] = []
        stop = asyncio.Event()

        async def produce() -> None:
            async with Producer("rb_prod", namesrv_addr=rcluster.namesrv_addr) as producer:
                i = 0
                while not stop.is_set():
                    result = await producer.send(Message(topic, b"m%d" % i))
                    sent.append(result.msg_id)
                    i += 1
                    await asyncio.sleep(0.005)

        def make(name: str) -> PushConsumer:
            c = PushConsumer(
                "cg_rb",
                client_config=fast_config(rcluster, name),
                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            )
            c.subscribe(topic)
            c.register_message_listener(got)  # one collector: the group's view
            return c

        producer = asyncio.create_task(produce())
        members = [make("rb-1")]
        await members[0].start()
        await await_until(lambda: _partitioned(members, topic, queues), what="one owner")
        for name in ("rb-2", "rb-3"):
            members.append(make(name))
            await members[-1].start()
            await await_until(lambda: _partitioned(members, topic, queues), what=f"{name} joined")
        leaving = members.pop(1)
        await leaving.close()
        await await_until(lambda: _partitioned(members, topic, queues), what="after a leave")
        stop.set()
        await producer
        await await_until(lambda: got.ids() >= set(sent), what="every message consumed")
        for c in members:
            await c.close()
        assert sent

    run(go())


def test_orderly_keeps_order_per_key_and_one_consumer_per_queue(rcluster: Cluster) -> None:
    topic, keys, per_key = "RbOrderly", 6, 40

    async def go() -> None:
        await create_topic(rcluster, topic, 4)
        active: dict[MessageQueue, int] = defaultdict(int)
        overlaps: list[MessageQueue] = []
        seqs: dict[str, list[int]] = defaultdict(list)
        by_consumer: dict[str, int] = defaultdict(int)

        async def listener(
            name: str, msgs: list[MessageExt], ctx: ConsumeOrderlyContext
        ) -> ConsumeOrderlyStatus:
            by_consumer[name] += len(msgs)
            mq = ctx.message_queue
            if active[mq]:
                overlaps.append(mq)
            active[mq] += 1
            try:
                for m in msgs:
                    seqs[m.keys[0]].append(int(m.body))
                await asyncio.sleep(0.002)  # widen the window a second owner would hit
            finally:
                active[mq] -= 1
            return ConsumeOrderlyStatus.SUCCESS

        def make(name: str) -> PushConsumer:
            c = PushConsumer(
                "cg_orderly",
                client_config=fast_config(rcluster, name),
                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                lock_interval_ms=500,
                consume_message_batch_max_size=3,
            )
            c.subscribe(topic)

            async def mine(
                msgs: list[MessageExt], ctx: ConsumeOrderlyContext
            ) -> ConsumeOrderlyStatus:
                return await listener(name, msgs, ctx)

            c.register_message_listener_orderly(mine)
            return c

        async with Producer("ord_prod", namesrv_addr=rcluster.namesrv_addr) as producer:
            first = make("ord-1")
            await first.start()
            second = make("ord-2")
            for seq in range(per_key):
                for k in range(keys):
                    key = f"order-{k}"
                    await producer.send(Message(topic, b"%d" % seq, keys=key), sharding_key=key)
                if seq == per_key // 3:
                    # both consumers must take part: on a loaded machine the sends can outrun
                    # the first consumer's lock-then-pull start, leaving it nothing before it
                    # closes
                    await await_until(lambda: by_consumer["ord-1"] > 0, what="ord-1 consuming")
                    await second.start()
                if seq == 2 * per_key // 3:
                    await first.close()
        expected = list(range(per_key))
        await await_until(
            lambda: all(sorted(set(seqs[f"order-{k}"])) == expected for k in range(keys)),
            what="every key complete",
        )
        await second.close()
        assert overlaps == []
        assert by_consumer["ord-1"] > 0
        assert by_consumer["ord-2"] > 0
        for k in range(keys):
            delivered = seqs[f"order-{k}"]
            # never skips ahead; a queue that moved may replay from its committed offset
            for prev, cur in itertools.pairwise(delivered):
                assert cur == prev + 1 or cur <= prev, (k, delivered)

    run(go())


def test_orderly_suspend_retries_the_same_message_in_place(rcluster: Cluster) -> None:
    topic = "RbSuspend"

    async def go() -> None:
        await create_topic(rcluster, topic, 1)
        seen: list[int] = []
        failures = {"left": 2}

        def listener(msgs: list[MessageExt], ctx: ConsumeOrderlyContext) -> ConsumeOrderlyStatus:
            seen.append(int(msgs[0].body))
            if int(msgs[0].body) == 3 and failures["left"]:
                failures["left"] -= 1
                ctx.suspend_current_queue_time_ms = 50
                return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
            return ConsumeOrderlyStatus.SUCCESS

        c = PushConsumer(
            "cg_suspend",
            client_config=fast_config(rcluster, "susp"),
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        )
        c.subscribe(topic)
        c.register_message_listener_orderly(listener)  # a plain function: worker thread
        async with Producer("susp_prod", namesrv_addr=rcluster.namesrv_addr) as producer:
            for i in range(6):
                await producer.send(Message(topic, b"%d" % i))
        async with c:
            await await_until(lambda: 5 in seen, what="all six")
        assert seen == [0, 1, 2, 3, 3, 3, 4, 5]

    run(go())


def test_orderly_broadcasting_needs_no_locks(rcluster: Cluster, tmp_path: Path) -> None:
    topic = "RbOrderlyBroadcast"

    async def go() -> None:
        await create_topic(rcluster, topic, 2)
        seen: dict[str, list[int]] = defaultdict(list)

        def make(name: str) -> PushConsumer:
            c = PushConsumer(
                "cg_orderly_bc",
                client_config=fast_config(rcluster, name),
                message_model=MessageModel.BROADCASTING,
                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                offset_store_dir=tmp_path,
            )
            c.subscribe(topic)

            async def listener(msgs: list[MessageExt], ctx: ConsumeOrderlyContext) -> Any:
                seen[name].extend(int(m.body) for m in msgs if m.queue_id == 0)
                return ConsumeOrderlyStatus.SUCCESS

            c.register_message_listener_orderly(listener)
            return c

        async with Producer("obc_prod", namesrv_addr=rcluster.namesrv_addr) as producer:
            q0 = MessageQueue(topic, "broker-a", 0)
            for i in range(30):
                await producer.send(Message(topic, b"%d" % i), queue=q0)
        async with make("obc-1"), make("obc-2"):
            await await_until(
                lambda: len(seen["obc-1"]) >= 30 and len(seen["obc-2"]) >= 30, what="both"
            )
        assert seen["obc-1"] == list(range(30))
        assert seen["obc-2"] == list(range(30))

    run(go())
