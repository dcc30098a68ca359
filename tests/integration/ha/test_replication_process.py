"""Master/slave replication with real processes started by ``ariane cluster``: byte identity
after 100k messages, slave catch-up, reads from the slave during a master outage, SYNC_MASTER
through a stalled or cut link, producers moving off a dead group, metadata copies."""

from __future__ import annotations

import asyncio
import itertools
import random
import time
import urllib.request

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
from ariane.client.errors import BrokerResponseError
from ariane.remoting.protocol.admin_bodies import DelayOffsetSerializeWrapper
from ariane.remoting.protocol.codes import RequestCode, ResponseCode
from tests.integration.ha.support import (
    client_config,
    commit_log_bytes,
    create_topic,
    pull_all,
    run,
    runtime,
    wait_caught_up,
    wait_until,
)
from tests.support.cluster import HACluster
from tests.support.processes import free_port
from tests.support.rpc import request, send_message
from tests.support.tcp_proxy import TcpProxy

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def scrape(addr: str) -> str:
    with urllib.request.urlopen(f"http://{addr}/metrics", timeout=10) as response:
        return str(response.read().decode())


def metric_value(text: str, name: str) -> float:
    """The value of the (only) series of ``name``."""
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no {name} in the scrape")


def test_slave_copies_100k_messages_byte_for_byte(ha_cluster: HACluster) -> None:
    ha_cluster.start()
    master, slave = ha_cluster.member("broker-a/0"), ha_cluster.member("broker-a/1")

    async def go() -> None:
        rng = random.Random(13)
        async with (
            Admin(namesrv_addr=ha_cluster.namesrv_addr) as admin,
            Producer("pg_100k", client_config=client_config(ha_cluster, "p100k")) as producer,
        ):
            await create_topic(admin, ha_cluster, "Bulk", 8)
            bodies = [rng.randbytes(size) for size in (8, 64, 300, 1500) for _ in range(16)]
            batches = [
                [Message("Bulk", rng.choice(bodies), keys=f"k{i + j}") for j in range(100)]
                for i in range(0, 100_000, 100)
            ]
            for i in range(0, len(batches), 32):
                results = await asyncio.gather(
                    *(producer.send_batch(b) for b in batches[i : i + 32])
                )
                assert all(r.status is SendStatus.SEND_OK for rs in results for r in rs)
            end = await wait_caught_up(admin, master.addr, slave.addr)
            assert end > 20 * 1024 * 1024  # about 20 files of 1 MiB: many rolls
            stats = await admin.topic_stats("Bulk")
            total = sum(o.max_offset for o in stats.offset_table.values())
            assert total == 100_000
        assert commit_log_bytes(slave.store, end) == commit_log_bytes(master.store, end)

    run(go())


def test_slave_refuses_writes_and_copies_metadata(ha_cluster: HACluster) -> None:
    metrics_port = free_port()
    ha_cluster.member_conf = {"broker-a/0": {"metricsPromExporterPort": metrics_port}}
    ha_cluster.start()
    master, slave = ha_cluster.addr("broker-a/0"), ha_cluster.addr("broker-a/1")

    async def go() -> None:
        async with Admin(namesrv_addr=ha_cluster.namesrv_addr) as admin:
            await create_topic(admin, ha_cluster, "Meta", 2)
            await admin.create_group("cg_meta", broker_addr=master, retry_max_times=3)
            await admin.api.update_consumer_offset(master, "cg_meta", "Meta", 1, 42)
            delayed = await asyncio.to_thread(
                send_message, master, "Meta", b"in a second", properties="DELAY\x011\x02"
            )
            assert delayed.code == ResponseCode.SUCCESS
            deadline = time.monotonic() + 20
            while True:
                try:
                    group = await admin.group_config("cg_meta", slave)
                except BrokerResponseError:
                    group = None
                offset = await admin.api.query_consumer_offset(slave, "cg_meta", "Meta", 1)
                delay = await asyncio.to_thread(
                    request, slave, RequestCode.GET_ALL_DELAY_OFFSET
                )  # the delay progress: level 1 delivered once on the master, copied
                levels = DelayOffsetSerializeWrapper.decode(delay.body or b"{}").offset_table
                copied = group is not None and group.retry_max_times == 3 and offset == 42
                if copied and levels.get(1) == 1:
                    break
                assert time.monotonic() < deadline, (group, offset, levels)
                await asyncio.sleep(0.1)
            info = await runtime(admin, slave)
            assert info["brokerRole"] == "SLAVE"
            assert info["masterAddr"] == master
            assert info["haClientState"] == "TRANSFER"
        refused = await asyncio.to_thread(send_message, slave, "Meta", b"to the slave")
        assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE
        assert "slave" in (refused.remark or "")
        # the master exports its slave's lag
        text = await asyncio.to_thread(scrape, f"127.0.0.1:{metrics_port}")
        assert "ariane_broker_role{" in text
        assert 'role="ASYNC_MASTER"' in text
        assert metric_value(text, "ariane_replication_connected_slaves") == 1
        assert metric_value(text, "ariane_replication_lag_bytes") == 0
        assert metric_value(text, "ariane_replication_lag_seconds") == 0

    run(go())


