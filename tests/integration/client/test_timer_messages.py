"""Timer messages (RocketMQ 5 arbitrary delivery time) against real processes: delivered at
or after their time, never early, each once; a broker killed with SIGKILL while timers wait
delivers all of them after its restart, none twice."""

from __future__ import annotations

import asyncio
import random
import time

import pytest

from ariane.client import Message, MessageExt, Producer, SimpleConsumer
from tests.integration.client.conftest import run
from tests.integration.client.consumer_support import create_topic, fast_config
from tests.support.cluster import Cluster

pytestmark = pytest.mark.integration

#: 100 ms slots, so that the tests wait little.
TIMER_BROKER_CONF: dict[str, object] = {
    "timerPrecisionMs": 100,
    "mappedFileSizeTimerLog": 1024 * 1024,
    "timerFlushIntervalMs": 200,
}


@pytest.fixture
def tcluster(fresh_cluster: Cluster) -> Cluster:
    return fresh_cluster.start(**TIMER_BROKER_CONF)


async def send_timed(cluster: Cluster, topic: str, due: list[int]) -> dict[str, int]:
    """Send one message per due time; message id -> due time."""
    out: dict[str, int] = {}
    async with Producer("timer_producer", namesrv_addr=cluster.namesrv_addr) as producer:
        for i, at in enumerate(due):
            result = await producer.send(Message(topic, b"%d" % i, deliver_time_ms=at))
            out[result.msg_id] = at
    return out


async def receive_all(
    cluster: Cluster, group: str, topic: str, want: int, timeout_s: float = 60
) -> list[MessageExt]:
    got: list[MessageExt] = []
    async with SimpleConsumer(
        group, {topic: "*"}, client_config=fast_config(cluster, group), await_duration_ms=1000,
        consume_from_max=False,
    ) as consumer:  # fmt: skip
        deadline = time.monotonic() + timeout_s
        while len(got) < want:
            assert time.monotonic() < deadline, f"received {len(got)} of {want}"
            batch = await consumer.receive(32)
            for msg in batch:
                await consumer.ack(msg)
            got += batch
        await asyncio.sleep(1)  # anything more (a duplicate) would arrive now
        got += await consumer.receive(32)
    return got


def test_timer_messages_arrive_at_their_time_once(tcluster: Cluster) -> None:
    async def go() -> None:
        await create_topic(tcluster, "TimerOnce", 4)
        now = int(time.time() * 1000)
        rng = random.Random(3)
        due = [now + rng.randrange(300, 3000) for _ in range(60)] + [now - 1000]
        sent = await send_timed(tcluster, "TimerOnce", due)
        got = await receive_all(tcluster, "cg_timer_once", "TimerOnce", len(due))
        assert sorted(m.msg_id for m in got) == sorted(sent)
        for msg in got:
            at = sent[msg.msg_id]
            # never early: the delivered copy was stored at or after its time
            assert msg.store_timestamp_ms >= at or at < now
            assert msg.properties.get("TIMER_DELIVER_MS") == str(at)

    run(go())


def test_sigkill_with_waiting_timers_loses_none_and_repeats_none(tcluster: Cluster) -> None:
    async def go() -> None:
        await create_topic(tcluster, "TimerCrash", 2)
        now = int(time.time() * 1000)
        due = [now + 500 + 40 * i for i in range(100)]  # due over 4.5 s
        sent = await send_timed(tcluster, "TimerCrash", due)
        # some are delivered, the others wait when the broker dies
        await asyncio.sleep(max(0.0, (due[40] - time.time() * 1000) / 1000))
        tcluster.restart_broker(crash=True)
        got = await receive_all(tcluster, "cg_timer_crash", "TimerCrash", len(due))
        assert sorted(m.msg_id for m in got) == sorted(sent)  # each once

    run(go())
