"""The message store of a DLedger broker (RocketMQ ``DefaultMessageStore`` with
``enableDLegerCommitLog=true``).

How it works: the store is the plain one (ConsumeQueues, index, reads, cleanup, flush
threads) around a :class:`~ariane.dledger.commitlog.DLedgerCommitLog`. Puts are Raft
proposals whose futures complete on commit; the reput thread sees committed records only.
Loading recovers the DLedger files first, then the ConsumeQueues and the index; what is
missing from them is re-dispatched from committed entries (a record found in a ConsumeQueue
proves its entry committed, so the commit index starts at least there). Under SYNC_FLUSH a
thread syncs new entries before they count as persisted (acknowledged to the leader, counted
for the quorum); under ASYNC_FLUSH the page cache counts, as in DLedger. The DLedger
``checkpoint`` (end and commit index) is written every ``checkPointInterval``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from concurrent.futures import Future

from ariane.common.clock import Clock
from ariane.common.fileio import write_file_atomically
from ariane.common.javaprops import format_properties, parse_properties
from ariane.common.properties import WAIT_STORE_MSG_OK
from ariane.common.sysflag import enters_consume_queue, is_rollback
from ariane.dledger.commitlog import DLedgerCommitLog
from ariane.dledger.config import DLedgerConfig
from ariane.dledger.dedup import MasterWindow, rebuild_from_log
from ariane.dledger.format import ENTRY_HEADER_SIZE
from ariane.dledger.upgrade import prepare_old_commit_log
from ariane.errors import ConfigError
from ariane.store.checkpoint import StoreCheckpoint
from ariane.store.cleanup import DiskUsage
from ariane.store.commit_log import CommitLog, PreparedOne
from ariane.store.config import StoreConfig
from ariane.store.dispatch import ArrivingListener, ReputService
from ariane.store.flush import Completion, FlushCommitLogService
from ariane.store.format import DispatchRequest, record_route
from ariane.store.index_repair import newest_before, relink_torn
from ariane.store.inner import MessageBatchInner, MessageInner
from ariane.store.loader import finish_load, load_consume_queues
from ariane.store.message_store import MessageStore
from ariane.store.recovery import redispatch
from ariane.store.results import PutResult, PutStatus
from ariane.store.service import ServiceThread

__all__ = ["DLedgerMessageStore", "check_identity"]

logger = logging.getLogger(__name__)


def _done(result: PutResult) -> Future[PutResult]:
    future: Future[PutResult] = Future()
    future.set_result(result)
    return future


class _Periodic(ServiceThread):
    """Calls ``fn`` every ``interval_s`` or when woken (and once more at stop)."""

    def __init__(self, name: str, interval_s: float, fn: Callable[[], None]) -> None:
        super().__init__(name)
        self.interval_s = interval_s
        self.fn = fn

    def run_once(self) -> None:
        self.wait(self.interval_s)
        self.fn()

    def on_stop(self) -> None:
        self.fn()


class DLedgerMessageStore(MessageStore):
    """A message store whose CommitLog is replicated by DLedger.

    Args:
        config: the store settings.
        dledger: group, peers and Raft timings.
        clock: wall clock (store timestamps, file expiry).
        monotonic_ms: Raft's clock in milliseconds (default: ``clock.monotonic``).
        disk_usage: disk usage probe.
        arriving_listener: told when committed messages become visible.
    """

    #: the idempotence window works on the master, refilled at each promotion
    #: (ariane.dledger.dedup)
    supports_dedup = True

    def __init__(
        self,
        config: StoreConfig,
        dledger: DLedgerConfig,
        *,
        clock: Clock | None = None,
        monotonic_ms: Callable[[], int] | None = None,
        disk_usage: DiskUsage | None = None,
        arriving_listener: ArrivingListener | None = None,
    ) -> None:
        super().__init__(
            config, clock=clock, disk_usage=disk_usage, arriving_listener=arriving_listener
        )
        clock_ = self.clock
        self.dledger = dledger
        self.commit_log: DLedgerCommitLog = DLedgerCommitLog(
            config, clock_, dledger.raft_config(), dledger.base_dir(config.store_path_root_dir),
            index_file_size=dledger.mapped_file_size_for_entry_index,
            now_ms=monotonic_ms or (lambda: int(clock_.monotonic() * 1000)),
            sync_persist=self._sync,
        )  # fmt: skip
        self.reput = ReputService(
            self.commit_log, self.dispatcher, sync_visibility=False,
            on_error=lambda r: self._set_unwriteable("dispatch", r),
        )  # fmt: skip
        self.reput.listener = arriving_listener
        self.commit_log.wake_dispatch = self.reput.wakeup
        self.commit_log.refusal_listener = self._count_refused
        self.persister: _Periodic | None = None
        self.checkpointer: _Periodic | None = None
        #: the term in which this node became the writable master (-1: not the master)
        self.master_term = -1
        self.dedup = MasterWindow(
            lambda: self.is_master, config.dedup_window_size, config.dedup_window_ms
        )

    @property
    def replica(self) -> object:
        """The DLedger replica (for the transport and tools)."""
        return self.commit_log.replica

    # -- loading --------------------------------------------------------------------------------
    def load(self) -> bool:
        """Check the node's identity, then load and recover (see ``MessageStore.load``).

        Raises:
            ConfigError: the DLedger files belong to another group, node or peer list.
            StoreError: another process holds the store lock.
        """
        check_identity(self.config, self.dledger)
        return super().load()

    def _recover(self) -> StoreCheckpoint:
        return load_dledger_store(self)

    # -- services -------------------------------------------------------------------------------
    def _start_commit_log_flush(self, cp: StoreCheckpoint) -> None:
        cfg = self.config
        cl = self.commit_log
        self.flush_commit_log = FlushCommitLogService(
            cl, cp, interval_ms=cfg.flush_interval_commit_log_ms,
            least_pages=cfg.flush_commit_log_least_pages,
            thorough_interval_ms=cfg.flush_commit_log_thorough_interval_ms, clock=self.clock,
        )  # fmt: skip
        self.flush_commit_log.start()
        if self._sync:
            self.persister = _Periodic("DLedgerFlush", 0.01, cl.replica.flush)
            self.persister.start()
            cl.work_listeners.append(self.persister.wakeup)
        self.checkpointer = _Periodic(
            "DLedgerCheckpoint", self.dledger.check_point_interval_ms / 1000,
            self._write_checkpoint,
        )  # fmt: skip
        self.checkpointer.start()

    def _write_checkpoint(self) -> None:
        try:
            self.commit_log.replica.write_checkpoint()
        except OSError as exc:
            logger.error("cannot write the DLedger checkpoint: %s", exc)

    def shutdown(self) -> None:
        for svc in (self.persister, self.checkpointer):
            if svc is not None:
                svc.stop()
        super().shutdown()

    def close_without_cleanup(self) -> None:
        for svc in (self.persister, self.checkpointer):
            if svc is not None:
                svc.abandon()
        super().close_without_cleanup()

    def set_replica_mode(self, on: bool) -> None:
        """Not used: who may write is Raft's business (:meth:`promote`)."""

    # -- the master's role ------------------------------------------------------------------------
    def master_ready(self) -> bool:
        """True when this node leads and everything in its log is committed and dispatched:
        it can take writes (``DLedgerRoleChangeHandler``'s condition)."""
        cl = self.commit_log
        with cl.put_lock:
            node = cl.replica.node
            if node is None or cl.replica.failed is not None or not node.is_leader:
                return False
            log = node.log
            return (
                log.end == log.committed
                and not cl.staged
                and not cl.pending
                and (self.reput.behind_bytes() == 0)
            )

    def promote(self) -> bool:
        """Start taking writes if :meth:`master_ready`: the idempotence window is refilled
        from the committed log, the next queue offsets come from the ConsumeQueues
        (``recoverTopicQueueTable``). Returns True when this node is the writable master
        now (on the broker's event loop, which owns the window)."""
        cl = self.commit_log
        with cl.put_lock:
            node = cl.replica.node
            if node is None:
                return False
            if self.master_term == node.term and node.is_leader:
                return True
            if not self.master_ready():
                return False
            term = node.term
        core = node

        def still_leading() -> bool:
            return core.is_leader and core.term == term

        if not rebuild_from_log(self.dedup, cl, self.clock.now_ms(), still_leading):
            return False
        with cl.put_lock:
            if not still_leading() or not self.master_ready():
                return False
            cl.topic_queue_table = {
                (cq.topic, cq.queue_id): cq.max_offset_in_queue for cq in self.all_consume_queues()
            }
            self.master_term = term
        if len(self.dedup):
            logger.info("idempotence window refilled from the DLedger log: %d ids", len(self.dedup))
        logger.info("DLedger %s takes writes in term %d", self.dledger.self_id, term)
        return True

    def rebuild_dedup(self) -> int:
        """Nothing at load: the window is refilled when this node becomes the master
        (:meth:`promote`; followers do not use it)."""
        self.dedup.clear()
        return 0

    @property
    def is_master(self) -> bool:
        """True while this node is the writable master."""
        node = self.commit_log.replica.node
        return node is not None and node.is_leader and node.term == self.master_term

    def _dledger_refusal(self) -> PutResult | None:
        refusal = self._refusal()
        if refusal is not None:
            return refusal
        if not self.is_master:
            self.put_failed_times += 1
            return PutResult(
                PutStatus.SERVICE_NOT_AVAILABLE,
                remark="message store is slave mode, so putMessage is forbidden "
                "(not the DLedger group's master)",
            )
        return None

    # -- puts -----------------------------------------------------------------------------------
    def _count_refused(self, count: int) -> None:
        """The commit log refused ``count`` puts (at once, or after they were written)."""
        self.put_failed_times += count

    @property
    def answers_at_once(self) -> bool:
        """Never: a put waits for the quorum."""
        return False

    def submit_message(self, msg: MessageInner) -> Future[PutResult]:
        """Propose ``msg``; the future completes when a quorum stored it (``WAIT=false``:
        once it is in this leader's log)."""
        refusal = self._dledger_refusal()
        if refusal is not None:
            return _done(refusal)
        wait = msg.properties.get(WAIT_STORE_MSG_OK) != "false"
        return self.commit_log.submit_one(msg, wait=wait)

    def submit_message_to(self, msg: MessageInner, done: Completion) -> None:
        """``submit_message`` (through the quorum) completing ``done`` with its result."""
        self.submit_message(msg).add_done_callback(lambda f: done.set_result(f.result()))

    def completion_submit(self) -> None:
        """None: this store's puts complete their own futures (see ``MessageStore``)."""
        return None

    def submit_prepared(
        self, ones: Sequence[PreparedOne]
    ) -> tuple[list[PutResult], Future[PutResult]]:
        """Each prepared message proposed on its own (a Raft entry each); returns once a
        quorum stored them."""
        futures = [self.submit_message(one.msg) for one in ones]
        results = [f.result() for f in futures]
        return results, _done(results[-1] if results else PutResult(PutStatus.PUT_OK))

    def put_message(self, msg: MessageInner) -> PutResult:
        """Propose and wait for the commit (not from the Raft transport's event loop)."""
        return self.submit_message(msg).result()

    def submit_messages(self, batch: MessageBatchInner) -> Future[PutResult]:
        """Propose a batch (one entry per message)."""
        refusal = self._dledger_refusal()
        if refusal is not None:
            return _done(refusal)
        return self.commit_log.submit_batch(batch)

    def put_messages(self, batch: MessageBatchInner) -> PutResult:
        """Propose a batch and wait for the commit."""
        return self.submit_messages(batch).result()

    def append_message(self, msg: MessageInner) -> tuple[PutResult, Future[PutResult]]:
        """``submit_message`` that also returns where the message went, before the commit
        (the idempotence window remembers it at once)."""
        refusal = self._dledger_refusal()
        if refusal is not None:
            return refusal, _done(refusal)
        wait = msg.properties.get(WAIT_STORE_MSG_OK) != "false"
        result, future = self.commit_log.append_one(msg, wait=wait)
        return result, future

    def append_messages(self, batch: MessageBatchInner) -> tuple[PutResult, Future[PutResult]]:
        """``submit_messages`` that also returns where the messages went."""
        refusal = self._dledger_refusal()
        if refusal is not None:
            return refusal, _done(refusal)
        result, future = self.commit_log.append_batch(batch)
        return result, future

    def wait_durable(self, result: PutResult) -> Future[PutResult]:
        """A future completing with ``result`` (messages this master stored earlier) once
        they are committed; refused when this node is no longer the master."""
        with self.commit_log.put_lock:  # a lost leadership fails the waits under it
            if self.is_master:
                return self.commit_log.wait_committed(result)
        return _done(
            PutResult(
                PutStatus.SERVICE_NOT_AVAILABLE, remark="not the DLedger group's master any more"
            )
        )

    # -- introspection ------------------------------------------------------------------------------
    def runtime_info(self) -> dict[str, str]:
        info = super().runtime_info()
        status = self.commit_log.replica.status()
        if status is not None:
            info.update(
                {
                    "dLegerGroup": status.group,
                    "dLegerSelfId": status.self_id,
                    "dLegerRole": status.role.name,
                    "dLegerTerm": str(status.term),
                    "dLegerLeaderId": status.leader_id or "",
                    "dLegerLedgerBeginIndex": str(status.ledger_begin_index),
                    "dLegerLedgerEndIndex": str(status.ledger_end_index),
                    "dLegerCommittedIndex": str(status.committed_index),
                }
            )
        return info