def test_consumers_read_from_the_slave_while_the_master_is_down(ha_cluster: HACluster) -> None:
    """A consumer finishes the queue from the slave after the master dies; its progress,
    committed to the slave meanwhile, reaches the master when it returns (offsets never go
    backwards), and the next consumer of the group reads only new messages, from the master."""
    ha_cluster.start()
    master, slave = ha_cluster.addr("broker-a/0"), ha_cluster.addr("broker-a/1")

    def consumer_of(got: list[bytes], instance: str) -> PushConsumer:
        async def listener(
            msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
        ) -> ConsumeConcurrentlyStatus:
            await asyncio.sleep(0.01 * len(msgs))  # slow enough to be killed mid-way
            got.extend(m.body for m in msgs)
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        consumer = PushConsumer(
            "cg_outage",
            client_config=client_config(ha_cluster, instance),
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            pull_batch_size=4,
            consume_thread_nums=2,
        )
        consumer.subscribe("Outage")
        consumer.register_message_listener(listener)
        return consumer

    async def offsets_on(admin: Admin, addr: str) -> int:
        found = [
            await admin.api.query_consumer_offset(addr, "cg_outage", "Outage", q, timeout_ms=1000)
            for q in range(4)
        ]
        return sum(o for o in found if o is not None and o > 0)

    async def go() -> None:
        async with Admin(namesrv_addr=ha_cluster.namesrv_addr) as admin:
            await create_topic(admin, ha_cluster, "Outage", 4)
            first = [f"a{i}".encode() for i in range(300)]
            async with Producer("pg_out", client_config=client_config(ha_cluster, "pout")) as p:
                for i in range(0, 300, 25):
                    await p.send_batch([Message("Outage", b) for b in first[i : i + 25]])
            await wait_caught_up(admin, master, slave)
            got: list[bytes] = []
            async with consumer_of(got, "c1"):
                await wait_until(lambda: len(set(got)) >= 40, what="some consumed from master")
                await asyncio.to_thread(ha_cluster.kill, "broker-a/0")
                assert len(set(got)) < 300
                await wait_until(lambda: set(got) >= set(first), 60, "the rest, from the slave")
                deadline = time.monotonic() + 20
                while await offsets_on(admin, slave) < 300:  # committed to the slave
                    assert time.monotonic() < deadline, await offsets_on(admin, slave)
                    await asyncio.sleep(0.1)
            assert set(got) == set(first)
            await asyncio.to_thread(ha_cluster.restart, "broker-a/0")
            deadline = time.monotonic() + 20
            while await offsets_on(admin, master) < 300:  # handed back by the slave
                assert time.monotonic() < deadline, await offsets_on(admin, master)
                await asyncio.sleep(0.1)
            second = [f"b{i}".encode() for i in range(40)]
            got2: list[bytes] = []
            async with consumer_of(got2, "c2"):
                async with Producer("pg_out2", client_config=client_config(ha_cluster, "p2")) as p:
                    await p.send_batch([Message("Outage", b) for b in second])
                await wait_until(lambda: set(got2) >= set(second), 60, "after the master returned")
                await asyncio.sleep(0.3)
            assert sorted(got2) == sorted(second)  # nothing of the first 300 again
            info = await runtime(admin, master)
            assert int(info["getMessageTimesTotalFound"]) > 0  # read from the master

    run(go())


