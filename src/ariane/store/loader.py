"""Start-up: load every file and recover (``DefaultMessageStore.load`` + ``recover``).

Fail-safe first, then recovery. Loading *looks* before it changes anything: the CommitLog
files (sizes, names, no gap), the checkpoint, the ConsumeQueues (where their valid entries
end), a walk of the CommitLog to where its valid records end, and a comparison of each
queue's oldest and newest entries with the records they point at. Damage that recovery must
not guess about (a CommitLog file of the wrong size, a missing or overlapping one, a damaged
checkpoint, entries pointing at the wrong records) stops the start with
:class:`~ariane.errors.StoreDamagedError` naming the file, and nothing on disk has changed;
``ariane store repair`` is the operator's way past it. What a crash leaves behind is not
damage and is recovered as RocketMQ does:

Order (spec §17.21): CommitLog files -> ConsumeQueues -> checkpoint -> index (dropping files
that may have lost writes after an abnormal exit) -> ConsumeQueue recovery -> CommitLog walk
and cut (a torn tail is saved to ``<file>.trN`` and zeroed) -> ConsumeQueue truncation ->
after an abnormal exit, the index's torn chains relinked and the keys of records stored at
or after the index checkpoint below the index's end put back (``recheck_index_keys``) ->
re-dispatch -> per-queue next offsets and minimums. ConsumeQueue or index files of a wrong
size or missing are derived data: they are rebuilt from the CommitLog by re-dispatching from
the first record that lacks them.
"""

from __future__ import annotations

import logging
import os
from typing import Protocol

from ariane.common.sysflag import enters_consume_queue, is_rollback
from ariane.errors import CorruptionError, StoreDamagedError
from ariane.store.checkpoint import StoreCheckpoint
from ariane.store.commit_log import CommitLog
from ariane.store.config import StoreConfig
from ariane.store.consume_queue import ConsumeQueue
from ariane.store.dispatch import Dispatcher, ReputService
from ariane.store.format import Decoded, DispatchRequest, check_record, record_route
from ariane.store.index_file import IndexService
from ariane.store.index_repair import newest_before, relink_torn
from ariane.store.recovery import (
    choose_abnormal_start,
    redispatch,
    truncate_tail,
    walk,
)

__all__ = [
    "LoadTarget",
    "finish_load",
    "load_consume_queues",
    "load_store",
    "recheck_index_keys",
]

logger = logging.getLogger(__name__)


class LoadTarget(Protocol):
    """What loading needs of the store (``MessageStore`` provides it)."""

    @property
    def config(self) -> StoreConfig: ...
    @property
    def commit_log(self) -> CommitLog: ...
    @property
    def index(self) -> IndexService | None: ...
    @property
    def dispatcher(self) -> Dispatcher: ...
    @property
    def reput(self) -> ReputService: ...
    @property
    def last_exit_ok(self) -> bool: ...

    consume_queue_table: dict[str, dict[int, ConsumeQueue]]

    def get_consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue | None: ...
    def all_consume_queues(self) -> list[ConsumeQueue]: ...


def _refuse(
    store: LoadTarget, path: str, what: str, aside: tuple[str, ...] | None = None
) -> StoreDamagedError:
    """Unmap what was mapped and build the refusal (nothing was written)."""
    store.commit_log.queue.shutdown()
    for cq in store.all_consume_queues():
        cq.shutdown()
    store.consume_queue_table.clear()
    return StoreDamagedError(path, what, store.config.store_path_root_dir, aside)


def load_commit_log_files(store: LoadTarget) -> None:
    """Map the CommitLog files, or refuse the start if one is missing, misplaced or of the
    wrong size.

    Raises:
        StoreDamagedError: see the module docs.
    """
    queue = store.commit_log.queue
    report = queue.load()
    if report.damaged:
        path = report.bad_file or queue.store_path
        aside = tuple(p for p in (report.bad_file, *report.set_aside) if p)
        raise _refuse(store, path, f"CommitLog damaged: {report.reason}", aside)


def load_checkpoint(store: LoadTarget) -> StoreCheckpoint:
    """The checkpoint, or refuse the start if it is damaged.

    Raises:
        StoreDamagedError: the checkpoint is not one this store wrote.
    """
    cfg = store.config
    try:
        return StoreCheckpoint(cfg.checkpoint_path, store.commit_log.disk)
    except CorruptionError as exc:
        raise _refuse(store, cfg.checkpoint_path, f"damaged checkpoint: {exc}") from None


