"""Fixtures for client integration tests: real NameServer and broker processes."""

from __future__ import annotations

import asyncio
import io
import os
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from ariane.client.errors import BrokerSystemError
from tests.support.cluster import Cluster
from tests.support.polling import await_for

T = TypeVar("T")


#: A test coroutine still running after this long is stopped with the stacks of every task
#: on its loop (pytest-timeout, at 300 s, only shows the threads: an idle loop says nothing
#: about which await never returns).
RUN_TIMEOUT_S = float(os.environ.get("ARIANE_TEST_RUN_TIMEOUT_S", "270"))


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run one test coroutine on a fresh event loop."""
    return asyncio.run(_watched(coro))


async def _watched(coro: Coroutine[Any, Any, T]) -> T:
    task = asyncio.ensure_future(coro)
    done, _ = await asyncio.wait({task}, timeout=RUN_TIMEOUT_S)
    if done:
        return task.result()
    stacks = io.StringIO()
    for other in asyncio.all_tasks():
        if other is not asyncio.current_task():
            other.print_stack(limit=12, file=stacks)
    task.cancel()
    raise AssertionError(
        f"the test coroutine still ran after {RUN_TIMEOUT_S:g} s; its loop's tasks:\n"
        + stacks.getvalue()
    )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One NameServer and one broker (broker-a), shared by a module's tests."""
    c = Cluster(tmp_path_factory.mktemp("client-cluster"))
    try:
        yield c.start()
    finally:
        c.stop()


@pytest.fixture
def fresh_cluster(tmp_path: Path) -> Iterator[Cluster]:
    """A cluster that only this test uses (started by the test itself)."""
    c = Cluster(tmp_path / "cluster")
    try:
        yield c
    finally:
        c.stop()


async def wait_for_route(admin: Any, topic: str) -> None:
    """Wait until the NameServer has a route for ``topic`` (brokers register new topics
    a moment after creating them)."""

    async def probe() -> bool:
        try:
            await admin.topic_route(topic)
        except Exception:
            return False
        return True

    assert await await_for(probe, bool), f"no route for {topic}"


async def producer_clients(admin: Any, group: str, topic: str) -> set[str]:
    """The client ids the broker lists as ``group``'s producers (none until a heartbeat named
    the group there: a client sends its first heartbeat to a broker in the background, once a
    route names that broker; before that the broker answers SYSTEM_ERROR "not exist")."""
    try:
        conn = await admin.producer_connections(group, topic)
    except BrokerSystemError:
        return set()
    return {c.client_id for c in conn.connection_set}