def _repair_index(store: DLedgerMessageStore, mark_ms: int, committed: int) -> None:
    """After an abnormal exit, the plain store's index repairs over the committed entries
    (``store/index_repair.py``): torn files relinked, and the keys of the records stored at
    or after the index checkpoint ``mark_ms``, below the index's end, put back where no file
    holds them (the records after the end are re-dispatched as usual)."""
    index = store.index
    assert index is not None
    cl = store.commit_log
    relink_torn(index, mark_ms)
    index_end = index.files[-1].end_phy_offset

    def stored_before(phys: int) -> bool:
        raw = cl.look_message_by_offset(phys)
        return raw is not None and record_route(raw, 0)[3] < mark_ms

    start = newest_before(index, stored_before)
    if start is None:  # every indexed record is at or after the mark: from the oldest one
        start = index.files[0].entry_phy(1) if index.files[0].index_count > 1 else None
    if start is None:
        return
    last = min(cl.index_at(index_end + 1), committed)
    batch = [
        r
        for r in cl.records(cl.index_at(start), last)
        if r.commit_log_offset <= index_end and r.store_timestamp_ms >= mark_ms
    ]
    added = index.recheck_keys(batch)
    if added:
        logger.warning("put back %d index keys lost after the index checkpoint", added)


def load_dledger_store(store: DLedgerMessageStore) -> StoreCheckpoint:
    """Load and recover a DLedger store; returns the store checkpoint.

    Raises:
        OSError: files cannot be read or written.
    """
    cfg = store.config
    cl = store.commit_log
    upgraded = prepare_old_commit_log(cl, cfg)
    rebuild_from = load_consume_queues(store)
    checkpoint = StoreCheckpoint(cfg.checkpoint_path)
    index = store.index
    if index is not None:
        point = index.load(store.last_exit_ok, checkpoint.index_msg_timestamp)
        if point is not None:
            rebuild_from = point if rebuild_from is None else min(rebuild_from, point)
    for cq in store.all_consume_queues():
        cq.recover()
    cl.replica.load()
    files = cl.files
    end_pos = max(files.end_pos, cl.divided_offset)
    max_phy_cq = max((cq.max_physic_offset for cq in store.all_consume_queues()), default=-1)
    if max_phy_cq >= end_pos:
        for cq in store.all_consume_queues():
            cq.truncate_dirty_logic_files(end_pos)
        max_phy_cq = max((cq.max_physic_offset for cq in store.all_consume_queues()), default=-1)
    node = cl.replica.node
    assert node is not None
    # a record in a ConsumeQueue was dispatched, so its entry was committed
    if max_phy_cq >= cl.divided_offset:
        proven = cl.index_at(max_phy_cq + 1) - 1
        node.log.committed = max(node.log.committed, min(proven, files.end))
    committed = node.log.committed
    unit = files.unit(committed)
    cl.committed_index = committed
    cl.committed_pos = (
        unit[1] + unit[2] if unit is not None else max(files.begin.pos, cl.divided_offset)
    )
    if index is not None and not store.last_exit_ok and not index.is_empty:
        _repair_index(store, checkpoint.index_msg_timestamp, committed)
    if cl.old_queue.files and (
        upgraded or (rebuild_from is not None and rebuild_from < cl.divided_offset)
    ):
        plain = CommitLog(cfg, store.clock)
        plain.queue = cl.old_queue
        begin = 0 if upgraded or rebuild_from is None else rebuild_from
        count = redispatch(
            plain, store.dispatcher.dispatch, begin, cl.divided_offset, cfg.delay_levels_ms
        )
        logger.info("dispatched %d records of the CommitLog from before DLedger", count)
    start = _redispatch_start(store, rebuild_from)
    if start is not None:
        count = 0
        batch: list[DispatchRequest] = []
        for request in cl.records(cl.index_at(start), committed):
            batch.append(request)
            if len(batch) >= 4096:
                store.dispatcher.dispatch(batch)
                count += len(batch)
                batch = []
        if batch:
            store.dispatcher.dispatch(batch)
            count += len(batch)
        logger.info("re-dispatched %d committed records from offset %d", count, start)
    cl.staged.extend(cl.records(committed + 1, files.end))
    last_ts = checkpoint.physic_msg_timestamp
    tail = cl.records(max(files.begin.index, files.end - 8), files.end)
    last_ts = max([last_ts, *(r.store_timestamp_ms for r in tail)])
    finish_load(store, last_ts)
    cl.queue.flushed_where = files.end_pos
    return checkpoint


