"""PullConsumer (lite pull) against real processes: assign, poll, seek, commit, pause, and
subscribe with rebalance; the blocking twin."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from ariane.client import (
    ConsumeFromWhere,
    Message,
    MessageExt,
    MessageQueue,
    PullConsumer,
    SyncPullConsumer,
)
from ariane.errors import InvalidArgumentError
from tests.integration.client.conftest import run
from tests.integration.client.consumer_support import (
    CONSUMER_BROKER_CONF,
    create_topic,
    fast_config,
    send_all,
)
from tests.support.cluster import Cluster

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def pcluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("pull-cluster"))
    try:
        yield c.start(**CONSUMER_BROKER_CONF)
    finally:
        c.stop()


async def _poll_until(
    consumer: PullConsumer, count: int, timeout_s: float = 20
) -> list[MessageExt]:
    out: list[MessageExt] = []
    deadline = time.monotonic() + timeout_s
    while len(out) < count:
        assert time.monotonic() < deadline, f"polled {len(out)} of {count}"
        out.extend(await consumer.poll(200))
    return out


def test_assign_poll_seek_commit(pcluster: Cluster) -> None:
    async def go() -> None:
        await create_topic(pcluster, "LiteAssign", 2)
        ids = await send_all(pcluster, [Message("LiteAssign", b"%d" % i) for i in range(20)])
        q0, q1 = (MessageQueue("LiteAssign", "broker-a", i) for i in (0, 1))
        consumer = PullConsumer(
            "cg_lite_assign",
            client_config=fast_config(pcluster, "lite-a"),
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            auto_commit=False,
        )
        consumer.assign([q0, q1])
        async with consumer:
            assert consumer.assignment() == {q0, q1}
            got = await _poll_until(consumer, 20)
            assert {m.msg_id for m in got} == set(ids)
            per_queue = {
                q: sorted(m.queue_offset for m in got if m.queue_id == q.queue_id) for q in (q0, q1)
            }
            assert all(offs == list(range(len(offs))) for offs in per_queue.values())
            assert await consumer.poll(100) == []
            await consumer.commit()
            assert await consumer.committed(q0) == len(per_queue[q0])
            assert await consumer.committed(q1) == len(per_queue[q1])
            # seek back: the same messages again, from offset 1 of queue 0
            await consumer.seek(q0, 1)
            again = await _poll_until(consumer, len(per_queue[q0]) - 1)
            assert [m.queue_offset for m in again] == list(range(1, len(per_queue[q0])))
            with pytest.raises(InvalidArgumentError):
                await consumer.seek(q0, 10_000)
            await consumer.commit({q1: 2})
            assert await consumer.committed(q1) == 2
            # pause: nothing new arrives from a paused queue
            consumer.pause([q0, q1])
            await send_all(pcluster, [Message("LiteAssign", b"later")], group="p2")
            assert await consumer.poll(300) == []
            consumer.resume([q0, q1])
            later = await _poll_until(consumer, 1)
            assert later[0].body == b"later"
            await consumer.seek_to_begin(q1)
            assert (await _poll_until(consumer, 1))[0].queue_offset == 0
            await consumer.seek_to_end(q0)
            await consumer.seek_to_end(q1)
            assert await consumer.poll(300) == []

    run(go())


def test_subscribe_splits_queues_and_auto_commits(pcluster: Cluster) -> None:
    async def go() -> None:
        await create_topic(pcluster, "LiteSub", 4)
        ids = set(await send_all(pcluster, [Message("LiteSub", b"%d" % i) for i in range(40)]))

        def make(name: str) -> PullConsumer:
            c = PullConsumer(
                "cg_lite_sub",
                client_config=fast_config(pcluster, name),
                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                auto_commit_interval_ms=100,
            )
            c.subscribe("LiteSub")
            return c

        a, b = make("ls-a"), make("ls-b")
        await a.start()
        await b.start()
        deadline = time.monotonic() + 20
        while not (len(a.assignment()) == 2 and len(b.assignment()) == 2):
            assert time.monotonic() < deadline, (a.assignment(), b.assignment())
            await asyncio.sleep(0.05)
        assert not a.assignment() & b.assignment()
        got: list[MessageExt] = []
        while {m.msg_id for m in got} < ids:
            assert time.monotonic() < deadline + 20
            for c in (a, b):
                got.extend(await c.poll(50))
        await asyncio.sleep(0.15)
        for c in (a, b):
            await c.poll(10)  # an auto-commit is due
        await a.close()
        await b.close()
        check = make("ls-check")
        async with check:
            total = 0
            for q in range(4):
                total += await check.committed(MessageQueue("LiteSub", "broker-a", q))
        assert total == 40

    run(go())


def test_sync_pull_consumer(pcluster: Cluster) -> None:
    async def setup() -> list[str]:
        await create_topic(pcluster, "LiteSync", 1)
        return await send_all(pcluster, [Message("LiteSync", b"%d" % i) for i in range(5)])

    ids = run(setup())
    consumer = SyncPullConsumer(
        "cg_lite_sync",
        client_config=fast_config(pcluster, "lite-sync"),
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    consumer.subscribe("LiteSync")
    with consumer:
        got: list[MessageExt] = []
        deadline = time.monotonic() + 20
        while len(got) < 5:
            assert time.monotonic() < deadline
            got.extend(consumer.poll(200))
        assert {m.msg_id for m in got} == set(ids)
        assert [m.queue_offset for m in got] == [0, 1, 2, 3, 4]  # one queue, in order
        consumer.commit()
        assert consumer.committed(MessageQueue("LiteSync", "broker-a", 0)) == 5
