"""Fetching the routes a consumer subscribes to but cannot see yet, quickly, until they exist.

How it works: a consumer's subscription may have no route when it starts: the group's retry
topic ``%RETRY%<group>`` is created by the broker at the group's first heartbeat, after the
consumer looked its routes up, and a topic whose first message was just sent is registered
with the NameServer a moment later. RocketMQ clients only find such a route at the next
rebalance (20 s) or route poll (30 s), so a new group's first retry comes late whatever its
delay level. ``RouteWaiter`` keeps the topics still without a route and fetches them again
after 200 ms, then twice as long each round up to a cap (``route_wait_initial_ms`` /
``route_wait_max_ms``); a topic that got its route (or that nobody needs any more) leaves the
set, and ``on_found`` runs once per round that found one (the client instance rebalances at
once). A topic asked for again starts the backoff over. The sleeping is injected for tests.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Iterator

from ariane.errors import ArianeError

__all__ = ["RouteWaiter", "backoff_ms"]

logger = logging.getLogger(__name__)


def backoff_ms(initial_ms: int, max_ms: int) -> Iterator[int]:
    """``initial_ms``, doubling each time, never above ``max_ms``."""
    delay = initial_ms
    while True:
        yield min(delay, max_ms)
        delay = min(delay * 2, max_ms)


class RouteWaiter:
    """The topics whose route is awaited, fetched again with a capped backoff.

    Args:
        fetch: fetches a topic's route; returns whether the topic is served now.
        wanted: whether anyone still needs the topic's route.
        on_found: called after a round in which a route was found.
        initial_ms: the first wait.
        max_ms: the longest wait.
        sleep: ``asyncio.sleep`` (tests pass their own).
    """

    def __init__(
        self,
        fetch: Callable[[str], Awaitable[bool]],
        wanted: Callable[[str], bool],
        on_found: Callable[[], None],
        *,
        initial_ms: int,
        max_ms: int,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._fetch = fetch
        self._wanted = wanted
        self._on_found = on_found
        self._initial_ms = initial_ms
        self._max_ms = max_ms
        self._sleep = sleep
        self.pending: set[str] = set()
        self._restart = asyncio.Event()

    def want(self, topics: Iterable[str]) -> bool:
        """Await the routes of ``topics`` (the backoff starts over); True if any is new."""
        new = set(topics) - self.pending
        if new:
            self.pending |= new
            self._restart.set()
        return bool(new)

    async def run(self) -> None:
        """Serve until cancelled (the client instance's background task)."""
        while True:
            await self._restart.wait()
            self._restart.clear()
            for delay in backoff_ms(self._initial_ms, self._max_ms):
                await self._sleep(delay / 1000)
                if await self.round():
                    self._on_found()
                if not self.pending or self._restart.is_set():
                    break

    async def round(self) -> bool:
        """Fetch every pending route once; returns whether one was found."""
        found = False
        for topic in sorted(self.pending):
            if not self._wanted(topic):
                self.pending.discard(topic)
                continue
            try:
                served = await self._fetch(topic)
            except ArianeError as exc:
                logger.debug("route of %s still unknown: %s", topic, exc)
                continue
            if served:
                self.pending.discard(topic)
                found = True
                logger.info("route of %s found", topic)
        return found
