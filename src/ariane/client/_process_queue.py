"""The client-side buffer of one owned queue (RocketMQ ``ProcessQueue``).

How it works: pulled messages go in (``put_messages``) in queue-offset order and leave when
consumed. Java keeps them in a ``TreeMap``; here a dict (offset -> message) holds them and a
deque holds their offsets in ascending order with lazy deletion, which is O(1) amortised for
the common case (pulls append increasing offsets; consumption removes anywhere):

* concurrent mode: ``remove_messages(batch)`` returns the offset to commit: the smallest
  offset still buffered, else ``queue_offset_max + 1`` (so a slow message pins the committed
  offset, and a restart re-delivers rather than loses). ``max_span`` is what
  ``consumeConcurrentlyMaxSpan`` limits.
* orderly mode: ``take_messages(n)`` moves the lowest ``n`` into the "consuming" map,
  ``commit()`` drops them and returns ``last + 1``, ``make_message_to_consume_again`` puts
  them back.

``msg_count``/``msg_size`` drive flow control. Everything runs on the consumer's event loop,
so there are no locks; ``consume_lock`` is the asyncio lock held while an orderly listener
runs (Java ``lockConsume``). Pure data structure apart from that lock.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterable, Sequence

from ariane.common import properties as props
from ariane.common.clock import Clock, SystemClock, monotonic_ms
from ariane.common.message import MessageExt

__all__ = ["PULL_MAX_IDLE_MS", "REBALANCE_LOCK_MAX_LIVE_MS", "ProcessQueue"]

#: ``rocketmq.client.rebalance.lockMaxLiveTime``: an unrefreshed orderly lock counts as lost.
REBALANCE_LOCK_MAX_LIVE_MS = 30_000
#: ``rocketmq.client.pull.pullMaxIdleTime``: a queue not pulled this long is re-created.
PULL_MAX_IDLE_MS = 120_000


class ProcessQueue:
    """Messages of one queue between pull and consumption.

    Attributes:
        dropped: the queue is no longer owned (its pull loop and consumers stop).
        locked: orderly mode: the broker lock is held.
        last_lock_ms: when the lock was last confirmed (monotonic ms).
        last_pull_ms: when the last pull started (monotonic ms).
        last_consume_ms: when messages were last removed (monotonic ms).
        queue_offset_max: the highest offset ever put.
        msg_size: the sum of buffered body lengths (bytes).
        consuming: orderly mode: a drain of this queue is scheduled or running.
        try_unlock_times: failed attempts to release the queue during a rebalance.
        msg_acc_cnt: backlog behind the last pulled message (from its ``MAX_OFFSET``).
    """

    def now_ms(self) -> int:
        """Monotonic milliseconds of the queue's clock."""
        return monotonic_ms(self._clock)

    def __init__(self, clock: Clock | None = None) -> None:
        self._clock: Clock = clock or SystemClock()
        self._msgs: dict[int, MessageExt] = {}
        self._order: deque[int] = deque()
        self._consuming: dict[int, MessageExt] = {}
        self.msg_size = 0
        self.queue_offset_max = 0
        self.dropped = False
        self.locked = False
        now = self.now_ms()
        self.last_lock_ms = now
        self.last_pull_ms = now
        self.last_consume_ms = now
        self.consuming = False
        self.try_unlock_times = 0
        self.msg_acc_cnt = 0
        self.consume_lock = asyncio.Lock()
        self._room = asyncio.Event()
        self._room.set()

    # -- state -----------------------------------------------------------------------------------

    @property
    def msg_count(self) -> int:
        """Buffered messages (being consumed included)."""
        return len(self._msgs) + len(self._consuming)

    def is_lock_expired(self, now_ms: int | None = None) -> bool:
        """Whether the orderly lock was not refreshed for ``REBALANCE_LOCK_MAX_LIVE_MS``."""
        return (now_ms or self.now_ms()) - self.last_lock_ms > REBALANCE_LOCK_MAX_LIVE_MS

    def is_pull_expired(self, now_ms: int | None = None) -> bool:
        """Whether no pull started for ``PULL_MAX_IDLE_MS``."""
        return (now_ms or self.now_ms()) - self.last_pull_ms > PULL_MAX_IDLE_MS

    def _trim(self) -> None:
        order, msgs = self._order, self._msgs
        while order and order[0] not in msgs:
            order.popleft()
        while order and order[-1] not in msgs:
            order.pop()

    def first_offset(self) -> int | None:
        """The smallest buffered offset (not counting messages being consumed orderly)."""
        self._trim()
        return self._order[0] if self._order else None

    @property
    def max_span(self) -> int:
        """``getMaxSpan``: highest minus lowest buffered offset (0 when empty)."""
        self._trim()
        order = self._order
        return order[-1] - order[0] if order else 0

    def has_temp_message(self) -> bool:
        """Java ``hasTempMessage``: whether anything is buffered outside the consuming map."""
        return bool(self._msgs)

    # -- flow control ----------------------------------------------------------------------------

    def mark_full(self) -> None:
        """Flow control engaged: ``wait_for_room`` blocks until messages are removed."""
        self._room.clear()

    async def wait_for_room(self, timeout_s: float) -> None:
        """Wait until consumption removes messages (or ``timeout_s`` passes)."""
        if self._room.is_set():
            return
        try:
            await asyncio.wait_for(self._room.wait(), timeout_s)
        except TimeoutError:
            pass

    # -- concurrent mode ---------------------------------------------------------------------------

    def put_messages(self, msgs: Sequence[MessageExt]) -> bool:
        """Buffer pulled messages; returns whether an orderly drain should be dispatched
        (Java ``putMessage``): something is buffered and no drain is active."""
        table, order = self._msgs, self._order
        size = 0
        in_order = True
        last = order[-1] if order else -1
        for msg in msgs:
            offset = msg.queue_offset
            if offset in table or offset in self._consuming:
                continue
            table[offset] = msg
            if offset <= last:
                in_order = False
            order.append(offset)
            last = offset
            size += len(msg.body)
            if offset > self.queue_offset_max:
                self.queue_offset_max = offset
        if not in_order:
            self._order = deque(sorted(set(order) & table.keys()))
        self.msg_size += size
        if msgs:
            raw = msgs[-1].properties.get(props.MAX_OFFSET)
            if raw is not None and raw.isdigit():
                self.msg_acc_cnt = max(int(raw) - msgs[-1].queue_offset, 0)
        if table and not self.consuming:
            self.consuming = True
            return True
        return False

    def remove_messages(self, msgs: Iterable[MessageExt]) -> int:
        """Drop consumed messages; the offset to commit: the smallest one still buffered,
        else ``queue_offset_max + 1``; -1 if nothing was buffered."""
        self.last_consume_ms = self.now_ms()
        table = self._msgs
        if not table:
            return -1
        size = 0
        for msg in msgs:
            removed = table.pop(msg.queue_offset, None)
            if removed is not None:
                size += len(removed.body)
        self.msg_size -= size
        self._room.set()
        first = self.first_offset()
        return first if first is not None else self.queue_offset_max + 1

    def expired_messages(
        self, consume_timeout_ms: int, now_wall_ms: int, limit: int = 16
    ) -> list[MessageExt]:
        """``cleanExpiredMsg`` candidates: the lowest buffered messages whose
        ``CONSUME_START_TIME`` is older than ``consume_timeout_ms`` (stops at the first one
        that is not)."""
        self._trim()
        out: list[MessageExt] = []
        for offset in list(self._order)[:limit]:
            msg = self._msgs.get(offset)
            if msg is None:
                continue
            started = msg.properties.get(props.CONSUME_START_TIMESTAMP)
            if started is None or not started.isdigit():
                break
            if now_wall_ms - int(started) <= consume_timeout_ms:
                break
            out.append(msg)
        return out

    # -- orderly mode ----------------------------------------------------------------------------

    def take_messages(self, n: int) -> list[MessageExt]:
        """Move the lowest ``n`` buffered messages into the consuming map (none: the drain
        ends and ``consuming`` becomes false)."""
        self.last_consume_ms = self.now_ms()
        out: list[MessageExt] = []
        order, table = self._order, self._msgs
        while order and len(out) < n:
            offset = order.popleft()
            msg = table.pop(offset, None)
            if msg is not None:
                self._consuming[offset] = msg
                out.append(msg)
        if not out:
            self.consuming = False
        return out

    def commit(self) -> int:
        """Forget the consuming map; ``last offset + 1``, or -1 if it was empty."""
        if not self._consuming:
            return -1
        last = max(self._consuming)
        self.msg_size -= sum(len(m.body) for m in self._consuming.values())
        self._consuming.clear()
        self._room.set()
        return last + 1

    def make_message_to_consume_again(self, msgs: Iterable[MessageExt]) -> None:
        """Put messages taken by ``take_messages`` back in front of the buffer."""
        back = []
        for msg in msgs:
            if self._consuming.pop(msg.queue_offset, None) is not None:
                self._msgs[msg.queue_offset] = msg
                back.append(msg.queue_offset)
        for offset in sorted(back, reverse=True):
            self._order.appendleft(offset)
        if back and any(a > b for a, b in zip(self._order, list(self._order)[1:], strict=False)):
            self._order = deque(sorted(set(self._order) & self._msgs.keys()))

    def rollback(self) -> None:
        """Put everything being consumed back (Java ``rollback``)."""
        self.make_message_to_consume_again(list(self._consuming.values()))

    def clear(self) -> None:
        """Drop every buffered message (reset offset, queue removed)."""
        self._msgs.clear()
        self._order.clear()
        self._consuming.clear()
        self.msg_size = 0
        self._room.set()

    def snapshot(self) -> dict[str, object]:
        """``ProcessQueueInfo`` fields for GET_CONSUMER_RUNNING_INFO."""
        first = self.first_offset()
        self._trim()
        return {
            "commitOffset": 0,
            "cachedMsgMinOffset": first if first is not None else 0,
            "cachedMsgMaxOffset": self._order[-1] if self._order else 0,
            "cachedMsgCount": self.msg_count,
            "cachedMsgSizeInMiB": self.msg_size // (1024 * 1024),
            "transactionMsgMinOffset": 0,
            "transactionMsgMaxOffset": 0,
            "transactionMsgCount": len(self._consuming),
            "locked": self.locked,
            "tryUnlockTimes": self.try_unlock_times,
            "lastLockTimestamp": self.last_lock_ms,
            "droped": self.dropped,
            "lastPullTimestamp": self.last_pull_ms,
            "lastConsumeTimestamp": self.last_consume_ms,
        }
