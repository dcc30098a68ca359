"""The 5.x in-sync replica settings with real processes: two SYNC_MASTER groups of one master
and two slaves each. Group a wants every copy (``inSyncReplicas=3``), group b the same with
``enableAutoInSyncReplicas`` and ``minInSyncReplicas=2``. With one slave down a answers
SLAVE_NOT_AVAILABLE (stored on the master, not on enough slaves) while b degrades to the
copies it has and answers SEND_OK once the remaining slave holds the message; with both of
b's slaves down b refuses sends before storing them (SYSTEM_ERROR "in-sync replicas not
enough", RocketMQ 5's IN_SYNC_REPLICAS_NOT_ENOUGH) and our producer moves to group a. The
answers are checked on the wire, as any RocketMQ client sees them."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable

import pytest

from ariane.client import Admin, ClientConfig, Message, Producer, SendStatus
from ariane.remoting.protocol.codes import ResponseCode
from tests.integration.ha.support import (
    commit_log_bytes,
    create_topic,
    pull_all,
    run,
    runtime,
    wait_caught_up,
)
from tests.support.cluster import HACluster
from tests.support.rpc import send_message

pytestmark = [pytest.mark.integration, pytest.mark.slow]

OK = ResponseCode.SUCCESS
SLAVE_NOT_AVAILABLE = ResponseCode.SLAVE_NOT_AVAILABLE
FLUSH_SLAVE_TIMEOUT = ResponseCode.FLUSH_SLAVE_TIMEOUT
SYSTEM_ERROR = ResponseCode.SYSTEM_ERROR


class Sender:
    """Raw SEND_MESSAGE_V2 to one master; remembers each body's answer code."""

    def __init__(self, cluster: HACluster, group: str) -> None:
        self.addr = cluster.addr(f"{group}/0")
        self.group = group
        self.answers: dict[bytes, int] = {}
        self._n = 0

    async def send(self) -> tuple[int, int]:
        """(answer code, CommitLog offset of the message or -1)."""
        body = f"{self.group}-{self._n}".encode()
        self._n += 1
        r = await asyncio.to_thread(send_message, self.addr, "Isr", body, timeout_ms=10_000)
        self.answers[body] = r.code
        if r.code == SYSTEM_ERROR:
            assert r.remark == "in-sync replicas not enough"
        msg_id = (r.ext_fields or {}).get("msgId", "")
        return r.code, int(msg_id[-16:], 16) if r.code != SYSTEM_ERROR else -1

    async def until(self, wanted: int, meanwhile: Iterable[int]) -> None:
        """Send until the answer is ``wanted``; others must be in ``meanwhile`` (the master
        has not yet seen a slave go)."""
        allowed = {wanted, *meanwhile}
        deadline = time.monotonic() + 60
        while (code := (await self.send())[0]) != wanted:
            assert code in allowed, code
            assert time.monotonic() < deadline, code
            await asyncio.sleep(0.05)

    def bodies(self, *codes: int) -> set[bytes]:
        return {b for b, c in self.answers.items() if c in codes}


async def log_end(admin: Admin, addr: str) -> int:
    return int((await runtime(admin, addr))["commitLogMaxOffset"])


async def held_by(admin: Admin, cluster: HACluster, keys: list[str], sender: Sender) -> None:
    """A SEND_OK answer means the slaves ``keys`` already hold that message."""
    code, offset = await sender.send()
    assert code == OK
    for key in keys:
        assert await log_end(admin, cluster.addr(key)) > offset, key


