"""Fixtures for client integration tests: real NameServer and broker processes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.support.cluster import Cluster

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run one test coroutine on a fresh event loop."""
    return asyncio.run(coro)


async def eventually(
    probe: Callable[[], Awaitable[T]], accept: Callable[[T], bool], timeout_s: float = 20.0
) -> T:
    """Call ``probe`` until ``accept`` likes its result (integration tests only)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = await probe()
        if accept(value) or time.monotonic() > deadline:
            return value
        await asyncio.sleep(0.05)


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

    assert await eventually(probe, bool), f"no route for {topic}"
