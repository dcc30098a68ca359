"""Start-up: load every file and recover (``DefaultMessageStore.load`` + ``recover``).

Order (spec §17.21): CommitLog files -> ConsumeQueues -> checkpoint -> index (dropping files
that may have lost writes after an abnormal exit) -> ConsumeQueue recovery -> CommitLog walk
and cut -> ConsumeQueue truncation -> re-dispatch -> per-queue next offsets and minimums.
Damaged derived files (ConsumeQueue or index files of a wrong size, missing entries) are
rebuilt from the CommitLog by re-dispatching from the first record that lacks them.
"""

from __future__ import annotations

import logging
import os
from typing import Protocol

from ariane.common.sysflag import enters_consume_queue, is_rollback
from ariane.store.checkpoint import StoreCheckpoint
from ariane.store.commit_log import CommitLog, _free_tr_name
from ariane.store.config import StoreConfig
from ariane.store.consume_queue import ConsumeQueue
from ariane.store.dispatch import Dispatcher, ReputService
from ariane.store.format import DispatchRequest
from ariane.store.index_file import IndexService
from ariane.store.recovery import (
    choose_abnormal_start,
    redispatch,
    truncate_tail,
    walk,
)

__all__ = ["LoadTarget", "finish_load", "load_consume_queues", "load_store"]

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


def _set_aside_paths(paths: list[str]) -> None:
    for path in paths:
        target = _free_tr_name(path)
        os.replace(path, target)
        logger.error("set aside unloadable CommitLog file %s as %s", path, target)


def load_consume_queues(store: LoadTarget) -> int | None:
    """Map every ConsumeQueue; return the earliest physical offset needing a rebuild."""
    root = store.config.consume_queue_dir
    rebuild: int | None = None
    try:
        topics = sorted(os.listdir(root))
    except FileNotFoundError:
        return None
    for topic in topics:
        topic_dir = os.path.join(root, topic)
        if not os.path.isdir(topic_dir):
            continue
        for qdir in sorted(os.listdir(topic_dir)):
            if not qdir.isdigit():
                continue
            cq = ConsumeQueue(topic, int(qdir), root, store.config.mapped_file_size_consume_queue)
            report = cq.load()
            if report.damaged:
                for path in [p for p in [report.bad_file, *report.set_aside] if p]:
                    logger.warning("deleting damaged ConsumeQueue file %s (rebuilt)", path)
                    try:
                        os.unlink(path)
                    except OSError:
                        logger.exception("could not delete %s", path)
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
    report = commit_log.queue.load()
    if report.damaged:
        _set_aside_paths([p for p in [report.bad_file, *report.set_aside] if p])
    rebuild_from = load_consume_queues(store)
    checkpoint = StoreCheckpoint(cfg.checkpoint_path)
    index = store.index
    if index is not None:
        point = index.load(store.last_exit_ok, checkpoint.index_msg_timestamp)
        if index.is_empty and commit_log.queue.files:
            point = 0
        if point is not None:
            rebuild_from = point if rebuild_from is None else min(rebuild_from, point)
    for cq in store.all_consume_queues():
        cq.recover()
    max_phy_cq = max((cq.max_physic_offset for cq in store.all_consume_queues()), default=-1)
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
        return checkpoint

    missing: list[int] = []
    index_end = index.files[-1].end_phy_offset if index is not None and index.files else -1

    def observe(req: DispatchRequest) -> None:
        if missing:
            return
        topic, qid, phys, _s, _t, _ts, _qo, keys, uniq, sys_flag, _p = req
        if enters_consume_queue(sys_flag):
            cq = store.get_consume_queue(topic, qid)
            if cq is None or cq.max_physic_offset < phys:
                missing.append(phys)
                return
        if index is not None and (keys or uniq) and not is_rollback(sys_flag) and index_end < phys:
            missing.append(phys)

    if store.last_exit_ok:
        start_index = max(0, len(files) - 3)
    else:
        start_index = choose_abnormal_start(commit_log, checkpoint)
    result = walk(
        commit_log, start_index, check_crc=cfg.check_crc_on_recover, levels_ms=levels,
        observe=observe,
    )  # fmt: skip
    end = result.process_offset
    if result.stop_reason:
        logger.warning("CommitLog valid data ends at %d: %s", end, result.stop_reason)
    truncate_tail(commit_log, end)
    if max_phy_cq >= end:
        for cq in store.all_consume_queues():
            cq.truncate_dirty_logic_files(end)
    starts = [p for p in (rebuild_from, *missing) if p is not None]
    if not store.last_exit_ok:
        starts.append(result.start_offset)
    if starts:
        start = min(starts)
        count = redispatch(commit_log, store.dispatcher.dispatch, start, end, levels)
        logger.info("re-dispatched %d records from %d to %d", count, start, end)
    finish_load(store, max(result.last_store_timestamp_ms, checkpoint.physic_msg_timestamp))
    commit_log.queue.flushed_where = commit_log.max_offset
    return checkpoint


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
