"""A small cache for the dashboard's lists: fresh for a moment, then served stale while one
refresh runs behind the scenes, and never loaded twice at once (single flight).

How it works: each key holds the last value, when it was loaded and the running load (an
``asyncio.Task``) if any. A fresh value is returned as is. A stale one (older than ``fresh_s``
but younger than ``stale_s``) is returned too, and a refresh starts unless one runs. Anything
older, or nothing, waits for the one running load. A failed load is not cached: the waiters
get the error and the next call tries again. The clock is an argument so tests never sleep.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = ["TtlCache"]

logger = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(slots=True)
class _Entry:
    value: Any = None
    loaded_at: float | None = None
    task: asyncio.Task[Any] | None = None


class TtlCache:
    """Fresh-then-stale cache with single-flight loads.

    Args:
        clock: seconds, monotonic.
        fresh_s: a value this young is returned without a load.
        stale_s: a value this young is returned while a refresh runs.
    """

    def __init__(self, clock: Callable[[], float], fresh_s: float, stale_s: float) -> None:
        self.clock = clock
        self.fresh_s = fresh_s
        self.stale_s = max(stale_s, fresh_s)
        self._entries: dict[str, _Entry] = {}

    async def get(self, key: str, loader: Callable[[], Awaitable[T]]) -> T:
        """The value of ``key``, loading it with ``loader`` when needed."""
        entry = self._entries.setdefault(key, _Entry())
        if entry.loaded_at is not None:
            age = self.clock() - entry.loaded_at
            if age < self.fresh_s:
                return entry.value  # type: ignore[no-any-return]
            if age < self.stale_s:
                self._start(key, entry, loader)
                return entry.value  # type: ignore[no-any-return]
        task = self._start(key, entry, loader)
        return await asyncio.shield(task)

    def _start(
        self, key: str, entry: _Entry, loader: Callable[[], Awaitable[Any]]
    ) -> asyncio.Task[Any]:
        if entry.task is not None:
            return entry.task

        async def load() -> Any:
            try:
                value = await loader()
            except BaseException:
                if self._entries.get(key) is entry:
                    entry.task = None
                raise
            entry.value, entry.loaded_at, entry.task = value, self.clock(), None
            return value

        task = asyncio.ensure_future(load())
        task.add_done_callback(_consume_error)
        entry.task = task
        return task

    def invalidate(self, *prefixes: str) -> None:
        """Forget the keys starting with any of ``prefixes`` (all keys when none given)."""
        for key in list(self._entries):
            if not prefixes or key.startswith(prefixes):
                entry = self._entries.pop(key)
                if entry.task is not None:
                    entry.task.add_done_callback(_consume_error)


def _consume_error(task: asyncio.Task[Any]) -> None:
    """Mark a background load's error as seen (a stale refresh nobody awaits)."""
    if not task.cancelled() and task.exception() is not None:
        logger.debug("cache load failed: %s", task.exception())
