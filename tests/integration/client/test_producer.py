"""Producer against real processes: every send mode, what the broker stores, auto-creation."""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict

import pytest

from ariane.client import (
    Admin,
    Message,
    MessageExt,
    MessageQueue,
    NoRouteError,
    Producer,
    SendStatus,
    SyncProducer,
)
from ariane.client.errors import QueryNotFoundError
from ariane.errors import InvalidArgumentError
from tests.integration.client.conftest import run, wait_for_route
from tests.support.cluster import Cluster
from tests.support.polling import await_for

pytestmark = pytest.mark.integration


async def _stored(admin: Admin, offset_msg_id: str) -> MessageExt:
    return await admin.view_message(offset_msg_id)


def test_sync_send_stores_body_tags_keys_and_properties(cluster: Cluster) -> None:
    async def go() -> None:
        async with (
            Producer("pg_sync", namesrv_addr=cluster.namesrv_addr) as producer,
            Admin(namesrv_addr=cluster.namesrv_addr) as admin,
        ):
            msg = Message(
                "ProdSync",
                b"hello \x00\xff",
                tags="TagA",
                keys=["order-1", "user-7"],
                properties={"color": "blue", "unicode": "h\u00e9llo"},
                flag=3,
            )
            result = await producer.send(msg)
            assert result.status is SendStatus.SEND_OK
            assert result.msg_id == msg.properties["UNIQ_KEY"]
            assert result.message_queue.topic == "ProdSync"
            stored = await _stored(admin, result.offset_msg_id)
            assert stored.body == b"hello \x00\xff"
            assert stored.tags == "TagA"
            assert stored.keys == ["order-1", "user-7"]
            assert stored.flag == 3
            assert stored.properties["color"] == "blue"
            assert stored.properties["unicode"] == "h\u00e9llo"
            assert stored.msg_id == result.msg_id
            assert (stored.queue_id, stored.queue_offset) == (
                result.message_queue.queue_id,
                result.queue_offset,
            )
            await wait_for_route(admin, "ProdSync")

            async def by_unique_key() -> MessageExt | None:
                try:
                    return await admin.query_message_by_id("ProdSync", result.msg_id)
                except QueryNotFoundError:
                    return None

            # the index of keys is built by the broker's reput thread after the answer
            by_id = await await_for(by_unique_key, lambda m: m is not None)
            assert by_id is not None
            assert by_id.body == stored.body
            by_key = await await_for(
                lambda: admin.query_message("ProdSync", "user-7"), lambda found: bool(found)
            )
            assert [m.msg_id for m in by_key] == [result.msg_id]

    run(go())


def test_bodies_from_4_kib_travel_compressed_and_read_back_whole(cluster: Cluster) -> None:
    body = (b"compress me " * 1000)[:12_000]

    async def go() -> None:
        async with (
            Producer("pg_zip", namesrv_addr=cluster.namesrv_addr) as producer,
            Admin(namesrv_addr=cluster.namesrv_addr) as admin,
        ):
            result = await producer.send(Message("ProdZip", body))
            stored = await _stored(admin, result.offset_msg_id)
            assert stored.body == body
            assert stored.store_size < len(body)  # the broker holds the compressed bytes

    run(go())


def test_async_oneway_and_batch_sends(cluster: Cluster) -> None:
    async def go() -> None:
        async with (
            Producer("pg_modes", namesrv_addr=cluster.namesrv_addr) as producer,
            Admin(namesrv_addr=cluster.namesrv_addr) as admin,
        ):
            await producer.send(Message("ProdModes", b"create"))
            futures = [producer.send_async(Message("ProdModes", b"a%d" % i)) for i in range(300)]
            results = await asyncio.gather(*futures)
            assert all(r.ok for r in results)
            assert len({r.msg_id for r in results}) == 300
            for i in range(10):
                await producer.send_oneway(Message("ProdModes", b"o%d" % i))
            batch = [Message("ProdModes", b"b%d" % i, keys="batchkey") for i in range(100)]
            (batch_result,) = await producer.send_batch(batch)
            assert batch_result.msg_id.split(",") == [m.properties["UNIQ_KEY"] for m in batch]
            mq = batch_result.message_queue
            await wait_for_route(admin, "ProdModes")
            for i in (0, 57, 99):
                offset = batch_result.queue_offset + i
                stored = await await_for(
                    lambda o=offset: admin.query_message_by_offset(mq, o),  # type: ignore[misc]
                    lambda m: m is not None,
                )
                assert stored is not None
                assert stored.body == b"b%d" % i
            total = 1 + 300 + 10 + 100

            async def stored_count() -> int:
                stats = await admin.topic_stats("ProdModes")
                return sum(o.max_offset for o in stats.offset_table.values())

            assert await await_for(stored_count, lambda n: n == total) == total

    run(go())