def _redispatch_start(store: DLedgerMessageStore, rebuild_from: int | None) -> int | None:
    """The physical offset from which committed records must be dispatched again: the first
    record in the last three data files (all of them after an abnormal exit) missing from its
    ConsumeQueue or from the index, or an earlier point a damaged derived file asks for."""
    cl = store.commit_log
    files = cl.files
    data = files.data.files
    if not data:
        return rebuild_from
    first_file = data[0] if not store.last_exit_ok else data[max(0, len(data) - 3)]
    walk_from = cl.index_at(max(first_file.file_from_offset, files.begin.pos) + ENTRY_HEADER_SIZE)
    index = store.index
    index_end = index.files[-1].end_phy_offset if index is not None and index.files else -1
    starts = [] if rebuild_from is None else [rebuild_from]
    if not store.last_exit_ok:
        starts.append(first_file.file_from_offset)
    for req in cl.records(walk_from, cl.committed_index):
        cq_missing = False
        if enters_consume_queue(req.sys_flag):
            cq = store.get_consume_queue(req.topic, req.queue_id)
            cq_missing = cq is None or cq.max_physic_offset < req.commit_log_offset
        index_missing = (
            index is not None
            and bool(req.keys or req.uniq_key)
            and not is_rollback(req.sys_flag)
            and index_end < req.commit_log_offset
        )
        if cq_missing or index_missing:
            starts.append(req.commit_log_offset)
            break
    return min(starts) if starts else None


def check_identity(store_config: StoreConfig, dledger: DLedgerConfig) -> None:
    """A node keeps its group, id and peers in ``dledger-<selfId>/identity`` and refuses to
    start with others: its log belongs to the group it was written for.

    Raises:
        ConfigError: the configuration differs from the one the files were made with.
    """
    path = os.path.join(dledger.base_dir(store_config.store_path_root_dir), "identity")
    mine = {"group": dledger.group, "selfId": dledger.self_id, "peers": dledger.peers_text}
    try:
        with open(path, "rb") as f:
            saved = parse_properties(f.read().decode("utf-8"))
    except FileNotFoundError:
        write_file_atomically(path, format_properties(mine).encode())
        return
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError("dLegerPeers", f"cannot read {path}: {exc}") from None
    names = {"group": "dLegerGroup", "selfId": "dLegerSelfId", "peers": "dLegerPeers"}
    for key, value in mine.items():
        if saved.get(key, value) != value:
            raise ConfigError(
                names[key],
                f"{value!r} differs from {saved.get(key)!r}, the setting this node's DLedger "
                f"files under {os.path.dirname(path)} were written with",
            )
