"""The CommitLog kept in DLedger entries (RocketMQ ``DLedgerCommitLog``).

How it works: each DLedger entry's body is one CommitLog record, encoded by the same code as
the plain CommitLog (:meth:`CommitLog.prepare_one` / :meth:`CommitLog.write_one`) straight
into the data file at ``entry pos + 48``, so the record's PHYSICALOFFSET (and the offset in
ConsumeQueues, SendResults and message ids) is the body's offset. A put on the leader checks it
may propose, places the entry (BLANK and roll as DLedger does), proposes it to Raft, writes
the record, seals the entry and waits: its future completes when the entry is committed
(a quorum stored it), or fails (TERM_CHANGED, WAIT_QUORUM_ACK_TIMEOUT, refusals) with the put
status RocketMQ maps those codes to. A batch is one entry per message, proposed together.
``WAIT=false`` puts are answered once appended locally.

Followers copy the leader's entries byte for byte and queue each record for dispatch. The
log's readable end (``max_offset``) is the end of the last *committed* entry, so the reput
thread builds ConsumeQueue and index entries for committed records only; entries cut by a
truncation leave the dispatch queue. Reads find records by physical offset in the data files,
or below ``divided_offset`` in the CommitLog of a store upgraded from master/slave.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from functools import partial

from ariane.common.clock import Clock
from ariane.dledger.commit_future import CommitFuture
from ariane.dledger.files import DLedgerFiles
from ariane.dledger.format import ENTRY_HEADER_SIZE, MAGIC_NORMAL
from ariane.dledger.replica import Replica
from ariane.raft import Code, RaftConfig, Role
from ariane.store.commit_log import CommitLog, PreparedOne
from ariane.store.config import StoreConfig
from ariane.store.dispatch_block import Pending, drop_topics
from ariane.store.format import DispatchRequest, record_dispatch
from ariane.store.inner import MessageBatchInner, MessageInner
from ariane.store.mapped_file import MappedFile
from ariane.store.mapped_file_queue import MappedFileQueue
from ariane.store.results import PutResult, PutStatus

__all__ = ["DLedgerCommitLog", "put_status_of"]

logger = logging.getLogger(__name__)

RoleListener = Callable[[int, Role, "str | None"], None]

_REFUSALS = {
    Code.NOT_LEADER: PutStatus.SERVICE_NOT_AVAILABLE,
    Code.INCONSISTENT_LEADER: PutStatus.SERVICE_NOT_AVAILABLE,
    Code.LEADER_NOT_READY: PutStatus.SERVICE_NOT_AVAILABLE,
    Code.LEADER_TRANSFERRING: PutStatus.SERVICE_NOT_AVAILABLE,
    Code.DISK_FULL: PutStatus.SERVICE_NOT_AVAILABLE,
    Code.WAIT_QUORUM_ACK_TIMEOUT: PutStatus.OS_PAGECACHE_BUSY,
    Code.LEADER_PENDING_FULL: PutStatus.OS_PAGECACHE_BUSY,
}


def put_status_of(code: Code) -> PutStatus:
    """The put status RocketMQ's DLedgerCommitLog answers for a DLedger code (4.x mapping:
    quorum timeouts and a full pending map are OS_PAGECACHE_BUSY, a lost leadership is
    SERVICE_NOT_AVAILABLE, anything else, TERM_CHANGED included, UNKNOWN_ERROR)."""
    return _REFUSALS.get(code, PutStatus.UNKNOWN_ERROR)


def _refused(code: Code) -> PutResult:
    return PutResult(put_status_of(code), remark=f"DLedger refused the append: {code.name}")


def _done(result: PutResult) -> Future[PutResult]:
    future: Future[PutResult] = Future()
    future.set_result(result)
    return future


def _now(result: PutResult) -> tuple[PutResult, Future[PutResult]]:
    return result, _done(result)


def _answer_all(answers: list[tuple[Future[PutResult], PutResult]]) -> None:
    """The puts a commit answered, in log order (one completion per commit, not per put)."""
    for future, result in answers:
        future.set_result(result)


_Waiting = tuple[int, int, Future[PutResult], PutResult, bool]


class DLedgerCommitLog(CommitLog):
    """The CommitLog of a DLedger broker.

    Args:
        config: the store configuration (``mapped_file_size_commit_log`` sizes data files).
        clock: store timestamps.
        raft: the node's Raft settings.
        base_dir: ``<storePathRootDir>/dledger-<selfId>``.
        index_file_size: size of each DLedger index file.
        now_ms: a monotonic clock for Raft, in milliseconds.
        sync_persist: entries are persisted only once synced (SYNC_FLUSH).
        first_pos: data offset of the first entry of a new log (``dividedCommitlogOffset``).
    """

    def __init__(
        self,
        config: StoreConfig,
        clock: Clock,
        raft: RaftConfig,
        base_dir: str,
        *,
        index_file_size: int,
        now_ms: Callable[[], int],
        sync_persist: bool = False,
        first_pos: int = 0,
    ) -> None:
        super().__init__(config, clock)
        #: the CommitLog files of a store upgraded from master/slave (read only)
        self.old_queue: MappedFileQueue = self.queue
        self.divided_offset = first_pos
        self.files = DLedgerFiles(
            base_dir, config.mapped_file_size_commit_log, index_file_size, first_pos=first_pos
        )
        self.queue = self.files.data
        lock = threading.RLock()
        self.put_lock = lock  # type: ignore[assignment]
        self.replica = Replica(raft, self.files, self, now_ms, sync_persist=sync_persist, lock=lock)
        self.committed_index = -1
        self.committed_pos = first_pos
        #: dispatch requests of entries not committed yet (they move to ``pending`` on commit)
        self.staged: deque[Pending] = deque()
        #: wakes the reput thread when records became committed (set by the store)
        self.wake_dispatch: Callable[[], None] | None = None
        self.role_listener: RoleListener | None = None
        #: called after a put left work (messages to send: the transport; entries to sync:
        #: the SYNC_FLUSH persister)
        self.work_listeners: list[Callable[[], None]] = []
        #: called with how many puts were refused (at once, or after they were
        #: written: a quorum timeout, a lost leadership): the store's putMessageFailedTimes,
        #: counted here rather than by a callback on every put's future
        self.refusal_listener: Callable[[int], None] | None = None
        #: (first index, last index, future, result, a put's: counted when refused)
        self._waiting: deque[_Waiting] = deque()

    # -- reading ------------------------------------------------------------------------------
    @property
    def max_offset(self) -> int:
        """End of the last committed entry: what readers and dispatch may see."""
        return self.committed_pos

    @property
    def written_offset(self) -> int:
        """End of the last entry written (committed or not)."""
        return max(self.files.end_pos, self.committed_pos)

    @property
    def min_offset(self) -> int:
        first = self.old_queue.first if self.old_queue.files else self.queue.first
        if first is None:
            return -1
        return first.file_from_offset

    def _queue_for(self, offset: int) -> MappedFileQueue:
        return self.old_queue if offset < self.divided_offset else self.queue

    def file_at(self, offset: int) -> MappedFile | None:
        return self._queue_for(offset).find_mapped_file_by_offset(offset)

    def get_message(self, offset: int, size: int) -> bytes | None:
        mf = self._queue_for(offset).find_mapped_file_by_offset(offset)
        if mf is None:
            return None
        return mf.read(offset - mf.file_from_offset, size)

    def get_data(self, offset: int, max_bytes: int | None = None) -> bytes | None:
        mf = self._queue_for(offset).find_mapped_file_by_offset(offset)
        if mf is None:
            return None
        pos = offset - mf.file_from_offset
        return mf.read_from(pos, None if max_bytes is None else pos + max_bytes)

    # -- putting ------------------------------------------------------------------------------
    def put_message(self, msg: MessageInner) -> PutResult:
        """Append and wait for the commit (never call it on the transport's event loop)."""
        return self.submit_one(msg).result()

    def put_messages(self, batch: MessageBatchInner) -> PutResult:
        """Append a batch and wait for the commit."""
        return self.submit_batch(batch).result()

    def submit_one(self, msg: MessageInner, *, wait: bool = True) -> Future[PutResult]:
        """Append one message; the future completes when it is committed (at once when
        ``wait`` is false)."""
        return self.append_one(msg, wait=wait)[1]

    def append_one(
        self, msg: MessageInner, *, wait: bool = True
    ) -> tuple[PutResult, Future[PutResult]]:
        """``submit_one`` that also returns where the message went, before the commit (a
        refusal: the refusal, ``msg_num`` 0)."""
        one = self.prepare_one(msg)
        if type(one) is not PreparedOne:
            return self._answer_now(one)  # type: ignore[arg-type]
        try:
            with self.put_lock:
                refusal = self.replica.can_propose(1)
                if refusal is not Code.SUCCESS:
                    return self._answer_now(_refused(refusal))
                mf, at = self.files.reserve(one.total)
                code, index, term = self.replica.propose(1)
                assert code is Code.SUCCESS
                store_ts = self.next_store_timestamp()
                body_at = at + ENTRY_HEADER_SIZE
                result = self.write_one(
                    one, mf.mm, body_at, mf.file_from_offset + body_at, store_ts
                )
                self.files.seal(mf, at, index, term, one.total)
                mf.store_timestamp = store_ts
                future = self._wait_for(index, index, result, wait)
        except OSError as exc:
            logger.exception("DLedger append failed")
            return self._answer_now(PutResult(PutStatus.CREATE_MAPPED_FILE_FAILED, remark=str(exc)))
        self._after_put()
        return result, future

    def submit_batch(self, batch: MessageBatchInner, *, wait: bool = True) -> Future[PutResult]:
        """Append a batch, one entry per message, all or none refused."""
        return self.append_batch(batch, wait=wait)[1]

    def append_batch(
        self, batch: MessageBatchInner, *, wait: bool = True
    ) -> tuple[PutResult, Future[PutResult]]:
        """``submit_batch`` that also returns where the messages went, before the commit."""
        prepared = self.prepare_batch(batch)
        if isinstance(prepared, PutResult):
            return self._answer_now(prepared)
        records = prepared.records
        key = (batch.topic, batch.queue_id)
        try:
            with self.put_lock:
                refusal = self.replica.can_propose(len(records))
                if refusal is not Code.SUCCESS:
                    return self._answer_now(_refused(refusal))
                code, first, term = self.replica.propose(len(records))
                assert code is Code.SUCCESS
                store_ts = self.next_store_timestamp()
                first_qoff = queue_offset = self.topic_queue_table.get(key, 0)
                offsets: list[int] = []
                for k, prep in enumerate(records):
                    mf, at = self.files.reserve(prep.total)
                    body_at = at + ENTRY_HEADER_SIZE
                    phys = mf.file_from_offset + body_at
                    self.write_batch_record(
                        prepared, prep, mf.mm, body_at, phys, queue_offset, store_ts
                    )
                    self.files.seal(mf, at, first + k, term, prep.total)
                    mf.store_timestamp = store_ts
                    offsets.append(phys)
                    queue_offset += 1
                self.topic_queue_table[key] = queue_offset
                store = batch.store_host
                result = PutResult(
                    PutStatus.PUT_OK, offsets[0], prepared.total, store_ts, first_qoff,
                    len(records), store.addr, store.port, tuple(offsets),
                )  # fmt: skip
                future = self._wait_for(first, first + len(records) - 1, result, wait)
        except OSError as exc:
            logger.exception("DLedger batch append failed")
            return self._answer_now(PutResult(PutStatus.CREATE_MAPPED_FILE_FAILED, remark=str(exc)))
        self._after_put()
        return result, future

    def wait_committed(self, result: PutResult) -> Future[PutResult]:
        """A future completing with ``result`` once the entries holding its records are
        committed (messages stored earlier and answered again: the idempotence window's
        duplicates). Only the leader that wrote them may ask (the caller checks); they fail
        as its own proposals do when it loses the leadership first."""
        last = result.offsets[-1] if result.offsets else result.wrote_offset
        with self.put_lock:
            if last < self.committed_pos:
                return _done(result)
            index = self.index_at(last)
            if index > self.files.end:  # pragma: no cover - the leader's own entries stay
                return _done(_refused(Code.TERM_CHANGED))
            future: Future[PutResult] = CommitFuture()
            waiting = self._waiting
            at = len(waiting)
            while at and waiting[at - 1][1] > index:
                at -= 1
            waiting.insert(at, (index, index, future, result, False))
            return future

    def _wait_for(self, first: int, last: int, result: PutResult, wait: bool) -> Future[PutResult]:
        future: Future[PutResult] = CommitFuture()
        if wait:
            self._waiting.append((first, last, future, result, True))
        else:
            self.replica.completions.append(partial(future.set_result, result))
        return future

    def _answer_now(self, result: PutResult) -> tuple[PutResult, Future[PutResult]]:
        """A put answered at once (a refusal: counted)."""
        if not result.status.is_stored:
            self._count_refused(1)
        return _now(result)

    def _count_refused(self, count: int) -> None:
        listener = self.refusal_listener
        if count and listener is not None:
            listener(count)

    def _after_put(self) -> None:
        replica = self.replica
        if replica.completions:  # a WAIT=false put's answer (others wait for the commit)
            replica.complete()
        for listener in self.work_listeners:
            listener()

    # -- what the replica reports (under the lock) ---------------------------------------------
    def on_copied(self, records: list[tuple[MappedFile, int, int, int]]) -> None:
        staged = self.staged
        levels = self._levels_ms
        last_ts = -1
        for mf, at, index, body_size in records:
            body_at = at + ENTRY_HEADER_SIZE
            request = record_dispatch(mf.mm, body_at, body_at + body_size, levels)
            pos = mf.file_from_offset + at
            if type(request) is not DispatchRequest:
                logger.error(
                    "entry %d at %d does not hold a CommitLog record: %s", index, pos, request
                )
                continue
            if request.commit_log_offset != pos + ENTRY_HEADER_SIZE:
                logger.error(
                    "entry %d at %d holds a record for offset %d", index, pos,
                    request.commit_log_offset,
                )  # fmt: skip
                continue
            staged.append(request)
            last_ts = mf.store_timestamp = request.store_timestamp_ms
        if last_ts >= 0:
            self.set_last_store_timestamp(last_ts)

    def on_truncated(self, pos: int) -> None:
        staged = self.staged
        while staged and staged[-1].commit_log_offset >= pos:
            staged.pop()

    def on_committed(self, index: int, pos: int) -> None:
        self.committed_index = index
        self.committed_pos = max(self.committed_pos, pos)
        staged, pending = self.staged, self.pending
        while staged and staged[0].commit_log_offset < pos:
            pending.append(staged.popleft())
        waiting = self._waiting
        completions = self.replica.completions
        if waiting and waiting[0][1] <= index:
            answers: list[tuple[Future[PutResult], PutResult]] = []
            while waiting and waiting[0][1] <= index:
                _, _, future, result, _ = waiting.popleft()
                answers.append((future, result))
            completions.append(partial(_answer_all, answers))
        if self.wake_dispatch is not None:
            self.wake_dispatch()

    def on_failed(self, first: int, last: int, code: Code) -> None:
        kept: deque[_Waiting] = deque()
        completions = self.replica.completions
        refused = 0
        for item in self._waiting:
            lo, hi, future, _, counted = item
            if hi < first or lo > last:
                kept.append(item)
            else:
                completions.append(partial(future.set_result, _refused(code)))
                refused += counted
        self._waiting = kept
        self._count_refused(refused)

    def on_role(self, term: int, role: Role, leader_id: str | None) -> None:
        if role is not Role.LEADER and self._waiting:
            # what the proposals' failure left: answers of duplicates (wait_committed)
            completions = self.replica.completions
            refused = 0
            for _, _, future, _, counted in self._waiting:
                completions.append(partial(future.set_result, _refused(Code.TERM_CHANGED)))
                refused += counted
            self._waiting.clear()
            self._count_refused(refused)
        listener = self.role_listener
        if listener is not None:
            listener(term, role, leader_id)

    def drop_pending_topics(self, topics: set[str]) -> None:
        super().drop_pending_topics(topics)
        drop_topics(self.staged, topics)

    # -- walking the log ---------------------------------------------------------------------------
    def index_at(self, pos: int) -> int:
        """The first entry whose body starts at or after data offset ``pos`` (``end + 1``
        when there is none)."""
        files = self.files
        lo, hi = files.begin.index, files.end + 1
        while lo < hi:
            mid = (lo + hi) // 2
            unit = files.unit(mid)
            if unit is not None and unit[1] + ENTRY_HEADER_SIZE < pos:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def records(self, first: int, last: int) -> Iterator[DispatchRequest]:
        """The CommitLog records of entries ``first .. last`` (NOOPs have none); a damaged
        one is logged and skipped."""
        files = self.files
        for index in range(max(first, files.begin.index), min(last, files.end) + 1):
            unit = files.unit(index)
            if unit is None or unit[0] != MAGIC_NORMAL or unit[2] <= ENTRY_HEADER_SIZE:
                continue
            pos = unit[1]
            mf = files.data.find_mapped_file_by_offset(pos)
            if mf is None:
                continue
            at = pos - mf.file_from_offset + ENTRY_HEADER_SIZE
            request = record_dispatch(mf.mm, at, at + unit[2] - ENTRY_HEADER_SIZE, self._levels_ms)
            if type(request) is DispatchRequest:
                yield request
            else:
                logger.error(
                    "entry %d at %d does not hold a CommitLog record: %s", index, pos, request
                )

    # -- maintenance ------------------------------------------------------------------------------
    def flush(self, least_pages: int) -> bool:
        """Flush the data and index files; True when there was nothing to flush."""
        before = self.files.data.flushed_where
        self.files.flush()
        return self.files.data.flushed_where == before

    def delete_expired_files(self, now_ms: int, reserved_ms: int, force: bool, limit: int) -> int:
        """Delete expired files: first the old CommitLog's (an upgraded store), only then
        DLedger data files, and of those only files whose entries are all committed, never
        the last; DLedger keeps them an hour longer (``fileReservedTime + 1``)."""
        with self.put_lock:
            old = self.old_queue
            if old.files:
                doomed = []
                for mf in old.files:
                    if not (now_ms >= mf.last_modified_ms() + reserved_ms or force):
                        break
                    if not mf.destroy():
                        break
                    doomed.append(mf)
                    if len(doomed) >= limit:
                        break
                old.remove_files(doomed)
                return len(doomed)
            reserved_ms += 3_600_000
            files = self.files.data.files
            keep_from = None
            for k, mf in enumerate(files[: min(limit, len(files) - 1)]):
                if not (now_ms >= mf.last_modified_ms() + reserved_ms or force):
                    break
                keep_from = files[k + 1].file_from_offset
            if keep_from is None:
                return 0
            before = len(files)
            begin = self.files.delete_files_before(keep_from, self.committed_index)
            node = self.replica.node
            if node is not None:
                node.discard_before(begin)
            deleted = before - len(self.files.data.files)
            if deleted:
                logger.info(
                    "deleted %d expired DLedger data file(s); the log begins at %d", deleted, begin
                )
            return deleted

    def shutdown(self) -> None:
        """Unmap every file."""
        self._current = None
        with self.put_lock:
            self.files.shutdown()
            self.old_queue.shutdown()
