"""The CommitLog a broker had before it turned to DLedger (RocketMQ ``DLedgerCommitLog.recover``,
spec part 2.13 and the upgrade of 2.16).

How it works: on the first start of a DLedger broker whose store holds plain CommitLog files
and no DLedger data yet, the old log is recovered as usual (valid records kept, a torn tail
cut), its last file is sealed with a BLANK record, and the first DLedger data file starts
where that file ends (``dividedCommitlogOffset``), so physical offsets, and the message ids
made of them, go on without a gap. On later starts the division is the first DLedger data
file's start. Old files stay readable below the division; DLedger files are never deleted
while old ones exist (offsets would have a hole).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ariane.dledger.files import LogBegin
from ariane.store.commit_log import CommitLog
from ariane.store.config import StoreConfig
from ariane.store.format import BLANK_MAGIC_CODE, SIZE_MAGIC
from ariane.store.recovery import truncate_tail, walk

if TYPE_CHECKING:
    from ariane.dledger.commitlog import DLedgerCommitLog

__all__ = ["prepare_old_commit_log"]

logger = logging.getLogger(__name__)


def prepare_old_commit_log(cl: DLedgerCommitLog, cfg: StoreConfig) -> bool:
    """Load the old CommitLog files of ``cl`` (if any) and fix the division.

    Returns:
        True on the first start after the upgrade (the old records need dispatching).

    Raises:
        OSError: files cannot be read or written.
    """
    old = cl.old_queue
    report = old.load()
    if report.damaged:
        logger.error(
            "old CommitLog files after %s are not loaded", report.bad_file or report.gap_at
        )
    data_names = cl.files.data.list_file_names()
    if not old.files:
        if data_names:
            _set_division(cl, int(data_names[0]))
        return False
    if data_names:
        _set_division(cl, int(data_names[0]))
        _positions_full(cl)
        return False
    plain = CommitLog(cfg, cl.clock)
    plain.queue = old
    result = walk(plain, 0, check_crc=cfg.check_crc_on_recover, levels_ms=(), observe=None)
    truncate_tail(plain, result.process_offset)
    last = old.files[-1]
    pos = last.wrote_position = result.process_offset - last.file_from_offset
    size = old.mapped_file_size
    if pos < size:
        SIZE_MAGIC.pack_into(last.mm, pos, size - pos, BLANK_MAGIC_CODE)
        last.sync()
    divided = last.file_from_offset + size
    _positions_full(cl)
    _set_division(cl, divided)
    logger.warning(
        "upgrading to DLedger: the old CommitLog ends at %d (%d records); DLedger entries "
        "start at %d", result.process_offset, result.records, divided,
    )  # fmt: skip
    return True


def _positions_full(cl: DLedgerCommitLog) -> None:
    for mf in cl.old_queue.files:
        mf.wrote_position = mf.flushed_position = cl.old_queue.mapped_file_size
    cl.old_queue.flushed_where = cl.old_queue.max_offset


def _set_division(cl: DLedgerCommitLog, divided: int) -> None:
    cl.divided_offset = divided
    files = cl.files
    if files.end < files.begin.index and files.begin.pos <= 0:
        files.begin = LogBegin(files.begin.index, divided, files.begin.base_term)
        files.next_pos = files.end_pos = divided
    cl.committed_pos = max(cl.committed_pos, divided)
