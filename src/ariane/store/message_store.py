"""``MessageStore``: the store facade the broker calls (RocketMQ ``DefaultMessageStore``).

How it works: ``load()`` maps the files and recovers (:mod:`ariane.store.loader`); ``start()``
creates the abort file and starts the background threads (reput, flush, group commit, ConsumeQueue
flush, cleanup); ``shutdown()`` stops them in order, flushes everything, writes the checkpoint
and removes the abort file only if dispatch caught up and the store is writeable.

Puts append synchronously on the caller's thread (one lock, microseconds) and complete per
the flush policy: ``put_*`` block, ``submit_*`` return a ``concurrent.futures.Future`` that is
already done under ASYNC_FLUSH and completes after the group commit under SYNC_FLUSH (never
blocking the caller on fsync). Reads are served from the ConsumeQueues, so a message becomes
visible once dispatched (and, under SYNC_FLUSH, flushed). Everything is thread-safe; there is
a single writer lock.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from functools import partial
from itertools import islice
from types import TracebackType

from ariane.common.clock import Clock, SystemClock
from ariane.common.properties import WAIT_STORE_MSG_OK
from ariane.errors import StoreDamagedError, StoreError
from ariane.store.allocate import AllocateMappedFileService
from ariane.store.batch_put import Scan, check_scanned, put_scanned
from ariane.store.checkpoint import StoreCheckpoint
from ariane.store.cleanup import CleanService, DiskUsage, disk_usage_ratio
from ariane.store.commit_log import CommitLog, PreparedOne
from ariane.store.config import FlushDiskType, StoreConfig
from ariane.store.consume_queue import ConsumeQueue
from ariane.store.dedup import DedupWindow, rebuild
from ariane.store.disk import OS_DISK, Disk
from ariane.store.dispatch import ArrivingListener, Dispatcher, ReputService
from ariane.store.filter import MessageFilter
from ariane.store.flush import (
    Completion,
    FlushCommitLogService,
    FlushConsumeQueueService,
    GroupCommitService,
    SyncWaiter,
)
from ariane.store.index_file import IndexService
from ariane.store.inner import MessageBatchInner, MessageInner
from ariane.store.loader import load_store
from ariane.store.maintenance import StoreMaintenance
from ariane.store.mapped_file_queue import MappedFileQueue
from ariane.store.put_direct import Direct, direct_put
from ariane.store.put_direct import method as _direct_method
from ariane.store.reads import ReadLimits, StoreReads
from ariane.store.record_block import BlockProgress, PackedRecord
from ariane.store.replica import ReplicaResult, ReplicaStatus, ReplicaWriter
from ariane.store.results import GetResult, GetStatus, PutResult, PutStatus, QueryResult
from ariane.store.runtime_info import store_runtime_info

__all__ = ["MessageStore"]

logger = logging.getLogger(__name__)


#: Prepared messages written per hold of the put lock (others may put in between).
_PREPARED_CHUNK = 256
#: a new topic's queues whose first ConsumeQueue file is made ahead (the others on demand)
PREPARE_QUEUES_MAX = 64
#: Most first files made ahead and not taken yet, over all topics. Each holds its size of
#: reserved disk (``mappedFileSizeConsumeQueue``, 6 MB by default), a mapping and an open
#: descriptor until a message reaches its queue; a broker where many topics are created and
#: few get messages (1,000 topics x 8 queues) would otherwise hold tens of GB and thousands
#: of descriptors. Past it, queues get their first file on their first dispatch, as in RocketMQ.
PREPARED_FIRST_MAX = 64
#: Packed records written per hold of the put lock (about a microsecond each).
_BLOCK_CHUNK = 2048


class MessageStore(StoreReads, StoreMaintenance):
    """The message store.

    Args:
        config: settings.
        clock: wall/monotonic time (store timestamps, file expiry). Defaults to the system clock.
        disk_usage: returns the used fraction of the partition of a path (for cleanup and the
            disk-full rule). Defaults to ``shutil.disk_usage``.
        arriving_listener: called on the dispatch thread when messages become visible (see
            :mod:`ariane.store.dispatch` for the exact contract).
        disk: the file system (:mod:`ariane.store.disk`; tests pass a simulated one).
    """

    #: whether the broker may deduplicate sends on this store (``append_message`` and the
    #: window's rebuild read and write this CommitLog directly; DLedger's replicated log
    #: does not allow it)
    supports_dedup = True

    def __init__(
        self,
        config: StoreConfig,
        *,
        clock: Clock | None = None,
        disk_usage: DiskUsage | None = None,
        arriving_listener: ArrivingListener | None = None,
        disk: Disk = OS_DISK,
    ) -> None:
        self.config = config
        self.clock: Clock = clock or SystemClock()
        self.disk_usage: DiskUsage = disk_usage or disk_usage_ratio
        self.disk = disk
        self.commit_log = CommitLog(config, self.clock, disk)
        self.consume_queue_table: dict[str, dict[int, ConsumeQueue]] = {}
        self._cq_lock = threading.RLock()
        self.checkpoint: StoreCheckpoint | None = None
        self.index: IndexService | None = (
            IndexService(
                config.index_dir,
                config.max_hash_slot_num,
                config.max_index_num,
                self.clock,
                disk,
            )
            if config.message_index_enable
            else None
        )
        self.dispatcher = Dispatcher(self.find_consume_queue, self.index)
        self._sync = config.flush_disk_type is FlushDiskType.SYNC_FLUSH
        self.reput = ReputService(
            self.commit_log, self.dispatcher, sync_visibility=self._sync,
            on_error=lambda r: self._set_unwriteable("dispatch", r),
        )  # fmt: skip
        self.reput.listener = arriving_listener
        self._not_writeable: dict[str, str] = {}
        self._loaded = False
        self._running = False
        self._shutdown = False
        self._lock_fd: int | None = None
        self.last_exit_ok = True
        self.boot_timestamp_ms = self.clock.now_ms()
        self.get_times_found = 0
        self.get_times_miss = 0
        self.get_transferred_msgs = 0
        self.put_failed_times = 0
        self._services: list[object] = []
        self.group_commit: GroupCommitService | None = None
        self.flush_commit_log: FlushCommitLogService | None = None
        self.flush_consume_queue: FlushConsumeQueueService | None = None
        self.cleaner: CleanService | None = None
        self.allocator: AllocateMappedFileService | None = None
        #: the queues whose first file was asked for ahead and is not taken yet
        self._prepared_first: list[MappedFileQueue] = []
        #: replication (a slave's store): replicated appends, and puts refused while on
        self.replica_writer = ReplicaWriter(self.commit_log, config.delay_levels_ms)
        self._replica_mode = False
        #: what the compiled put_message puts with, None while the Python one decides
        #: (store/put_direct.py; kept by _refresh_direct)
        self._direct: Direct | None = None
        #: ids of idempotent sends stored lately (the broker reads and feeds it)
        self.dedup = DedupWindow(config.dedup_window_size, config.dedup_window_ms)

    # -- lifecycle -----------------------------------------------------------------------
    def __enter__(self) -> MessageStore:
        if not self._loaded and not self.load():
            raise StoreError("message store failed to load")
        if not self._running:
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.shutdown()

    def load(self) -> bool:
        """Take the store lock, map the files and recover. Returns True on success.

        Raises:
            StoreError: another process holds the store lock.
            StoreDamagedError: the files are damaged (nothing was changed; the message names
                the file and what to do).
        """
        self.disk.makedirs(self.config.store_path_root_dir)
        self._take_lock()
        self.last_exit_ok = not self.disk.exists(self.config.abort_path)
        try:
            self.checkpoint = self._recover()
        except StoreDamagedError as exc:
            logger.error("message store not started: %s", exc)
            self._release_lock()
            raise
        except Exception:
            logger.exception("loading the message store failed")
            return False
        self.rebuild_dedup()
        self._loaded = True
        return True

    def rebuild_dedup(self) -> int:
        """Refill the idempotence window from the CommitLog's tail (at load, and when a slave
        becomes writeable); returns the ids it holds."""
        if not self.supports_dedup:
            return 0
        log = self.commit_log
        count = rebuild(self.dedup, log, log.max_offset, self.clock.now_ms())
        if count:
            logger.info("idempotence window rebuilt from the CommitLog: %d ids", count)
        return count

    def _recover(self) -> StoreCheckpoint:
        """Map the files and recover (``load_store``); returns the checkpoint."""
        return load_store(self)

    def _take_lock(self) -> None:
        try:
            self._lock_fd = self.disk.lock(self.config.lock_path)
        except OSError as exc:
            raise StoreError(f"store {self.config.store_path_root_dir} is in use") from exc

    def _release_lock(self) -> None:
        if self._lock_fd is not None:
            self.disk.unlock(self._lock_fd)
            self._lock_fd = None

    def start(self) -> None:
        """Create the abort file and start the background services."""
        if not self._loaded or self.checkpoint is None:
            raise StoreError("load() must succeed before start()")
        if self._running:
            return
        self.disk.write_file(self.config.abort_path, b"", sync=True)
        self.disk.sync_dir(self.config.store_path_root_dir)
        self.allocator = AllocateMappedFileService(
            self.commit_log.queue,
            min_lead_bytes=self.config.commit_log_warm_min_lead_bytes,
            max_lead_bytes=self.config.commit_log_warm_max_lead_bytes,
            fast_writer_bytes_per_s=self.config.commit_log_warm_fast_writer_bytes_per_s,
            on_space=lambda r: self._set_unwriteable("space", r),
            init_lead_bytes=self.config.commit_log_init_lead_bytes if self._sync else 0,
            init_lock=self.commit_log.put_lock,
        )
        self.allocator.start()
        cfg = self.config
        cp = self.checkpoint
        self._start_commit_log_flush(cp)
        self.reput.start()
        self.flush_consume_queue = FlushConsumeQueueService(
            self.all_consume_queues, self.index, cp,
            lambda: self.dispatcher.last_store_timestamp,
            interval_ms=cfg.flush_interval_consume_queue_ms,
            least_pages=cfg.flush_consume_queue_least_pages,
            thorough_interval_ms=cfg.flush_consume_queue_thorough_interval_ms, clock=self.clock,
        )  # fmt: skip
        self.flush_consume_queue.start()
        self.cleaner = CleanService(
            cfg, self.commit_log, self.all_consume_queues, self.index, self.clock,
            self.disk_usage, lambda r: self._set_unwriteable("disk", r),
        )  # fmt: skip
        self.cleaner._space_check()
        self.cleaner.start()
        self._running = True
        self._refresh_direct()

    def _start_commit_log_flush(self, cp: StoreCheckpoint) -> None:
        """Start the CommitLog flush: group commit under SYNC_FLUSH, else periodic."""
        cfg = self.config
        if self._sync:
            self.group_commit = GroupCommitService(
                self.commit_log, cp, timeout_ms=cfg.sync_flush_timeout_ms,
                on_flushed=self.reput.wakeup, dispatch=self.reput.reput_here,
                slice_ns=cfg.group_commit_slice_ns,
            )  # fmt: skip
            self.group_commit.start()
        else:
            self.flush_commit_log = FlushCommitLogService(
                self.commit_log, cp, interval_ms=cfg.flush_interval_commit_log_ms,
                least_pages=cfg.flush_commit_log_least_pages,
                thorough_interval_ms=cfg.flush_commit_log_thorough_interval_ms, clock=self.clock,
            )  # fmt: skip
            self.flush_commit_log.start()

    def shutdown(self) -> None:
        """Stop the services, flush everything, write the checkpoint, release the files.

        The abort file is removed only when dispatch caught up and the store is writeable, so
        that the next start re-dispatches otherwise. Idempotent.
        """
        if self._shutdown:
            return
        self._shutdown = True
        was_running = self._running
        self._running = False
        self._direct = None
        if was_running:
            assert self.cleaner is not None
            assert self.flush_consume_queue is not None
            self.cleaner.stop()
            if self.allocator is not None:
                self.allocator.stop()
            deadline = time.monotonic() + 5.0
            while self.commit_log.pending and time.monotonic() < deadline:
                if self.group_commit is not None:
                    self.commit_log.flush(0)
                self.reput.wakeup()
                time.sleep(0.01)
            if self.group_commit is not None:
                self.group_commit.stop()
            if self.flush_commit_log is not None:
                self.flush_commit_log.stop()
            self.reput.stop()
            self.flush_consume_queue.stop()
        clean = was_running and not self.commit_log.pending and self.is_writeable_ignoring_run
        self.commit_log.shutdown()
        for cq in self.all_consume_queues():
            cq.shutdown()
        if self.index is not None:
            self.index.shutdown()
        if clean:
            try:
                self.disk.unlink(self.config.abort_path)
                self.disk.sync_dir(self.config.store_path_root_dir)
            except FileNotFoundError:
                pass
        elif was_running:
            logger.warning("keeping the abort file: dispatch behind or store not writeable")
        self._release_lock()

    def close_without_cleanup(self) -> None:
        """Stop the threads and unmap the files with no final flush, no checkpoint and the
        abort file left in place: the state a killed process leaves (tests and tools)."""
        self._shutdown = True
        self._running = False
        self._direct = None
        services = [self.allocator, self.cleaner, self.flush_consume_queue, self.group_commit]
        for svc in [*services, self.flush_commit_log, self.reput]:
            if svc is not None:
                svc.abandon()
        self.commit_log.shutdown()
        for cq in self.all_consume_queues():
            cq.shutdown()
        if self.index is not None:
            for f in self.index.files:
                f.mf.close()
        self._release_lock()

    # -- writeability --------------------------------------------------------------------
    def _set_unwriteable(self, kind: str, reason: str | None) -> None:
        if reason is None:
            if self._not_writeable.pop(kind, None) is not None:
                logger.info("store writeable again (%s)", kind)
        elif kind not in self._not_writeable:
            logger.error("store not writeable: %s", reason)
            self._not_writeable[kind] = reason
        else:
            self._not_writeable[kind] = reason
        self._refresh_direct()

    def _refresh_direct(self) -> None:
        """Open the compiled put_message's path (``_direct``) exactly while the Python
        one would put at once: running, ASYNC_FLUSH, writeable, not a replica."""
        open_ = self._running and not (self._sync or self._not_writeable or self._replica_mode)
        self._direct = direct_put(self.commit_log, self.reput, open_)

    @property
    def is_writeable_ignoring_run(self) -> bool:
        """True when no disk/dispatch problem blocks writes."""
        return not self._not_writeable

    @property
    def is_writeable(self) -> bool:
        """True when puts are accepted."""
        return self._running and not self._not_writeable

    @property
    def writeable_reason(self) -> str | None:
        """Why puts are refused (None when they are accepted)."""
        if not self._running:
            return "message store is not running"
        if self._not_writeable:
            return "; ".join(self._not_writeable.values())
        return None

    # -- ConsumeQueue table --------------------------------------------------------------
    def find_consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        """Get or create the ConsumeQueue of (topic, queue id)."""
        queues = self.consume_queue_table.get(topic)
        if queues is not None:
            cq = queues.get(queue_id)
            if cq is not None:
                return cq
        with self._cq_lock:
            queues = self.consume_queue_table.setdefault(topic, {})
            cq = queues.get(queue_id)
            if cq is None:
                cq = ConsumeQueue(
                    topic, queue_id, self.config.consume_queue_dir,
                    self.config.mapped_file_size_consume_queue, self.disk,
                )  # fmt: skip
                queues[queue_id] = cq
            return cq

    def prepare_consume_queues(self, topic: str, queue_ids: Iterable[int]) -> None:
        """Have the first file of each of these ConsumeQueues created ahead, in the
        background (a topic was created: its queues' first dispatches then find their files
        made, not creating and syncing them on the reput thread); at most
        :data:`PREPARE_QUEUES_MAX` queues, those that have no file yet, while fewer than
        :data:`PREPARED_FIRST_MAX` made ahead wait for their first message."""
        allocator = self.allocator
        if allocator is None or not self._running:
            return
        waiting = [
            q
            for q in self._prepared_first
            if q.last is None and (q.next_ready or allocator.is_waiting(q))
        ]
        room = min(PREPARE_QUEUES_MAX, PREPARED_FIRST_MAX - len(waiting))
        queues = []
        for queue_id in islice(queue_ids, max(0, room)):
            cq = self.find_consume_queue(topic, queue_id)
            if cq.queue.last is None and not cq.queue.next_ready:
                queues.append(cq.queue)
        self._prepared_first = waiting + queues
        if queues:
            allocator.prepare_first_files(queues)

    def get_consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        """The ConsumeQueue of (topic, queue id) if it exists."""
        queues = self.consume_queue_table.get(topic)
        return queues.get(queue_id) if queues is not None else None

    def all_consume_queues(self) -> list[ConsumeQueue]:
        """Every ConsumeQueue."""
        return [
            cq for queues in list(self.consume_queue_table.values()) for cq in list(queues.values())
        ]

    # -- put -----------------------------------------------------------------------------
    def _refusal(self) -> PutResult | None:
        if self._running and not self._not_writeable and not self._replica_mode:
            return None
        self.put_failed_times += 1
        if self._replica_mode:
            return PutResult(
                PutStatus.SERVICE_NOT_AVAILABLE,
                remark="message store is in slave mode, so putMessage is forbidden",
            )
        if self._shutdown or not self._running:
            return PutResult(PutStatus.SERVICE_NOT_AVAILABLE, remark="message store is not running")
        return PutResult(PutStatus.SERVICE_NOT_AVAILABLE, remark=self.writeable_reason)

    def _append(self, do: Callable[[], PutResult]) -> PutResult:
        refusal = self._refusal()
        if refusal is not None:
            return refusal
        try:
            result = do()
        except OSError as exc:
            # no file was mapped without its blocks: writes stop until the allocator can
            # create the next file again (it clears this)
            reason = f"disk full: cannot reserve a new CommitLog file ({exc.strerror or exc})"
            logger.error("CommitLog append failed: %s", exc)
            self._set_unwriteable("space", reason)
            self.put_failed_times += 1
            return PutResult(PutStatus.CREATE_MAPPED_FILE_FAILED, remark=reason)
        if result.msg_num == 0:
            self.put_failed_times += 1
        elif not self._sync:
            self.reput.wake_after_put()
        return result

    def _wait_flush(self, result: PutResult, wait: bool) -> Future[PutResult]:
        future: Future[PutResult] = Future()
        self._complete_when_flushed(result, wait, future)
        return future

    def _complete_when_flushed(self, result: PutResult, wait: bool, done: Completion) -> None:
        if not self._sync or result.msg_num == 0:
            done.set_result(result)
            return
        gc = self.group_commit
        assert gc is not None
        if not wait:
            gc.wakeup()
            done.set_result(result)
            return
        gc.put_request(result.wrote_offset + result.wrote_bytes, done, result)

    def submit_message_to(self, msg: MessageInner, done: Completion) -> None:
        """``submit_message`` that completes ``done`` (``set_result``, on this thread or the
        group commit's) instead of a new ``Future``: a caller with a cheaper completion (the
        send processor's, which answers on the event loop in bulk) skips the Future's
        Condition and callbacks."""
        result = self._append(lambda: self.commit_log.put_message(msg))
        self._complete_when_flushed(result, msg.properties.get(WAIT_STORE_MSG_OK) != "false", done)

    def completion_submit(self) -> Callable[[MessageInner, Completion], None] | None:
        """``submit_message_to`` when this store's single puts complete a light ``Completion``
        (this store); None for a store whose puts complete futures of their own (DLedger, whose
        leader answers in the loop turn that saw the quorum): callers then use
        ``submit_message``."""
        return self.submit_message_to

    @property
    def answers_at_once(self) -> bool:
        """True when ``put_message`` never waits (ASYNC_FLUSH): an event loop may call it."""
        return not self._sync

    def submit_message(self, msg: MessageInner) -> Future[PutResult]:
        """Append ``msg`` now; the future completes when the flush policy is met.

        Never blocks on fsync. Under SYNC_FLUSH the future completes with ``PUT_OK`` after the
        group commit covers the record, or ``FLUSH_DISK_TIMEOUT`` after ``sync_flush_timeout_ms``
        (the message is stored either way). A ``WAIT=false`` property skips the wait.
        """
        result = self._append(lambda: self.commit_log.put_message(msg))
        return self._wait_flush(result, msg.properties.get(WAIT_STORE_MSG_OK) != "false")

    def append_message(self, msg: MessageInner) -> tuple[PutResult, Future[PutResult]]:
        """``submit_message`` that also returns the append's result at once (where the
        message went, before the flush policy is met)."""
        result = self._append(lambda: self.commit_log.put_message(msg))
        return result, self._wait_flush(result, msg.properties.get(WAIT_STORE_MSG_OK) != "false")

    def append_messages(self, batch: MessageBatchInner) -> tuple[PutResult, Future[PutResult]]:
        """``submit_messages`` that also returns the append's result at once."""
        result = self._append(lambda: self.commit_log.put_messages(batch))
        return result, self._wait_flush(result, True)

    def append_scanned(
        self, batch: MessageBatchInner, data: bytes, stamp: bytes, scanned: Scan
    ) -> tuple[PutResult, Future[PutResult] | None] | None:
        """A batch body of the common shape appended straight from ``data`` (``batch``: its
        fields, :mod:`ariane.store.batch_put`); the future as ``append_messages``'s, None when
        the flush is asynchronous (the result is final); None: ``put_messages`` must decide
        (always on a store whose log is not its own CommitLog files, :attr:`writes_blocks`: a
        DLedger store's batches go through the quorum)."""
        if not self.writes_blocks:
            return None
        ready = check_scanned(self.commit_log, batch, data, stamp, scanned)
        if ready is None:
            return None
        result = self._append(partial(put_scanned, self.commit_log, ready))
        return result, self._wait_flush(result, True) if self._sync else None

    def wait_durable(self, result: PutResult) -> Future[PutResult]:
        """A future completing with ``result`` once the flush policy covers its bytes (a
        message stored earlier, answered again: the idempotence window's duplicates)."""
        return self._wait_flush(result, True)

    def _put_and_wait(self, result: PutResult, wait: bool) -> PutResult:
        gc = self.group_commit
        if result.msg_num == 0 or gc is None:
            return result
        if not wait:
            gc.wakeup()
            return result
        waiter = SyncWaiter(gc.relay)
        gc.put_request(result.wrote_offset + result.wrote_bytes, waiter, result)
        return waiter.wait()

    def put_message(self, msg: MessageInner) -> PutResult:
        """Append ``msg`` and block until it is durable per the flush policy. (The compiled
        build serves the common ASYNC_FLUSH case in C and comes here for the rest:
        store/put_direct.py.)"""
        if self._sync:
            result = self._append(lambda: self.commit_log.put_message(msg))
            return self._put_and_wait(result, msg.properties.get(WAIT_STORE_MSG_OK) != "false")
        if not self._running or self._not_writeable or self._replica_mode:
            return self._append(lambda: self.commit_log.put_message(msg))
        try:
            result = self.commit_log.put_message(msg)
        except OSError:
            return self._append(lambda: self.commit_log.put_message(msg))
        if result.msg_num == 0:
            self.put_failed_times += 1
        else:
            self.reput.wake_after_put()
        return result

    def prepare_message(self, msg: MessageInner) -> PreparedOne | PutResult:
        """Validate and encode ``msg`` ahead of its put (:meth:`submit_prepared`); a refusal
        (too big, bad topic...) comes back as a ``PutResult``. Writes nothing."""
        return self.commit_log.prepare_one(msg)

    def submit_prepared(
        self, ones: Sequence[PreparedOne]
    ) -> tuple[list[PutResult], Future[PutResult]]:
        """Append prepared messages in order, taking the put lock once per
        ``_PREPARED_CHUNK`` of them (a burst of timer deliveries pays only the write).

        Returns one result per message at once, and a future that completes when the flush
        policy covers the last one stored (at once under ASYNC_FLUSH). Messages after a
        refusal (not writeable, no new CommitLog file) get that refusal and are not stored.
        """
        results: list[PutResult] = []
        for start in range(0, len(ones), _PREPARED_CHUNK):
            chunk = ones[start : start + _PREPARED_CHUNK]
            written: list[PutResult] = []
            failed = self._append(partial(self._put_prepared, chunk, written))
            results += written
            if failed.msg_num == 0 and len(written) < len(chunk):
                results += [failed] * (len(ones) - len(results))
                break
        last = next((r for r in reversed(results) if r.stored), None)
        if last is None:
            future: Future[PutResult] = Future()
            future.set_result(results[-1] if results else PutResult(PutStatus.PUT_OK))
            return results, future
        return results, self._wait_flush(last, True)

    def _put_prepared(self, chunk: Sequence[PreparedOne], written: list[PutResult]) -> PutResult:
        self.commit_log.put_prepared(chunk, written)
        return written[-1]

    @property
    def writes_blocks(self) -> bool:
        """Whether :meth:`submit_block` writes here (this store's own CommitLog files, not a
        replicated log whose entries wrap each record)."""
        return type(self.commit_log) is CommitLog

    def submit_block(
        self, recs: Sequence[PackedRecord]
    ) -> tuple[int, PutResult | None, Future[PutResult]]:
        """Append packed records (:mod:`ariane.store.record_block`) in order, taking the put
        lock once per ``_BLOCK_CHUNK`` of them; only when :attr:`writes_blocks`.

        Returns how many were stored (the first ones), the refusal that stopped the rest
        (not writeable, no new CommitLog file) or None, and a future that completes when the
        flush policy covers the last one stored.
        """
        progress = BlockProgress()
        for start in range(0, len(recs), _BLOCK_CHUNK):
            chunk = recs[start : start + _BLOCK_CHUNK]
            done = progress.written
            result = self._append(partial(self._put_block, chunk, progress))
            if progress.written - done < len(chunk):
                return progress.written, result, self._wait_flush(_block_end(progress), True)
        return progress.written, None, self._wait_flush(_block_end(progress), True)

    def _put_block(self, chunk: Sequence[PackedRecord], progress: BlockProgress) -> PutResult:
        self.commit_log.put_block(chunk, progress)
        return _block_end(progress)

    def submit_messages(self, batch: MessageBatchInner) -> Future[PutResult]:
        """Append a batch atomically; like ``submit_message`` (one result for the batch)."""
        result = self._append(lambda: self.commit_log.put_messages(batch))
        return self._wait_flush(result, True)

    def put_messages(self, batch: MessageBatchInner) -> PutResult:
        """Append a batch atomically and block until durable per the flush policy."""
        result = self._append(lambda: self.commit_log.put_messages(batch))
        return self._put_and_wait(result, True) if self._sync else result

    # -- replication (a slave's store; see ariane.store.replica) --------------------------
    @property
    def replica_mode(self) -> bool:
        """True while the store takes replicated bytes and refuses puts (a slave)."""
        return self._replica_mode

    def set_replica_mode(self, on: bool) -> None:
        """Become a replica (puts refused, :meth:`append_replica` accepted) or stop being one.

        Leaving replica mode drops an incomplete record the master had not finished sending
        (it never reached the files), so local puts continue after the last complete one.
        """
        if on == self._replica_mode:
            return
        self.replica_writer.reset()
        self._replica_mode = on
        self._refresh_direct()
        if on:
            logger.info("message store in replica mode from offset %d", self.max_phy_offset)
        else:
            logger.info("message store accepts puts again at offset %d", self.max_phy_offset)
            self.rebuild_dedup()  # the replicated records' ids, for the sends to come

    def append_replica(self, offset: int, data: bytes) -> ReplicaResult:
        """Append the master's CommitLog bytes ``data`` at ``offset`` (the end of the log)
        and dispatch the records they complete (see :class:`ReplicaWriter`). Never raises."""
        end = self.commit_log.max_offset
        if not self._replica_mode or not self._running:
            reason = "not a replica" if self._running else "message store is not running"
            return ReplicaResult(ReplicaStatus.UNAVAILABLE, end, reason=reason)
        try:
            result = self.replica_writer.append(offset, data)
        except OSError as exc:
            logger.exception("replicated append at %d failed", offset)
            return ReplicaResult(ReplicaStatus.UNAVAILABLE, end, reason=f"write failed: {exc}")
        if result.records:
            if self.group_commit is not None:
                self.group_commit.wakeup()
            elif self.reput.idle:
                self.reput.wakeup()
        return result

    def confirm_replica(self, offset: int, data: bytes) -> bool:
        """Whether the CommitLog holds exactly ``data`` at ``offset`` (history check)."""
        return self.replica_writer.confirm(offset, data)

    # -- introspection -------------------------------------------------------------------
    def topic_queues(self) -> dict[str, list[int]]:
        """Every topic with a ConsumeQueue and its queue ids (sorted)."""
        return {
            topic: sorted(queues)
            for topic, queues in sorted(self.consume_queue_table.items())
            if queues
        }

    def dispatch_behind_bytes(self) -> int:
        """CommitLog bytes written but not yet dispatched to ConsumeQueue/index."""
        return self.reput.behind_bytes()

    def runtime_info(self) -> dict[str, str]:
        """The store's part of RocketMQ's broker runtime info (all values strings)."""
        return store_runtime_info(self)

    # -- maintenance ---------------------------------------------------------------------
    def wait_dispatched(self, timeout_s: float = 10.0) -> bool:
        """Block until everything written is dispatched (tests, benchmarks, shutdown)."""
        deadline = time.monotonic() + timeout_s
        while True:
            if not self.commit_log.pending and self.reput.behind_bytes() == 0:
                return True
            if time.monotonic() > deadline:
                return False
            if not self._running:
                if self._sync:
                    self.commit_log.queue.flush_all()
                self.reput.do_reput()
                continue
            if self.group_commit is not None:
                self.group_commit.wakeup()
            self.reput.wakeup()
            time.sleep(0.0005)

    def flush(self) -> None:
        """Flush the CommitLog, ConsumeQueues, index and checkpoint now (tests, tools)."""
        self.wait_dispatched()
        for _ in range(len(self.commit_log.queue.files) + 2):
            self.commit_log.flush(0)
        if self.checkpoint is not None and self.commit_log.queue.store_timestamp:
            self.checkpoint.physic_msg_timestamp = self.commit_log.queue.store_timestamp
        if self.flush_consume_queue is not None:
            self.flush_consume_queue.do_flush(thorough=True)

    # -- reads (see StoreReads) ----------------------------------------------------------
    def get_message(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        max_count: int,
        message_filter: MessageFilter | None = None,
        limits: ReadLimits | None = None,
    ) -> GetResult:
        """Read up to ``max_count`` records of a queue from ``offset`` (see ``StoreReads``;
        ``limits`` replace the store's transfer limits, for bulk readers)."""
        if self._shutdown:
            return GetResult(GetStatus.SERVICE_NOT_AVAILABLE, offset, 0, 0)
        return self.read_queue(topic, queue_id, offset, max_count, message_filter, limits)

    def query_message(
        self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int
    ) -> QueryResult:
        """Records of ``topic`` whose KEYS or UNIQ_KEY equal ``key`` (see ``StoreReads``)."""
        return self.query_by_key(topic, key, max_num, begin_ms, end_ms)


def _block_end(progress: BlockProgress) -> PutResult:
    """A result ending where the block's last stored record ends (what the flush waits for;
    no record when none was stored)."""
    if progress.written == 0:
        return PutResult(PutStatus.PUT_OK)
    return PutResult(
        PutStatus.PUT_OK, progress.end_offset - 1, 1, progress.store_timestamp_ms, msg_num=1
    )


if _direct_method is not None:  # the compiled put_message; the Python one is its fallback
    MessageStore.put_message = _direct_method(MessageStore.put_message)  # type: ignore[method-assign]
