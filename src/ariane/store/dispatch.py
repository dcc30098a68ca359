"""The reput loop: CommitLog -> ConsumeQueue and IndexFile (RocketMQ ``ReputMessageService``).

How it works: the writer leaves one :data:`~ariane.store.format.DispatchRequest` per record in
``CommitLog.pending`` (in physical order), or one
:class:`~ariane.store.dispatch_block.DispatchBlock` (the requests as columns) per run of records
written at once. This thread takes them in batches (a block is a batch), but only those
whose record lies entirely below the *visibility limit*: the write position under
ASYNC_FLUSH, the flushed position under SYNC_FLUSH (so a reader never sees a message that is
not on disk). Each batch goes to the ConsumeQueues (not PREPARED/ROLLBACK records), then to
the index, then to the arriving listener. Dispatch is idempotent, so after a failure the batch
is simply put back and retried. Under SYNC_FLUSH at a light load the group commit runs the
round itself right after its ``fdatasync`` (:meth:`ReputService.reput_here`); under ASYNC_FLUSH
at a light load the broker's event loop may *claim* the next round (``claimed``: a send to a
queue somebody holds a pull on, while this thread is idle): the puts until then do not wake
this thread and the loop runs the round itself right after the read
(``broker/loop_round.py``). Rounds run one at a time either way.

Arriving listener contract: after a batch is visible, the listener is called once per
(topic, queue id, tagsCode) group of the batch with ``next_logic_offset`` = queue offset after
the group's last message, that message's tagsCode and store time, and its properties when the
group is a single message (else None: check the records). It runs on the round's thread (this
one, or a ``reput_here`` caller's) and must not block.
"""

from __future__ import annotations

import bisect
import logging
import threading
from collections import Counter, deque
from collections.abc import Callable, Sequence
from itertools import compress, islice, repeat
from typing import Any, Protocol, cast

import numpy as np
import numpy.typing as npt

from ariane.common import native
from ariane.common.sysflag import (
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
    enters_consume_queue,
)
from ariane.store.commit_log import CommitLog
from ariane.store.consume_queue import ConsumeQueue
from ariane.store.dispatch_block import DispatchBlock, Pending
from ariane.store.dispatch_groups import CqGroup, cq_groups
from ariane.store.format import DispatchRequest
from ariane.store.index_file import IndexService
from ariane.store.service import ServiceThread
from ariane.store.vector import VECTOR_MIN

__all__ = ["ArrivingListener", "Dispatcher", "ReputService", "int64_rows_py"]

logger = logging.getLogger(__name__)

_BATCH = 8192


def int64_rows_py(columns: tuple[Sequence[int], ...]) -> bytearray:
    """Equal-length int columns as rows of native int64 values, one row after the other (the
    pure twin of ``_speedups.int64_rows``, which returns None where numpy would convert or
    raise)."""
    return bytearray(np.array(columns, dtype=np.int64).tobytes())


_native_int64_rows: Callable[[tuple[Sequence[int], ...]], bytearray | None] | None = getattr(
    native.speedups, "int64_rows", None
)


def _int64_rows(columns: tuple[Sequence[int], ...]) -> npt.NDArray[np.int64]:
    """``columns`` as a (k, n) int64 array: read by the compiled ``int64_rows`` when it takes
    them (no per-element type discovery), else by numpy."""
    raw = _native_int64_rows(columns) if _native_int64_rows is not None else None
    if raw is None:
        return np.array(columns, dtype=np.int64)
    return np.frombuffer(raw, dtype=np.int64).reshape(len(columns), len(columns[0]))


class ArrivingListener(Protocol):
    """``MessageArrivingListener.arriving``."""

    def __call__(
        self,
        topic: str,
        queue_id: int,
        next_logic_offset: int,
        tags_code: int,
        store_timestamp_ms: int,
        properties: dict[str, str] | None,
    ) -> None: ...


