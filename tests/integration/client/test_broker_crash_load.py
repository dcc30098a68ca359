"""``ariane broker`` SIGKILLed at random moments while our SDK producer sends and a push
consumer consumes, under SYNC_FLUSH and ASYNC_FLUSH.

After the last restart every acknowledged message is consumed; duplicates are counted and
must stay within the uncommitted-offset window: a message is redelivered only if it was
consumed less than ``flushConsumerOffsetInterval`` (the broker's offset persistence) plus
``persistConsumerOffsetInterval`` (the client's commit period) before a kill, or while the
broker was down and restarting. Consumption resumes from the committed offsets (never from
the start) and the group's committed offsets reach the end of every queue.

Two kills per mode keep the suite fast; ``ARIANE_CRASH_TRIALS=20`` runs the acceptance soak.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections import Counter
from typing import Any

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


class Consumed:
    """The listener: every delivery with the time it arrived."""

    def __init__(self) -> None:
        self.at: list[tuple[float, bytes]] = []

    async def __call__(
        self, msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
    ) -> ConsumeConcurrentlyStatus:
        now = time.monotonic()
        self.at.extend((now, m.body) for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    def bodies(self) -> set[bytes]:
        return {body for _, body in self.at}


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
        outages: list[tuple[float, float]] = []  # (kill time, broker ready again)
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
                    killed = time.monotonic()
                    await asyncio.to_thread(fresh_cluster.restart_broker, "broker-a", crash=True)
                    outages.append((killed, time.monotonic()))
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
                last = max(up for _, up in outages)
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
        counts = Counter(body for _, body in got.at)
        prefix = b"%s-" % mode.encode()
        assert all(body.startswith(prefix) for body in counts), "a foreign message"
        first: dict[bytes, float] = {}
        for t, body in got.at:
            first.setdefault(body, t)
        # a message is redelivered only if its first delivery fell in the uncommitted window
        # of a kill: consumed shortly before it (offsets not yet persisted by the broker) or
        # while the broker was down and starting again
        at_risk = {
            body
            for body, t in first.items()
            if any(k - window_s <= t <= up + 1.0 for k, up in outages)
        }
        redelivered = {body for body, n in counts.items() if n > 1}
        assert redelivered <= at_risk, sorted(redelivered - at_risk)[:5]
        duplicates = sum(n - 1 for n in counts.values())
        assert len(redelivered) < len(want) / 2, "consumption restarted from the beginning"
        print(
            f"{mode}: {TRIALS} kills, {len(want)} acked, all consumed, {duplicates} duplicates "
            f"({len(at_risk)} consumed in the uncommitted windows)"
        )

    run(go())
