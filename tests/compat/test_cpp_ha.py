"""SYNC_MASTER failover with the real C++ client (PyPI ``rocketmq==0.4.4``) and our SDK: the
master is SIGKILLed under load from both; every acknowledged message is then consumed from the
slave, by our push consumer and by the C++ consumer, and a consumer group's offsets continue
on the slave instead of starting over."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from ariane.client import (
    Admin,
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    Message,
    MessageExt,
    Producer,
    PushConsumer,
    SendStatus,
)
from tests.compat.conftest import CppClient
from tests.integration.ha.support import client_config, wait_topic_on, wait_until
from tests.support.cluster import HACluster

pytestmark = [pytest.mark.compat, pytest.mark.integration, pytest.mark.slow]

TOPIC = "HaKill"


@pytest.fixture
def sync_cluster(tmp_path: Path) -> Iterator[HACluster]:
    c = HACluster(tmp_path / "cluster", role="SYNC_MASTER")
    try:
        yield c.start()
    finally:
        c.stop()


def consumer_of(cluster: HACluster, group: str, got: list[MessageExt]) -> PushConsumer:
    async def listener(
        msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
    ) -> ConsumeConcurrentlyStatus:
        got.extend(msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        group,
        client_config=client_config(cluster, group),
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    consumer.subscribe(TOPIC)
    consumer.register_message_listener(listener)
    return consumer


def test_sync_master_killed_under_load_loses_no_acknowledged_message(
    sync_cluster: HACluster, cpp: CppClient
) -> None:
    slave = sync_cluster.addr("broker-a/1")

    async def go() -> None:
        async with Admin(namesrv_addr=sync_cluster.namesrv_addr) as admin:
            await admin.create_topic(TOPIC, read_queue_nums=4, write_queue_nums=4)
            await wait_topic_on(admin, slave, TOPIC)
            cpp_run = cpp.spawn(
                "producer.py",
                ["--namesrv", sync_cluster.namesrv_addr, "--topic", TOPIC, "--count", "100000",
                 "--body-prefix", "cpp-", "--timeout-ms", "3000"],
            )  # fmt: skip
            acked: set[bytes] = set()
            stop = asyncio.Event()

            async def produce(producer: Producer, worker: int) -> None:
                i = 0
                while not stop.is_set():
                    body = f"py-{worker}-{i}".encode()
                    i += 1
                    try:
                        result = await producer.send(Message(TOPIC, body))
                    except Exception:
                        await asyncio.sleep(0.05)
                        continue
                    if result.status is SendStatus.SEND_OK:
                        acked.add(body)

            early: list[MessageExt] = []
            config = client_config(sync_cluster, "pkill")
            async with (
                Producer("pg_kill", client_config=config, retry_times=0) as producer,
                consumer_of(sync_cluster, "cg_continue", early),
            ):
                workers = [asyncio.create_task(produce(producer, w)) for w in range(4)]
                await wait_until(
                    lambda: len(acked) >= 300 and len(cpp_run.of("sent")) >= 100 and len(early)
                    > 100, 60, "load from both clients",
                )  # fmt: skip
                await asyncio.to_thread(sync_cluster.kill, "broker-a/0")
                await asyncio.sleep(1.0)
                stop.set()
                await asyncio.gather(*workers)
            cpp_run.terminate()
            cpp_run.wait(60)
            acked |= {f"cpp-{e['i']}".encode() for e in cpp_run.of("sent") if e.get("status") == 0}
            assert any(b.startswith(b"cpp-") for b in acked)
            # the consumer group continues on the slave where it was, not from the start
            committed = {
                q: await admin.api.query_consumer_offset(slave, "cg_continue", TOPIC, q)
                for q in range(4)
            }
            later: list[MessageExt] = []
            fresh: list[MessageExt] = []
            async with consumer_of(sync_cluster, "cg_continue", later):
                await wait_until(
                    lambda: {m.body for m in early + later} >= acked, 60, "the group's rest"
                )
                # a new group reads everything acknowledged from the slave; meanwhile the
                # restarted group keeps pulling, so had it gone back to the start (or the first
                # consumer drained everything before it stopped, leaving it nothing) it would
                # have received messages below its committed offsets by the time this is done
                async with consumer_of(sync_cluster, "cg_fresh", fresh):
                    await wait_until(lambda: {m.body for m in fresh} >= acked, 60, "all from slave")
            for msg in later:
                assert msg.queue_offset >= (committed[msg.queue_id] or 0), (msg, committed)
            on_slave = {m.body for m in fresh}
        cpp_consumer = cpp.run(
            "consumer.py",
            ["--namesrv", sync_cluster.namesrv_addr, "--topic", TOPIC, "--group", "cg_cpp",
             "--expect", str(len(on_slave)), "--linger", "0.5", "--timeout", "90"],
            timeout_s=120,
        )  # fmt: skip
        cpp_bodies = {e["body"].encode() for e in cpp_consumer.of("msg")}
        assert cpp_bodies >= acked
        assert cpp_bodies == on_slave

    asyncio.run(asyncio.wait_for(go(), 240))
