"""Queue locks of orderly consumers (RocketMQ ``RebalanceLockManager``).

How it works: an orderly consumer may only consume a queue while it holds that queue's lock on
the broker. ``try_lock_batch`` grants a lock when the queue is free, already held by the same
client, or held by a client that has not refreshed it for ``max_live_ms``
(``rebalanceLockMaxLiveTime``, 60 s); clients refresh their locks every 20 s and stop consuming
a queue whose lock they have not refreshed for 30 s, so two clients never consume one queue at
once. ``unlock_batch`` releases only locks the caller holds. Each lock remembers the connection
it was taken or last refreshed on; when that connection closes (the client crashed or
stopped) its locks are released at once instead of after ``max_live_ms`` (Ariane's addition;
RocketMQ waits for the expiry). The table lives in memory only, as in RocketMQ: a broker
restart releases every lock. While a group holds unexpired locks, its retry messages go
straight to the DLQ (``broker.retry.RetryToDlqInterceptor``).
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
    """Who holds a queue lock, on which connection, and when it was last refreshed
    (monotonic ms)."""

    client_id: str
    last_update_ms: float
    channel_id: int | None = None

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
        self,
        group: str,
        mqs: Iterable[MessageQueue],
        client_id: str,
        channel_id: int | None = None,
    ) -> list[MessageQueue]:
        """Lock what can be locked for ``client_id`` (asking on connection ``channel_id``);
        returns the queues it now holds."""
        now = self._now_ms()
        locks = self.table.setdefault(group, {})
        granted: list[MessageQueue] = []
        for mq in mqs:
            entry = locks.get(mq)
            if entry is None:
                locks[mq] = LockEntry(client_id, now, channel_id)
                logger.info("%s locked %s for %s", client_id, mq, group)
            elif entry.client_id == client_id:
                entry.last_update_ms = now
                entry.channel_id = channel_id
            elif entry.is_expired(now, self.max_live_ms):
                logger.warning(
                    "%s takes over expired lock of %s on %s (%s)", client_id, entry.client_id,
                    mq, group,
                )  # fmt: skip
                entry.client_id = client_id
                entry.last_update_ms = now
                entry.channel_id = channel_id
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

    def unlock_channel(self, channel_id: int) -> int:
        """Release every lock last taken or refreshed on a connection that closed; returns
        how many."""
        released = 0
        for group in list(self.table):
            locks = self.table[group]
            for mq in [mq for mq, e in locks.items() if e.channel_id == channel_id]:
                entry = locks.pop(mq)
                released += 1
                logger.info(
                    "%s lost the lock of %s for %s: its connection closed", entry.client_id,
                    mq, group,
                )  # fmt: skip
            if not locks:
                del self.table[group]
        return released

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
