"""``ariane broker`` SIGKILLed at random moments while our SDK producer sends and a push
consumer consumes, under SYNC_FLUSH and ASYNC_FLUSH.

After the last restart every acknowledged message is consumed. Duplicates come in two kinds,
told apart by the queue position they are delivered from, and each is bounded:

- a redelivery (one stored message, one queue offset, delivered again) only if its first
  delivery was less than ``flushConsumerOffsetInterval`` (the broker's offset persistence)
  plus ``persistConsumerOffsetInterval`` (the client's commit period) before a kill, or while
  the broker was down and restarting;
- a second stored copy (the same body at two queue positions) only across a kill: a producer
  whose answer the kill lost sends again, and plain sends are not deduplicated (as in
  RocketMQ), so one copy was stored before the broker went back up and another after it went
  down.

Consumption resumes from the committed offsets (never from the start) and the group's
committed offsets reach the end of every queue.

Two kills per mode keep the suite fast; ``ARIANE_CRASH_TRIALS=20`` runs the acceptance soak.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections import Counter
from typing import Any, NamedTuple

import pytest

from ariane.client import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    Message,
    MessageExt,
    Producer,
    PushConsumer,
    SendStatus,
)
from tests.integration.client.conftest import run
from tests.integration.client.consumer_support import committed, create_topic, fast_config
from tests.support.cluster import Cluster
from tests.support.polling import await_until

pytestmark = pytest.mark.integration

TOPIC = "CrashLoad"
QUEUES = 4
OFFSET_FLUSH_MS = 1000  # the broker's flushConsumerOffsetInterval in this test
TRIALS = int(os.environ.get("ARIANE_CRASH_TRIALS", "2"))


class Delivery(NamedTuple):
    at: float  # time.monotonic() when the listener got it
    body: bytes
    position: tuple[int, int]  # (queue id, queue offset)
    stored_ms: int  # the broker's store timestamp


class Consumed:
    """The listener: every delivery with the time it arrived and where it was stored."""

    def __init__(self) -> None:
        self.at: list[Delivery] = []

    async def __call__(
        self, msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
    ) -> ConsumeConcurrentlyStatus:
        now = time.monotonic()
        self.at.extend(
            Delivery(now, m.body, (m.queue_id, m.queue_offset), m.store_timestamp_ms) for m in msgs
        )
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    def bodies(self) -> set[bytes]:
        return {d.body for d in self.at}


class Outage(NamedTuple):
    killed: float  # time.monotonic() just before the SIGKILL
    up: float  # time.monotonic() once the broker answered again
    killed_ms: int  # the same two moments on the wall clock (store timestamps are wall)
    up_ms: int


def check_duplicates(got: Consumed, outages: list[Outage], window_s: float) -> tuple[int, int]:
    """Assert the two bounds of the module docstring; return (redelivered, stored twice)."""
    first: dict[tuple[int, int], float] = {}
    deliveries = Counter(d.position for d in got.at)
    for d in got.at:
        first.setdefault(d.position, d.at)
    redelivered = {pos for pos, n in deliveries.items() if n > 1}
    at_risk = {
        pos
        for pos, t in first.items()
        if any(o.killed - window_s <= t <= o.up + 1.0 for o in outages)
    }
    assert redelivered <= at_risk, sorted(redelivered - at_risk)[:5]
    copies: dict[bytes, dict[tuple[int, int], int]] = {}
    for d in got.at:
        copies.setdefault(d.body, {})[d.position] = d.stored_ms
    twice = {body: stored for body, stored in copies.items() if len(stored) > 1}
    for body, stored in twice.items():
        earliest, latest = min(stored.values()), max(stored.values())
        assert any(earliest <= o.up_ms and latest >= o.killed_ms for o in outages), (
            f"{body!r} stored at {sorted(stored)} at {sorted(stored.values())} ms, "
            f"with no kill between: {outages}"
        )
    return len(redelivered), len(twice)


@pytest.mark.parametrize("mode", ["SYNC_FLUSH", "ASYNC_FLUSH"])
def test_broker_killed_at_random_moments_under_load(fresh_cluster: Cluster, mode: str) -> None:
    crash_under_load(fresh_cluster, mode)


def crash_under_load(fresh_cluster: Cluster, mode: str, cpp: Any = None) -> None:
    """The test above; ``cpp`` (a ``tests.compat.conftest.CppClient``) adds the C++ client's
    producer, sending synchronously all along (tests/compat/test_cpp_crash_load.py)."""
    rng = random.Random(f"crash-load-{mode}")
    fresh_cluster.start(flushDiskType=mode, flushConsumerOffsetInterval=OFFSET_FLUSH_MS)
    config = fast_config(fresh_cluster, f"crash-load-{mode}")
    window_s = (OFFSET_FLUSH_MS + config.persist_consumer_offset_interval_ms) / 1000 + 0.5

    async def go() -> None:
        await create_topic(fresh_cluster, TOPIC, QUEUES)
        got = Consumed()
        acked: list[bytes] = []
        outages: list[Outage] = []
        stop = asyncio.Event()

        async def produce(producer: Producer) -> None:
            i = 0
            while not stop.is_set():
                body = b"%s-%06d" % (mode.encode(), i)
                i += 1
                try:
                    r = await producer.send(Message(TOPIC, body), timeout_ms=2000)
                except Exception:  # the broker is down: not acknowledged, go on
                    await asyncio.sleep(0.05)
                    continue
                if r.status is SendStatus.SEND_OK:
                    acked.append(body)

        consumer = PushConsumer(
            f"cg_crash_load_{mode.lower()}",
            client_config=config,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        )
        consumer.subscribe(TOPIC)
        consumer.register_message_listener(got)
        producer = Producer("pg_crash_load", client_config=fast_config(fresh_cluster, "p"))
        cpp_run = None
        if cpp is not None:
            cpp_run = cpp.spawn(
                "producer.py",
                ["--namesrv", fresh_cluster.namesrv_addr, "--topic", TOPIC, "--count", "10000000",
                 "--group", "PG_CPP_CRASH", "--body-prefix", f"{mode}-cpp-", "--timeout-ms", "3000"],
            )  # fmt: skip
            assert cpp_run.wait_for("sent", 1), cpp_run.tail()
        async with consumer, producer:
            task = asyncio.create_task(produce(producer))
            try:
                for _ in range(TRIALS):
                    n = len(acked) + 20
                    await await_until(lambda n=n: len(acked) >= n, what="sends acked")
                    await asyncio.sleep(rng.uniform(0.0, 1.5))  # a random moment
                    killed, killed_ms = time.monotonic(), time.time_ns() // 1_000_000
                    await asyncio.to_thread(fresh_cluster.restart_broker, "broker-a", crash=True)
                    up_ms = time.time_ns() // 1_000_000 + 1
                    outages.append(Outage(killed, time.monotonic(), killed_ms, up_ms))
                n = len(acked) + 20
                await await_until(lambda n=n: len(acked) >= n, what="sends after the last")
            finally:
                stop.set()
                await task
                if cpp_run is not None:
                    cpp_run.terminate()
                    await asyncio.to_thread(cpp_run.wait, 60)
            want = set(acked)
            if cpp_run is not None:
                cpp_acked = {
                    f"{mode}-cpp-{e['i']}".encode()
                    for e in cpp_run.of("sent")
                    if e.get("status") == 0
                }
                last = max(o.up for o in outages)
                assert cpp_acked, cpp_run.tail()
                print(f"C++ producer: {len(cpp_acked)} acked, last restart at {last:.1f}")
                want |= cpp_acked
            await await_until(
                lambda: got.bodies() >= want, timeout_s=90, what="every acked message consumed"
            )
            total = len(acked)
            await await_until(
                lambda: asyncio.to_thread(
                    committed, fresh_cluster, consumer.group, TOPIC, QUEUES, total
                ),
                timeout_s=60,
                what="committed offsets at the end of every queue",
            )
        prefix = b"%s-" % mode.encode()
        assert all(d.body.startswith(prefix) for d in got.at), "a foreign message"
        redelivered, twice = check_duplicates(got, outages, window_s)
        assert redelivered < len(want) / 2, "consumption restarted from the beginning"
        print(
            f"{mode}: {TRIALS} kills, {len(want)} acked, all consumed, {redelivered} "
            f"redelivered, {twice} stored twice by a producer's retry across a kill"
        )

    run(go())
