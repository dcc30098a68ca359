"""Long polling of pulls (RocketMQ ``PullRequestHoldService`` and
``NotifyMessageArrivingListener``).

How it works: a pull that finds nothing new and carries the SUSPEND flag is *held* instead of
answered: it is kept under ``(topic, queueId)`` with the offset it wants and its tag filter.
It is re-executed (without the right to be held again) and answered

* as soon as a matching message arrives on that queue: the store's dispatch thread reports
  arrivals; they are queued and handed to the event loop with one ``call_soon_threadsafe``
  per batch, and only for queues somebody waits on (the answers are written at the end of
  the arrival's wakes, not at the next loop turn). An arrival reported on the loop's own
  thread (a light round the loop ran after a send: ``broker/loop_round.py``) is handled at
  once. An arrival matches when its tag hash
  passes the pull's filter and, when the store passed the message's properties along, so do
  they (SQL92 filters need them);
* at the latest when its time is up (a timer per held pull; the client's
  ``suspendTimeoutMillis``, or ``shortPollingTimeMills`` when long polling is off);
* when the periodic re-check (every 5 s, or every ``shortPollingTimeMills`` with long polling
  off, when arrivals are not reported at all) finds the queue has grown.

Right after holding a pull the queue is checked once more, so a message stored between the
failed read and the hold is not missed. A closed connection drops its held pulls at once, and
one connection may hold at most ``max_per_channel`` pulls (more are answered right away).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from ariane.broker.filters import PullFilter
from ariane.broker.loop_relay import LoopRelay
from ariane.remoting.channel import Channel, flushes_held
from ariane.remoting.dispatch import RequestContext
from ariane.remoting.eventloop import cancel_and_wait
from ariane.remoting.protocol.command import RemotingCommand

__all__ = ["HeldPull", "PullRequestHoldService"]

logger = logging.getLogger(__name__)

#: ``execute(ctx, request)``: re-run a held pull without suspension and return the answer.
ExecuteFunction = Callable[[RequestContext, RemotingCommand], RemotingCommand | None]
#: ``max_offset(topic, queue_id)``: the queue's next offset.
MaxOffsetFunction = Callable[[str, int], int]

_Key = tuple[str, int]


@dataclass(slots=True, eq=False)
class HeldPull:
    """One suspended pull."""

    ctx: RequestContext
    request: RemotingCommand
    key: _Key
    offset: int
    message_filter: PullFilter
    timer: asyncio.TimerHandle | None = None


class PullRequestHoldService:
    """Holds pulls until messages arrive or their time is up.

    Args:
        execute: re-runs a pull (no suspension) and returns the response.
        max_offset: the queue's current max offset.
        long_polling: react to arrivals (``longPollingEnable``); else short polling.
        short_polling_ms: hold time and check period without long polling.
        check_interval_s: period of the safety re-check with long polling.
        max_per_channel: pulls one connection may have held at once.
    """

    def __init__(
        self,
        execute: ExecuteFunction,
        max_offset: MaxOffsetFunction,
        *,
        long_polling: bool = True,
        short_polling_ms: int = 1000,
        check_interval_s: float = 5.0,
        max_per_channel: int = 65536,
    ) -> None:
        self.execute = execute
        self.max_offset = max_offset
        self.long_polling = long_polling
        self.short_polling_ms = short_polling_ms
        self.check_interval_s = check_interval_s if long_polling else short_polling_ms / 1000
        self.max_per_channel = max_per_channel
        self.table: dict[_Key, list[HeldPull]] = {}
        self._by_channel: dict[int, set[HeldPull]] = {}
        self._arrivals: LoopRelay[tuple[str, int, int, int, dict[str, str] | None]] = LoopRelay(
            lambda a: self.notify_message_arriving(*a)
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = -1
        self._task: asyncio.Task[None] | None = None
        self.woken_by_arrival = 0
        self.woken_by_timeout = 0

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        """Start the periodic re-check (on the running loop)."""
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._arrivals.bind()
        self._task = self._loop.create_task(self._check_loop(), name="pull-hold-check")

    async def stop(self) -> None:
        """Stop checking and drop every held pull (their connections are about to close)."""
        task, self._task = self._task, None
        await cancel_and_wait(task)
        for held_list in self.table.values():
            for held in held_list:
                if held.timer is not None:
                    held.timer.cancel()
        self.table.clear()
        self._by_channel.clear()

    @property
    def held_count(self) -> int:
        """Pulls currently held."""
        return sum(len(v) for v in self.table.values())

    # -- holding -----------------------------------------------------------------------------

    def suspend(
        self,
        ctx: RequestContext,
        request: RemotingCommand,
        topic: str,
        queue_id: int,
        offset: int,
        message_filter: PullFilter,
        timeout_ms: int,
    ) -> bool:
        """Hold a pull; False when it cannot be held (the caller answers it now)."""
        loop = self._loop
        channel = ctx.channel
        if loop is None or not channel.is_active:
            return False
        mine = self._by_channel.get(channel.id)
        if mine is not None and len(mine) >= self.max_per_channel:
            return False
        if not self.long_polling:
            timeout_ms = self.short_polling_ms
        key = (topic, queue_id)
        held = HeldPull(ctx, request, key, offset, message_filter)
        held.timer = loop.call_later(max(0, timeout_ms) / 1000.0, self._timed_out, held)
        self.table.setdefault(key, []).append(held)
        if mine is None:
            mine = self._by_channel[channel.id] = set()
        mine.add(held)
        if self.long_polling and self.max_offset(topic, queue_id) > offset:
            self._wake(held)  # arrived between the read and the hold
        return True

    def _remove(self, held: HeldPull) -> bool:
        held_list = self.table.get(held.key)
        if held_list is None:
            return False
        try:
            held_list.remove(held)
        except ValueError:
            return False
        if not held_list:
            del self.table[held.key]
        mine = self._by_channel.get(held.ctx.channel.id)
        if mine is not None:
            mine.discard(held)
            if not mine:
                del self._by_channel[held.ctx.channel.id]
        if held.timer is not None:
            held.timer.cancel()
            held.timer = None
        return True

    def _wake(self, held: HeldPull) -> None:
        if not self._remove(held):
            return
        if not held.ctx.channel.is_active:
            return
        try:
            response = self.execute(held.ctx, held.request)
        except Exception:
            logger.exception("re-running a held pull failed")
            return
        if response is not None:
            held.ctx.send_response(response)

    def _timed_out(self, held: HeldPull) -> None:
        held.timer = None
        self.woken_by_timeout += 1
        self._wake(held)

    def on_channel_closed(self, channel: Channel) -> None:
        """Drop the pulls held for a closed connection."""
        mine = self._by_channel.pop(channel.id, None)
        if not mine:
            return
        for held in list(mine):
            held_list = self.table.get(held.key)
            if held_list is not None:
                try:
                    held_list.remove(held)
                except ValueError:
                    pass
                if not held_list:
                    del self.table[held.key]
            if held.timer is not None:
                held.timer.cancel()
                held.timer = None

    # -- arrivals ----------------------------------------------------------------------------

    def notify_message_arriving(
        self,
        topic: str,
        queue_id: int,
        max_offset: int,
        tags_code: int | None,
        properties: dict[str, str] | None = None,
    ) -> None:
        """Wake held pulls of the queue that want what arrived (event-loop thread).

        ``tags_code`` None (periodic check) counts as a match; the re-run filters for real.
        ``properties`` (when the arrival was a single message) are checked too.
        """
        held_list = self.table.get((topic, queue_id))
        if not held_list:
            return
        # the answers are written when this arrival's wakes are done (one write per
        # connection), not at the next loop turn: that turn's poll lets the dispatch thread
        # take the GIL first
        with flushes_held():
            for held in list(held_list):
                newest = max_offset
                if newest <= held.offset:
                    newest = self.max_offset(topic, queue_id)
                if newest <= held.offset:
                    continue
                flt = held.message_filter
                if tags_code is None or (
                    flt.is_matched_by_consume_queue(tags_code)
                    and (properties is None or flt.is_matched_by_properties(properties))
                ):
                    self.woken_by_arrival += 1
                    self._wake(held)

    def arriving(
        self,
        topic: str,
        queue_id: int,
        next_logic_offset: int,
        tags_code: int,
        store_timestamp_ms: int,
        properties: dict[str, str] | None,
    ) -> None:
        """The store's arriving listener (dispatch thread): queue the arrival for the loop when
        somebody waits on that queue; on the loop's own thread (a round the loop ran) handle it
        at once."""
        if not self.long_polling or (topic, queue_id) not in self.table:
            return
        if threading.get_ident() == self._loop_thread:
            self.notify_message_arriving(topic, queue_id, next_logic_offset, tags_code, properties)
            return
        self._arrivals.push((topic, queue_id, next_logic_offset, tags_code, properties))

    # -- periodic check ------------------------------------------------------------------------

    def check_all(self) -> None:
        """Re-check every queue with held pulls against its max offset."""
        for topic, queue_id in list(self.table):
            try:
                offset = self.max_offset(topic, queue_id)
            except Exception:
                logger.exception("max offset of %s:%d failed", topic, queue_id)
                continue
            self.notify_message_arriving(topic, queue_id, offset, None)

    async def _check_loop(self) -> None:
        while True:
            await asyncio.sleep(self.check_interval_s)
            try:
                self.check_all()
            except Exception:
                logger.exception("checking held pulls failed")
