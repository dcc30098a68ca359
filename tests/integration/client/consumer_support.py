"""Helpers for consumer integration tests: fast client settings, topic setup, collectors."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

from ariane.client import (
    Admin,
    ClientConfig,
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    Message,
    MessageExt,
    Producer,
    SendResult,
)
from tests.integration.client.conftest import wait_for_route
from tests.support import rpc
from tests.support.cluster import Cluster

#: Brokers for consumer tests: SQL92 on, every delay level 1 s (retries come back quickly).
CONSUMER_BROKER_CONF: dict[str, object] = {
    "enablePropertyFilter": "true",
    "messageDelayLevel": " ".join(["1s"] * 18),
}


def fast_config(cluster: Cluster, instance: str) -> ClientConfig:
    """Client settings with short service periods so tests converge quickly."""
    return ClientConfig(
        namesrv_addr=cluster.namesrv_addr,
        instance_name=instance,
        rebalance_interval_ms=500,
        persist_consumer_offset_interval_ms=200,
        poll_name_server_interval_ms=500,
        heartbeat_broker_interval_ms=1000,
    )


async def create_topic(cluster: Cluster, topic: str, queues: int = 4) -> None:
    """Create ``topic`` with ``queues`` queues and wait for its route."""
    async with Admin(namesrv_addr=cluster.namesrv_addr) as admin:
        await admin.create_topic(topic, read_queue_nums=queues, write_queue_nums=queues)
        await wait_for_route(admin, topic)


#: The budget of each send of ``send_all`` (bounds a broken run only).
SEND_BUDGET_MS = 30_000


async def send_all(
    cluster: Cluster, msgs: list[Message], group: str = "ptest", in_flight: int = 32
) -> list[str]:
    """Send ``msgs`` pipelined, at most ``in_flight`` at a time; their UNIQ_KEYs in order.

    Bounded: each send compresses its body (over 4 KiB) on the event loop before its request
    goes out, and 300 sends started at once kept a loaded machine's loop from reading the
    NameServer's answer to the first one past its 3 s timeout. Each send's budget is
    ``SEND_BUDGET_MS``: the other sends' compression on the same loop counts against it, and
    with 32 in flight a CPU-starved run still used up the default 3 s before a first attempt
    (sends are what these tests prepare, not what they measure)."""
    slots = asyncio.Semaphore(in_flight)

    async def send(producer: Producer, msg: Message) -> SendResult:
        async with slots:
            return await producer.send(msg, timeout_ms=SEND_BUDGET_MS)

    async with Producer(group, namesrv_addr=cluster.namesrv_addr) as producer:
        results = await asyncio.gather(*(send(producer, m) for m in msgs))
    return [r.msg_id for r in results]


@dataclass
class Collector:
    """A concurrent listener that records what it got (and may fail on purpose)."""

    status: ConsumeConcurrentlyStatus = ConsumeConcurrentlyStatus.CONSUME_SUCCESS
    got: list[MessageExt] = field(default_factory=list)

    async def __call__(
        self, msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
    ) -> ConsumeConcurrentlyStatus:
        self.got.extend(msgs)
        return self.status

    def ids(self) -> set[str]:
        return {m.msg_id for m in self.got}


def fresh_dir(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    path.mkdir(parents=True, exist_ok=True)
    return path


def committed(cluster: Cluster, group: str, topic: str, queues: int, total: int) -> bool:
    """``group`` has committed offsets summing to ``total`` over ``queues`` queues at the
    broker (blocking: call it in a thread)."""
    addr = cluster.broker_addr()
    return sum(max(0, rpc.committed_offset(addr, group, topic, q)) for q in range(queues)) >= total