def test_one_consumer_rides_through_a_master_restart(ha_cluster: HACluster) -> None:
    """One push consumer keeps running while the master dies and comes back: it finishes the
    queue from the slave, then its pulls return to the master (the slave serves none of the
    later ones), every message arrives exactly once with its body, and the returned master
    ends with the group's offsets at the queues' ends (never behind the slave's)."""
    ha_cluster.start()
    master, slave = ha_cluster.addr("broker-a/0"), ha_cluster.addr("broker-a/1")
    got: list[MessageExt] = []

    async def listener(
        msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
    ) -> ConsumeConcurrentlyStatus:
        await asyncio.sleep(0.02 * len(msgs))  # slow: most of the queue is left for the slave
        got.extend(msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    def bodies() -> list[bytes]:
        return sorted(m.body for m in got)

    class Seen:
        """What had arrived, told when a wait times out: missing or delivered twice."""

        def __init__(self, what: str, expected: list[bytes]) -> None:
            self.what, self.expected = what, expected

        def __str__(self) -> str:
            have = bodies()
            missing = sorted(set(self.expected) - set(have))
            twice = sorted({b for b in have if have.count(b) > 1})
            slots = sorted((m.broker_name, m.queue_id, m.queue_offset) for m in got)
            return (
                f"{self.what}: {len(have)} received, {len(missing)} missing {missing[:8]}, "
                f"{len(twice)} twice {twice[:8]}, last slots {slots[-6:]}"
            )

    async def found(admin: Admin, addr: str) -> int:
        return int((await runtime(admin, addr))["getMessageTimesTotalFound"])

    async def offsets(admin: Admin, addr: str) -> list[int]:
        return [
            (await admin.api.query_consumer_offset(addr, "cg_ride", "Ride", q, timeout_ms=1000))
            or 0
            for q in range(2)
        ]

    async def send_each(bodies: list[bytes], instance: str) -> None:
        """One send per message: both queues get some (a held pull on each returns)."""
        async with Producer("pg_" + instance, client_config=client_config(ha_cluster, instance),
                            retry_times=4) as p:  # fmt: skip
            for body in bodies:
                deadline = time.monotonic() + 30
                while (await p.send(Message("Ride", body))).status is not SendStatus.SEND_OK:
                    assert time.monotonic() < deadline
                    await asyncio.sleep(0.1)

    async def go() -> None:
        async with Admin(namesrv_addr=ha_cluster.namesrv_addr) as admin:
            await create_topic(admin, ha_cluster, "Ride", 2)
            consumer = PushConsumer(
                "cg_ride",
                client_config=client_config(ha_cluster, "cride"),
                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                pull_batch_size=4,
                pull_threshold_for_queue=8,
                consume_thread_nums=2,
            )
            consumer.subscribe("Ride")
            consumer.register_message_listener(listener)
            first = [f"first-{i}".encode() for i in range(120)]
            second = [f"second-{i}".encode() for i in range(40)]
            third = [f"third-{i}".encode() for i in range(40)]
            await send_each(first, "p1")
            await wait_caught_up(admin, master, slave)
            assert await found(admin, slave) == 0
            async with consumer:
                await wait_until(lambda: len(got) >= 20, 30, "some consumed from the master")
                await asyncio.to_thread(ha_cluster.kill, "broker-a/0")
                assert len(got) < 100
                await wait_until(
                    lambda: bodies() == sorted(first), 60, Seen("the rest, from the slave", first)
                )
                assert await found(admin, slave) > 0
                await asyncio.to_thread(ha_cluster.restart, "broker-a/0")
                await send_each(second, "p2")
                await wait_until(
                    lambda: bodies() == sorted(first + second),
                    120,  # a broker restarted under a loaded CI run can take a while to serve
                    Seen("second, after the restart", first + second),
                )
                await asyncio.sleep(2.0)  # every queue's next pull goes to the master
                on_slave, on_master = await found(admin, slave), await found(admin, master)
                await send_each(third, "p3")
                await wait_until(
                    lambda: bodies() == sorted(first + second + third),
                    30,
                    Seen("third", first + second + third),
                )
                assert await found(admin, master) > on_master  # read from the master again
                assert await found(admin, slave) == on_slave  # and no longer from the slave
                deadline = time.monotonic() + 20
                while sum(await offsets(admin, master)) < 200:
                    assert time.monotonic() < deadline, await offsets(admin, master)
                    await asyncio.sleep(0.1)
            stats = await admin.topic_stats("Ride")
            ends = {mq.queue_id: o.max_offset for mq, o in stats.offset_table.items()}
            assert sum(ends.values()) == 200
            assert await offsets(admin, master) == [ends[0], ends[1]]
            # each message exactly once: every (queue, offset) of both queues, nothing twice
            slots = sorted((m.queue_id, m.queue_offset) for m in got)
            assert slots == [(q, o) for q in range(2) for o in range(ends[q])]

    run(go())


def test_slave_restart_catches_up_from_far_behind(ha_cluster: HACluster) -> None:
    ha_cluster.start()
    master, slave = ha_cluster.member("broker-a/0"), ha_cluster.member("broker-a/1")

    async def go() -> None:
        async with (
            Admin(namesrv_addr=ha_cluster.namesrv_addr) as admin,
            Producer("pg_far", client_config=client_config(ha_cluster, "pfar")) as p,
        ):
            await create_topic(admin, ha_cluster, "Far", 2)
            await p.send(Message("Far", b"before"))
            await wait_caught_up(admin, master.addr, slave.addr)
            await asyncio.to_thread(ha_cluster.stop_member, "broker-a/1")
            body = b"x" * 900
            for _ in range(40):
                await asyncio.gather(*(p.send_batch([Message("Far", body)] * 50) for _ in range(5)))
            await asyncio.to_thread(ha_cluster.restart, "broker-a/1")
            end = await wait_caught_up(admin, master.addr, slave.addr)
            assert end > 8 * 1024 * 1024
        assert commit_log_bytes(slave.store, end) == commit_log_bytes(master.store, end)

    run(go())


def test_sync_master_through_a_stalled_then_cut_link(ha_cluster: HACluster) -> None:
    proxy = TcpProxy()
    ha_cluster.role = "SYNC_MASTER"
    ha_cluster.member_conf = {"broker-a/1": {"haMasterAddress": proxy.address}}
    try:
        ha_cluster.start()
        proxy.target = ha_cluster.member("broker-a/0").ha
        master, slave = ha_cluster.member("broker-a/0"), ha_cluster.member("broker-a/1")

        async def go() -> None:
            async with (
                Admin(namesrv_addr=ha_cluster.namesrv_addr) as admin,
                Producer("pg_link", client_config=client_config(ha_cluster, "plink"),
                         retry_times=0, send_timeout_ms=5000) as p,
            ):  # fmt: skip
                await create_topic(admin, ha_cluster, "Link", 2)

                async def send(tag: str) -> SendStatus:
                    return (await p.send(Message("Link", tag.encode()))).status

                deadline = time.monotonic() + 30
                while await send("probe") is not SendStatus.SEND_OK:
                    assert time.monotonic() < deadline, "the slave never connected"
                    await asyncio.sleep(0.1)
                assert await send("ok-1") is SendStatus.SEND_OK
                proxy.stall()
                began = time.monotonic()
                assert await send("stalled") is SendStatus.FLUSH_SLAVE_TIMEOUT
                assert time.monotonic() - began >= 1.2  # syncFlushTimeout is 1.5 s here
                proxy.resume()
                deadline = time.monotonic() + 30
                while await send("resumed") is not SendStatus.SEND_OK:
                    assert time.monotonic() < deadline
                proxy.cut()
                await wait_until(lambda: proxy.open_connections == 0, 10, "the link to be cut")
                deadline = time.monotonic() + 30
                while (status := await send("cut")) is not SendStatus.SLAVE_NOT_AVAILABLE:
                    assert status is not SendStatus.SEND_OK or time.monotonic() < deadline
                    assert time.monotonic() < deadline, status
                proxy.resume()
                deadline = time.monotonic() + 30
                while await send("back") is not SendStatus.SEND_OK:
                    assert time.monotonic() < deadline, "the slave never came back"
                    await asyncio.sleep(0.05)
                end = await wait_caught_up(admin, master.addr, slave.addr)
            assert commit_log_bytes(slave.store, end) == commit_log_bytes(master.store, end)

        run(go())
    finally:
        proxy.close()


def test_producers_move_off_a_dead_group_within_a_second(ha_cluster: HACluster) -> None:
    ha_cluster.groups = 2
    ha_cluster.role = "SYNC_MASTER"
    ha_cluster.start()

    async def go() -> None:
        async with Admin(namesrv_addr=ha_cluster.namesrv_addr) as admin:
            await create_topic(admin, ha_cluster, "Spread", 4)
            acked: list[tuple[float, str, bytes]] = []
            stop = asyncio.Event()

            async def produce(producer: Producer, worker: int) -> None:
                i = 0
                while not stop.is_set():
                    body = f"w{worker}-{i}".encode()
                    i += 1
                    try:
                        r = await producer.send(Message("Spread", body))
                    except Exception:
                        await asyncio.sleep(0.005)
                        continue
                    if r.status is SendStatus.SEND_OK:
                        acked.append((time.monotonic(), r.message_queue.broker_name, body))
                    await asyncio.sleep(0.005)

            config = client_config(ha_cluster, "pspread")
            async with Producer("pg_spread", client_config=config) as producer:
                workers = [asyncio.create_task(produce(producer, w)) for w in range(4)]
                await wait_until(
                    lambda: {b for _, b, _ in acked} == {"broker-a", "broker-b"}, 30, "both"
                )
                await asyncio.sleep(1.0)
                killed = time.monotonic()
                await asyncio.to_thread(ha_cluster.kill, "broker-a/0")
                await asyncio.sleep(3.0)
                stop.set()
                await asyncio.gather(*workers)
            times = sorted(t for t, _, _ in acked if t > killed - 1)
            gaps = [b - a for a, b in itertools.pairwise(times)]
            assert max(gaps) < 1.0, max(gaps)
            later = [b for t, b, _ in acked if t > killed + 1.0]
            assert later
            assert set(later) == {"broker-b"}
            # every acknowledged message of the dead group is on its slave (SYNC_MASTER)
            slave = ha_cluster.addr("broker-a/1")
            on_a = {body for _, b, body in acked if b == "broker-a"}
            found = {m.body for m in await pull_all(admin, slave, "Spread", 4)}
            assert on_a <= found

    run(go())
