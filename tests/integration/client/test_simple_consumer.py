"""SimpleConsumer (RocketMQ 5 style, remoting POP) against real processes: receive and ack
every message byte for byte, redelivery after the invisible duration, change of the invisible
duration, dead letters after the maximum attempts, FIFO groups, POP next to push consumers, and
the blocking twin."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner

from ariane.admin.cli import admin
from ariane.client import (
    Admin,
    Message,
    MessageExt,
    MessageQueue,
    Producer,
    PushConsumer,
    SimpleConsumer,
    SyncSimpleConsumer,
)
from ariane.client._pop_api import receipt_handle_of
from ariane.common.hashing import consistent_hash, java_string_hash
from ariane.errors import InvalidArgumentError
from tests.integration.client.conftest import run, wait_for_route
from tests.integration.client.consumer_support import (
    Collector,
    create_topic,
    fast_config,
    send_all,
)
from tests.support.cluster import Cluster
from tests.support.polling import await_for, await_until

pytestmark = pytest.mark.integration

#: Revive every 100 ms, 100 ms timer slots: short invisible durations come back quickly.
POP_BROKER_CONF: dict[str, object] = {
    "reviveInterval": 100,
    "reviveQueueNum": 2,
    "timerPrecisionMs": 100,
    "mappedFileSizeTimerLog": 1024 * 1024,
}


@pytest.fixture(scope="module")
def scluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("simple-cluster"))
    try:
        yield c.start(**POP_BROKER_CONF)
    finally:
        c.stop()


def consumer(cluster: Cluster, group: str, topic: str, **kw: object) -> SimpleConsumer:
    kw.setdefault("await_duration_ms", 1000)
    return SimpleConsumer(
        group, {topic: "*"}, client_config=fast_config(cluster, group), consume_from_max=False,
        **kw,  # type: ignore[arg-type]
    )  # fmt: skip


async def receive_until(
    c: SimpleConsumer, count: int, timeout_s: float = 30, batch: int = 32, **kw: int
) -> list[MessageExt]:
    out: list[MessageExt] = []
    deadline = time.monotonic() + timeout_s
    while len(out) < count:
        assert time.monotonic() < deadline, f"received {len(out)} of {count}"
        out.extend(await c.receive(min(batch, count - len(out)), **kw))
    return out


def test_receive_and_ack_every_message_byte_for_byte(scluster: Cluster) -> None:
    async def go() -> None:
        await create_topic(scluster, "SimpleAll", 4)
        rng = random.Random(7)
        bodies = [rng.randbytes(rng.choice((1, 100, 5000, 200_000))) for _ in range(300)]
        ids = await send_all(scluster, [Message("SimpleAll", b, tags="T") for b in bodies])
        want = dict(zip(ids, bodies, strict=True))
        async with consumer(scluster, "cg_simple_all", "SimpleAll") as c:
            got = await receive_until(c, len(bodies))
            await asyncio.gather(*(c.ack(m) for m in got))
            assert len(got) == len(want)
            assert {m.msg_id: m.body for m in got} == want
            assert all(m.reconsume_times == 0 and m.topic == "SimpleAll" for m in got)
            assert await c.receive(32) == []  # acked: nothing comes back
        async with Admin(namesrv_addr=scluster.namesrv_addr) as admin:
            stats = await admin.consume_stats("cg_simple_all", "SimpleAll")
            assert sum(w.consumer_offset for w in stats.offset_table.values()) == 300

    run(go())


def test_unacked_message_comes_back_after_its_invisible_duration(scluster: Cluster) -> None:
    async def go() -> None:
        await create_topic(scluster, "SimpleRetry", 2)
        (mid,) = await send_all(scluster, [Message("SimpleRetry", b"again", keys="k")])
        async with consumer(scluster, "cg_simple_retry", "SimpleRetry") as c:
            (first,) = await receive_until(c, 1, invisible_duration_ms=1000)
            assert first.msg_id == mid
            (second,) = await receive_until(c, 1, invisible_duration_ms=1000)
            # popped again only after the first lease ended (broker times, not the test's)
            first_lease = receipt_handle_of(first)
            assert receipt_handle_of(second).pop_time >= first_lease.next_visible_time
            assert (second.msg_id, second.body, second.reconsume_times) == (mid, b"again", 1)
            assert second.topic == "SimpleRetry"
            # keep it longer, then give it back at once
            await c.change_invisible_duration(second, 60_000)
            await c.change_invisible_duration(second, 0)
            (third,) = await receive_until(c, 1)
            assert (third.msg_id, third.reconsume_times) == (mid, 2)
            await c.ack(third)
            assert await c.receive(8) == []
            with pytest.raises(InvalidArgumentError):
                await c.ack(Message("SimpleRetry", b"not received"))  # type: ignore[arg-type]

    run(go())


def test_dead_letter_after_max_attempts(scluster: Cluster) -> None:
    async def go() -> None:
        await create_topic(scluster, "SimpleDlq", 1)
        async with Admin(namesrv_addr=scluster.namesrv_addr) as admin:
            await admin.create_group("cg_simple_dlq", cluster="DefaultCluster", retry_max_times=2)
            (mid,) = await send_all(scluster, [Message("SimpleDlq", b"poison")])
            async with consumer(scluster, "cg_simple_dlq", "SimpleDlq") as c:
                for attempt in range(3):
                    (m,) = await receive_until(c, 1, invisible_duration_ms=500)
                    assert (m.msg_id, m.reconsume_times) == (mid, attempt)
                await asyncio.sleep(2)
                assert await c.receive(8) == []

            async def dead() -> MessageExt | None:
                try:
                    return await admin.query_message_by_id("%DLQ%cg_simple_dlq", mid)
                except Exception:
                    return None

            deadline = time.monotonic() + 20
            found = await dead()
            while found is None and time.monotonic() < deadline:
                await asyncio.sleep(0.2)
                found = await dead()
            assert found is not None
            assert found.body == b"poison"
            assert found.properties["DLQ_ORIGIN_TOPIC"] == "SimpleDlq"

    run(go())


def test_fifo_group_delivers_a_queue_in_order(scluster: Cluster) -> None:
    async def go() -> None:
        await create_topic(scluster, "SimpleFifo", 1)
        for i in range(6):  # one by one: in this order
            await send_all(scluster, [Message("SimpleFifo", b"%d" % i)])
        # a POP returns what is in the queue now: wait until the reput thread put all six there
        mq = MessageQueue("SimpleFifo", "broker-a", 0)
        async with Admin(namesrv_addr=scluster.namesrv_addr) as adm:
            assert await await_for(lambda: adm.max_offset(mq), lambda n: n == 6) == 6
        async with consumer(scluster, "cg_simple_fifo", "SimpleFifo", fifo=True) as c:
            first = await c.receive(3, invisible_duration_ms=60_000)
            assert [m.body for m in first] == [b"0", b"1", b"2"]
            assert await c.receive(3) == []  # blocked until acked or expired
            await c.ack(first[0])
            assert await c.receive(3) == []  # 1 and 2 are not acked
            # their leases end: they come back first, counted
            await c.change_invisible_duration(first[1], 0)
            await c.change_invisible_duration(first[2], 0)
            again = await receive_until(c, 3, invisible_duration_ms=60_000)
            assert [(m.body, m.reconsume_times) for m in again] == [
                (b"1", 1), (b"2", 1), (b"3", 0),
            ]  # fmt: skip
            for m in again:
                await c.ack(m)
            rest = await receive_until(c, 2)
            assert [m.body for m in rest] == [b"4", b"5"]

    run(go())


def test_fifo_topic_from_mqadmin_and_message_groups(scluster: Cluster) -> None:
    runner = CliRunner()

    def mqadmin(*args: str) -> Any:
        argv = [*args, "-n", scluster.namesrv_addr]
        return runner.invoke(admin, argv, prog_name="mqadmin", catch_exceptions=False)

    base = ("updateTopic", "-t", "SimpleGroups", "-c", "DefaultCluster", "-r", "4", "-w", "4")
    mixed = mqadmin(*base, "-a", "+message.type=MIXED")
    assert mixed.exit_code != 0
    assert "MIXED message type is not supported" in mixed.stderr
    assert len(mixed.stderr.strip().splitlines()) == 1
    done = mqadmin(*base, "-a", "+message.type=FIFO")
    assert done.exit_code == 0, done.stderr

    async def go() -> None:
        async with Admin(namesrv_addr=scluster.namesrv_addr) as adm:
            tc = await adm.topic_config("SimpleGroups", scluster.broker_addr())
            assert tc.attributes == {"message.type": "FIFO"}
            await wait_for_route(adm, "SimpleGroups")
        groups = [f"g{g}" for g in range(5)]
        async with Producer("groups_producer", namesrv_addr=scluster.namesrv_addr) as producer:
            for i in range(40):
                msg = Message("SimpleGroups", b"%d" % i, message_group=groups[i % 5])
                result = await producer.send(msg)
                # one queue per group, the one RocketMQ 5's proxy picks
                assert result.message_queue.queue_id == consistent_hash(
                    java_string_hash(groups[i % 5]), 4
                )
        async with consumer(scluster, "cg_simple_groups", "SimpleGroups", fifo=True) as c:
            got: list[MessageExt] = []
            deadline = time.monotonic() + 30
            while len(got) < 40:
                assert time.monotonic() < deadline
                batch = await c.receive(8)
                for m in batch:
                    await c.ack(m)
                got += batch
        for g in groups:  # every group in send order
            bodies = [int(m.body) for m in got if m.properties["__SHARDINGKEY"] == g]
            assert bodies == sorted(bodies)
            assert len(bodies) == 8

    run(go())


def test_pop_and_push_consumers_of_different_groups_side_by_side(scluster: Cluster) -> None:
    async def go() -> None:
        await create_topic(scluster, "SimpleMixed", 4)
        ids = set(await send_all(scluster, [Message("SimpleMixed", b"%d" % i) for i in range(50)]))
        collector = Collector()
        push = PushConsumer(
            "cg_mixed_push", client_config=fast_config(scluster, "mixed-push"),
            consume_from_where=0,
        )  # fmt: skip
        push.subscribe("SimpleMixed", "*")
        push.register_message_listener(collector)
        await push.start()
        try:
            async with consumer(scluster, "cg_mixed_pop", "SimpleMixed") as c:
                got = await receive_until(c, 50)
                for m in got:
                    await c.ack(m)
                assert {m.msg_id for m in got} == ids
            await await_until(lambda: collector.ids() >= ids, what="push consumer")
        finally:
            await push.close()

    run(go())


def test_blocking_simple_consumer(scluster: Cluster) -> None:
    run(create_topic(scluster, "SimpleSync", 2))
    (mid,) = run(send_all(scluster, [Message("SimpleSync", b"sync")]))
    with SyncSimpleConsumer(
        "cg_simple_sync", {"SimpleSync": "*"}, client_config=fast_config(scluster, "sync"),
        consume_from_max=False, await_duration_ms=1000,
    ) as c:  # fmt: skip
        got: list[MessageExt] = []
        deadline = time.monotonic() + 20
        while not got and time.monotonic() < deadline:
            got = c.receive(4)
        (m,) = got
        assert (m.msg_id, m.body) == (mid, b"sync")
        c.change_invisible_duration(m, 30_000)
        c.ack(m)
