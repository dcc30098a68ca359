"""Admin API against real processes: cluster, topics, groups, offsets, messages."""

from __future__ import annotations

import time

import pytest

from ariane.client import Admin, Message, MessageQueue, Producer, SyncAdmin
from ariane.client.errors import QueryNotFoundError, TopicNotExistError
from tests.integration.client.conftest import producer_clients, run, wait_for_route
from tests.support.cluster import Cluster
from tests.support.polling import await_for

pytestmark = pytest.mark.integration


def test_cluster_and_broker_information(cluster: Cluster) -> None:
    async def go() -> None:
        async with Admin(namesrv_addr=cluster.namesrv_addr) as admin:
            info = await admin.cluster_info()
            assert info.cluster_addr_table == {"DefaultCluster": {"broker-a"}}
            addr = info.broker_addr_table["broker-a"].master_addr
            assert addr == cluster.broker_addr()
            runtime = await admin.broker_runtime_info(addr)
            assert "commitLogMaxOffset" in runtime
            config = await admin.broker_config(addr)
            assert config["brokerName"] == "broker-a"
            later = await admin.update_broker_config(addr, {"flushConsumerOffsetInterval": "4000"})
            assert later == ["flushConsumerOffsetInterval"]  # read at start: saved for then
            assert (await admin.broker_config(addr))["flushConsumerOffsetInterval"] == "5000"
            assert await admin.update_broker_config(addr, {"shortPollingTimeMills": "1500"}) == []
            assert (await admin.broker_config(addr))["shortPollingTimeMills"] == "1500"

    run(go())


def test_topic_lifecycle(cluster: Cluster) -> None:
    async def go() -> None:
        async with Admin(namesrv_addr=cluster.namesrv_addr) as admin:
            written = await admin.create_topic(
                "AdmTopic",
                read_queue_nums=3,
                write_queue_nums=3,
                attributes={"message.type": "NORMAL"},
            )
            assert written == [cluster.broker_addr()]
            await wait_for_route(admin, "AdmTopic")
            route = await admin.topic_route("AdmTopic")
            assert [(q.broker_name, q.write_queue_nums) for q in route.queue_datas] == [
                ("broker-a", 3)
            ]
            assert "AdmTopic" in await admin.topic_list()
            config = await admin.topic_config("AdmTopic")
            assert (config.read_queue_nums, config.write_queue_nums) == (3, 3)
            stats = await admin.topic_stats("AdmTopic")
            assert sorted(mq.queue_id for mq in stats.offset_table) == [0, 1, 2]
            await admin.delete_topic("AdmTopic")

            async def gone() -> bool:
                try:
                    await admin.topic_route("AdmTopic")
                except TopicNotExistError:
                    return True
                return False

            assert await await_for(gone, bool)

    run(go())


def test_groups_offsets_and_consume_stats(cluster: Cluster) -> None:
    async def go() -> None:
        async with (
            Admin(namesrv_addr=cluster.namesrv_addr) as admin,
            Producer("pg_adm", namesrv_addr=cluster.namesrv_addr) as producer,
        ):
            await admin.create_topic("AdmOffsets", read_queue_nums=1, write_queue_nums=1)
            await wait_for_route(admin, "AdmOffsets")
            await admin.create_group("AdmGroup", retry_max_times=5, consume_orderly=True)
            group = await admin.group_config("AdmGroup", cluster.broker_addr())
            assert (group.retry_max_times, group.consume_message_orderly) == (5, True)

            before = int(time.time() * 1000) - 1
            results = [await producer.send(Message("AdmOffsets", b"m%d" % i)) for i in range(10)]
            mq = MessageQueue("AdmOffsets", "broker-a", 0)
            assert await await_for(lambda: admin.max_offset(mq), lambda n: n == 10) == 10
            assert await admin.min_offset(mq) == 0
            assert await admin.search_offset(mq, before) == 0
            # past the last message: RocketMQ versions answer the last or the next offset
            assert await admin.search_offset(mq, int(time.time() * 1000) + 60_000) in (9, 10)
            earliest = await admin.earliest_msg_store_time(mq)
            assert before <= earliest <= int(time.time() * 1000)
            fifth = await admin.query_message_by_offset(mq, 5)
            assert fifth is not None
            assert fifth.msg_id == results[5].msg_id
            assert await admin.query_message_by_offset(mq, 10) is None

            # reset: the group's offset of every queue moves to the time given
            reset = await admin.reset_offset_by_time("AdmGroup", "AdmOffsets", -1)
            assert reset == {mq: 10}
            stats = await admin.consume_stats("AdmGroup", "AdmOffsets")
            assert stats.offset_table[mq].broker_offset == 10
            mine = {producer.instance.client_id}
            ids = await await_for(
                lambda: producer_clients(admin, "pg_adm", "AdmOffsets"), lambda i: i == mine
            )
            assert ids == mine
            await admin.delete_group("AdmGroup")

    run(go())


def test_message_queries(cluster: Cluster) -> None:
    async def go() -> None:
        async with (
            Admin(namesrv_addr=cluster.namesrv_addr) as admin,
            Producer("pg_query", namesrv_addr=cluster.namesrv_addr) as producer,
        ):
            first = await producer.send(Message("AdmQuery", b"one", keys=["shared", "k1"]))
            second = await producer.send(Message("AdmQuery", b"two", keys="shared"))
            await producer.send(Message("AdmQuery", b"three", keys="other"))
            await wait_for_route(admin, "AdmQuery")
            found = await await_for(
                lambda: admin.query_message("AdmQuery", "shared"), lambda ms: len(ms) == 2
            )
            assert sorted(m.body for m in found) == [b"one", b"two"]
            assert [m.body for m in await admin.query_message("AdmQuery", "k1")] == [b"one"]
            assert await admin.query_message("AdmQuery", "nothing") == []
            assert (await admin.query_message_by_id("AdmQuery", second.msg_id)).body == b"two"
            by_offset_id = await admin.query_message_by_id("AdmQuery", first.offset_msg_id)
            assert by_offset_id.body == b"one"
            assert (await admin.view_message(first.offset_msg_id)).body == b"one"
            with pytest.raises(QueryNotFoundError):
                await admin.query_message_by_id("AdmQuery", "0" * 32)

    run(go())


def test_blocking_admin(cluster: Cluster) -> None:
    with SyncAdmin(namesrv_addr=cluster.namesrv_addr) as admin:
        assert "broker-a" in admin.cluster_info().broker_addr_table
        admin.create_topic("AdmBlocking", read_queue_nums=2, write_queue_nums=2)
        admin.create_group("AdmBlockingGroup")
        assert admin.group_config("AdmBlockingGroup", cluster.broker_addr()).group_name == (
            "AdmBlockingGroup"
        )
        mq = MessageQueue("AdmBlocking", "broker-a", 1)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                assert admin.max_offset(mq) == 0
                break
            except TopicNotExistError:
                time.sleep(0.05)
        assert admin.topic_consumed_by("AdmBlocking") == []
