"""Keeps CommitLog files ready ahead of the writer (RocketMQ ``AllocateMappedFileService``).

How it works: a background thread polls the writer's position every 20 ms (backing off to
every 100 ms while the writer does not move: an idle broker wakes it 10 times a second, not 50)
and calls :meth:`~ariane.store.mapped_file_queue.MappedFileQueue.prepare_ahead` until nothing is
left to do: it creates (``posix_fallocate``) the next CommitLog file once the writer is past
half of the current one, and reads the pages ahead of the writer into the page cache with the GIL released
(1 MiB steps while refilling, the whole shortfall at once while the writer is in a burst). How far ahead is paced (:class:`~ariane.store.warm_pacing.WarmPacer`,
issue 18): while the writer is in a burst only a short lead is kept (``min_lead_bytes``, at
once); while it is idle or slow the lead is refilled up to ``max_lead_bytes`` in steps with
short pauses, so a burst writes into pages warmed before it began instead of paying for them
inside it. The writer then finds its file ready and its pages present; if it ever gets ahead,
it creates the file itself and takes the faults.
Under SYNC_FLUSH it also writes the pages just ahead of the writer back once, unchanged
(``init_lead_bytes``, under the log's put lock): a fallocated block stays *unwritten* until
its first write-back, and converting it made the group commit's ``fdatasync`` wait for a
kernel worker and write the inode (issue 18); now this thread's own ``fdatasync`` does that.
It also makes the first file of a new topic's ConsumeQueues (``prepare_first_files``), so the
reput thread does not create and sync them while it dispatches, and reads each into the page
cache, so the first write through its map does not fault in its readahead window either.

A file whose blocks cannot be reserved (``ENOSPC``) is not created: the service reports the
store full (``on_space(reason)``: puts are refused with that reason, never written into an
unbacked page) and tries again every second; the first file it creates after that reports
the space back (``on_space(None)``).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager

from ariane.store.mapped_file_queue import MappedFileQueue
from ariane.store.service import ServiceThread
from ariane.store.warm_pacing import (
    REFILL_STEP_BYTES,
    WARM_FAST_WRITER_BYTES_PER_S,
    WARM_MAX_LEAD_BYTES,
    WARM_MIN_LEAD_BYTES,
    WarmPacer,
)

__all__ = ["AllocateMappedFileService"]

#: The read buffer of a warm step: a longer step reads into it again and again (one
#: ``preadv`` of repeated buffers; the pages are zeros, only their coming into the page cache
#: counts).
WARM_CHUNK_BYTES = REFILL_STEP_BYTES
#: Poll interval while the writer moves.
POLL_S = 0.02
#: Longest poll interval, reached by doubling while the writer stays where it was.
IDLE_POLL_MAX_S = 0.1
#: Retry interval while files cannot be created.
RETRY_S = 1.0

logger = logging.getLogger(__name__)


class AllocateMappedFileService(ServiceThread):
    """Creates and warms CommitLog files ahead of the writer.

    Args:
        queue: the CommitLog's file queue.
        min_lead_bytes: kept warm ahead of the write position at any rate.
        max_lead_bytes: warmed ahead of it while the writer is idle or slow.
        fast_writer_bytes_per_s: a writer faster than this is in a burst.
        on_space: called with why files cannot be created, and with None once they can.
        clock: monotonic seconds (tests pass their own).
        init_lead_bytes: SYNC_FLUSH: the pages up to this far ahead of the writer are written
            back once, unchanged (:meth:`~ariane.store.mapped_file_queue.MappedFileQueue.initialize_ahead`,
            under ``init_lock``, the log's put lock), so no group commit's ``fdatasync`` waits
            for a block's conversion from unwritten; 0: not done.
    """

    def __init__(
        self,
        queue: MappedFileQueue,
        *,
        min_lead_bytes: int = WARM_MIN_LEAD_BYTES,
        max_lead_bytes: int = WARM_MAX_LEAD_BYTES,
        fast_writer_bytes_per_s: int = WARM_FAST_WRITER_BYTES_PER_S,
        on_space: Callable[[str | None], None] = lambda reason: None,
        clock: Callable[[], float] = time.monotonic,
        init_lead_bytes: int = 0,
        init_lock: AbstractContextManager[object] | None = None,
    ) -> None:
        super().__init__("AllocateMappedFileService")
        self.queue = queue
        self.pacer = WarmPacer(
            min(min_lead_bytes, queue.mapped_file_size), max_lead_bytes, fast_writer_bytes_per_s
        )
        self.clock = clock
        self.on_space = on_space
        self.init_lead_bytes = init_lead_bytes if init_lock is not None else 0
        self.init_lock = init_lock
        self._init_failed = False
        self.failing = False
        self._buf = bytearray(WARM_CHUNK_BYTES)
        #: queues (a new topic's ConsumeQueues) whose first file this thread creates
        self._first_files: deque[MappedFileQueue] = deque()
        #: the queue whose first file this thread is making now
        self._making: MappedFileQueue | None = None
        #: the writer's position at the last poll, and the poll interval it led to
        self._seen_offset = -1
        self._poll_s = POLL_S

    def prepare_first_files(self, queues: Iterable[MappedFileQueue]) -> None:
        """Have this thread create the first file of each of ``queues`` that has none (a new
        topic's ConsumeQueues, ``MessageStore.prepare_consume_queues``), so the reput
        thread's first write to each finds it made instead of creating and syncing it."""
        self._first_files.extend(queues)
        self.wakeup()

    def is_waiting(self, queue: MappedFileQueue) -> bool:
        """``queue``'s first file is asked for and not made yet (or being made)."""
        return queue is self._making or queue in self._first_files

    def _make_first_files(self) -> None:
        while self._first_files:
            queue = self._making = self._first_files[0]
            self._first_files.popleft()
            try:
                if queue.prepare_first():
                    queue.warm_prepared(self._buf)
            except OSError as exc:  # the writer creates it then, and says why if it fails
                logger.warning("cannot create %s ahead: %s", queue.store_path, exc)
            finally:
                self._making = None

    def run_once(self) -> None:
        self._make_first_files()
        queue = self.queue
        write = queue.max_offset
        step = self.pacer.decide(self.clock(), write, queue.warmed_to)
        try:
            did = queue.prepare_ahead(write, step.lead_bytes, self._buf, step.step_bytes)
        except OSError as exc:
            if not self.failing:
                logger.error("cannot create the next CommitLog file: %s", exc)
            self.failing = True
            self.on_space(f"disk full: cannot reserve a new CommitLog file ({exc.strerror})")
            self.wait(RETRY_S)
            return
        if self.init_lead_bytes:  # 0 without a lock
            self._initialize(write)
        last = self.queue.last
        if (self.failing or not did) and (
            self.queue.next_ready or (last is not None and not last.is_full)
        ):
            # the writer has room (the reason may have come from the writer itself); said
            # after a failure and on polls, not after each step of a refill (every 2 ms)
            self.failing = False
            self.on_space(None)
        if not did:
            self.wait(self._next_poll_s())
        elif step.pause_s:
            self.wait(step.pause_s)  # a refill while the writer is idle or slow

    def _initialize(self, write: int) -> None:
        assert self.init_lock is not None
        try:
            self.queue.initialize_ahead(write, self.init_lead_bytes, self.init_lock)
        except OSError as exc:  # the group commit's own fdatasync says what matters
            if not self._init_failed:
                logger.warning("cannot write CommitLog pages back ahead: %s", exc)
            self._init_failed = True

    def _next_poll_s(self) -> float:
        """``POLL_S`` when the writer moved since the last poll, else twice the last interval
        up to ``IDLE_POLL_MAX_S``."""
        offset = self.queue.max_offset
        if offset != self._seen_offset:
            self._seen_offset = offset
            self._poll_s = POLL_S
        else:
            self._poll_s = min(self._poll_s * 2, IDLE_POLL_MAX_S)
        return self._poll_s