class Dispatcher:
    """Applies dispatch requests to the ConsumeQueues and the index.

    Args:
        find_consume_queue: get-or-create the ConsumeQueue of (topic, queue id).
        index: the index service, or None when indexing is off.
    """

    def __init__(
        self,
        find_consume_queue: Callable[[str, int], ConsumeQueue],
        index: IndexService | None,
    ) -> None:
        self.find_consume_queue = find_consume_queue
        self.index = index
        self._cqs: dict[tuple[str, int], ConsumeQueue] = {}
        self.last_store_timestamp = 0
        #: held while a batch is taken from the log and dispatched (topic deletion waits).
        self.lock = threading.Lock()

    def forget(self, topic: str) -> None:
        """Drop cached ConsumeQueues of ``topic`` (after it was deleted)."""
        for key in [k for k in self._cqs if k[0] == topic]:
            del self._cqs[key]

    def dispatch(self, batch: Sequence[DispatchRequest]) -> list[CqGroup] | None:
        """Build ConsumeQueue entries and index keys for ``batch`` (idempotent); returns its
        ConsumeQueue groups as :meth:`dispatch_columns` does."""
        if not batch:
            return None
        if cq_groups is not None:  # the compiled groups: no per-record Python work
            return self.dispatch_columns(tuple(zip(*batch, strict=True)))
        if len(batch) < VECTOR_MIN:
            self._dispatch_each(batch)
            if self.index is not None:
                self.index.build_index(batch)
        else:
            columns = tuple(zip(*batch, strict=True))
            self._dispatch_columns(columns)
            if self.index is not None:
                self.index.build_index_columns(columns)
        self.last_store_timestamp = batch[-1].store_timestamp_ms
        return None

    def dispatch_columns(self, columns: tuple[tuple[Any, ...], ...]) -> list[CqGroup] | None:
        """``dispatch`` for a batch given as its columns (a :class:`DispatchBlock`'s, or
        ``zip(*requests)``); returns the batch's ConsumeQueue groups when the compiled
        ``cq_groups`` made them (``store/dispatch_groups.py``), else None."""
        if not columns or not columns[0]:
            return None
        groups = cq_groups(columns) if cq_groups is not None else None
        if groups is None:
            self._dispatch_columns(columns)
        else:
            self._dispatch_groups(columns, groups)
        if self.index is not None:
            self.index.build_index_columns(columns)
        self.last_store_timestamp = columns[5][-1]
        return groups

    def _dispatch_groups(self, columns: tuple[tuple[Any, ...], ...], groups: list[CqGroup]) -> None:
        """ConsumeQueue entries per group: a run in one write when it lands at its queue's end
        (``ConsumeQueue.put_run``), else record by record as ``_dispatch_each``."""
        for topic, queue_id, _n, first_phys, last_phys, first_offset, _row, units, _s in groups:
            cq = self._queue(topic, queue_id)
            if units is None or not cq.put_run(units, first_phys, last_phys, first_offset):
                self._put_group(cq, columns, topic, queue_id)

    @staticmethod
    def _put_group(
        cq: ConsumeQueue, columns: tuple[tuple[Any, ...], ...], topic: str, queue_id: int
    ) -> None:
        topics, queue_ids, phys, sizes, tags, _ts, offsets, _k, _u, flags = columns[:10]
        for i, t in enumerate(topics):
            if t == topic and queue_ids[i] == queue_id and enters_consume_queue(flags[i]):
                cq.put(phys[i], sizes[i], tags[i], offsets[i])

    def _queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        key = (topic, queue_id)
        cq = self._cqs.get(key)
        if cq is None:
            cq = self._cqs[key] = self.find_consume_queue(topic, queue_id)
        return cq

    def _dispatch_each(self, batch: Sequence[DispatchRequest]) -> None:
        cqs = self._cqs
        for topic, queue_id, phys, size, tags, _ts, cq_offset, _k, _u, sys_flag, _p in batch:
            if not enters_consume_queue(sys_flag):
                continue
            cq = cqs.get((topic, queue_id))
            if cq is None:
                cq = self._queue(topic, queue_id)
            cq.put(phys, size, tags, cq_offset)

    def _dispatch_columns(self, columns: tuple[tuple[Any, ...], ...]) -> None:
        """ConsumeQueue entries for a batch given as columns: each queue's run in one go."""
        topics, queue_ids, phys_col, size_col, tags_col, _ts, offset_col, _k, _u, flag_col = (
            columns[:10]
        )
        count = len(topics)
        flags, group, phys, sizes, tags, offsets = _int64_rows(
            (flag_col, queue_ids, phys_col, size_col, tags_col, offset_col)
        )
        tx = flags & TRANSACTION_TYPE_MASK
        keep = (tx != TRANSACTION_PREPARED_TYPE) & (tx != TRANSACTION_ROLLBACK_TYPE)
        if topics.count(topics[0]) != count:  # else the queue ids are the groups
            ids: dict[tuple[str, int], int] = {}
            group = np.fromiter(
                (ids.setdefault(k, len(ids)) for k in zip(topics, queue_ids, strict=True)),
                dtype=np.int64,
                count=count,
            )
        rows = np.flatnonzero(keep)
        order = rows[np.argsort(group[rows], kind="stable")]
        starts = np.flatnonzero(np.diff(group[order])) + 1
        for run in np.split(order, starts) if len(order) else ():
            first = int(run[0])
            cq = self._queue(topics[first], queue_ids[first])
            if len(run) < VECTOR_MIN:
                for i in run.tolist():
                    cq.put(phys_col[i], size_col[i], tags_col[i], offset_col[i])
            else:
                cq.put_units(phys[run], sizes[run], tags[run], offsets[run])


