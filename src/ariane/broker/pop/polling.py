"""Long polling of POP and NOTIFICATION requests (RocketMQ 5 ``PopLongPollingService``).

How it works: a POP that finds nothing and may wait (``pollTime`` > 0) *parks* a future under
``(topic, group, queueId as requested)``; the request's coroutine awaits it and pops again
when it is woken, until its time (``bornTime + pollTime``, less 50 ms to leave time for the
answer) is up. A new message on a topic wakes, for every group parked on that topic, the
oldest parked request at ``(topic, group, -1)`` and the oldest at ``(topic, group, queueId)``
whose filter accepts the message's tag (and properties, when the store passed them); a woken
request that then finds nothing parks again. Messages on a group's POP retry topic (v1 and v2
names alike, where upstream maps only v2) wake that group's requests on the original topic.
A pop that leaves messages behind, a FIFO ack that unblocks a queue and the end of a FIFO
batch's invisibility wake one more request.

Arrivals are reported by the store's dispatch thread and hopped to the event loop only for
topics somebody waits on; since that check can race with a request that is about to park,
:meth:`PopLongPolling.park` takes the queue offsets the request saw and wakes it at once when
a queue has grown since. Limits: ``maxPopPollingSize`` parked requests in all and
``popPollingSize`` per key; beyond them a request is answered POLLING_FULL.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ariane.broker.filters import PullFilter
from ariane.broker.loop_relay import LoopRelay
from ariane.common.clock import Clock
from ariane.common.topics import RETRY_PREFIX

__all__ = ["PopLongPolling", "Probe"]

logger = logging.getLogger(__name__)

_Key = tuple[str, str, int]
#: A queue a parked request read and the offset it saw there: (topic, queue id, offset).
Probe = tuple[str, int, int]
#: The answer margin: a parked request is woken this long before its end (ms).
_MARGIN_MS = 50


@dataclass(slots=True, eq=False)
class _Waiter:
    key: _Key
    future: asyncio.Future[bool]
    message_filter: PullFilter | None
    timer: asyncio.TimerHandle | None = None


class PopLongPolling:
    """Parked POP (or NOTIFICATION) requests.

    Args:
        clock: time source (deadlines are broker times in ms).
        max_offset: ``max_offset(topic, queue_id)``: the queue's next offset.
        max_total: ``maxPopPollingSize``.
        max_per_key: ``popPollingSize``.
    """

    def __init__(
        self,
        clock: Clock,
        max_offset: Callable[[str, int], int],
        *,
        max_total: int = 100_000,
        max_per_key: int = 1024,
    ) -> None:
        self.clock = clock
        self.max_offset = max_offset
        self.max_total = max_total
        self.max_per_key = max_per_key
        self._parked: dict[_Key, deque[_Waiter]] = {}
        #: topic (original or POP retry topic) -> {group parked on it: original topic}
        self._groups: dict[str, dict[str, str]] = {}
        #: (original topic, group) -> [parked requests, the topics listed in _groups]
        self._refs: dict[tuple[str, str], tuple[list[int], set[str]]] = {}
        self._total = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._arrivals: LoopRelay[tuple[str, int, int, dict[str, str] | None]] = LoopRelay(
            lambda a: self.notify_arrival(*a)
        )
        self.woken_by_arrival = 0

    def start(self) -> None:
        """Bind to the running loop (arrivals are hopped to it)."""
        self._loop = asyncio.get_running_loop()
        self._arrivals.bind()

    def stop(self) -> None:
        """Wake every parked request (it answers with what it finds)."""
        for waiters in list(self._parked.values()):
            for waiter in list(waiters):
                self._resolve(waiter, False)

    @property
    def total(self) -> int:
        """Requests parked now."""
        return self._total

    def count(self, topic: str, group: str, queue_id: int) -> int:
        """Requests parked at one key (POLLING_INFO)."""
        waiters = self._parked.get((topic, group, queue_id))
        return len(waiters) if waiters else 0

    # -- parking -------------------------------------------------------------------------------

    def park(
        self,
        topic: str,
        group: str,
        queue_id: int,
        message_filter: PullFilter | None,
        deadline_ms: int,
        probes: Iterable[Probe] = (),
        retry_topics: Iterable[str] = (),
    ) -> asyncio.Future[bool] | None:
        """Park a request until a wake-up or ``deadline_ms``; None when the limits refuse it.

        The future resolves True when woken by a message, False when the time is up.
        ``retry_topics`` are the group's POP retry topics (their messages wake it too).
        """
        key = (topic, group, queue_id)
        waiters = self._parked.get(key)
        if self._total >= self.max_total or (
            waiters is not None and len(waiters) >= self.max_per_key
        ):
            return None
        loop = asyncio.get_running_loop()
        waiter = _Waiter(key, loop.create_future(), message_filter)
        delay_s = max(0.0, (deadline_ms - _MARGIN_MS - self.clock.now_ms()) / 1000.0)
        waiter.timer = loop.call_later(delay_s, self._resolve, waiter, False)
        if waiters is None:
            waiters = self._parked[key] = deque()
        waiters.append(waiter)
        self._total += 1
        ref = self._refs.get((topic, group))
        if ref is None:
            ref = self._refs[(topic, group)] = ([0], set())
        ref[0][0] += 1
        for name in (topic, *retry_topics):
            if name not in ref[1]:
                ref[1].add(name)
                self._groups.setdefault(name, {})[group] = topic
        for probe_topic, probe_qid, seen in probes:
            if self.max_offset(probe_topic, probe_qid) > seen:
                self._resolve(waiter, True)
                break
        return waiter.future

    def unpark(self, future: asyncio.Future[bool]) -> None:
        """Forget a parked request (its coroutine ended: woken, timed out or cancelled)."""
        if not future.done():
            future.cancel()

    def _resolve(self, waiter: _Waiter, woken: bool) -> None:
        waiters = self._parked.get(waiter.key)
        if waiters is not None:
            try:
                waiters.remove(waiter)
            except ValueError:
                pass
            else:
                self._total -= 1
                self._release(waiter.key)
            if not waiters:
                del self._parked[waiter.key]
        if waiter.timer is not None:
            waiter.timer.cancel()
            waiter.timer = None
        if not waiter.future.done():
            waiter.future.set_result(woken)

    def _release(self, key: _Key) -> None:
        topic, group, _ = key
        ref = self._refs.get((topic, group))
        if ref is None:
            return
        ref[0][0] -= 1
        if ref[0][0] > 0:
            return
        del self._refs[(topic, group)]
        for name in ref[1]:
            groups = self._groups.get(name)
            if groups is not None:
                groups.pop(group, None)
                if not groups:
                    del self._groups[name]

    # -- waking --------------------------------------------------------------------------------

    def wake_one(
        self,
        topic: str,
        group: str,
        queue_id: int,
        tags_code: int | None = None,
        properties: dict[str, str] | None = None,
    ) -> bool:
        """Wake the oldest request at the key whose filter accepts the message (any request
        when ``tags_code`` is None)."""
        waiters = self._parked.get((topic, group, queue_id))
        if not waiters:
            return False
        for waiter in list(waiters):
            if waiter.future.cancelled():
                self._resolve(waiter, False)
                continue
            flt = waiter.message_filter
            if (
                tags_code is not None
                and flt is not None
                and not (
                    flt.is_matched_by_consume_queue(tags_code)
                    and (properties is None or flt.is_matched_by_properties(properties))
                )
            ):
                continue
            self._resolve(waiter, True)
            return True
        return False

    def notify_arrival(
        self, topic: str, queue_id: int, tags_code: int | None, properties: dict[str, str] | None
    ) -> None:
        """A message is readable on (topic, queue): wake what waits for it (loop thread)."""
        groups = self._groups.get(topic)
        if not groups:
            return
        retry = topic.startswith(RETRY_PREFIX)
        for group, original in list(groups.items()):
            woke = False
            if retry:
                woke = self.wake_one(original, group, 0, tags_code, properties)
            else:
                woke = self.wake_one(original, group, queue_id, tags_code, properties)
            if self.wake_one(original, group, -1, tags_code, properties) or woke:
                self.woken_by_arrival += 1

    def arriving(
        self,
        topic: str,
        queue_id: int,
        next_logic_offset: int,
        tags_code: int,
        store_timestamp_ms: int,
        properties: dict[str, str] | None,
    ) -> None:
        """The store's arriving listener (dispatch thread)."""
        if topic in self._groups:
            self._arrivals.push((topic, queue_id, tags_code, properties))

    def wake_later(self, topic: str, group: str, queue_id: int, at_ms: int) -> None:
        """Wake one request of the key (and of -1) at ``at_ms`` (a FIFO batch's end)."""
        loop = self._loop
        if loop is None:
            return
        delay_s = max(0.0, (at_ms - self.clock.now_ms()) / 1000.0)

        def fire() -> None:
            self.wake_one(topic, group, queue_id)
            self.wake_one(topic, group, -1)

        loop.call_later(delay_s, fire)
