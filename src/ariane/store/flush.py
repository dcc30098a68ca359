"""Flushing: async CommitLog flush, sync group commit, ConsumeQueue/index/checkpoint flush.

Mirrors RocketMQ's ``FlushRealTimeService``, ``GroupCommitService`` and
``FlushConsumeQueueService``.

* Async (``FlushRealTimeService``): every ``flush_interval_commit_log_ms`` flush when at least
  ``flush_commit_log_least_pages`` dirty 4 KiB pages accumulated, and everything every
  ``flush_commit_log_thorough_interval_ms``.
* Sync (``GroupCommitService``): a put registers (end offset, future); the thread swaps the
  request list, calls ``fdatasync`` once for all of them (the GIL is released meanwhile, so
  more puts queue up for the next round) and completes every covered future with ``PUT_OK``;
  then, at a light load, it dispatches the records it just made visible itself (the reput's
  ``reput_here``: no hand-over to the reput thread between the flush and the arrival).
  A request not covered within ``sync_flush_timeout_ms`` completes with ``FLUSH_DISK_TIMEOUT``
  (a reaper thread enforces this even if an fsync hangs).
* ``FlushConsumeQueueService``: flushes dirty ConsumeQueues (and, on thorough rounds, the index
  files and then the checkpoint, with timestamps taken before the data was flushed).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Protocol

from ariane.common.clock import Clock
from ariane.common.sched import set_thread_slice
from ariane.store.checkpoint import StoreCheckpoint
from ariane.store.commit_log import CommitLog
from ariane.store.consume_queue import ConsumeQueue
from ariane.store.index_file import IndexService
from ariane.store.results import PutResult, PutStatus
from ariane.store.service import ServiceThread

__all__ = [
    "Completion",
    "FlushCommitLogService",
    "FlushConsumeQueueService",
    "GroupCommitService",
    "SyncWaiter",
]

logger = logging.getLogger(__name__)

#: Longest a group commit waits for the writers its last round released to queue again.
GATHER_S = 0.001
#: Most requests a group commit waits for.
MAX_GATHER = 1024
#: Fewest requests a round must have completed for the next one to gather.
GATHER_FROM = 8

#: How long an idle group commit sleeps (no request, nothing written and unflushed). Every
#: writer wakes it: a waiting put by ``put_request``, any other write (``WAIT=false``, a batch
#: that does not wait, a replica's append) by ``wakeup``. RocketMQ's service polls every
#: 10 ms; an idle broker then spent more CPU here than in all its other threads together.
IDLE_WAIT_S = 0.5


def _flush_commit_log_fully(commit_log: CommitLog, checkpoint: StoreCheckpoint) -> None:
    for _ in range(len(commit_log.queue.files) + 2):
        commit_log.flush(0)
        if commit_log.flushed_where >= commit_log.max_offset:
            break
    if commit_log.queue.store_timestamp:
        checkpoint.physic_msg_timestamp = commit_log.queue.store_timestamp


class FlushCommitLogService(ServiceThread):
    """ASYNC_FLUSH: periodic CommitLog flush.

    Args:
        commit_log: the log.
        checkpoint: receives ``physic_msg_timestamp`` after full flushes.
        interval_ms / least_pages / thorough_interval_ms: RocketMQ's three settings.
        clock: monotonic time source.
    """

    def __init__(
        self,
        commit_log: CommitLog,
        checkpoint: StoreCheckpoint,
        *,
        interval_ms: int,
        least_pages: int,
        thorough_interval_ms: int,
        clock: Clock,
    ) -> None:
        super().__init__("FlushRealTimeService")
        self.commit_log = commit_log
        self.checkpoint = checkpoint
        self.interval_s = interval_ms / 1000
        self.least_pages = least_pages
        self.thorough_s = thorough_interval_ms / 1000
        self.clock = clock
        self._last_thorough = clock.monotonic()

    def run_once(self) -> None:
        self.wait(self.interval_s)
        least = self.least_pages
        now = self.clock.monotonic()
        if now >= self._last_thorough + self.thorough_s:
            self._last_thorough = now
            least = 0
        self.commit_log.flush(least)
        if least == 0 and self.commit_log.queue.store_timestamp:
            self.checkpoint.physic_msg_timestamp = self.commit_log.queue.store_timestamp

    def on_stop(self) -> None:
        _flush_commit_log_fully(self.commit_log, self.checkpoint)


class Completion(Protocol):
    """What the group commit completes: a ``Future[PutResult]`` or a :class:`SyncWaiter`."""

    def done(self) -> bool: ...

    def set_result(self, result: PutResult) -> None: ...


class SyncWaiter:
    """A cheaper completion than a Future for a thread that blocks until the flush: one lock,
    released when the result is set.

    Relay: the group commit may set the results of many waiters at once but wake only the
    first; each waiter, once awake, wakes the next one queued in ``relay``. So the threads a
    round releases start one after another instead of all contending for the GIL at once
    (on a VM every extra context switch costs more than a put).
    """

    __slots__ = ("_lock", "_relay", "result")

    def __init__(self, relay: deque[SyncWaiter] | None = None) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()
        self._relay = relay
        self.result: PutResult | None = None

    def done(self) -> bool:
        return self.result is not None

    def set_result(self, result: PutResult) -> None:
        self.result = result
        self._lock.release()

    def wait(self) -> PutResult:
        """Block until woken (the reaper guarantees it within the flush timeout), then wake
        the next relayed waiter, if any."""
        self._lock.acquire()
        relay = self._relay
        if relay:
            try:
                relay.popleft()._lock.release()
            except IndexError:
                pass
        assert self.result is not None
        return self.result


def _complete(done: list[tuple[Completion, PutResult]], relay: deque[SyncWaiter]) -> None:
    """Set every result; wake the relayed waiters through the relay (see SyncWaiter)."""
    first: SyncWaiter | None = None
    for completion, result in done:
        if isinstance(completion, SyncWaiter) and completion._relay is relay:
            completion.result = result
            if first is None:
                first = completion
            else:
                relay.append(completion)
        else:
            completion.set_result(result)
    if first is not None:
        first._lock.release()


class _Request:
    __slots__ = ("deadline", "future", "next_offset", "result")

    def __init__(
        self, next_offset: int, future: Completion, result: PutResult, deadline: float
    ) -> None:
        self.next_offset = next_offset
        self.future = future
        self.result = result
        self.deadline = deadline


class GroupCommitService(ServiceThread):
    """SYNC_FLUSH group commit.

    Args:
        commit_log: the log.
        checkpoint: receives ``physic_msg_timestamp`` after each round.
        timeout_ms: ``syncFlushTimeout``.
        on_flushed: called after each round that advanced the flush point (wakes dispatch).
        dispatch: when given, called instead on this thread after such a round's completions
            (``ReputService.reput_here``: the flushed records dispatched here, their arrivals
            queued for the event loop right behind the round's answers); ``on_flushed`` is
            then called only when it returns False.
        slice_ns: the thread's scheduler time slice (:func:`~ariane.common.sched.set_thread_slice`,
            0: the kernel's default): a round's thread wakes at the end of each ``fdatasync``
            and, with a short slice, runs then instead of after the running thread's slice.
    """

    def __init__(
        self,
        commit_log: CommitLog,
        checkpoint: StoreCheckpoint,
        *,
        timeout_ms: int,
        on_flushed: Callable[[], None],
        dispatch: Callable[[], bool] | None = None,
        slice_ns: int = 0,
    ) -> None:
        super().__init__("GroupCommitService")
        self.slice_ns = slice_ns
        self.commit_log = commit_log
        self.checkpoint = checkpoint
        self.timeout_s = timeout_ms / 1000
        self.on_flushed = on_flushed
        self.dispatch = dispatch
        self._cond = threading.Condition(threading.Lock())
        self._write: list[_Request] = []
        self._inflight: list[_Request] = []
        self._expect = 1
        #: waiters whose result is set, each woken by the one before (see SyncWaiter).
        self.relay: deque[SyncWaiter] = deque()
        self._complete_lock = threading.Lock()
        self._reaper: threading.Thread | None = None
        self._reaper_stop = threading.Event()

    def put_request(self, next_offset: int, future: Completion, result: PutResult) -> None:
        """Complete ``future`` with ``result`` once the log is durable up to ``next_offset``."""
        req = _Request(next_offset, future, result, time.monotonic() + self.timeout_s)
        with self._cond:
            write = self._write
            write.append(req)
            if len(write) == 1 or len(write) >= self._expect:
                self._cond.notify()

    def start(self) -> None:
        self._reaper_stop.clear()
        super().start()
        self._reaper = threading.Thread(target=self._reap, name="GroupCommitReaper", daemon=True)
        self._reaper.start()

    def on_start(self) -> None:
        if self.slice_ns:
            set_thread_slice(self.slice_ns)

    def stop(self, join_timeout_s: float = 30.0) -> None:
        with self._cond:
            self._stopped = True  # under the lock: run_once reads it there before it waits
            self._cond.notify()
        self._reaper_stop.set()
        super().stop(join_timeout_s)
        if self._reaper is not None:
            self._reaper.join(join_timeout_s)

    def wakeup(self) -> None:
        """Flush now: data was written without a request (``WAIT=false``, a batch that does
        not wait, a replica's append)."""
        with self._cond:
            self._cond.notify()

    def _unflushed(self) -> bool:
        log = self.commit_log
        return log.max_offset > log.flushed_where

    def run_once(self) -> None:
        with self._cond:
            if not self._inflight and not self.stopped:
                if not self._write:
                    # written and unflushed without a request: its writer's wake-up may have
                    # come while a round ran, so flush it soon (RocketMQ's 10 ms poll)
                    self._cond.wait(0.01 if self._unflushed() else IDLE_WAIT_S)
                if self._write and self._expect >= GATHER_FROM and len(self._write) < self._expect:
                    # Gather: the writers the last round released usually put again at
                    # once; one fsync for all of them beats one per half of them. Not
                    # after a round of a few (a light load: the next put is no writer the
                    # round released, so waiting for it only delays this one's answer).
                    self._cond.wait(GATHER_S)
            batch = self._write
            self._write = []
        if not batch and not self._inflight and not self._unflushed():
            return  # idle: nothing to flush or complete
        self._inflight.extend(batch)
        self._expect = min(self._do_commit(), MAX_GATHER)

    def _do_commit(self) -> int:
        """Flush for the in-flight requests and complete the covered ones; returns how many
        completed."""
        requests = self._inflight
        target = max((r.next_offset for r in requests), default=0)
        before = self.commit_log.flushed_where
        for _ in range(3):
            if requests and self.commit_log.flushed_where >= target:
                break
            if self.commit_log.flush(0) and not requests:
                break
        flushed = self.commit_log.flushed_where
        if self.commit_log.queue.store_timestamp:
            self.checkpoint.physic_msg_timestamp = self.commit_log.queue.store_timestamp
        advanced = flushed > before
        dispatch = self.dispatch
        if advanced and dispatch is None:
            self.on_flushed()
        now = time.monotonic()
        keep: list[_Request] = []
        done: list[tuple[Completion, PutResult]] = []
        with self._complete_lock:
            for req in requests:
                if req.future.done():
                    continue
                if req.next_offset <= flushed:
                    if now > req.deadline:
                        req.result.status = PutStatus.FLUSH_DISK_TIMEOUT
                    done.append((req.future, req.result))
                elif now > req.deadline:
                    req.result.status = PutStatus.FLUSH_DISK_TIMEOUT
                    done.append((req.future, req.result))
                else:
                    keep.append(req)
            _complete(done, self.relay)
        self._inflight = keep
        if advanced and dispatch is not None and not dispatch():
            self.on_flushed()
        return len(requests) - len(keep)

    def _reap(self) -> None:
        # 50 ms steps while requests wait; longer ones when none does, still short enough
        # (half the timeout at most) that a request put meanwhile is watched in 50 ms steps
        # well before its deadline
        idle_s = min(IDLE_WAIT_S, self.timeout_s / 2)
        pause = 0.05
        while not self._reaper_stop.wait(pause):
            now = time.monotonic()
            with self._cond:
                waiting = list(self._write)
            pause = 0.05 if waiting or self._inflight else max(0.05, idle_s)
            with self._complete_lock:
                for req in [*self._inflight, *waiting]:
                    if now > req.deadline and not req.future.done():
                        req.result.status = PutStatus.FLUSH_DISK_TIMEOUT
                        req.future.set_result(req.result)

    def on_stop(self) -> None:
        with self._cond:
            self._inflight.extend(self._write)
            self._write = []
        _flush_commit_log_fully(self.commit_log, self.checkpoint)
        self._do_commit()
        with self._complete_lock:
            for req in self._inflight:
                if not req.future.done():
                    req.result.status = PutStatus.FLUSH_DISK_TIMEOUT
                    req.future.set_result(req.result)
        self._inflight = []


class FlushConsumeQueueService(ServiceThread):
    """Flushes ConsumeQueues, index files and the checkpoint.

    Args:
        queues: returns the current ConsumeQueues.
        index: the index service (None when indexing is off).
        checkpoint: the checkpoint.
        logics_timestamp: store time of the last dispatched record.
        interval_ms / least_pages / thorough_interval_ms: RocketMQ's three settings.
        clock: monotonic time source.
    """

    def __init__(
        self,
        queues: Callable[[], Iterable[ConsumeQueue]],
        index: IndexService | None,
        checkpoint: StoreCheckpoint,
        logics_timestamp: Callable[[], int],
        *,
        interval_ms: int,
        least_pages: int,
        thorough_interval_ms: int,
        clock: Clock,
    ) -> None:
        super().__init__("FlushConsumeQueueService")
        self.queues = queues
        self.index = index
        self.checkpoint = checkpoint
        self.logics_timestamp = logics_timestamp
        self.interval_s = interval_ms / 1000
        self.least_pages = least_pages
        self.thorough_s = thorough_interval_ms / 1000
        self.clock = clock
        self._last_thorough = clock.monotonic()
        self._lock = threading.Lock()

    def run_once(self) -> None:
        self.wait(self.interval_s)
        self.do_flush(thorough=False)

    def do_flush(self, *, thorough: bool) -> None:
        """One round; ``thorough`` (or the thorough interval) flushes everything + checkpoint."""
        with self._lock:
            least = self.least_pages
            now = self.clock.monotonic()
            if thorough or now >= self._last_thorough + self.thorough_s:
                self._last_thorough = now
                least = 0
            logics_ts = self.logics_timestamp()
            for cq in list(self.queues()):
                if cq.dirty:
                    for _ in range(len(cq.queue.files) + 1):
                        if cq.flush(least) or least:
                            break
            if least == 0:
                if self.index is not None:
                    index_ts = self.index.flush()
                    if index_ts:
                        self.checkpoint.index_msg_timestamp = index_ts
                if logics_ts > 0:
                    self.checkpoint.logics_msg_timestamp = logics_ts
                self.checkpoint.flush()

    def on_stop(self) -> None:
        self.do_flush(thorough=True)