def _remove_leftovers(store: LoadTarget) -> None:
    """Delete files of interrupted creations (``*.new``): they never hold data."""
    store.commit_log.queue.remove_leftovers()
    for cq in store.all_consume_queues():
        cq.queue.remove_leftovers()


def load_consume_queues(store: LoadTarget) -> int | None:
    """Map every ConsumeQueue; return the earliest physical offset needing a rebuild."""
    root = store.config.consume_queue_dir
    disk = store.commit_log.disk
    rebuild: int | None = None
    try:
        topics = sorted(disk.listdir(root))
    except FileNotFoundError:
        return None
    for topic in topics:
        topic_dir = os.path.join(root, topic)
        if not disk.isdir(topic_dir):
            continue
        for qdir in sorted(disk.listdir(topic_dir)):
            if not qdir.isdigit():
                continue
            size = store.config.mapped_file_size_consume_queue
            cq = ConsumeQueue(topic, int(qdir), root, size, disk)
            report = cq.load()
            if report.damaged:
                # derived data: the files from the damage on are rebuilt from the CommitLog
                for path in [p for p in [report.bad_file, *report.set_aside] if p]:
                    logger.warning(
                        "deleting ConsumeQueue file %s (%s; rebuilt)", path, report.reason
                    )
                    try:
                        disk.unlink(path)
                    except OSError:
                        logger.exception("could not delete %s", path)
                disk.sync_dir(cq.store_path)
                cq.recover()
                point = cq.max_physic_offset + 1 if cq.max_physic_offset >= 0 else 0
                rebuild = point if rebuild is None else min(rebuild, point)
            store.consume_queue_table.setdefault(topic, {})[int(qdir)] = cq
    return rebuild


def load_store(store: LoadTarget) -> StoreCheckpoint:
    """Load and recover ``store``; returns the checkpoint.

    Raises:
        OSError: files cannot be read or written.
    """
    cfg = store.config
    commit_log = store.commit_log
    load_commit_log_files(store)
    checkpoint = load_checkpoint(store)
    rebuild_from = load_consume_queues(store)
    plans = {id(cq): cq.scan_recovery() for cq in store.all_consume_queues()}
    index = store.index
    levels = cfg.delay_levels_ms
    files = commit_log.queue.files
    if not files:
        logger.info("empty CommitLog: dropping every ConsumeQueue")
        for cq in store.all_consume_queues():
            cq.destroy()
        store.consume_queue_table.clear()
        if index is not None:
            index.destroy()
            index.ensure_file()
        _remove_leftovers(store)
        return checkpoint
    for cq in store.all_consume_queues():  # what the walk compares with (nothing cut yet)
        plan = plans[id(cq)]
        cq.max_physic_offset = plan.max_phys if plan is not None else -1
    index_plan = (
        index.scan_load(store.last_exit_ok, checkpoint.index_msg_timestamp)
        if index is not None
        else None
    )
    missing: list[int] = []
    index_end = index_plan.end_phy_offset if index_plan is not None else -1
    if index_plan is not None and index_plan.kept:
        last_index = index_plan.kept[-1]
        if last_index.index_count <= 1 and last_index.end_phy_offset == 0:
            index_end = -1  # no entry yet (or a header never written): nothing is indexed

    def observe(topic: str, qid: int, phys: int, sys_flag: int) -> bool:
        """Find the first record whose ConsumeQueue entry or index keys may be missing (keys
        are not decoded: a record past the index's end counts as missing)."""
        if enters_consume_queue(sys_flag):
            cq = store.get_consume_queue(topic, qid)
            if cq is None or cq.max_physic_offset < phys:
                missing.append(phys)
                return False
        if index is not None and index_end < phys and not is_rollback(sys_flag):
            missing.append(phys)
            return False
        return True

    if store.last_exit_ok:
        start_index = max(0, len(files) - 3)
    else:
        start_index = choose_abnormal_start(commit_log, checkpoint)
    result = walk(
        commit_log, start_index, check_crc=cfg.check_crc_on_recover, levels_ms=levels,
        observe=observe,
    )  # fmt: skip
    end = result.process_offset

    def record_at(phys: int) -> DispatchRequest | None:
        raw = commit_log.look_message_by_offset(phys)
        if raw is None:
            return None
        res = check_record(raw, 0, len(raw), check_crc=False, want_dispatch=True, levels_ms=levels)
        return res.dispatch if isinstance(res, Decoded) else None

    for cq in store.all_consume_queues():
        problem = cq.entries_problem(plans[id(cq)], record_at, commit_log.min_offset, end)
        if problem is not None:
            if index_plan is not None:
                index_plan.close()
            raise _refuse(store, cq.store_path, f"ConsumeQueue damaged: {problem}")
    # -- nothing was changed up to here; now recover ------------------------------------
    _remove_leftovers(store)
    if index is not None and index_plan is not None:
        point = index.apply_load(index_plan)
        if index.is_empty:
            point = 0
        if point is not None:
            rebuild_from = point if rebuild_from is None else min(rebuild_from, point)
    for cq in store.all_consume_queues():
        cq.apply_recovery(plans[id(cq)])
    max_phy_cq = max((cq.max_physic_offset for cq in store.all_consume_queues()), default=-1)
    if result.stop_reason:
        logger.warning("CommitLog valid data ends at %d: %s", end, result.stop_reason)
    truncate_tail(commit_log, end)
    if max_phy_cq >= end:
        for cq in store.all_consume_queues():
            cq.truncate_dirty_logic_files(end)
    if index is not None and not store.last_exit_ok and index_end >= 0 and not index.is_empty:
        relink_torn(index, checkpoint.index_msg_timestamp)
        recheck_index_keys(store, checkpoint.index_msg_timestamp, result.start_offset, index_end)
    # after an abnormal exit too, re-dispatch starts at the first record the queues or the
    # index may lack (RocketMQ re-dispatches the whole walk; the builders skip what they have)
    starts = [p for p in (rebuild_from, *missing) if p is not None]
    if starts:
        start = min(starts)
        count = redispatch(commit_log, store.dispatcher.dispatch, start, end, levels)
        logger.info("re-dispatched %d records from %d to %d", count, start, end)
    finish_load(store, max(result.last_store_timestamp_ms, checkpoint.physic_msg_timestamp))
    commit_log.queue.flushed_where = commit_log.max_offset
    return checkpoint


