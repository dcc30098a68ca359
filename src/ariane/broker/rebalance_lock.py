"""Queue locks of orderly consumers (RocketMQ ``RebalanceLockManager``).

How it works: an orderly consumer may only consume a queue while it holds that queue's lock on
the broker. ``try_lock_batch`` grants a lock when the queue is free, already held by the same
client, or held by a client that has not refreshed it for ``max_live_ms`` (60 s); clients
refresh their locks every 20 s. ``unlock_batch`` releases only locks the caller holds. The
table lives in memory only, as in RocketMQ: a broker restart releases every lock.

Issue 4 extends this (send-back to DLQ while a group holds locks, lock-aware retry).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from ariane.common.clock import Clock
from ariane.remoting.protocol.client_bodies import MessageQueue

__all__ = ["LockEntry", "RebalanceLockManager"]

logger = logging.getLogger(__name__)

#: ``rocketmq.broker.rebalance.lockMaxLiveTime``.
LOCK_MAX_LIVE_MS = 60_000


@dataclass(slots=True)
class LockEntry:
    """Who holds a queue lock and when it was last refreshed (monotonic ms)."""

    client_id: str
    last_update_ms: float

    def is_expired(self, now_ms: float, max_live_ms: int) -> bool:
        """Whether the holder let the lock lapse."""
        return now_ms - self.last_update_ms > max_live_ms


class RebalanceLockManager:
    """Per-group queue locks.

    Args:
        clock: time source.
        max_live_ms: a lock not refreshed for this long may be taken over.
    """

    def __init__(self, clock: Clock, max_live_ms: int = LOCK_MAX_LIVE_MS) -> None:
        self.clock = clock
        self.max_live_ms = max_live_ms
        self.table: dict[str, dict[MessageQueue, LockEntry]] = {}

    def _now_ms(self) -> float:
        return self.clock.monotonic() * 1000.0

    def try_lock_batch(
        self, group: str, mqs: Iterable[MessageQueue], client_id: str
    ) -> list[MessageQueue]:
        """Lock what can be locked for ``client_id``; returns the queues it now holds."""
        now = self._now_ms()
        locks = self.table.setdefault(group, {})
        granted: list[MessageQueue] = []
        for mq in mqs:
            entry = locks.get(mq)
            if entry is None:
                locks[mq] = LockEntry(client_id, now)
                logger.info("%s locked %s for %s", client_id, mq, group)
            elif entry.client_id == client_id:
                entry.last_update_ms = now
            elif entry.is_expired(now, self.max_live_ms):
                logger.warning(
                    "%s takes over expired lock of %s on %s (%s)", client_id, entry.client_id,
                    mq, group,
                )  # fmt: skip
                entry.client_id = client_id
                entry.last_update_ms = now
            else:
                continue
            granted.append(mq)
        if not locks:
            del self.table[group]
        return granted

    def unlock_batch(self, group: str, mqs: Iterable[MessageQueue], client_id: str) -> None:
        """Release the locks ``client_id`` holds among ``mqs``."""
        locks = self.table.get(group)
        if locks is None:
            return
        for mq in mqs:
            entry = locks.get(mq)
            if entry is not None and entry.client_id == client_id:
                del locks[mq]
                logger.info("%s unlocked %s for %s", client_id, mq, group)
        if not locks:
            del self.table[group]

    def holder(self, group: str, mq: MessageQueue) -> str | None:
        """The client holding an unexpired lock on ``mq`` for ``group``."""
        entry = self.table.get(group, {}).get(mq)
        if entry is None or entry.is_expired(self._now_ms(), self.max_live_ms):
            return None
        return entry.client_id

    def is_locked(self, group: str, mq: MessageQueue, client_id: str) -> bool:
        """Whether ``client_id`` holds an unexpired lock on ``mq``."""
        return self.holder(group, mq) == client_id

    def group_has_locks(self, group: str) -> bool:
        """Whether any unexpired lock of ``group`` exists."""
        now = self._now_ms()
        return any(
            not e.is_expired(now, self.max_live_ms) for e in self.table.get(group, {}).values()
        )
