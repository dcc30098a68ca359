"""Consumers under stress: a broker crash and restart, flow control with a slow listener,
compressed bodies."""

from __future__ import annotations

import asyncio

import pytest

from ariane.client import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    Message,
    MessageExt,
    PushConsumer,
)
from tests.integration.client.conftest import run
from tests.integration.client.consumer_support import (
    Collector,
    committed,
    create_topic,
    fast_config,
    send_all,
)
from tests.support.cluster import Cluster
from tests.support.polling import await_until

pytestmark = pytest.mark.integration


def test_consumer_rides_through_a_broker_crash(fresh_cluster: Cluster) -> None:
    fresh_cluster.start()

    async def go() -> None:
        await create_topic(fresh_cluster, "CrashTopic", 2)
        got = Collector()
        consumer = PushConsumer(
            "cg_crash",
            client_config=fast_config(fresh_cluster, "crash"),
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        )
        consumer.subscribe("CrashTopic")
        consumer.register_message_listener(got)
        async with consumer:
            before = set(await send_all(fresh_cluster, [Message("CrashTopic", b"a")] * 10))
            await await_until(lambda: got.ids() >= before, what="before the crash")
            await await_until(
                lambda: asyncio.to_thread(
                    committed, fresh_cluster, "cg_crash", "CrashTopic", 2, 10
                ),
                what="offsets committed at the broker",
            )
            await asyncio.to_thread(fresh_cluster.restart_broker, "broker-a", crash=True)
            after = set(await send_all(fresh_cluster, [Message("CrashTopic", b"b")] * 10))
            await await_until(lambda: got.ids() >= after, timeout_s=60, what="after the restart")
        # at-least-once: everything arrived (redeliveries after the crash are allowed)
        assert got.ids() >= before | after

    run(go())


def test_flow_control_bounds_the_buffer_of_a_slow_listener(fresh_cluster: Cluster) -> None:
    fresh_cluster.start()

    async def go() -> None:
        await create_topic(fresh_cluster, "SlowTopic", 1)
        await send_all(fresh_cluster, [Message("SlowTopic", b"x" * 100)] * 120)
        buffered: list[int] = []
        consumer = PushConsumer(
            "cg_slow",
            client_config=fast_config(fresh_cluster, "slow"),
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            pull_threshold_for_queue=10,
            pull_batch_size=4,
            consume_thread_nums=2,
        )

        async def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> object:
            pq = consumer.rebalance.process_queue_table[ctx.message_queue]
            buffered.append(pq.msg_count)
            await asyncio.sleep(0.002)
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        consumer.subscribe("SlowTopic")
        consumer.register_message_listener(listener)
        async with consumer:
            await await_until(lambda: len(buffered) >= 120, what="all consumed")
        # a pull starts only while <= 10 are buffered and brings at most 4 more
        assert max(buffered) <= 14
        assert consumer.stats.flow_control_times > 0

    run(go())


def test_compressed_and_large_bodies_arrive_inflated(fresh_cluster: Cluster) -> None:
    fresh_cluster.start()

    async def go() -> None:
        await create_topic(fresh_cluster, "BigTopic", 1)
        bodies = [bytes([i]) * (5000 + i * 1000) for i in range(1, 6)]
        await send_all(fresh_cluster, [Message("BigTopic", b) for b in bodies])
        got = Collector()
        consumer = PushConsumer(
            "cg_big",
            client_config=fast_config(fresh_cluster, "big"),
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        )
        consumer.subscribe("BigTopic")
        consumer.register_message_listener(got)
        async with consumer:
            await await_until(lambda: len(got.got) >= 5, what="big bodies")
        assert sorted(m.body for m in got.got) == sorted(bodies)
        assert all(m.sys_flag & 0x1 == 0 for m in got.got)  # no longer marked compressed

    run(go())