def test_large_batches_are_split_by_size(cluster: Cluster) -> None:
    async def go() -> None:
        async with Producer(
            "pg_split", namesrv_addr=cluster.namesrv_addr, max_message_bytes=64 * 1024
        ) as producer:
            batch = [Message("ProdSplit", bytes([i % 251]) * 1000) for i in range(200)]
            results = await producer.send_batch(batch)
            assert len(results) >= 3
            ids = [i for r in results for i in r.msg_id.split(",")]
            assert ids == [m.properties["UNIQ_KEY"] for m in batch]

    run(go())


def test_sharding_key_keeps_each_key_in_one_queue_in_order(cluster: Cluster) -> None:
    async def go() -> None:
        async with Producer("pg_order", namesrv_addr=cluster.namesrv_addr) as producer:
            seen: dict[str, list[tuple[MessageQueue, int]]] = defaultdict(list)
            for i in range(60):
                key = f"order-{i % 4}"
                result = await producer.send(
                    Message("ProdOrder", f"{key}:{i}".encode()), sharding_key=key
                )
                seen[key].append((result.message_queue, result.queue_offset))
            for entries in seen.values():
                assert len({mq for mq, _ in entries}) == 1
                offsets = [o for _, o in entries]
                assert offsets == sorted(offsets)
            chosen = await producer.fetch_publish_message_queues("ProdOrder")
            target = chosen[-1]
            result = await producer.send(Message("ProdOrder", b"pinned"), queue=target)
            assert result.message_queue == target

    run(go())


def test_new_topics_are_created_from_the_template_with_the_default_queue_count(
    cluster: Cluster,
) -> None:
    async def go() -> None:
        async with (
            Producer(
                "pg_auto", namesrv_addr=cluster.namesrv_addr, default_topic_queue_nums=3
            ) as producer,
            Admin(namesrv_addr=cluster.namesrv_addr) as admin,
        ):
            await producer.send(Message("ProdAutoCreated", b"x"))

            async def queues() -> int:
                try:
                    route = await admin.topic_route("ProdAutoCreated")
                except Exception:
                    return 0
                return sum(q.write_queue_nums for q in route.queue_datas)

            assert await await_for(queues, lambda n: n == 3) == 3

    run(go())


def test_delay_level_and_flags_travel_as_properties(cluster: Cluster) -> None:
    async def go() -> None:
        async with (
            Producer("pg_delay", namesrv_addr=cluster.namesrv_addr) as producer,
            Admin(namesrv_addr=cluster.namesrv_addr) as admin,
        ):
            result = await producer.send(
                Message("ProdDelay", b"later", delay_level=2, wait_store_msg_ok=False)
            )
            stored = await _stored(admin, result.offset_msg_id)
            assert stored.properties["DELAY"] == "2"
            assert stored.properties["WAIT"] == "false"

    run(go())


def test_invalid_messages_fail_before_any_request(cluster: Cluster) -> None:
    async def go() -> None:
        async with Producer("pg_bad", namesrv_addr=cluster.namesrv_addr) as producer:
            with pytest.raises(InvalidArgumentError):
                await producer.send(Message("Prod Bad", b"x"))
            with pytest.raises(InvalidArgumentError):
                await producer.send(Message("ProdBad", b""))
            with pytest.raises(InvalidArgumentError):
                await producer.send_batch([Message("A1", b"x"), Message("A2", b"x")])

    run(go())


def test_blocking_producer_from_many_threads(cluster: Cluster) -> None:
    results: list[object] = []
    errors: list[BaseException] = []
    with SyncProducer("pg_blocking", namesrv_addr=cluster.namesrv_addr) as producer:

        def worker(n: int) -> None:
            try:
                for i in range(20):
                    results.append(producer.send(Message("ProdBlocking", b"%d-%d" % (n, i))))
                results.append(producer.send_async(Message("ProdBlocking", b"async")).result(10))
                results.extend(producer.send_batch([Message("ProdBlocking", b"b")] * 3))
                producer.send_oneway(Message("ProdBlocking", b"oneway"))
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    assert not errors
    assert len(results) == 4 * 22


def test_no_route_without_auto_creation(fresh_cluster: Cluster) -> None:
    fresh_cluster.start(autoCreateTopicEnable="false")

    async def go() -> None:
        async with Producer("pg_noroute", namesrv_addr=fresh_cluster.namesrv_addr) as producer:
            with pytest.raises(NoRouteError):
                await producer.send(Message("ProdNeverCreated", b"x"))
            async with Admin(namesrv_addr=fresh_cluster.namesrv_addr) as admin:
                await admin.create_topic(
                    "ProdCreatedByAdmin", read_queue_nums=2, write_queue_nums=2
                )

            async def send() -> object:
                try:
                    return await producer.send(Message("ProdCreatedByAdmin", b"x"))
                except NoRouteError:
                    return None

            result = await await_for(send, lambda r: r is not None)
            assert result is not None

    run(go())