def test_in_sync_replicas_with_a_slave_down(ha_cluster: HACluster) -> None:
    ha_cluster.groups, ha_cluster.slaves, ha_cluster.role = 2, 2, "SYNC_MASTER"
    ha_cluster.member_conf = {
        "broker-a/0": {"inSyncReplicas": 3},
        "broker-b/0": {
            "inSyncReplicas": 3, "enableAutoInSyncReplicas": "true", "minInSyncReplicas": 2
        },
    }  # fmt: skip
    ha_cluster.start()
    a, b = Sender(ha_cluster, "broker-a"), Sender(ha_cluster, "broker-b")

    async def stop(*keys: str) -> None:
        await asyncio.gather(*(asyncio.to_thread(ha_cluster.stop_member, k) for k in keys))

    async def go() -> None:
        async with Admin(namesrv_addr=ha_cluster.namesrv_addr) as admin:
            await create_topic(admin, ha_cluster, "Isr", 1)
            # all up: SEND_OK only once both slaves hold the message
            connecting = [SLAVE_NOT_AVAILABLE, FLUSH_SLAVE_TIMEOUT]
            await asyncio.gather(a.until(OK, connecting), b.until(OK, connecting))
            await held_by(admin, ha_cluster, ["broker-a/1", "broker-a/2"], a)
            await held_by(admin, ha_cluster, ["broker-b/1", "broker-b/2"], b)

            await stop("broker-a/2", "broker-b/2")
            # a: three copies wanted, two possible
            await a.until(SLAVE_NOT_AVAILABLE, [FLUSH_SLAVE_TIMEOUT])
            assert [(await a.send())[0] for _ in range(3)] == [SLAVE_NOT_AVAILABLE] * 3
            # b: degrades to the copies in sync (two) and waits for the remaining slave
            await b.until(OK, [FLUSH_SLAVE_TIMEOUT])
            for _ in range(3):
                await held_by(admin, ha_cluster, ["broker-b/1"], b)

            await stop("broker-b/1")
            # b: one copy left, fewer than minInSyncReplicas: refused, nothing stored
            await b.until(SYSTEM_ERROR, [FLUSH_SLAVE_TIMEOUT])
            end = await log_end(admin, b.addr)
            assert [(await b.send())[0] for _ in range(3)] == [SYSTEM_ERROR] * 3
            # our producer takes the refusal as a failed send and moves to group a
            config = ClientConfig(namesrv_addr=ha_cluster.namesrv_addr, instance_name="pisr")
            async with Producer("pg_isr", client_config=config, retry_times=2) as producer:
                for i in range(4):
                    body = f"sdk-{i}".encode()
                    r = await producer.send(Message("Isr", body))
                    assert r.message_queue.broker_name == "broker-a"
                    assert r.status is SendStatus.SLAVE_NOT_AVAILABLE
                    a.answers[body] = SLAVE_NOT_AVAILABLE
            assert await log_end(admin, b.addr) == end

            await asyncio.gather(
                asyncio.to_thread(ha_cluster.restart, "broker-a/2"),
                asyncio.to_thread(ha_cluster.restart, "broker-b/1"),
            )
            await asyncio.gather(a.until(OK, [SLAVE_NOT_AVAILABLE, FLUSH_SLAVE_TIMEOUT]),
                                 b.until(OK, [SYSTEM_ERROR, FLUSH_SLAVE_TIMEOUT]))  # fmt: skip
            await held_by(admin, ha_cluster, ["broker-a/1", "broker-a/2"], a)
            await held_by(admin, ha_cluster, ["broker-b/1"], b)

            # every stored answer is on the group's slaves, no refused message anywhere
            ends: dict[str, int] = {}
            for key in ("broker-a/1", "broker-a/2", "broker-b/1"):
                master = ha_cluster.addr(key.split("/")[0] + "/0")
                ends[key] = await wait_caught_up(admin, master, ha_cluster.addr(key))
            stored_codes = (OK, SLAVE_NOT_AVAILABLE, FLUSH_SLAVE_TIMEOUT)
            for sender, keys in ((a, ["broker-a/0", "broker-a/1", "broker-a/2"]),
                                 (b, ["broker-b/0", "broker-b/1"])):  # fmt: skip
                for key in keys:
                    deadline = time.monotonic() + 30
                    while True:  # a slave's ConsumeQueue follows its CommitLog
                        on = [m.body for m in await pull_all(admin, ha_cluster.addr(key), "Isr", 1)]
                        if len(on) >= len(sender.bodies(*stored_codes)):
                            break
                        assert time.monotonic() < deadline, key
                        await asyncio.sleep(0.1)
                    assert sorted(on) == sorted(sender.bodies(*stored_codes)), key
            assert b.bodies(SYSTEM_ERROR)
        for key, end in ends.items():
            master = ha_cluster.member(key.split("/")[0] + "/0").store
            assert commit_log_bytes(ha_cluster.member(key).store, end) == commit_log_bytes(
                master, end
            )

    run(go())