def recheck_index_keys(store: LoadTarget, mark_ms: int, walk_start: int, index_end: int) -> int:
    """After an abnormal exit, put back the index keys lost of records below the index's end
    offset (re-dispatch covers those after it); returns how many were put.

    The index checkpoint ``mark_ms`` promises every key of records stored before it (see
    ``IndexService.flush``); keys of records stored at or after it may be lost while their
    file is kept (its end time is not past the mark). Only those records are re-checked:
    from the newest indexed record stored before the mark (found by bisecting the entries)
    or else from the walk's start (every record with lost keys is after it: its store time
    is at least the mark, which is not before the ConsumeQueue checkpoint the walk starts 3
    s before), to the end of the record at ``index_end`` (the index's end offset).
    """
    index = store.index
    assert index is not None
    commit_log = store.commit_log
    min_offset = commit_log.min_offset
    last = commit_log.look_message_by_offset(index_end)
    to_offset = min(index_end + len(last) if last is not None else index_end, commit_log.max_offset)

    def stored_before(phys: int) -> bool:
        if phys < min_offset:
            return True
        if phys >= to_offset:
            return False
        raw = commit_log.look_message_by_offset(phys)
        return raw is not None and record_route(raw, 0)[3] < mark_ms

    start = newest_before(index, stored_before)
    if start is None:
        start = walk_start
    added = 0

    def recheck(batch: list[DispatchRequest]) -> None:
        nonlocal added
        added += index.recheck_keys([r for r in batch if r.store_timestamp_ms >= mark_ms])

    seen = redispatch(
        commit_log, recheck, start, to_offset, store.config.delay_levels_ms, from_record=True
    )
    if added:
        logger.warning(
            "put back %d index keys lost after the index checkpoint (%d records re-checked "
            "from %d to %d)", added, seen, start, to_offset,
        )  # fmt: skip
    return added


def finish_load(store: LoadTarget, last_store_timestamp_ms: int) -> None:
    """The last steps of loading: an index file to write to, each queue's next offset and
    minimum, the store clock, and dispatch resuming at the end of the log."""
    commit_log = store.commit_log
    if store.index is not None:
        store.index.ensure_file()
    min_phy = commit_log.min_offset
    table: dict[tuple[str, int], int] = {}
    for cq in store.all_consume_queues():
        table[(cq.topic, cq.queue_id)] = cq.max_offset_in_queue
        cq.correct_min_offset(min_phy)
    commit_log.topic_queue_table = table
    commit_log.set_last_store_timestamp(last_store_timestamp_ms)
    store.reput.reput_from_offset = commit_log.max_offset
