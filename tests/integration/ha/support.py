"""Helpers for the replication tests with real processes (``ariane cluster``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from ariane.client import Admin, ClientConfig, MessageExt
from ariane.client.message import PullStatus
from ariane.common.sysflag import PULL_SUBSCRIPTION
from ariane.remoting.protocol import headers as h
from tests.support.cluster import HACluster
from tests.support.polling import await_until


def client_config(cluster: HACluster, instance: str) -> ClientConfig:
    """Fast client periods (route refresh, rebalance, offset commits)."""
    return ClientConfig(
        namesrv_addr=cluster.namesrv_addr,
        instance_name=instance,
        rebalance_interval_ms=500,
        persist_consumer_offset_interval_ms=200,
        poll_name_server_interval_ms=1000,
        heartbeat_broker_interval_ms=1000,
        route_refresh_on_failure_ms=300,
    )


def run(coro: Coroutine[Any, Any, None]) -> None:
    """Run a test's coroutine with a generous overall deadline."""
    asyncio.run(asyncio.wait_for(coro, 240))


async def create_topic(admin: Admin, cluster: HACluster, topic: str, queues: int = 4) -> None:
    """Create ``topic`` on every master and wait until every member and the route know it."""
    await admin.create_topic(topic, read_queue_nums=queues, write_queue_nums=queues)
    for member in cluster.members.values():
        await wait_topic_on(admin, member.addr, topic)
    deadline = time.monotonic() + 20
    while True:
        try:
            await admin.topic_route(topic)
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)


async def wait_until(cond: Callable[[], bool], timeout_s: float = 30.0, what: object = "") -> None:
    """The shared poll (tests/support/polling.py) with this package's default timeout;
    ``what`` is formatted only on a timeout (an object whose ``str`` says what was seen)."""
    await await_until(cond, timeout_s, 0.05, what=what)


async def runtime(admin: Admin, addr: str) -> dict[str, str]:
    return await admin.broker_runtime_info(addr)


async def wait_caught_up(admin: Admin, master: str, slave: str, timeout_s: float = 60) -> int:
    """Wait until the slave's CommitLog ends where the master's does; returns that offset."""
    deadline = time.monotonic() + timeout_s
    while True:
        m = int((await runtime(admin, master))["commitLogMaxOffset"])
        s = int((await runtime(admin, slave))["commitLogMaxOffset"])
        if m == s and m > 0:
            return m
        if time.monotonic() > deadline:
            pytest.fail(f"slave at {s}, master at {m}")
        await asyncio.sleep(0.1)


async def wait_topic_on(admin: Admin, addr: str, topic: str, timeout_s: float = 30) -> None:
    """Wait until the broker at ``addr`` knows ``topic`` (a slave copies it from its master)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            await admin.topic_config(topic, addr)
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
        await asyncio.sleep(0.1)


def commit_log_bytes(store: Path, end: int) -> bytes:
    """A store's CommitLog bytes [0, end) read from its files."""
    out = bytearray()
    for path in sorted((store / "commitlog").glob("0" * 5 + "*")):
        if not path.name.isdigit():
            continue  # a next file being created (``<name>.new``, renamed once whole)
        start = int(path.name)
        if start >= end:
            break
        data = path.read_bytes()
        out += data[: end - start]
    return bytes(out)


async def pull_all(admin: Admin, addr: str, topic: str, queues: int) -> list[MessageExt]:
    """Every message of ``topic`` on the broker at ``addr`` (a master or a slave)."""
    out: list[MessageExt] = []
    for queue_id in range(queues):
        offset = 0
        while True:
            header = h.PullMessageRequestHeader(
                consumer_group="TOOLS_CONSUMER", topic=topic, queue_id=queue_id,
                queue_offset=offset, max_msg_nums=32, sys_flag=PULL_SUBSCRIPTION,
                commit_offset=0, suspend_timeout_millis=0, sub_version=0, subscription="*",
            )  # fmt: skip
            result = await admin.api.pull_message(addr, header, 5000)
            if result.status is not PullStatus.FOUND or not result.messages:
                break
            out.extend(result.messages)
            offset = result.next_begin_offset
    return out