def _visible(pending: deque[Pending], count: int, limit: int) -> int:
    """How many of the first ``count`` requests (single ones) end at or below ``limit`` (they
    are in physical order, so a prefix)."""
    if not count:
        return 0
    if pending[count - 1].end_offset <= limit:
        return count
    return bisect.bisect_right(range(count), limit, key=lambda i: pending[i].end_offset)


def _singles(pending: deque[Pending], count: int, blocks: int) -> int:
    """How many of the first ``count`` entries are single requests (no block before them);
    ``blocks``: ``CommitLog.blocks_queued`` read after ``count`` (0: no block anywhere)."""
    if not blocks:
        return count
    types = list(map(type, islice(pending, count)))
    return types.index(DispatchBlock) if DispatchBlock in types else count


def _at_most(log: CommitLog, most: int) -> bool:
    """Whether at most ``most`` records are pending (a block counts its records)."""
    pending = log.pending
    if len(pending) > most:
        return False
    if not log.blocks_queued:
        return True
    # a C-level copy (the writer may append meanwhile)
    return sum(len(p) if type(p) is DispatchBlock else 1 for p in list(pending)) <= most


class ReputService(ServiceThread):
    """Runs dispatch behind the writer.

    Args:
        commit_log: the log whose ``pending`` requests are dispatched.
        dispatcher: applies them.
        sync_visibility: only dispatch what is flushed (SYNC_FLUSH).
        on_error: called with a reason when dispatch fails (the store stops accepting writes
            until dispatch works again); called with None when it recovers.
    """

    def __init__(
        self,
        commit_log: CommitLog,
        dispatcher: Dispatcher,
        *,
        sync_visibility: bool,
        on_error: Callable[[str | None], None],
    ) -> None:
        super().__init__("ReputMessageService")
        self.commit_log = commit_log
        self.dispatcher = dispatcher
        self.sync_visibility = sync_visibility
        self.on_error = on_error
        self.listener: ArrivingListener | None = None
        self.reput_from_offset = 0
        #: True while the thread waits to be woken by a put (the writer then calls wakeup).
        self.idle = False
        #: a round that dispatched at least this many requests is followed by a 1 ms wait
        #: that puts do not cut short (they gather into the next batch); after a smaller
        #: round the thread is idle, woken by the next put.
        self.gather_from = 32
        #: True while a caller (the broker's event loop) has claimed the next round: puts do
        #: not wake this thread (``idle and not claimed``), the caller clears this and then
        #: runs :meth:`reput_here` (or wakes this thread when that declines)
        self.claimed = False
        self._failing = False
        self._groups: list[CqGroup] | None = None
        #: held for a whole round: this thread's, or one run elsewhere by :meth:`reput_here`
        #: (rounds one at a time, so batches are notified and ``reput_from_offset`` moves in
        #: log order)
        self._round = threading.Lock()

    def visibility_limit(self) -> int:
        """Physical offset below which records may be dispatched."""
        if self.sync_visibility:
            return self.commit_log.flushed_where
        return self.commit_log.max_offset

    def behind_bytes(self) -> int:
        """``dispatchBehindBytes``: written bytes not dispatched yet."""
        return max(0, self.commit_log.max_offset - self.reput_from_offset)

    def do_reput(self) -> int:
        """Dispatch every visible pending request; return how many were dispatched."""
        with self._round:
            return self._do_reput()

    def wake_after_put(self) -> None:
        """After a put that stored records (ASYNC_FLUSH): wake this thread when it is idle
        and no caller claimed its next round (a claimed round is run by the claimer: the
        broker's event loop, ``broker/loop_round.py``). The compiled put makes the same test
        (``_speedups_storeput.h``)."""
        if self.idle and not self.claimed:
            self.wakeup()

    def reput_here(self) -> bool:
        """A light round on the calling thread (SYNC_FLUSH: the group commit's, right after
        the ``fdatasync`` that made the records visible; ASYNC_FLUSH: the event loop's, after a
        read whose put it claimed), instead of waking this service's thread: one thread
        hand-over less between the records becoming visible and the arrival on the loop.

        Returns False, doing nothing, when more than ``gather_from`` records are pending (a
        busy writer: this thread dispatches them while the next flush runs), when a round is
        running on another thread (it may have read the visibility limit before the flush),
        or when dispatch fails: the caller then wakes this thread."""
        if not _at_most(self.commit_log, self.gather_from):
            return False
        if not self._round.acquire(blocking=False):
            return False
        try:
            self._do_reput()
        finally:
            self._round.release()
        return not self._failing

    def _do_reput(self) -> int:
        done = 0
        while self.commit_log.pending:
            with self.dispatcher.lock:
                taken = self._take(self.commit_log.pending, self.visibility_limit())
                if taken is None:
                    break
                singles: list[DispatchRequest] | None = None
                columns: tuple[tuple[Any, ...], ...] | None = None
                if isinstance(taken, DispatchBlock):
                    columns, end = taken.columns(), taken.end_offset
                else:
                    singles, end = taken, taken[-1].end_offset
                    if len(taken) >= VECTOR_MIN:  # the columns once, for the listener too
                        columns = tuple(zip(*taken, strict=True))
                error = self._dispatch(taken, columns)
            if error is not None:
                if not self._failing:
                    logger.error("dispatch failed; writes are refused until it works: %s", error)
                    self._failing = True
                    self.on_error(f"dispatch to ConsumeQueue/index failed: {error}")
                return done
            if self._failing:
                self._failing = False
                self.on_error(None)
            self.reput_from_offset = end
            done += len(taken)
            if self.listener is not None:
                if columns is None:
                    assert singles is not None
                    columns = tuple(zip(*singles, strict=True))
                assert columns is not None
                groups = self._groups
                if groups is not None and all(g[8] for g in groups):
                    self._notify_groups(columns, groups)
                else:
                    self._notify_columns(columns)
        if not self.commit_log.pending and self.commit_log.max_offset > self.reput_from_offset:
            self._catch_up_blank()
        return done

    def _take(
        self, pending: deque[Pending], limit: int
    ) -> list[DispatchRequest] | DispatchBlock | None:
        """The next batch to dispatch, taken off ``pending``: the visible part of the block at
        its head, or its first visible single requests (at most ``_BATCH``, up to a block);
        None when nothing is visible."""
        head = pending[0]
        if type(head) is DispatchBlock:
            count = head.visible(limit)
            if not count:
                return None
            if count == len(head):
                pending.popleft()
                return head
            taken, pending[0] = head.split(count)
            return taken
        count = min(len(pending), _BATCH)
        count = _visible(pending, _singles(pending, count, self.commit_log.blocks_queued), limit)
        if not count:
            return None
        # popped one by one (the writer may append meanwhile), by a C-level map: no Python
        # frame per request
        return cast("list[DispatchRequest]", list(map(deque.popleft, repeat(pending, count))))

    def _dispatch(
        self,
        batch: list[DispatchRequest] | DispatchBlock,
        columns: tuple[tuple[Any, ...], ...] | None,
    ) -> str | None:
        """Dispatch ``batch`` (as ``columns`` when given: a block's, or many single requests');
        on failure put it back and return the error text. The batch's ConsumeQueue groups
        (when made) are left in ``_groups`` for the listener calls."""
        self._groups = None
        try:
            if columns is not None:
                self._groups = self.dispatcher.dispatch_columns(columns)
            elif isinstance(batch, DispatchBlock):
                self.dispatcher.dispatch_columns(batch.columns())
            else:
                self._groups = self.dispatcher.dispatch(batch)
        except Exception as exc:
            logger.exception("dispatch of %d records failed", len(batch))
            pending = self.commit_log.pending
            if isinstance(batch, DispatchBlock):
                pending.appendleft(batch)
            else:
                pending.extendleft(reversed(batch))
            return str(exc) or type(exc).__name__
        return None

    def _catch_up_blank(self) -> None:
        """With nothing pending, everything written up to the limit was dispatched (the rest
        is BLANK filler at a file end)."""
        with self.commit_log.put_lock:
            if not self.commit_log.pending:
                limit = min(self.visibility_limit(), self.commit_log.max_offset)
                if limit > self.reput_from_offset:
                    self.reput_from_offset = limit

    def _notify(self, batch: Sequence[DispatchRequest]) -> None:
        """:meth:`_notify_columns` for single requests."""
        self._notify_columns(tuple(zip(*batch, strict=True)))

    def _notify_groups(self, columns: tuple[tuple[Any, ...], ...], groups: list[CqGroup]) -> None:
        """:meth:`_notify_columns` when each (topic, queue id) group of the batch has one
        tags code: one call per group, in order of first appearance, with its last record
        (its properties when the group is one record), from ``cq_groups``' groups."""
        listener = self.listener
        assert listener is not None
        tags_col, ts_col, offsets, props = columns[4], columns[5], columns[6], columns[10]
        for topic, queue_id, count, _fp, _lp, _fo, i, _units, _same in groups:
            try:
                listener(
                    topic, queue_id, offsets[i] + 1, tags_col[i], ts_col[i],
                    props[i] if count == 1 else None,
                )  # fmt: skip
            except Exception:
                logger.exception("arriving listener failed")

    def _notify_columns(self, columns: tuple[tuple[Any, ...], ...]) -> None:
        """One listener call per (topic, queue id, tagsCode) group, in order of first
        appearance, with the group's last request (grouped by C-level zips and a Counter: a
        per-request loop cost as much as the dispatch itself); ``columns``: the batch's."""
        listener = self.listener
        assert listener is not None
        topics, queue_ids, _phys, _size, tags_col, ts_col, offsets, _k, _u, flags, props = columns
        keys = list(zip(topics, queue_ids, tags_col, strict=True))
        rows: Sequence[int] = range(len(keys))
        outside = [f for f in set(flags) if not enters_consume_queue(f)]
        if outside:
            kept = [f not in outside for f in flags]
            keys = list(compress(keys, kept))
            rows = list(compress(rows, kept))
        # the properties go with a group of one; none to give when no request has them
        counts = None if props.count(None) == len(props) else Counter(keys)
        for key, i in dict(zip(keys, rows, strict=True)).items():
            topic, queue_id, tags = key
            try:
                listener(
                    topic, queue_id, offsets[i] + 1, tags, ts_col[i],
                    props[i] if counts is not None and counts[key] == 1 else None,
                )  # fmt: skip
            except Exception:
                logger.exception("arriving listener failed")

    def run_once(self) -> None:
        if self._failing:
            self.wait(1.0)
        if self.do_reput() >= self.gather_from:
            # a busy writer: let the next batch gather (no wake-up per put meanwhile)
            self.wait(0.001)
            return
        # idle, or a few records (a light load: 2,000 single sends/s dispatch one at a time):
        # the next put wakes this thread at once instead of finding it in a 1 ms sleep (the
        # idle flag is set before ``pending`` is read, so a put in between is not missed)
        # Under SYNC_FLUSH the records still pending are not flushed yet: the group commit's
        # round that flushes them dispatches them (``reput_here``) or wakes this thread, so
        # no 1 ms poll for them (it took the GIL every millisecond at 2,000 sends/s)
        self.idle = True
        self.wait(0.001 if self.commit_log.pending and not self.sync_visibility else 0.05)
        self.idle = False

    def on_stop(self) -> None:
        self.do_reput()
