"""PushConsumer against real processes: concurrent delivery, tags and SQL92, retries and the
DLQ, broadcasting with local offsets, consume-from rules, offset resets, the blocking twin."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ariane.client import (
    Admin,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    Message,
    MessageExt,
    MessageModel,
    MessageQueue,
    MessageSelector,
    PushConsumer,
    SyncPushConsumer,
)
from tests.integration.client.conftest import run
from tests.integration.client.consumer_support import (
    CONSUMER_BROKER_CONF,
    Collector,
    committed,
    create_topic,
    fast_config,
    send_all,
)
from tests.support.cluster import Cluster
from tests.support.polling import await_for, await_until

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def ccluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("consumer-cluster"))
    try:
        yield c.start(**CONSUMER_BROKER_CONF)
    finally:
        c.stop()


def test_concurrent_consumer_gets_every_tagged_message_intact(ccluster: Cluster) -> None:
    async def go() -> None:
        await create_topic(ccluster, "PushTags")
        msgs = [
            Message(
                "PushTags",
                f"body-{i}".encode(),
                tags="TagA" if i % 3 else ("TagB" if i % 2 else "TagC"),
                keys=[f"k{i}", "shared"],
                properties={"n": str(i), "uni": "h\u00e9"},
            )
            for i in range(60)
        ]
        ids = await send_all(ccluster, msgs)
        wanted = {mid for mid, m in zip(ids, msgs, strict=True) if m.tags in ("TagA", "TagB")}
        got = Collector()
        consumer = PushConsumer(
            "cg_tags",
            client_config=fast_config(ccluster, "tags"),
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            consume_message_batch_max_size=4,
        )
        consumer.subscribe("PushTags", "TagA || TagB")
        consumer.register_message_listener(got)
        async with consumer:
            await await_until(lambda: got.ids() >= wanted, what="tagged messages")
        assert got.ids() == wanted
        by_id = {m.msg_id: m for m in got.got}
        for mid, sent in zip(ids, msgs, strict=True):
            if mid in by_id:
                m = by_id[mid]
                assert m.topic == "PushTags"
                assert m.body == sent.body
                assert m.keys == sent.keys
                assert m.tags == sent.tags
                assert m.properties["n"] == sent.properties["n"]
                assert m.properties["uni"] == "h\u00e9"
                assert m.reconsume_times == 0

    run(go())


def test_offsets_are_committed_and_a_restart_continues(ccluster: Cluster) -> None:
    async def go() -> None:
        await create_topic(ccluster, "PushRestart")
        first = await send_all(ccluster, [Message("PushRestart", b"a%d" % i) for i in range(20)])
        got = Collector()
        consumer = PushConsumer(
            "cg_restart",
            client_config=fast_config(ccluster, "r1"),
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        )
        consumer.subscribe("PushRestart")
        consumer.register_message_listener(got)
        async with consumer:
            await await_until(lambda: got.ids() >= set(first), what="first batch")
        async with Admin(namesrv_addr=ccluster.namesrv_addr) as admin:
            stats = await admin.consume_stats("cg_restart", "PushRestart")
            assert sum(o.consumer_offset for o in stats.offset_table.values()) == 20
        second = await send_all(ccluster, [Message("PushRestart", b"b%d" % i) for i in range(10)])
        again = Collector()
        consumer = PushConsumer("cg_restart", client_config=fast_config(ccluster, "r2"))
        consumer.subscribe("PushRestart")
        consumer.register_message_listener(again)
        async with consumer:
            await await_until(lambda: again.ids() >= set(second), what="second batch")
        assert not again.ids() & set(first)

    run(go())


def test_failures_are_retried_then_dead_lettered(ccluster: Cluster) -> None:
    async def go() -> None:
        await create_topic(ccluster, "PushRetry", queues=2)
        deliveries: list[MessageExt] = []
        seen_ok = Collector()

        async def listener(msgs: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
            for m in msgs:
                deliveries.append(m)
                if m.body == b"poison":
                    raise RuntimeError("cannot process")  # counts as RECONSUME_LATER
                seen_ok.got.append(m)
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        consumer = PushConsumer(
            "cg_retry",
            client_config=fast_config(ccluster, "retry"),
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            max_reconsume_times=2,
        )
        consumer.subscribe("PushRetry")
        consumer.register_message_listener(listener)
        dlq = MessageQueue("%DLQ%cg_retry", "broker-a", 0)
        async with consumer, Admin(namesrv_addr=ccluster.namesrv_addr) as admin:
            (poison_id, ok_id) = await send_all(
                ccluster, [Message("PushRetry", b"poison"), Message("PushRetry", b"fine")]
            )

            def poison_times() -> list[int]:
                return [m.reconsume_times for m in deliveries if m.msg_id == poison_id]

            await await_until(lambda: len(poison_times()) >= 3, what="three deliveries")
            await await_until(lambda: seen_ok.ids() >= {ok_id}, what="the fine message")

            async def dlq_size() -> int:
                try:
                    return await admin.max_offset(dlq)
                except Exception:
                    return 0

            async def dead_letter() -> MessageExt | None:
                try:
                    return await admin.query_message_by_id("%DLQ%cg_retry", poison_id)
                except Exception:
                    return None

            await await_until(lambda: dlq_size(), timeout_s=30, what="a message in the DLQ")
            # the DLQ's ConsumeQueue entry comes before its index keys (both built by the
            # broker's reput thread after the answer): wait for the key too
            dead = await await_for(dead_letter, lambda m: m is not None)
            assert dead is not None
            assert dead.body == b"poison"
            assert dead.reconsume_times == 3
        assert poison_times() == [0, 1, 2]
        retried = [m for m in deliveries if m.msg_id == poison_id and m.reconsume_times > 0]
        assert all(m.topic == "PushRetry" for m in retried)  # the retry topic is hidden
        assert seen_ok.ids() == {ok_id}

    run(go())


def test_sql92_subscription_filters_on_properties(ccluster: Cluster) -> None:
    async def go() -> None:
        await create_topic(ccluster, "PushSql")
        got = Collector()
        consumer = PushConsumer(
            "cg_sql",
            client_config=fast_config(ccluster, "sql"),
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        )
        consumer.subscribe("PushSql", MessageSelector.by_sql("a > 5 AND color = 'red'"))
        consumer.register_message_listener(got)
        async with consumer:
            await await_until(lambda: bool(consumer.rebalance.process_queue_table), what="queues")
            msgs = [
                Message("PushSql", b"%d" % i, properties={"a": str(i), "color": c})
                for i in range(10)
                for c in ("red", "blue")
            ]
            await send_all(ccluster, msgs)
            await await_until(lambda: len(got.got) >= 4, what="matching messages")
            await asyncio.sleep(0.3)
        assert sorted(int(m.body) for m in got.got) == [6, 7, 8, 9]
        assert {m.properties["color"] for m in got.got} == {"red"}

    run(go())


def test_broadcasting_keeps_local_offsets_across_restart(ccluster: Cluster, tmp_path: Path) -> None:
    async def go() -> None:
        await create_topic(ccluster, "PushBroadcast")

        def make(instance: str, got: Collector) -> PushConsumer:
            c = PushConsumer(
                "cg_bcast",
                client_config=fast_config(ccluster, instance),
                message_model=MessageModel.BROADCASTING,
                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                offset_store_dir=tmp_path / "offsets",
            )
            c.subscribe("PushBroadcast")
            c.register_message_listener(got)
            return c

        a, b = Collector(), Collector()
        ca, cb = make("bc-a", a), make("bc-b", b)
        await ca.start()
        await cb.start()
        first = set(
            await send_all(ccluster, [Message("PushBroadcast", b"x%d" % i) for i in range(16)])
        )
        await await_until(lambda: a.ids() >= first and b.ids() >= first, what="both get all")
        await cb.close()
        cid = fast_config(ccluster, "bc-b").build_client_id()
        assert (tmp_path / "offsets" / cid / "cg_bcast" / "offsets.json").exists()
        second = set(
            await send_all(ccluster, [Message("PushBroadcast", b"y%d" % i) for i in range(8)])
        )
        await await_until(lambda: a.ids() >= second, what="a gets the second batch")
        b2 = Collector()
        cb2 = make("bc-b", b2)
        await cb2.start()
        await await_until(lambda: b2.ids() >= second, what="restarted b catches up")
        await asyncio.sleep(0.3)
        await cb2.close()
        await ca.close()
        assert not b2.ids() & first  # resumed from the file, not from the first offset
        assert len(b2.got) == len(second)

    run(go())


def test_consume_from_last_timestamp_and_first(ccluster: Cluster) -> None:
    async def go() -> None:
        await create_topic(ccluster, "PushFrom", queues=2)
        old = set(await send_all(ccluster, [Message("PushFrom", b"old%d" % i) for i in range(6)]))
        # the stamp (whole seconds) is >= 1.5 s after the old batch and <= 1 s before the next
        # one, so "first at or after" and 4.x's "closest" both pick the first of the next
        await asyncio.sleep(2.5)
        stamp = time.strftime("%Y%m%d%H%M%S", time.localtime())
        mid = set(await send_all(ccluster, [Message("PushFrom", b"mid%d" % i) for i in range(6)]))

        async def consume(group: str, cfw: ConsumeFromWhere) -> Collector:
            got = Collector()
            c = PushConsumer(
                group,
                client_config=fast_config(ccluster, group),
                consume_from_where=cfw,
                consume_timestamp=stamp,
            )
            c.subscribe("PushFrom")
            c.register_message_listener(got)
            async with c:
                await await_until(lambda: len(c.rebalance.process_queue_table) >= 2, what="queues")
                if cfw is ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET:
                    new = set(await send_all(ccluster, [Message("PushFrom", b"new")]))
                    # RocketMQ's rule for a new group: the broker answers offset 0 while the
                    # queue still starts at 0 in memory, so a young queue is read from the start
                    await await_until(lambda: got.ids() >= new | old | mid, what="everything")
                else:
                    await await_until(lambda: got.ids() >= mid, what="mid messages")
            return got

        first = await consume("cg_from_first", ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
        assert first.ids() >= old | mid
        by_time = await consume("cg_from_time", ConsumeFromWhere.CONSUME_FROM_TIMESTAMP)
        assert by_time.ids() >= mid
        assert not by_time.ids() & old
        last = await consume("cg_from_last", ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET)
        assert last.ids() >= old | mid

    run(go())


def test_reset_offset_by_time_reaches_a_running_consumer(ccluster: Cluster) -> None:
    async def go() -> None:
        await create_topic(ccluster, "PushReset", queues=2)
        got = Collector()
        consumer = PushConsumer(
            "cg_reset",
            client_config=fast_config(ccluster, "reset"),
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        )
        consumer.subscribe("PushReset")
        consumer.register_message_listener(got)
        async with consumer, Admin(namesrv_addr=ccluster.namesrv_addr) as admin:
            ids = await send_all(ccluster, [Message("PushReset", b"r%d" % i) for i in range(10)])
            await await_until(lambda: got.ids() >= set(ids), what="first pass")
            await await_until(
                lambda: asyncio.to_thread(committed, ccluster, "cg_reset", "PushReset", 2, 10),
                what="offsets committed at the broker",
            )
            count = len(got.got)
            table = await admin.reset_offset_by_time("cg_reset", "PushReset", 0)
            assert sum(table.values()) == 0
            await await_until(lambda: len(got.got) >= count + len(ids), what="second pass")
        again = [m.msg_id for m in got.got[count:]]
        assert set(again) == set(ids)

    run(go())


def test_sync_push_consumer_runs_listeners_in_threads(ccluster: Cluster) -> None:
    async def setup() -> list[str]:
        await create_topic(ccluster, "PushSync")
        return await send_all(ccluster, [Message("PushSync", b"s%d" % i) for i in range(12)])

    ids = run(setup())
    got: list[MessageExt] = []
    threads: set[str] = set()
    lock = threading.Lock()

    def listener(msgs: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
        with lock:
            got.extend(msgs)
            threads.add(threading.current_thread().name)
        time.sleep(0.01)  # blocking is fine here
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = SyncPushConsumer(
        "cg_sync",
        client_config=fast_config(ccluster, "sync"),
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        consume_thread_nums=4,
    )
    consumer.subscribe("PushSync")
    consumer.register_message_listener(listener)
    with consumer:
        deadline = time.monotonic() + 30
        while {m.msg_id for m in got} < set(ids):
            assert time.monotonic() < deadline, "sync consumer did not get everything"
            time.sleep(0.05)
    assert all(name.startswith("ConsumeMessageThread_cg_sync") for name in threads)
    assert "ariane-client-loop" not in threads


def test_running_info_and_consume_directly_through_the_broker(ccluster: Cluster) -> None:
    async def go() -> None:
        await create_topic(ccluster, "PushInfo", 2)
        got = Collector()
        consumer = PushConsumer(
            "cg_info",
            client_config=fast_config(ccluster, "info"),
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        )
        consumer.subscribe("PushInfo", "TagA")
        consumer.register_message_listener(got)
        async with consumer, Admin(namesrv_addr=ccluster.namesrv_addr) as admin:
            (mid,) = await send_all(ccluster, [Message("PushInfo", b"direct", tags="TagA")])
            await await_until(lambda: len(got.got) == 1, what="first delivery")
            client_id = consumer.instance.client_id
            info = await admin.consumer_running_info("cg_info", client_id)
            assert info["properties"]["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY"
            assert {s["topic"] for s in info["subscriptionSet"]} == {"PushInfo", "%RETRY%cg_info"}
            topics = [dict(mq)["topic"] for mq in info["mqTable"]]  # fastjson object keys
            assert topics.count("PushInfo") == 2
            stored = got.got[0]
            result = await admin.api.consume_message_directly(
                ccluster.broker_addr(), "cg_info", client_id, stored.offset_msg_id
            )
            assert result["consumeResult"] == "CR_SUCCESS"
            await await_until(lambda: len(got.got) == 2, what="the direct delivery")
            assert got.got[1].msg_id == mid

    run(go())
