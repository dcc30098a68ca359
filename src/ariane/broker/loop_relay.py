"""Handing work from a store thread to the event loop in batches (the store's dispatch thread
reports arrivals; long polling runs on the loop).

How it works: :meth:`LoopRelay.push` appends an item to a deque and, unless a drain is already
scheduled, schedules one with a single ``call_soon_threadsafe``; the drain runs on the loop
and hands every queued item to the handler in order. An item pushed before the relay is bound
to a loop, or after the loop closed, is dropped (nobody waits for it).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["LoopRelay"]

logger = logging.getLogger(__name__)

T = TypeVar("T")


class LoopRelay(Generic[T]):
    """Thread-to-loop hand-off of items, one wake-up of the loop per batch.

    Args:
        handle: called on the loop with each item; its exceptions are logged.
    """

    def __init__(self, handle: Callable[[T], None]) -> None:
        self.handle = handle
        self.loop: asyncio.AbstractEventLoop | None = None
        self._items: deque[T] = deque()
        self._scheduled = False

    def __len__(self) -> int:
        """Items queued and not handled yet."""
        return len(self._items)

    def bind(self) -> None:
        """Deliver to the running loop from now on."""
        self.loop = asyncio.get_running_loop()

    def push(self, item: T) -> None:
        """Queue ``item`` for the loop (any thread)."""
        loop = self.loop
        if loop is None:
            return
        self._items.append(item)
        if not self._scheduled:
            self._scheduled = True
            try:
                loop.call_soon_threadsafe(self._drain)
            except RuntimeError:  # the loop closed during shutdown
                self._scheduled = False

    def _drain(self) -> None:
        self._scheduled = False
        items = self._items
        while items:
            item = items.popleft()
            try:
                self.handle(item)
            except Exception:
                logger.exception("handling %r on the loop failed", item)
