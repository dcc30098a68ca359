"""RouteWaiter without sockets or real sleeps: backoff, found routes, restarts (issue 20 item 2)."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable

from ariane.client._route_wait import RouteWaiter, backoff_ms
from ariane.errors import ConnectError


def test_backoff_doubles_from_200_ms_and_is_capped() -> None:
    assert list(itertools.islice(backoff_ms(200, 5000), 8)) == [
        200,
        400,
        800,
        1600,
        3200,
        5000,
        5000,
        5000,
    ]
    assert list(itertools.islice(backoff_ms(300, 250), 2)) == [250, 250]


class World:
    """Routes that appear after a number of lookups; a sleep that records and yields."""

    def __init__(self, appear_after: dict[str, int]) -> None:
        self.appear_after = appear_after
        self.lookups: dict[str, int] = {}
        self.sleeps: list[int] = []
        self.found_rounds = 0
        self.needed = set(appear_after)
        self.fail_next = 0
        self.waiter = RouteWaiter(
            self.fetch,
            lambda t: t in self.needed,
            self.on_found,
            initial_ms=200,
            max_ms=1000,
            sleep=self.sleep,
        )

    async def fetch(self, topic: str) -> bool:
        if self.fail_next:
            self.fail_next -= 1
            raise ConnectError("namesrv down")
        self.lookups[topic] = self.lookups.get(topic, 0) + 1
        if self.lookups[topic] >= self.appear_after[topic]:
            self.needed.discard(topic)
            return True
        return False

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(round(seconds * 1000))
        await asyncio.sleep(0)

    def on_found(self) -> None:
        self.found_rounds += 1


async def _until(condition: Callable[[], bool]) -> None:
    for _ in range(1000):  # each turn lets the waiter take one step
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("the waiter never got there")


async def _settle(world: World, task: asyncio.Task[None]) -> None:
    for _ in range(200):
        await asyncio.sleep(0)
        if not world.waiter.pending and world.waiter._restart.is_set() is False:
            break
    task.cancel()


def test_topics_are_fetched_with_backoff_until_their_route_exists() -> None:
    async def go() -> World:
        world = World({"%RETRY%g": 1, "T": 4})
        task = asyncio.create_task(world.waiter.run())
        assert world.waiter.want(["%RETRY%g", "T"])
        assert not world.waiter.want(["T"])  # already awaited: no restart
        await _settle(world, task)
        return world

    world = asyncio.run(go())
    assert world.lookups == {"%RETRY%g": 1, "T": 4}
    assert world.sleeps == [200, 400, 800, 1000]
    assert world.found_rounds == 2  # the retry topic in round 1, T in round 4
    assert not world.waiter.pending


def test_lookup_failures_and_topics_nobody_needs() -> None:
    async def go() -> World:
        world = World({"A": 1, "Gone": 99})
        world.fail_next = 1  # the NameServer is down for the first lookup
        task = asyncio.create_task(world.waiter.run())
        world.waiter.want(["A", "Gone"])
        await asyncio.sleep(0)
        world.needed.discard("Gone")  # unsubscribed meanwhile
        await _settle(world, task)
        return world

    world = asyncio.run(go())
    assert world.lookups == {"A": 1}
    assert world.sleeps == [200, 400]
    assert world.found_rounds == 1


def test_a_new_topic_starts_the_backoff_over() -> None:
    async def go() -> World:
        world = World({"Slow": 10**9, "New": 1})
        task = asyncio.create_task(world.waiter.run())
        world.waiter.want(["Slow"])
        await _until(lambda: len(world.sleeps) >= 4)
        world.waiter.want(["New"])
        await _until(lambda: "New" in world.lookups)
        task.cancel()
        return world

    world = asyncio.run(go())
    assert world.sleeps[:4] == [200, 400, 800, 1000]
    assert world.sleeps[4] == 200
    assert world.found_rounds == 1
    assert world.waiter.pending == {"Slow"}
